"""Limits that stand in for upstream's cost limit: length, nesting, steps, value sizes."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from types import FrameType

import pytest

from webhook.core.api.constants import CEL_SELECTOR_MAX_LENGTH
from webhook.core.cel import CelCompileError, CelRuntimeError, SelectorEngine, SimpleDevice
from webhook.core.cel.environment import MAX_NESTING, MAX_TREE_DEPTH, bracket_nesting

DEVICE = SimpleDevice("gpu.example.com", {"gpu.example.com/model": ("string", "A100")})


def test_length_limit_counts_bytes() -> None:
    engine = SelectorEngine()
    pad = "true" + " " * (CEL_SELECTOR_MAX_LENGTH - 4)
    engine.compile(pad)
    with pytest.raises(CelCompileError, match="Too long: may not be more than 10240 bytes"):
        engine.compile(pad + " ")
    multibyte = "'" + "é" * (CEL_SELECTOR_MAX_LENGTH // 2) + "' != ''"  # fewer characters than bytes
    assert len(multibyte) < CEL_SELECTOR_MAX_LENGTH
    with pytest.raises(CelCompileError, match="Too long"):
        engine.compile(multibyte)


def test_bracket_nesting_limit() -> None:
    engine = SelectorEngine()
    ok = "(" * MAX_NESTING + "true" + ")" * MAX_NESTING
    assert engine.matches(ok, DEVICE)
    deep = "(" * (MAX_NESTING + 1) + "true" + ")" * (MAX_NESTING + 1)
    with pytest.raises(CelCompileError, match="nested too deeply: 33 levels of brackets"):
        engine.compile(deep)
    with pytest.raises(CelCompileError, match="nested too deeply"):
        engine.compile("[" * 5000 + "]" * 5000 + " == []")


def test_bracket_scan_ignores_strings_and_comments() -> None:
    assert bracket_nesting("'((((' == \"[[[\" && r'\\(' != ''") == 0
    assert bracket_nesting("'''(((\n((''' == '' // ((((((\n && (true)") == 1
    assert bracket_nesting("'\\'((' == ''") == 0
    engine = SelectorEngine()
    assert engine.matches("'" + "(" * 100 + "' != '' // " + "[" * 100, DEVICE)


def test_operator_chains_are_limited_without_brackets() -> None:
    engine = SelectorEngine()
    with pytest.raises(CelCompileError, match="nested too deeply"):
        engine.compile("-1" + " * 1" * (MAX_TREE_DEPTH * 2) + " == -1")
    # a run of one unary operator is not a chain: cel-go's parser drops its pairs
    assert not engine.matches("!" * (MAX_TREE_DEPTH * 2 + 1) + "true", DEVICE)
    with pytest.raises(CelCompileError, match="nested too deeply"):
        engine.compile("1" + " + 1" * 300 + " > 0")
    assert engine.matches("1" + " + 1" * 50 + " == 51", DEVICE)


def test_long_conjunctions_are_balanced_not_rejected() -> None:
    engine = SelectorEngine()
    clause = "device.driver == 'gpu.example.com'"
    expr = " && ".join([clause] * 200)
    assert engine.matches(expr, DEVICE)
    assert not engine.matches(expr + " && false", DEVICE)
    assert engine.matches(" || ".join(["false"] * 300 + ["true"]), DEVICE)


def test_step_budget_stops_runaway_macros() -> None:
    engine = SelectorEngine()
    hundred = str(list(range(100)))
    expr = f"{hundred}.all(a, {hundred}.all(b, {hundred}.all(c, a + b + c >= 0)))"
    with pytest.raises(CelRuntimeError, match="actual cost limit exceeded"):
        engine.matches(expr, DEVICE)


def test_doubling_strings_stops_at_the_cost_limit() -> None:
    engine = SelectorEngine()
    expr = "'ab'"
    for i in range(30):
        expr = f"cel.bind(v{i}, {expr}, v{i} + v{i})"
    with pytest.raises(CelRuntimeError, match="actual cost limit exceeded"):
        engine.matches(f"size({expr}) > 0", DEVICE)


def _doubled(times: int, seed: str) -> str:
    """A selector binding ``seed`` doubled ``times`` times, true when the result is not empty."""
    expr = f"x{times}.size() > 0"
    for i in range(times, 0, -1):
        expr = f"cel.bind(x{i}, x{i - 1} + x{i - 1}, {expr})"
    return f"cel.bind(x0, {seed}, {expr})"


def test_strings_are_bounded_by_the_cost_limit_alone() -> None:
    """Upstream (the oracle) accepts a 'ab' doubled 21 times (4 Mi characters, cost 838,916) and
    stops the next doubling (cost 1,677,776): a string's ``+`` costs a tenth of its length, so the
    cost limit bounds what an evaluation builds; no size cap of draxr's stops it earlier."""
    engine = SelectorEngine()
    assert engine.matches(_doubled(20, "'ab'"), DEVICE)
    assert engine.matches(_doubled(21, "'ab'"), DEVICE)
    assert engine.matches(_doubled(20, "b'ab'"), DEVICE)
    with pytest.raises(CelRuntimeError, match="actual cost limit exceeded"):
        engine.matches(_doubled(22, "'ab'"), DEVICE)


def test_doubling_lists_is_capped() -> None:
    """cel-go concatenates lists lazily at a constant cost (upstream accepts [1, 2] doubled 22
    times, cost 69); draxr copies them, so its size cap stays (a known difference)."""
    engine = SelectorEngine()
    assert engine.matches(_doubled(18, "[1, 2]"), DEVICE)
    with pytest.raises(CelRuntimeError, match="actual cost limit exceeded"):
        engine.matches(_doubled(20, "[1, 2]"), DEVICE)


def test_process_recursion_limit_is_untouched() -> None:
    before = sys.getrecursionlimit()
    engine = SelectorEngine()
    engine.compile("device.driver == 'x'")
    engine.matches("[1].exists(x, x == 1)", DEVICE)
    assert sys.getrecursionlimit() == before


def _at_depth(depth: int, fn: Callable[[], bool]) -> bool:
    return fn() if depth == 0 else _at_depth(depth - 1, fn)


def _stack_depth() -> int:
    """Frames on the caller's stack, itself included."""
    frames = 0
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        frames += 1
        frame = frame.f_back
    return frames


def test_deepest_allowed_expression_evaluates_from_a_deep_caller() -> None:
    """A caller 500 frames deep (a backtracking allocator, say) still evaluates the deepest
    expression the limits allow."""
    engine = SelectorEngine()
    inner = "(" * (MAX_NESTING - 2) + "[1].exists(x, x == 1)" + ")" * (MAX_NESTING - 2)
    chain = "1" + " + 1" * 60
    expr = f"{inner} && {chain} == 61"
    assert _at_depth(500, lambda: engine.matches(expr, DEVICE))


def test_recursion_error_is_reported_and_not_cached() -> None:
    engine = SelectorEngine()
    # Arithmetic keeps cel-rust on the reference evaluator (Python frames); its own Rust programs
    # do not use the Python stack at all.
    expr = "(" * (MAX_NESTING - 1) + "[1].exists(x, x + 0 == 1)" + ")" * (MAX_NESTING - 1)
    engine.compile(expr)
    limit = sys.getrecursionlimit()
    frames = _stack_depth()
    with pytest.raises(CelRuntimeError, match="RecursionError"):
        _at_depth(limit - frames - 30, lambda: engine.matches(expr, DEVICE))
    assert engine.stats()["uncached_failures"] == 1
    assert engine.matches(expr, DEVICE)  # with a normal stack the same input works


def test_select_reports_an_aborted_evaluation_as_the_devices_error_and_caches_nothing() -> None:
    """The batch path (``select``, a class's cold start) meets the abort in one backend call for
    every device; it then asks device by device as ``matches`` would, so each device carries the
    abort as its error, with the selector's index, and nothing of it is cached."""
    engine = SelectorEngine()
    expr = "(" * (MAX_NESTING - 1) + "[1].exists(x, x + 0 == 1)" + ")" * (MAX_NESTING - 1)
    engine.compile(expr)
    other = SimpleDevice("gpu.example.com", {"gpu.example.com/model": ("string", "H100")})
    limit = sys.getrecursionlimit()
    frames = _stack_depth()
    verdicts: list[object] = []

    def deep() -> bool:
        verdicts.extend(engine.select(["true", expr], [DEVICE, other]))
        return True

    _at_depth(limit - frames - 60, deep)
    assert len(verdicts) == 2
    for verdict in verdicts:
        assert isinstance(verdict, CelRuntimeError), verdict
        assert "RecursionError" in str(verdict)
        assert verdict.selector_index == 1
    assert engine.stats()["uncached_failures"] >= 2
    assert engine.select(["true", expr], [DEVICE, other]) == [True, True]  # a normal stack: it works


def test_a_compile_that_runs_out_of_the_callers_stack_is_not_cached() -> None:
    """The parser runs out of stack at some depth of the caller's: that is the caller's failure,
    not the expression's, so the same expression compiles with a normal stack afterwards (it was
    cached as a syntax error, failing every later call)."""
    frames = _stack_depth()
    expr = "device.driver == 'gpu.example.com'"
    failed = 0
    for margin in range(1, 60):  # from too deep for anything to deep enough for the parser alone
        engine = SelectorEngine()
        try:
            _at_depth(sys.getrecursionlimit() - frames - margin, partial(engine.matches, expr, DEVICE))
        except CelCompileError:
            failed += 1
        except RecursionError:  # the engine's own frames, before it could say anything
            pass
        assert engine.matches(expr, DEVICE) is True, margin
    assert failed > 0  # some depths did fail in the parser
