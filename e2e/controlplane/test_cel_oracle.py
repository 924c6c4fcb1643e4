"""The CEL oracle (go/celoracle) answers as upstream's allocator does, on selectors whose upstream
outcome is known: a match and a non-match, a compile error, a type error the checker refuses, runtime
errors (with the allocator's hint after ``no such key``), the runtime cost limit, a library call and
a bad request line, which gets an error of its own without stopping the program."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .launcher import find_cel_oracle

DEVICE: dict[str, Any] = {
    "driver": "x",
    "attributes": {"model": {"string": "a100"}, "count": {"int": 8}, "v": {"version": "1.2.3"}},
    "capacity": {"memory": {"value": "16Gi"}},
}


@pytest.fixture(scope="module")
def oracle() -> Path:
    found = find_cel_oracle()
    if isinstance(found, str):
        if os.environ.get("CI") == "true":
            pytest.fail(found)
        pytest.skip(found)
    return found


def ask(oracle: Path, *lines: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [str(oracle)],
        input="".join(f"{ln}\n" for ln in lines),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


def request(expression: str, device: dict[str, Any] = DEVICE) -> str:
    return json.dumps({"expression": expression, "device": device})


def test_a_selector_matches_or_not(oracle: Path) -> None:
    yes, no, quantity, semver = ask(
        oracle,
        request('device.driver == "x"'),
        request('device.driver == "y"'),
        request('device.capacity["x"].memory.compareTo(quantity("16Gi")) == 0'),
        request('device.attributes["x"].v.isGreaterThan(semver("1.2.2"))'),
    )
    assert yes == {
        "compiles": True,
        "matches": True,
        "cost": 3,
        "costExceeded": False,
        "estimatedCost": 3,
        "validates": True,
    }
    assert no["matches"] is False
    assert no["compiles"] is True
    assert quantity["matches"] is True
    assert semver["matches"] is True


def test_the_api_servers_validation_has_the_environment_for_new_expressions(oracle: Path) -> None:
    """1.37's API server validates a new selector at its compatibility version (1.36), feature gates
    at their defaults: no ``includes`` (lists version 1 is 1.37's, DRA's own needs
    DRAListTypeAttributes), attribute values typed ``any``; the scheduler compiles both."""
    includes, ranged = ask(
        oracle,
        request("[1, 2].includes(2)"),
        request('device.attributes["x"].ids.exists(i, i == 1)'),
    )
    assert includes["compiles"]
    assert ranged["compiles"]
    assert not includes["validates"]
    assert "undeclared reference to 'includes'" in includes["validationError"]
    assert not ranged["validates"]
    assert "expression of type 'any' cannot be range of a comprehension" in ranged["validationError"]


def test_compile_errors_are_upstreams(oracle: Path) -> None:
    syntax, mixed, not_bool, library = ask(
        oracle,
        request("device.driver =="),
        request("1 == 1.0"),
        request("device.attributes"),
        request('sets.contains([1, 2], [1]) && ip("10.0.0.1").family() == 4'),
    )
    assert syntax["compiles"] is False
    assert syntax["matches"] is None
    assert syntax["compileError"].startswith("compilation failed: ERROR: <input>:1:17: Syntax error:")
    assert "found no matching overload for '_==_' applied to '(int, double)'" in mixed["compileError"]
    assert "must evaluate to bool" in not_bool["compileError"]
    assert library["compiles"] is True
    assert library["matches"] is True


def test_runtime_errors_and_the_cost_limit(oracle: Path) -> None:
    missing, division, costly = ask(
        oracle,
        request('device.attributes["x"].nope == 1'),
        request('device.attributes["x"].count / 0 == 1'),
        request("lists.range(1000).all(i, lists.range(1000).all(j, i + j >= 0))"),
    )
    assert missing["compiles"] is True
    assert missing["matches"] is None
    assert missing["runtimeError"].startswith("no such key: nope. consider using CEL optional chaining")
    assert division["runtimeError"] == "division by zero"
    assert division["costExceeded"] is False
    assert costly["runtimeError"] == "operation cancelled: actual cost limit exceeded"
    assert costly["costExceeded"] is True
    assert costly["cost"] > 1_000_000


def test_a_bad_line_gets_an_error_and_the_next_line_its_answer(oracle: Path) -> None:
    bad, missing, good = ask(oracle, "not json", json.dumps({"expression": "true"}), request("true"))
    assert bad["inputError"].startswith("invalid request:")
    assert missing["inputError"] == "invalid request: expression and device are required"
    assert good["matches"] is True


#: The differential check's ceiling (bench/cel_differential.py, default seed and count): no
#: expression either engine decides otherwise than upstream.
MAX_DIFFERENCES = 0


@pytest.mark.timeout(900)  # 1,484 selectors through cel-python: minutes on a loaded machine
def test_the_differential_check_does_not_regress(oracle: Path) -> None:
    """Both engines against upstream's compiler on 1,484 selectors: none decided otherwise, so a
    change that breaks a library upstream accepts, or words an error otherwise, fails here."""
    bench = Path(__file__).resolve().parents[2] / "bench" / "cel_differential.py"
    done = subprocess.run(
        [sys.executable, str(bench), "--oracle", str(oracle)],
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    differing = {name: engine["differing"] for name, engine in report["engines"].items()}
    assert differing, report
    assert all(n <= MAX_DIFFERENCES for n in differing.values()), differing
