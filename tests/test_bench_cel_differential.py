"""``bench/cel_differential.py`` without the Go oracle: the generator (seeded, valid devices, the
libraries covered), the curated data, error normalisation, the comparison's categories, and the
whole run against a stand-in oracle script (its report, ``--out`` and ``--max-differences``)."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from bench.cel_differential import (
    CURATED_FILE,
    Case,
    Outcome,
    compare,
    curated_cases,
    draxr_outcome,
    main,
    measure,
    normalise_error,
    oracle_outcome,
    random_cases,
)
from webhook.core.cel import SelectorEngine, SimpleDevice

MATCH = Outcome(compiles=True, matches=True)
NO_MATCH = Outcome(compiles=True, matches=False)


def test_random_cases_are_reproducible_from_the_seed() -> None:
    assert random_cases(7, 50) == random_cases(7, 50)
    assert random_cases(7, 50) != random_cases(8, 50)
    assert len(random_cases(1, 123)) == 123


def test_random_devices_are_valid_resource_slice_devices() -> None:
    for case in random_cases(3, 300):
        device = SimpleDevice.from_json(case.device["driver"], case.device)
        assert device.checked, case.device


def test_the_generator_reaches_every_library() -> None:
    text = "\n".join(c.expression for c in random_cases(31, 700))
    for needle in (
        "device.attributes[",
        "device.capacity[",
        ".?",
        "quantity(",
        "semver(",
        "sets.",
        "lists.range(",
        "ip(",
        "cidr(",
        "url(",
        "format.",
        ".format(",
        ".matches(",
        ".find(",
        ".all(i, v,",
        ".exists_one(",
        "cel.bind(",
        "has(",
        " % ",
        ".filter(",
    ):
        assert needle in text, needle


def test_the_curated_expressions_are_upstreams_and_issue_31s() -> None:
    cases = curated_cases(CURATED_FILE)
    assert len(cases) >= 300
    assert len({(c.expression, json.dumps(c.device, sort_keys=True)) for c in cases}) == len(cases)
    sources = {c.source for c in cases}
    # The DRA compile tests come with their own devices, named after the test case.
    includes = [c for c in cases if c.source.endswith("(includes-function-on-int-list-negative)")]
    assert [c.device for c in includes] == [
        {"driver": "dra.example.com", "attributes": {"name": {"ints": [1, 2]}}}
    ]
    assert "k8s.io/apiserver/pkg/cel/library/ip_test.go" in sources
    assert "github.com/google/cel-go/ext/strings_test.go" in sources
    assert sum(c.source == "issue 31" for c in cases) == 7


def test_a_malformed_curated_line_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"expression": "true"}\n{"source": "x"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not a curated expression"):
        curated_cases(bad)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            "compilation failed: ERROR: <input>:1:1: undeclared reference to 'math' (in container '')\n"
            " | math.least(1)\n | ^\nERROR: <input>:1:5: undeclared reference to 'least' (in container '')",
            "undeclared reference to 'math' (in container '')",
        ),
        ("compilation failed: ERROR: <input>:1:17: Syntax error: mismatched input '<EOF>'", "syntax error"),
        ("compilation failed: ERROR: <input>:1:15: Syntax error: Unexpected token", "syntax error"),
        (
            "no such key: bar. consider using CEL optional chaining (.? followed by orValue()) or ...",
            "no such key: bar",
        ),
        ("operation cancelled: actual cost limit exceeded", "actual cost limit exceeded"),
        ("Division by Zero.", "division by zero"),
    ],
)
def test_normalised_error_words(text: str, words: str) -> None:
    assert normalise_error(text) == words


def err(stage: str, text: str) -> Outcome:
    if stage == "compile":
        return Outcome(compiles=False, compile_error=text)
    return Outcome(compiles=True, runtime_error=text, cost_exceeded="cost limit" in text)


@pytest.mark.parametrize(
    ("upstream", "draxr", "categories"),
    [
        (MATCH, MATCH, []),
        (MATCH, NO_MATCH, ["matches"]),
        (MATCH, err("compile", "undeclared reference to 'sets'"), ["compile:upstream-only"]),
        (err("compile", "x"), NO_MATCH, ["compile:draxr-only"]),
        (err("runtime", "division by zero"), MATCH, ["runtime-error:upstream-only"]),
        (MATCH, err("runtime", "no such key: x"), ["runtime-error:draxr-only"]),
        (
            err("runtime", "operation cancelled: actual cost limit exceeded"),
            MATCH,
            ["cost-limit:upstream-only"],
        ),
        (
            err("runtime", "operation cancelled: actual cost limit exceeded"),
            err("runtime", "division by zero"),
            ["cost-limit:upstream-only"],
        ),
        (
            err("runtime", "division by zero"),
            err("runtime", "modulus or divide by zero"),
            ["error-words:runtime"],
        ),
        (
            err("runtime", "no such key: a. consider using CEL optional chaining"),
            err("runtime", "no such key: a"),
            [],
        ),
        (
            err("compile", "ERROR: <input>:1:2: Syntax error: a"),
            err("compile", "ERROR: <input>:1:3: Syntax error: b"),
            [],
        ),
        (
            err("compile", "found no matching overload"),
            err("compile", "undeclared reference"),
            ["error-words:compile"],
        ),
        (replace(MATCH, validates=False), replace(MATCH, validates=True), ["validation:draxr-only"]),
        (
            replace(MATCH, validates=True),
            replace(NO_MATCH, validates=False),
            ["validation:upstream-only", "matches"],
        ),
        (replace(MATCH, validates=True), MATCH, []),  # not asked of draxr: not compared
    ],
)
def test_compare(upstream: Outcome, draxr: Outcome, categories: list[str]) -> None:
    assert compare(upstream, draxr) == categories


def test_oracle_answers_become_outcomes() -> None:
    assert oracle_outcome({"compiles": True, "matches": False, "cost": 3}) == Outcome(
        compiles=True, matches=False, cost=3
    )
    assert oracle_outcome({"compiles": True, "matches": True, "validates": False}).validates is False
    assert oracle_outcome({"compiles": False, "compileError": "e", "matches": None}) == err("compile", "e")
    costly = oracle_outcome(
        {
            "compiles": True,
            "matches": None,
            "runtimeError": "operation cancelled: actual cost limit exceeded",
            "costExceeded": True,
        }
    )
    assert costly.cost_exceeded
    assert costly.matches is None
    assert not costly.estimate_exceeded  # no estimatedCost given
    # null: upstream's estimate saturated at the maximum uint64; a figure over 1,000,000 passes too
    for estimate in (None, 1_000_001):
        answer = {"compiles": True, "matches": True, "estimatedCost": estimate}
        assert oracle_outcome(answer).estimate_exceeded
    assert not oracle_outcome(
        {"compiles": True, "matches": True, "estimatedCost": 1_000_000}
    ).estimate_exceeded
    with pytest.raises(ValueError, match="oracle refused the request: invalid request"):
        oracle_outcome({"inputError": "invalid request: x"})


def test_draxr_outcomes_through_the_selector_engine() -> None:
    engine = SelectorEngine()
    device = SimpleDevice.from_json("x", {"attributes": {"n": {"int": 1}}})
    assert draxr_outcome(engine, 'device.attributes["x"].n == 1', device) == MATCH
    assert draxr_outcome(engine, "device.driver ==", device).compiles is False
    missing = draxr_outcome(engine, 'device.attributes["x"].m == 1', device)
    assert missing.compiles is True
    assert missing.runtime_error == "no such key: m"
    assert not missing.estimate_exceeded
    unbounded = draxr_outcome(engine, "device.attributes.x.a == device.attributes.x.b", device)
    assert unbounded.estimate_exceeded
    assert unbounded.runtime_error == "no such key: a"  # an unknown domain is an empty map


def test_an_estimate_on_one_side_of_the_limit_only_is_a_difference() -> None:
    refused = Outcome(compiles=True, matches=True, estimate_exceeded=True)
    assert compare(refused, MATCH) == ["estimate-limit:upstream-only"]
    assert compare(MATCH, refused) == ["estimate-limit:draxr-only"]
    assert compare(refused, refused) == []


#: A stand-in oracle: every selector compiles and matches, except "false".
FAKE_ORACLE = """
import json, sys
for line in sys.stdin:
    expression = json.loads(line)["expression"]
    answer = {"compiles": True, "matches": expression != "false", "cost": 1, "costExceeded": False}
    print(json.dumps(answer), flush=True)
"""


@pytest.fixture
def fake_oracle(tmp_path: Path) -> Path:
    script = tmp_path / "oracle"
    script.write_text(f"#!{sys.executable}\n{FAKE_ORACLE}")
    script.chmod(0o755)
    return script


def test_measure_reports_differences_by_category(fake_oracle: Path, tmp_path: Path) -> None:
    device = {"driver": "x"}
    cases = [Case(e, device, "t") for e in ("true", "false", "1 == 2", "1 / 0 == 1")]
    out = tmp_path / "full.jsonl"
    report = measure(fake_oracle, cases, ["cel-python"], out)
    engine = report["engines"]["cel-python"]
    assert report["expressions"] == 4
    assert report["upstream"] == {
        "compiles": 4,
        "matches": 3,
        "runtime_errors": 0,
        "cost_exceeded": 0,
        "estimate_exceeded": 0,
        "validates": 0,
    }
    assert engine["differing"] == 2
    assert engine["agreeing"] == 2
    assert {k: v["count"] for k, v in engine["by_category"].items()} == {
        "matches": 1,
        "runtime-error:draxr-only": 1,
    }
    assert engine["by_category"]["matches"]["examples"][0]["expression"] == "1 == 2"
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["cel-python"]["differences"] for r in rows] == [
        [],
        [],
        ["matches"],
        ["runtime-error:draxr-only"],
    ]


def test_main_exits_1_only_above_max_differences(
    fake_oracle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    curated = tmp_path / "curated.jsonl"
    curated.write_text(
        "\n".join(json.dumps({"expression": e, "source": "t"}) for e in ("true", "1 == 2")) + "\n"
    )
    argv = ["--oracle", str(fake_oracle), "--curated", str(curated), "--count", "0", "--engine", "cel-python"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["engines"]["cel-python"]["differing"] == 1
    assert main([*argv, "--max-differences", "1"]) == 0
    assert main([*argv, "--max-differences", "0"]) == 1


def test_a_failing_oracle_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "oracle"
    broken.write_text("#!/bin/sh\necho broken >&2\nexit 3\n")
    broken.chmod(0o755)
    assert main(["--oracle", str(broken), "--count", "1", "--engine", "cel-python"]) == 2
    assert "the CEL oracle failed (exit 3): broken" in capsys.readouterr().err
