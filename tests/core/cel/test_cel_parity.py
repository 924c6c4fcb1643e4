"""Parity of the compiled engine (``cel-rust``) with the reference (``cel-python``).

The conftest already runs every test of this directory on both engines. Here the two engines
are compared directly, outcome by outcome (True, False, or the error class and its text):

* on generated selectors and devices (the fuzz generators of ``test_cel_fuzz``);
* on the selectors real DeviceClasses use, which must also run natively (not fall back);
* and the CEL-dependent tests outside this directory run again with ``cel-rust`` as the default.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.cel.conftest import require_engine
from tests.core.cel.test_cel_fuzz import HOSTILE_PIECES, _expressions, devices
from webhook.core.api.quantity import Quantity
from webhook.core.api.semver import Semver
from webhook.core.cel import CelError, SelectorEngine, SimpleDevice
from webhook.core.cel.backend import make_backend

REFERENCE, RUST = "cel-python", "cel-rust"
ROOT = Path(__file__).resolve().parents[3]
GPU = "gpu.example.com"


def outcome(engine: SelectorEngine, expression: str, device: SimpleDevice) -> tuple[str, Any]:
    try:
        return ("ok", engine.matches(expression, device))
    except CelError as e:
        return (type(e).__name__, e.message)


def both(expression: str, device: SimpleDevice) -> tuple[tuple[str, Any], tuple[str, Any]]:
    return (
        outcome(SelectorEngine(engine=REFERENCE), expression, device),
        outcome(SelectorEngine(engine=RUST), expression, device),
    )


@pytest.mark.both_engines
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expression=_expressions(), device=devices)
def test_generated_selectors_agree(expression: str, device: SimpleDevice) -> None:
    reference, rust = both(expression, device)
    assert rust == reference


@pytest.mark.both_engines
@settings(max_examples=200, deadline=None)
@given(
    expression=st.one_of(st.text(max_size=60), st.lists(HOSTILE_PIECES, max_size=40).map("".join)),
    device=devices,
)
def test_hostile_text_agrees(expression: str, device: SimpleDevice) -> None:
    reference, rust = both(expression, device)
    assert rust == reference


# --- well-typed selectors: most evaluate natively, so the comparison has teeth ----------------

DOMAINS = [GPU, "numa.example.org"]
NAMES = ["s", "i", "b", "v", "tags", "nums", "vers"]
_values = {
    "string": st.sampled_from(["a", "A100", "gpu", "é", ""]),
    "int": st.integers(-3, 40) | st.sampled_from([2**63 - 1, -(2**63)]),
    "bool": st.booleans(),
    "version": st.builds(Semver, st.integers(0, 2), st.integers(0, 2), st.integers(0, 2)),
}
_lists = {
    "strings": st.lists(_values["string"], min_size=1, max_size=4).map(tuple),
    "ints": st.lists(st.integers(-3, 5), min_size=1, max_size=4).map(tuple),
    "bools": st.lists(st.booleans(), min_size=1, max_size=2).map(tuple),
    "versions": st.lists(_values["version"], min_size=1, max_size=3).map(tuple),
}
attribute_values = st.one_of(
    *(st.tuples(st.just(k), v) for k, v in _values.items()),
    *(st.tuples(st.just(k), v) for k, v in _lists.items()),
)
typed_devices = st.builds(
    SimpleDevice,
    driver=st.sampled_from([GPU, "other.example.com"]),
    attributes=st.dictionaries(
        st.one_of(
            st.builds(lambda d, n: f"{d}/{n}", st.sampled_from(DOMAINS), st.sampled_from(NAMES)),
            st.sampled_from(NAMES),  # bare: the driver's domain
        ),
        attribute_values,
        min_size=4,
        max_size=10,
    ),
    capacity=st.dictionaries(
        st.builds(lambda d, n: f"{d}/{n}", st.sampled_from(DOMAINS), st.sampled_from(["mem", "cores"])),
        st.sampled_from(["16Gi", "17179869184", "80Gi", "1", "500m", "0"]).map(Quantity.parse),
        max_size=3,
    ),
    allow_multiple_allocations=st.booleans(),
)


def _attr(d: str, n: str) -> str:
    return f"device.attributes['{d}'].{n}"


def _clauses() -> st.SearchStrategy[str]:
    d = st.sampled_from([*DOMAINS, "absent.example.com"])
    n = st.sampled_from(NAMES)
    lit = st.sampled_from(
        [
            *("'a'", "'A100'", "1", "3", "40", "3.0", "true", "false", "null"),
            "semver('1.1.1')",
            "quantity('16Gi')",
        ]
    )
    templates = st.sampled_from(
        [
            "{a} == {lit}",
            "{a} != {lit}",
            "{lit} == {a}",
            "{a} >= {lit}",
            "{a} < {lit}",
            "{a}.startsWith('A')",
            "{a}.endsWith('0')",
            "{a}.contains('1')",
            "{a}.lowerAscii() == 'a100'",
            "{a}.isGreaterThan(semver('1.0.0'))",
            "{a}.compareTo(semver('1.1.1')) == 0",
            "{a}.major() == 1",
            "{a}.includes({lit})",
            "{lit} in {a}",
            "{a}.exists(x, x == {lit})",
            "{a}.all(x, x != {lit})",
            "{a}.asList().exists(x, x == {lit})",
            "size({a}) > 1",
            "{a}",
            "!{a}",
            "has(device.attributes['{d}'].{n})",
            "'{n}' in device.attributes['{d}']",
            "'{d}' in device.attributes",
            "size(device.attributes['{d}']) >= 2",
            "device.attributes['{d}'].exists(k, k == '{n}')",
            "cel.bind(m, device.attributes['{d}'], has(m.{n}) && m.{n} == {lit})",
            "device.capacity['{d}'].mem.compareTo(quantity('16Gi')) >= 0",
            "device.capacity['{d}'].mem == quantity('16Gi')",
            "device.capacity['{d}'].mem == {lit}",
            "device.capacity['{d}'].cores.isLessThan(quantity('1'))",
            "has(device.capacity['{d}'].mem)",
            "device.driver == '{d}'",
            "device.allowMultipleAllocations",
            "dyn({a}) == dyn({lit})",
        ]
    )
    return st.builds(
        lambda t, dom, name, value: t.format(a=_attr(dom, name), d=dom, n=name, lit=value),
        templates,
        d,
        n,
        lit,
    )


def _typed_selectors() -> st.SearchStrategy[str]:
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        pair = st.tuples(inner, inner)
        return st.one_of(
            pair.map(lambda p: f"({p[0]}) && ({p[1]})"),
            pair.map(lambda p: f"({p[0]}) || ({p[1]})"),
            inner.map(lambda e: f"!({e})"),
            st.tuples(inner, inner, inner).map(lambda p: f"({p[0]}) ? ({p[1]}) : ({p[2]})"),
        )

    return st.recursive(_clauses(), extend, max_leaves=4)


@pytest.mark.both_engines
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expression=_typed_selectors(), device=typed_devices)
def test_typed_selectors_agree(expression: str, device: SimpleDevice) -> None:
    reference, rust = both(expression, device)
    assert rust == reference


# --- real selectors run natively, not through the fallback ------------------------------------

REAL_SELECTORS = [
    "device.driver == 'gpu.example.com' && device.attributes['gpu.example.com'].type == 'gpu'",
    "'gpu.example.com' in device.attributes && device.attributes['gpu.example.com'].memory >= 16 "
    "&& device.attributes['gpu.example.com'].model.startsWith('A100')",
    "device.driver == 'gpu.example.com' && "
    "device.capacity['gpu.example.com'].memory.compareTo(quantity('16Gi')) >= 0 && "
    "device.attributes['gpu.example.com'].driverVersion.isGreaterThan(semver('1.2.3'))",
    "device.attributes['gpu.example.com'].driverVersion == semver('1.3.0')",
    "has(device.attributes['gpu.example.com'].model) && device.attributes['gpu.example.com'].healthy",
    "device.attributes['gpu.example.com'].tags.includes('nvlink')",
    "device.attributes['gpu.example.com'].tags.asList().exists(t, t == 'nvlink')",
    "cel.bind(g, device.attributes['gpu.example.com'], g.memory >= 16 && g.type == 'gpu')",
    "device.capacity['gpu.example.com'].memory.isGreaterThan(quantity('16Gi'))",
    "!device.allowMultipleAllocations",
]


def real_gpu(memory: int) -> SimpleDevice:
    return SimpleDevice(
        GPU,
        {
            f"{GPU}/type": ("string", "gpu"),
            f"{GPU}/memory": ("int", memory),
            f"{GPU}/model": ("string", "A100-80GB"),
            f"{GPU}/driverVersion": ("version", Semver.parse("1.3.0")),
            f"{GPU}/healthy": ("bool", True),
            f"{GPU}/tags": ("strings", ("fast", "nvlink")),
        },
        {f"{GPU}/memory": Quantity.parse(f"{memory}Gi")},
    )


@pytest.mark.both_engines
@pytest.mark.parametrize("expression", REAL_SELECTORS)
def test_real_selectors_run_natively(expression: str) -> None:
    rust = SelectorEngine(engine=RUST)
    for memory in (8, 80):
        device = real_gpu(memory)
        reference = SelectorEngine(engine=REFERENCE)
        assert outcome(rust, expression, device) == outcome(reference, expression, device)
    stats = rust.stats()
    assert stats["declined_programs"] == 0
    assert stats["reference_evaluations"] == 0
    assert stats["native_evaluations"] >= 1
    assert stats["native_evaluations"] + stats["memo_hits"] == 2


@pytest.mark.both_engines
@pytest.mark.parametrize("test", ["startsWith", "endsWith", "contains"])
def test_string_tests_on_an_attribute_run_in_rust_without_a_callback(test: str) -> None:
    expression = f"device.attributes['{GPU}'].model.{test}('A')"
    program: Any = make_backend(RUST).compile(expression)
    assert program.program is not None
    assert program.functions == {}
    for model in (("string", "A100"), ("int", 7), ("strings", ("A100",)), ("version", Semver.parse("1.0.0"))):
        device = SimpleDevice(GPU, {f"{GPU}/model": model})  # not a string: Rust errs, the reference answers
        assert outcome(SelectorEngine(engine=RUST), expression, device) == outcome(
            SelectorEngine(engine=REFERENCE), expression, device
        )


@pytest.mark.both_engines
def test_errors_come_from_the_reference_with_its_text() -> None:
    rust = SelectorEngine(engine=RUST)
    expression = f"device.attributes['{GPU}'].missing == 'x'"
    assert outcome(rust, expression, real_gpu(8)) == ("CelRuntimeError", "no such key: missing")
    assert rust.stats()["reference_evaluations"] == 1
    version_vs_string = f"device.attributes['{GPU}'].driverVersion == '1.3.0'"
    assert outcome(rust, version_vs_string, real_gpu(8)) == outcome(
        SelectorEngine(engine=REFERENCE), version_vs_string, real_gpu(8)
    )
    assert outcome(rust, version_vs_string, real_gpu(8))[0] == "CelRuntimeError"


@pytest.mark.both_engines
def test_devices_that_agree_on_what_a_selector_reads_share_one_evaluation() -> None:
    rust = SelectorEngine(engine=RUST)
    expression = f"device.attributes['{GPU}'].memory >= 16"
    for i in range(10):
        device = SimpleDevice(GPU, {f"{GPU}/memory": ("int", 40), f"{GPU}/index": ("int", i)})
        assert rust.matches(expression, device)
    stats = rust.stats()
    assert stats["native_evaluations"] == 1
    assert stats["memo_hits"] == 9


def test_unknown_engine_is_refused(cel_engine: str) -> None:
    with pytest.raises(ValueError, match="unknown CEL engine 'nope'"):
        SelectorEngine(engine="nope")
    assert SelectorEngine().engine == cel_engine


# --- the CEL-dependent tests outside this directory, on the compiled engine -------------------

PYTEST = (
    sys.executable,
    "-m",
    "pytest",
    "-q",
    "-p",
    "tests.core.cel.engine_plugin",
    "-p",
    "no:cacheprovider",
)
CEL_MARKERS = ("SelectorEngine", "CelError", "CelRuntimeError", "selectors=", "CEL runtime error")


def cel_dependent_test_files() -> list[str]:
    found = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        if path.parent == Path(__file__).parent:
            continue
        text = path.read_text(encoding="utf-8")
        if any(marker in text for marker in CEL_MARKERS):
            found.append(str(path.relative_to(ROOT)))
    return found


@pytest.mark.both_engines
@pytest.mark.slow
def test_cel_dependent_tests_elsewhere_pass_on_the_compiled_engine() -> None:
    require_engine(RUST)
    files = cel_dependent_test_files()
    assert "tests/core/allocation/test_allocator.py" in files
    env = {**os.environ, "DRAXR_CEL_ENGINE": RUST}
    run = subprocess.run(
        [*PYTEST, *files],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout
