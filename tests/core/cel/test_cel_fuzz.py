"""Fuzzing: hostile expressions and random devices never leak anything but CelError, and the
same input always gives the same answer (cached or not)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.core.api.quantity import Quantity
from webhook.core.api.semver import Semver
from webhook.core.cel import CelError, SelectorEngine, SimpleDevice

DOMAINS = ["gpu.example.com", "numa.example.org", "x.com"]
IDS = ["model", "index", "memory", "healthy", "tags", "ver", "missing"]

scalar_values = st.one_of(
    st.tuples(st.just("int"), st.integers(min_value=-(2**63), max_value=2**63 - 1)),
    st.tuples(st.just("bool"), st.booleans()),
    st.tuples(st.just("string"), st.text(max_size=6)),
    st.tuples(
        st.just("version"),
        st.builds(Semver, st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)),
    ),
)
list_values = st.one_of(
    st.tuples(st.just("ints"), st.lists(st.integers(-5, 5), min_size=1, max_size=4).map(tuple)),
    st.tuples(
        st.just("strings"), st.lists(st.sampled_from(["a", "b", "fast"]), min_size=1, max_size=3).map(tuple)
    ),
    st.tuples(st.just("bools"), st.lists(st.booleans(), min_size=1, max_size=2).map(tuple)),
)
devices = st.builds(
    SimpleDevice,
    driver=st.sampled_from(DOMAINS),
    attributes=st.dictionaries(
        st.builds(lambda d, i: f"{d}/{i}", st.sampled_from(DOMAINS), st.sampled_from(IDS)),
        scalar_values | list_values,
        max_size=6,
    ),
    capacity=st.dictionaries(
        st.builds(lambda d, i: f"{d}/{i}", st.sampled_from(DOMAINS), st.sampled_from(IDS)),
        st.integers(0, 2**40).map(lambda n: Quantity.parse(str(n))),
        max_size=2,
    ),
    allow_multiple_allocations=st.booleans(),
)

ATOMS = [
    "device.driver",
    "device.allowMultipleAllocations",
    *(f"device.attributes['{d}'].{i}" for d in DOMAINS for i in IDS),
    *(f"device.capacity['{d}'].{i}" for d in DOMAINS[:1] for i in IDS),
    "device.attributes",
    "device.capacity['gpu.example.com']",
    "1",
    "-7",
    "2.5",
    "3u",
    "'gpu'",
    "'A100'",
    "true",
    "false",
    "null",
    "[1, 'a', true]",
    "{'a': 1}",
    "quantity('16Gi')",
    "semver('1.2.3')",
    "b'x'",
]
UNARY = ["!{}", "-{}", "({})", "size({})", "has({}.model)", "{}.includes(1)", "{}.lowerAscii()", "dyn({})"]
BINARY = [
    "{} == {}",
    "{} != {}",
    "{} < {}",
    "{} >= {}",
    "{} && {}",
    "{} || {}",
    "{} + {}",
    "{} / {}",
    "{} % {}",
    "{} in {}",
    "{}[{}]",
    "{}.compareTo({})",
    "{}.isGreaterThan({})",
    "{}.startsWith({})",
    "{}.add({})",
    "[{}].exists(x, x == {})",
    "[{}, 0].all(v, v != {})",
    "cel.bind(b, {}, b == {})",
    "{} ? true : {}",
]


def _expressions() -> st.SearchStrategy[str]:
    base = st.sampled_from(ATOMS)

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        unary = st.tuples(st.sampled_from(UNARY), inner).map(lambda t: t[0].format(t[1]))
        binary = st.tuples(st.sampled_from(BINARY), inner, inner).map(lambda t: t[0].format(t[1], t[2]))
        return unary | binary

    return st.recursive(base, extend, max_leaves=8)


def outcome(engine: SelectorEngine, expression: str, device: SimpleDevice) -> tuple[str, Any]:
    try:
        return ("ok", engine.matches(expression, device))
    except CelError as e:  # any other exception fails the test
        failure: tuple[str, Any] = (type(e).__name__, e.message)
    assert failure[1]
    return failure


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expression=_expressions(), device=devices)
def test_generated_selectors(expression: str, device: SimpleDevice) -> None:
    engine = SelectorEngine()
    first = outcome(engine, expression, device)
    assert outcome(engine, expression, device) == first  # from the cache
    assert outcome(SelectorEngine(), expression, device) == first  # recomputed


HOSTILE_PIECES = st.sampled_from(
    [
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        "'",
        '"',
        "'''",
        "\\",
        ".",
        ",",
        ":",
        "?",
        "!",
        "-",
        "+",
        "*",
        "/",
        "%",
        "==",
        "&&",
        "||",
        " in ",
        "device",
        ".attributes",
        "['gpu.example.com']",
        ".exists(x, ",
        "x",
        "has(",
        "cel.bind(",
        "quantity(",
        "'1Gi'",
        "9223372036854775807",
        "1e999",
        "0x",
        "\n",
        "//",
        "r'",
        "b'",
        "\\u00",
        "\x00",
        "é",
        "true",
        "null",
        "1u",
    ]
)


@settings(max_examples=400, deadline=None)
@given(
    expression=st.one_of(st.text(max_size=60), st.lists(HOSTILE_PIECES, max_size=40).map("".join)),
    device=devices,
)
def test_hostile_text(expression: str, device: SimpleDevice) -> None:
    engine = SelectorEngine()
    message = ""
    try:
        engine.compile(expression)
    except CelError as e:
        message = e.message or "(empty)"
    compiled = not message
    first = outcome(engine, expression, device)
    if not compiled:
        assert first[0] == "CelCompileError"
    assert outcome(engine, expression, device) == first
    assert outcome(SelectorEngine(), expression, device) == first


@settings(max_examples=25, deadline=None)
@given(
    piece=st.sampled_from(["(", "[", "!", "-", "{'a':", "[1].map(x,", "quantity(", "a+"]),
    count=st.integers(min_value=30, max_value=3000),
)
def test_deep_hostile_input_is_rejected_cheaply(piece: str, count: int) -> None:
    engine = SelectorEngine()
    expression = (piece * count)[:10240]
    result = outcome(engine, expression, SimpleDevice("d"))
    assert result[0] in ("CelCompileError", "CelRuntimeError", "ok")
