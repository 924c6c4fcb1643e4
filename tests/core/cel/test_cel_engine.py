"""SelectorEngine caches, statistics and thread safety."""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.core.api.quantity import Quantity
from webhook.core.cel import CelCompileError, CelError, CelRuntimeError, SelectorEngine, SimpleDevice
from webhook.core.cel.engine import _MISSING, LRU

GPU = "gpu.example.com"


def indexed(i: int, **extra: tuple[str, Any]) -> SimpleDevice:
    return SimpleDevice(
        GPU, {f"{GPU}/index": ("int", i), **extra}, {f"{GPU}/memory": Quantity.parse(f"{i}Gi")}
    )


@dataclass
class RawDevice:
    """A device whose fingerprint the test controls (None, unhashable, or shared)."""

    driver: str
    attributes: Mapping[str, tuple[str, Any]] = field(default_factory=dict)
    capacity: Mapping[str, Quantity] = field(default_factory=dict)
    allow_multiple_allocations: bool = False
    fingerprint: Hashable = None


def test_results_are_cached_by_expression_and_fingerprint() -> None:
    engine = SelectorEngine()
    expr = f"device.attributes['{GPU}'].index == 1"
    assert engine.matches(expr, indexed(1))
    assert engine.matches(expr, indexed(1))  # an equal device: same fingerprint
    assert not engine.matches(expr, indexed(2))
    stats = engine.stats()
    assert stats["evaluations"] == 2
    assert stats["result_hits"] == 1
    assert stats["compiles"] == 1
    assert stats["programs"] == 1
    assert stats["activations"] == 2
    assert stats["results"] == 2


def test_activation_is_shared_between_expressions() -> None:
    engine = SelectorEngine()
    d = indexed(1)
    assert engine.matches("device.driver == 'gpu.example.com'", d)
    assert engine.matches(f"device.attributes['{GPU}'].index == 1", d)
    stats = engine.stats()
    assert stats["activation_misses"] == 1
    assert stats["activation_hits"] == 1


def test_cached_errors_are_raised_again_as_fresh_instances() -> None:
    engine = SelectorEngine()
    expr = f"device.attributes['{GPU}'].missing == 1"
    caught: list[CelError] = []
    for _ in range(2):
        with pytest.raises(CelRuntimeError, match="no such key: missing") as info:
            engine.matches(expr, indexed(1))
        caught.append(info.value)
    assert caught[0] is not caught[1]
    caught[0].selector_index = 3  # what the cluster state does
    assert caught[1].selector_index == 0
    assert engine.stats()["evaluations"] == 1
    for _ in range(2):
        with pytest.raises(CelCompileError, match="Syntax error"):
            engine.matches("device.", indexed(1))
    assert engine.stats()["compiles"] == 2  # the two distinct expressions, compile errors cached


def test_devices_without_a_usable_fingerprint_are_evaluated_every_time() -> None:
    engine = SelectorEngine()
    a = RawDevice(GPU, {f"{GPU}/index": ("int", 1)}, fingerprint=None)
    b = RawDevice(GPU, {f"{GPU}/index": ("int", 2)}, fingerprint=None)
    expr = f"device.attributes['{GPU}'].index == 1"
    assert engine.matches(expr, a)
    assert not engine.matches(expr, b)  # None must not be a shared cache key
    unhashable = RawDevice(GPU, {f"{GPU}/index": ("int", 1)}, fingerprint=[1])  # type: ignore[arg-type]
    assert engine.matches(expr, unhashable)
    assert engine.stats()["results"] == 0
    assert engine.stats()["evaluations"] == 3


def test_bad_device_content_is_a_runtime_error() -> None:
    engine = SelectorEngine()
    bad = RawDevice(GPU, {f"{GPU}/x": ("float", 1.5)}, fingerprint="bad")
    with pytest.raises(CelRuntimeError, match="unsupported attribute value"):
        engine.matches("true", bad)
    weird = RawDevice(GPU, attributes=None, fingerprint="weird")  # type: ignore[arg-type]
    with pytest.raises(CelRuntimeError, match="unusable device"):
        engine.matches("true", weird)


def test_caches_are_bounded() -> None:
    engine = SelectorEngine(max_programs=2, max_results=3)
    for i in range(5):
        engine.matches(f"device.attributes['{GPU}'].index == {i}", indexed(i))
    stats = engine.stats()
    assert stats["programs"] == 2
    assert stats["results"] == 3
    assert stats["activations"] <= 3
    with pytest.raises(ValueError, match="at least 1"):
        SelectorEngine(max_programs=0)


def test_lru_keeps_recently_used_entries() -> None:
    engine = SelectorEngine(max_results=2)
    expr = f"device.attributes['{GPU}'].index >= 0"
    engine.matches(expr, indexed(1))
    engine.matches(expr, indexed(2))
    engine.matches(expr, indexed(1))  # refresh 1
    engine.matches(expr, indexed(3))  # evicts 2
    before = engine.stats()["evaluations"]
    engine.matches(expr, indexed(1))
    assert engine.stats()["evaluations"] == before
    engine.matches(expr, indexed(2))
    assert engine.stats()["evaluations"] == before + 1


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), st.lists(st.one_of(st.none(), st.integers(0, 6)), max_size=5)),
        max_size=12,
    )
)
def test_lru_batch_calls_are_single_calls_in_a_row(steps: list[tuple[bool, list[int | None]]]) -> None:
    """``get_many``/``put_many`` (the engine's batches) keep the same entries, order and counts as
    ``get``/``put`` one key at a time; a None key is skipped, uncounted."""
    single: LRU[int, str] = LRU(3)
    batched: LRU[int, str] = LRU(3)
    for put, keys in steps:
        present = [k for k in keys if k is not None]
        if put:
            for k in present:
                single.put(k, f"v{k}")
            batched.put_many((k, f"v{k}") for k in present)
        else:
            expected = [single.get(k) if k is not None else _MISSING for k in keys]
            assert batched.get_many(keys) == expected
        assert list(batched._data.items()) == list(single._data.items())
        assert (batched.hits, batched.misses) == (single.hits, single.misses)


def test_clear_drops_cached_entries() -> None:
    engine = SelectorEngine()
    engine.matches("true", indexed(1))
    engine.clear()
    stats = engine.stats()
    assert (stats["programs"], stats["activations"], stats["results"]) == (0, 0, 0)
    assert engine.matches("true", indexed(1))
    assert engine.stats()["evaluations"] == 2


def test_non_string_expression_is_a_compile_error() -> None:
    with pytest.raises(CelCompileError, match="must be a string"):
        SelectorEngine().compile(None)  # type: ignore[arg-type]


EXPRESSIONS = [
    f"device.attributes['{GPU}'].index % 3 == 0",
    f"device.capacity['{GPU}'].memory.isGreaterThan(quantity('100Gi'))",
    f"device.attributes['{GPU}'].tags.exists(t, t == 'even')",
    f"device.attributes['{GPU}'].missing == 1 || device.attributes['{GPU}'].index > 150",
    f"cel.bind(a, device.attributes['{GPU}'], a.index > 10 && a.index < 20)",
]


def _outcome(engine: SelectorEngine, expr: str, device: SimpleDevice) -> bool | str:
    try:
        return engine.matches(expr, device)
    except CelError as e:
        return f"{type(e).__name__}: {e.message}"


def test_threads_get_the_same_answers_as_a_single_thread() -> None:
    devices = [
        indexed(i, **{f"{GPU}/tags": ("strings", ("even" if i % 2 == 0 else "odd",))}) for i in range(200)
    ]
    work = [(e, d) for e in EXPRESSIONS for d in devices]
    expected = [_outcome(SelectorEngine(), e, d) for e, d in work]
    assert any(r is True for r in expected)
    assert any(r is False for r in expected)
    assert any(isinstance(r, str) for r in expected)

    shared = SelectorEngine(max_results=300)  # small: threads also race on eviction
    start = threading.Barrier(8)

    def run(offset: int) -> list[bool | str]:
        start.wait(timeout=30)
        order = work[offset:] + work[:offset]
        got = [_outcome(shared, e, d) for e, d in order]
        return got[len(work) - offset :] + got[: len(work) - offset]

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(run, [i * 97 for i in range(8)], timeout=120))
    for got in results:
        assert got == expected


def _one_by_one(engine: SelectorEngine, expr: str, devices: list[Any]) -> list[bool | str]:
    out: list[bool | str] = []
    for d in devices:
        try:
            out.append(engine.matches(expr, d))
        except CelRuntimeError as e:
            out.append(f"error: {e}")
    return out


MANY_EXPRESSIONS = [
    f"device.attributes['{GPU}'].index >= 2",
    f"device.attributes['{GPU}'].missing == 1",  # a runtime error on every device
    f"device.capacity['{GPU}'].memory.compareTo(quantity('3Gi')) < 0",
    f"has(device.attributes['{GPU}'].model) && device.attributes['{GPU}'].model == 'a'",
]


@pytest.mark.parametrize("expr", MANY_EXPRESSIONS)
def test_a_batch_caches_for_single_calls_and_evaluates_each_fingerprint_once(expr: str) -> None:
    devices: list[Any] = [
        indexed(1),
        indexed(2, **{f"{GPU}/model": ("string", "a")}),
        indexed(1),  # equal to the first: evaluated once per call
        indexed(5),
        RawDevice(GPU, {f"{GPU}/index": ("int", 3)}, fingerprint=None),
        RawDevice(GPU, {f"{GPU}/index": ("int", 4)}, fingerprint=[4]),  # type: ignore[arg-type]
        RawDevice(GPU, {f"{GPU}/x": ("float", 1.5)}, fingerprint="bad"),
    ]
    expected = _one_by_one(SelectorEngine(), expr, devices)
    batch = SelectorEngine()
    assert _verdict_texts(batch.select([expr], devices)) == expected
    # Its outcomes are cached for later single calls, and hits are fresh error instances.
    evaluations = batch.stats()["evaluations"]
    assert evaluations == 6  # seven devices, two with one fingerprint
    assert _one_by_one(batch, expr, devices) == expected
    assert batch.stats()["evaluations"] == evaluations + 2  # only the two without a usable fingerprint
    again = batch.select([expr], devices)
    assert _verdict_texts(again) == expected
    errors = [o for o in again if isinstance(o, CelError)]
    assert all(a is not b for a in errors for b in errors if a is not b)
    assert batch.select([expr], []) == []


def _verdict_texts(verdicts: list[bool | CelError]) -> list[bool | str]:
    return [v if isinstance(v, bool) else f"error: {v}" for v in verdicts]


def _select_one_by_one(engine: SelectorEngine, exprs: list[str], devices: list[Any]) -> list[object]:
    """What a loop of ``matches`` gives, as ``select`` reports it: True, False, or (index, text)."""
    out: list[object] = []
    for d in devices:
        verdict: object = True
        for i, expr in enumerate(exprs):
            try:
                if not engine.matches(expr, d):
                    verdict = False
                    break
            except CelError as e:
                verdict = (i, type(e).__name__, str(e))
                break
        out.append(verdict)
    return out


def _select_texts(verdicts: list[bool | CelError]) -> list[object]:
    return [v if isinstance(v, bool) else (v.selector_index, type(v).__name__, str(v)) for v in verdicts]


SELECT_DEVICES: list[Any] = [
    indexed(1),
    indexed(2, **{f"{GPU}/model": ("string", "a")}),
    indexed(1),
    indexed(5),
    RawDevice(GPU, {f"{GPU}/index": ("int", 3)}, fingerprint=None),
    RawDevice(GPU, {f"{GPU}/index": ("int", 4)}, fingerprint=[4]),  # type: ignore[arg-type]
    RawDevice(GPU, {f"{GPU}/x": ("float", 1.5)}, fingerprint="bad"),
]


@pytest.mark.parametrize(
    "exprs",
    [
        [],
        MANY_EXPRESSIONS,
        [MANY_EXPRESSIONS[0], MANY_EXPRESSIONS[3]],
        [MANY_EXPRESSIONS[3], MANY_EXPRESSIONS[1]],  # the error only where the first matched
        [f"device.attributes['{GPU}'].index >= 2", "device."],  # a compile error, second
        ["device.", "true"],
    ],
)
def test_select_gives_what_matches_in_a_loop_gives(exprs: list[str]) -> None:
    expected = _select_one_by_one(SelectorEngine(), exprs, SELECT_DEVICES)
    engine = SelectorEngine()
    verdicts = engine.select(exprs, SELECT_DEVICES)
    assert _select_texts(verdicts) == expected
    errors = [v for v in verdicts if isinstance(v, CelError)]
    assert len({id(e) for e in errors}) == len(errors)  # each device its own instance
    assert _select_texts(engine.select(exprs, SELECT_DEVICES)) == expected  # and from the caches


def test_select_stops_evaluating_a_device_once_a_selector_decided_it() -> None:
    devices = [indexed(i) for i in range(10)]
    engine = SelectorEngine()
    verdicts = engine.select(
        [f"device.attributes['{GPU}'].index >= 7", f"device.attributes['{GPU}'].index != 8"], devices
    )
    assert verdicts == [False] * 7 + [True, False, True]
    assert engine.stats()["evaluations"] == 10 + 3  # the second selector saw only 7, 8 and 9


@settings(max_examples=150, deadline=None)
@given(
    exprs=st.lists(
        st.sampled_from(
            [
                *MANY_EXPRESSIONS,
                f"device.attributes['{GPU}'].index % 2 == 0",
                f"device.attributes['{GPU}'].index / (device.attributes['{GPU}'].index - 3) > 0",
                "device.driver == 'gpu.example.com'",
                "true",
                "device.",
            ]
        ),
        max_size=4,
    ),
    indices=st.lists(st.integers(min_value=0, max_value=6), max_size=12),
)
def test_select_agrees_with_a_loop_of_matches(exprs: list[str], indices: list[int]) -> None:
    devices: list[Any] = [indexed(i) for i in indices]
    assert _select_texts(SelectorEngine().select(exprs, devices)) == _select_one_by_one(
        SelectorEngine(), exprs, devices
    )


def test_batches_prepare_a_device_once_across_calls_where_preparing_is_dear() -> None:
    devices = [indexed(i % 5) for i in range(20)]
    engine = SelectorEngine()
    engine.select([f"device.attributes['{GPU}'].index >= 1"], devices)
    engine.select([f"device.attributes['{GPU}'].index >= 2"], devices)  # another class, same devices
    stats = engine.stats()
    if engine.engine == "cel-python":  # celpy activations are kept: five made, then five hits
        assert (stats["activations"], stats["activation_misses"], stats["activation_hits"]) == (5, 5, 5)
    else:  # cel-rust wraps the device again, cheaper than a lookup: its cache stays empty
        assert (stats["activations"], stats["activation_misses"], stats["activation_hits"]) == (0, 0, 0)
    assert stats["evaluations"] == 10
