"""Selector semantics of upstream ``dynamic-resource-allocation/cel`` on the celpy engine."""

from __future__ import annotations

import re
from typing import Any

import pytest

from webhook.core.api.quantity import Quantity
from webhook.core.api.semver import Semver
from webhook.core.cel import CelCompileError, CelRuntimeError, SelectorEngine, SimpleDevice

GPU = "gpu.example.com"


def gpu(**overrides: Any) -> SimpleDevice:
    attributes: dict[str, tuple[str, Any]] = {
        f"{GPU}/type": ("string", "gpu"),
        f"{GPU}/memory": ("int", 40),
        f"{GPU}/model": ("string", "A100-80GB"),
        f"{GPU}/driverVersion": ("version", Semver.parse("1.3.0")),
        f"{GPU}/index": ("int", 3),
        f"{GPU}/healthy": ("bool", True),
        "numa.example.org/node": ("int", 1),
    }
    attributes.update(overrides.pop("attributes", {}))
    capacity = {f"{GPU}/memory": Quantity.parse("80Gi")}
    capacity.update(overrides.pop("capacity", {}))
    return SimpleDevice(
        driver=overrides.pop("driver", GPU),
        attributes=attributes,
        capacity=capacity,
        allow_multiple_allocations=overrides.pop("allow_multiple_allocations", False),
    )


@pytest.fixture
def engine() -> SelectorEngine:
    return SelectorEngine()


def match(engine: SelectorEngine, expression: str, device: SimpleDevice | None = None) -> bool:
    return engine.matches(expression, device if device is not None else gpu())


# The three selectors measured in cel-engines.md.
E1 = "device.driver == 'gpu.example.com' && device.attributes['gpu.example.com'].type == 'gpu'"
E2 = (
    "'gpu.example.com' in device.attributes && device.attributes['gpu.example.com'].memory >= 16 "
    "&& device.attributes['gpu.example.com'].model.startsWith('A100')"
)
E3 = (
    "device.driver == 'gpu.example.com' && "
    "device.capacity['gpu.example.com'].memory.compareTo(quantity('16Gi')) >= 0 && "
    "device.attributes['gpu.example.com'].driverVersion.isGreaterThan(semver('1.2.3'))"
)


def test_e1_e2_e3_match_a_fitting_gpu(engine: SelectorEngine) -> None:
    for expr in (E1, E2, E3):
        assert match(engine, expr)


def test_e1_e2_e3_reject_other_devices(engine: SelectorEngine) -> None:
    nic = SimpleDevice("nic.example.com", {"nic.example.com/type": ("string", "nic")})
    assert not match(engine, E1, nic)
    assert not match(engine, E2, nic)  # the domain is absent: `in` is false, no error
    assert not match(engine, E3, nic)
    small = gpu(attributes={f"{GPU}/memory": ("int", 8)}, capacity={f"{GPU}/memory": Quantity.parse("8Gi")})
    assert not match(engine, E2, small)
    assert not match(engine, E3, small)
    old = gpu(attributes={f"{GPU}/driverVersion": ("version", Semver.parse("1.2.3"))})
    assert not match(engine, E3, old)


def test_device_fields(engine: SelectorEngine) -> None:
    assert match(engine, "device.driver == 'gpu.example.com'")
    assert match(engine, "!device.allowMultipleAllocations")
    assert match(engine, "device.allowMultipleAllocations", gpu(allow_multiple_allocations=True))
    assert match(engine, "size(device.attributes) == 2 && size(device.capacity) == 1")


def test_scenario_30_missing_key_is_a_runtime_error_not_a_non_match(engine: SelectorEngine) -> None:
    with pytest.raises(CelRuntimeError, match="no such key: missing"):
        match(engine, 'device.attributes["gpu.example.com"].missing == "x"')
    assert not match(engine, 'has(device.attributes["gpu.example.com"].missing)')
    assert match(engine, 'has(device.attributes["gpu.example.com"].model)')
    with pytest.raises(CelRuntimeError, match="no such key: missing"):
        match(engine, 'device.attributes["gpu.example.com"]["missing"] == "x"')
    assert not match(engine, '"missing" in device.attributes["gpu.example.com"]')


def test_unknown_domain_is_an_empty_map(engine: SelectorEngine) -> None:
    assert match(engine, 'size(device.attributes["other.example.com"]) == 0')
    assert match(engine, 'size(device.capacity["other.example.com"]) == 0')
    assert not match(engine, 'has(device.attributes["other.example.com"].model)')
    # Upstream's wrapper only overrides Find, so `in` reports the real domains.
    assert not match(engine, '"other.example.com" in device.attributes')
    assert match(engine, '"numa.example.org" in device.attributes')
    assert match(engine, "device.attributes.exists(d, d == 'numa.example.org')")
    with pytest.raises(CelRuntimeError, match="no such key: model"):
        match(engine, 'device.attributes["other.example.com"].model == "x"')


def test_attribute_kinds(engine: SelectorEngine) -> None:
    assert match(engine, f"device.attributes['{GPU}'].index == 3")
    assert match(engine, f"device.attributes['{GPU}'].healthy")
    assert match(engine, f"device.attributes['{GPU}'].driverVersion == semver('1.3.0')")
    assert match(engine, f"device.attributes['{GPU}'].driverVersion.major() == 1")
    assert match(engine, "device.attributes['numa.example.org'].node == 1")


def test_bare_names_belong_to_the_driver_domain(engine: SelectorEngine) -> None:
    bare = SimpleDevice(GPU, {"model": ("string", "H100")}, {"memory": Quantity.parse("1Gi")})
    assert match(engine, "device.attributes['gpu.example.com'].model == 'H100'", bare)
    assert match(engine, "device.capacity['gpu.example.com'].memory == quantity('1Gi')", bare)


def test_split_at_the_first_slash(engine: SelectorEngine) -> None:
    d = SimpleDevice(GPU, {"a.example.com/x/y": ("string", "v")})
    assert match(engine, "device.attributes['a.example.com']['x/y'] == 'v'", d)


def test_heterogeneous_equality(engine: SelectorEngine) -> None:
    # Attributes are dyn: comparing with another type is false at runtime, never an error.
    assert not match(engine, f"device.attributes['{GPU}'].model == 5")
    assert match(engine, f"device.attributes['{GPU}'].model != 5")
    assert not match(engine, f"device.attributes['{GPU}'].healthy == 1")  # celpy alone says true
    assert match(engine, f"device.attributes['{GPU}'].index == 3.0")
    assert match(engine, f"device.attributes['{GPU}'].index < 3.5")
    assert match(engine, "dyn(1) == dyn(1u)")
    assert not match(engine, "dyn(true) == dyn(1)")
    assert match(engine, "[dyn(1), dyn('a')] == [dyn(1), dyn('a')] && {'a': 1} == {'a': 1}")


def test_literal_type_mismatch_is_a_compile_error(engine: SelectorEngine) -> None:
    for expr in ("true == 1", "'a' == 1", "'a' < 1", "1 + 'a'", "!1", "'a' && true"):
        with pytest.raises(CelCompileError, match="found no matching overload"):
            engine.compile(expr)


def test_ordering_between_incomparable_values_is_a_runtime_error(engine: SelectorEngine) -> None:
    # cel-go: a comparable left operand's Compare refuses the other type; a left operand that
    # is not comparable at all (a quantity) is refused by the operator
    with pytest.raises(CelRuntimeError, match=r"^no such overload$"):
        match(engine, f"device.attributes['{GPU}'].model < 5")
    with pytest.raises(CelRuntimeError, match=r"^no such overload$"):
        match(engine, f"device.attributes['{GPU}'].healthy < 2")
    with pytest.raises(CelRuntimeError, match=r"^no such overload: _<_$"):
        match(engine, "quantity('1') < quantity('2')")


def test_quantity_library(engine: SelectorEngine) -> None:
    cases = [
        "quantity('1Gi') == quantity('1024Mi')",
        "quantity('50000000G').isInteger()",
        "!quantity('9999999999999999999999999999999999999G').isInteger()",
        "quantity('50k').asInteger() == 50000",
        "quantity('50k').sub(20000).asApproximateFloat() == 30000.0",
        "quantity('50k').add(quantity('20k')) == quantity('70k')",
        "quantity('50k').add(20) == quantity('50020')",
        "quantity('50k').add(20).sub(quantity('100k')).sub(-50000) == quantity('20')",
        "quantity('200M').compareTo(quantity('0.2G')) == 0",
        "quantity('50M').compareTo(quantity('50Mi')) == -1",
        "quantity('50Mi').compareTo(quantity('50M')) == 1",
        "quantity('150Mi').isGreaterThan(quantity('100Mi'))",
        "quantity('50M').isLessThan(quantity('100M'))",
        "quantity('-5').sign() == -1 && quantity('0').sign() == 0 && sign(quantity('3')) == 1",
        "isQuantity('1.3G') && isQuantity('10000k') && !isQuantity('200K') && !isQuantity('Three')",
        # resource.ParseQuantity reads a missing integer part as 0: upstream's compiler accepts 'Mi'
        "!isQuantity('1,3G') && isQuantity('Mi')",
        "device.capacity['gpu.example.com'].memory.isGreaterThan(quantity('16Gi'))",
    ]
    for expr in cases:
        assert match(engine, expr), expr


def test_quantity_errors(engine: SelectorEngine) -> None:
    for expr, message in [
        ("quantity('200K') == quantity('1')", "unable to parse quantity's suffix"),
        ("quantity('200x') == quantity('1')", "regular expression"),
        (
            "quantity('9999999999999999999999999999999999999G').asInteger() > 0",
            "cannot convert value to integer",
        ),
        ("quantity('1').add(1.5) == quantity('2')", r"no such overload: add\(kubernetes.Quantity, double\)"),
        ("quantity('1') == 1", r"no such overload: _==_\(kubernetes.Quantity, int\)"),
    ]:
        with pytest.raises(CelRuntimeError, match=message):
            match(engine, expr)
    # no conversion takes a quantity: cel-go's checker refuses the call
    with pytest.raises(
        CelCompileError, match=r"no matching overload for 'string' applied to '\(kubernetes\.Quantity\)'"
    ):
        engine.compile("string(quantity('1Gi')) == '1Gi'")


def test_semver_library(engine: SelectorEngine) -> None:
    cases = [
        "semver('1.2.3').compareTo(semver('1.2.3')) == 0",
        "semver('1.2.3').compareTo(semver('2.0.0')) == -1",
        "semver('1.2.3').compareTo(semver('0.1.2')) == 1",
        "semver('1.2.3').isLessThan(semver('1.10.0'))",
        "semver('1.0.0').isGreaterThan(semver('1.0.0-rc.1'))",
        "semver('1.2.3').major() == 1 && semver('1.2.3').minor() == 2 && semver('1.2.3').patch() == 3",
        "semver('v1.0', true) == semver('1.0.0')",
        "semver('1.0.0+build') == semver('1.0.0')",
        "isSemver('1.0.0') && !isSemver('hello') && !isSemver('v1.0') && isSemver('v1.0', true)",
    ]
    for expr in cases:
        assert match(engine, expr), expr
    with pytest.raises(CelRuntimeError):
        match(engine, "semver('v1.0') == semver('1.0.0')")
    with pytest.raises(CelRuntimeError, match="no such overload: isLessThan"):
        match(engine, "semver('1.0.0').isLessThan(quantity('1'))")


def test_list_attributes_and_includes(engine: SelectorEngine) -> None:
    d = gpu(
        attributes={
            f"{GPU}/ports": ("ints", (1, 2, 3)),
            f"{GPU}/tags": ("strings", ("fast", "nvlink")),
            f"{GPU}/flags": ("bools", (True,)),
            f"{GPU}/versions": ("versions", (Semver.parse("1.0.0"), Semver.parse("2.1.0"))),
        }
    )
    a = f"device.attributes['{GPU}']"
    for expr in [
        f"{a}.tags.includes('nvlink')",
        f"!{a}.tags.includes('slow')",
        f"{a}.ports.includes(2) && 2 in {a}.ports && size({a}.ports) == 3",
        f"{a}.ports.exists(p, p > 2) && {a}.ports.all(p, p > 0)",
        f"{a}.versions.exists(v, v.isGreaterThan(semver('2.0.0')))",
        f"{a}.versions.includes(semver('1.0.0'))",
        f"{a}.flags.includes(true) && !{a}.flags.includes(1)",
        f"{a}.model.includes('A100-80GB')",  # a scalar includes itself
        f"!{a}.index.includes(4)",
        "[1, 2].includes(2)",
    ]:
        assert match(engine, expr, d), expr


def test_as_list_compiles_and_treats_a_scalar_as_a_one_element_list(engine: SelectorEngine) -> None:
    """KEP-5491 list-typed attributes: ``asList()`` is declared, so a selector written for drivers
    that publish a list (``pcieRoots``) or a scalar (``index``) compiles and matches both."""
    d = gpu(attributes={f"{GPU}/roots": ("strings", ("pci0", "pci1")), f"{GPU}/root": ("string", "pci0")})
    a = f"device.attributes['{GPU}']"
    for expr in [
        f"{a}.roots.asList().exists(r, r == 'pci1')",
        f"{a}.root.asList().exists(r, r == 'pci0') && size({a}.root.asList()) == 1",
        f"{a}.roots.asList() == ['pci0', 'pci1']",
        f"!{a}.root.asList().exists(r, r == 'pci1')",
        "[1, 2].asList() == [1, 2]",
    ]:
        assert match(engine, expr, d), expr
    assert not match(engine, f"{a}.roots.asList().all(r, r == 'pci0')", d)


def test_includes_rejects_lists_longer_than_32_values_in_1_36_only(engine: SelectorEngine) -> None:
    """1.36's ``dra_includes_dyn_dyn`` refuses a list longer than a device may hold; 1.37's
    ``list_includes_dyn_dyn`` (Kubernetes' lists library version 1) does not."""
    assert match(engine, f"{list(range(33))}.includes(32)")
    assert engine.set_release((1, 36))
    assert match(engine, f"{list(range(32))}.includes(31)")
    with pytest.raises(
        CelRuntimeError, match="'includes' function cannot be applied to lists longer than 32"
    ):
        match(engine, f"{list(range(33))}.includes(99)")


def test_strings_extension_subset(engine: SelectorEngine) -> None:
    a = f"device.attributes['{GPU}']"
    for expr in [
        f"{a}.model.lowerAscii() == 'a100-80gb'",
        "'ÄbC'.upperAscii() == 'ÄBC' && 'ÄbC'.lowerAscii() == 'Äbc'",
        "'  x '.trim() == 'x'",
        "'a,b,c'.split(',') == ['a', 'b', 'c'] && 'a,b,c'.split(',', 2) == ['a', 'b,c']",
        "'abc'.split('') == ['a', 'b', 'c'] && 'a,b'.split(',', 0) == []",
        "'hello'.substring(1, 3) == 'el' && 'hello'.substring(3) == 'lo'",
        "'hello'.charAt(1) == 'e' && 'hello'.charAt(5) == ''",
        "'hello'.indexOf('l') == 2 && 'hello'.lastIndexOf('l') == 3 && 'hello'.indexOf('z') == -1",
        "'hello'.indexOf('l', 3) == 3 && 'hello'.lastIndexOf('l', 2) == 2",
        "'aaa'.replace('a', 'b') == 'bbb' && 'aaa'.replace('a', 'b', 1) == 'baa'",
        "['a', 'b'].join('-') == 'a-b' && ['a', 'b'].join() == 'ab'",
        "'A100-80GB'.matches('^A[0-9]+') && 'abc'.contains('b') && 'abc'.endsWith('c')",
    ]:
        assert match(engine, expr), expr
    with pytest.raises(CelRuntimeError, match="index out of range"):
        match(engine, "'abc'.substring(4) == ''")


def test_cel_bind(engine: SelectorEngine) -> None:
    expr = "cel.bind(g, device.attributes['gpu.example.com'], g.memory >= 16 && g.type == 'gpu')"
    assert match(engine, expr)
    assert not match(engine, expr, gpu(attributes={f"{GPU}/type": ("string", "fpga")}))
    assert match(engine, "cel.bind(x, 1, cel.bind(y, x + 1, y == 2))")


def test_macros(engine: SelectorEngine) -> None:
    assert match(engine, "[1, 2, 3].filter(x, x > 1) == [2, 3]")
    assert match(engine, "[1, 2, 3].map(x, x * 2) == [2, 4, 6]")
    assert match(engine, "[1, 2, 3].exists_one(x, x == 2)")
    assert match(engine, "[1, 0].exists(x, 1 / x == 1)")  # an error loses against a true element
    with pytest.raises(CelRuntimeError, match="division by zero"):
        match(engine, "[0].exists(x, 1 / x == 1)")
    assert not match(engine, "[0, -1].all(x, 1 / x > 0)")  # a false element wins over the error
    with pytest.raises(CelRuntimeError, match="division by zero"):
        match(engine, "[0, 1].all(x, 1 / x > 0)")
    assert match(engine, "true || [0].map(x, 1 / x)[0] == 1")  # errors stay values inside macros
    assert match(engine, "{'a': 1, 'b': 2}.exists(k, k == 'b')")
    # a non-bool predicate is refused as cel-go's expansion ``x ? l + [x] : l`` is
    with pytest.raises(CelCompileError, match=r"'_\?_:_' applied to '\(int, list\(int\), list\(int\)\)'"):
        engine.compile("[1, 2].filter(x, x) == [1]")


def test_logical_operators_absorb_errors_like_cel(engine: SelectorEngine) -> None:
    missing = f"device.attributes['{GPU}'].missing == 1"
    assert not match(engine, f"false && {missing}")
    assert not match(engine, f"{missing} && false")
    assert match(engine, f"true || {missing}")
    assert match(engine, f"{missing} || true")
    with pytest.raises(CelRuntimeError):
        match(engine, f"true && {missing}")
    with pytest.raises(CelRuntimeError):
        match(engine, f"{missing} || false")
    assert match(engine, f"true ? true : {missing}")


def test_result_must_be_bool(engine: SelectorEngine) -> None:
    for expr, typename in [
        ("device.driver", "string"),
        ("1 + 1", "int"),
        ("'a'", "string"),
        ("quantity('1')", "kubernetes.Quantity"),
        ("[true]", "list(bool)"),
    ]:
        with pytest.raises(CelCompileError, match=re.escape(f"not {typename}")):
            engine.compile(expr)
    with pytest.raises(CelRuntimeError, match="CEL result of type string could not be converted to bool"):
        match(engine, f"device.attributes['{GPU}'].model")
    assert match(engine, f"device.attributes['{GPU}'].healthy")


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("device.attributes[", "Syntax error"),
        ("foo == 1", "undeclared reference to 'foo'"),
        ("device.nodeName == 'x'", "undefined field 'nodeName'"),
        ("unknownFunction(1)", "undeclared reference to 'unknownFunction'"),
        ("device.driver.unknownMethod()", "undeclared reference to 'unknownMethod'"),
        ("has(device)", "invalid argument to has() macro"),
        ("[1].reduce(a, b, 0, a + b) == 1", "undeclared reference to 'reduce'"),
        ("[1].all(1, true)", "argument must be a simple name"),
        ("x.all(x, true)", "undeclared reference to 'x'"),
    ],
)
def test_compile_errors(engine: SelectorEngine, expr: str, message: str) -> None:
    with pytest.raises(CelCompileError, match=re.escape(message)):
        engine.compile(expr)
    with pytest.raises(CelCompileError):
        match(engine, expr)


def test_macro_variables_are_scoped(engine: SelectorEngine) -> None:
    assert match(engine, "[1].all(x, x == 1) && [2].all(x, x == 2)")
    with pytest.raises(CelCompileError, match="undeclared reference to 'x'"):
        engine.compile("[1].all(x, x == 1) && x == 1")


def test_runtime_errors_never_leak_python_exceptions(engine: SelectorEngine) -> None:
    for expr in [
        "1 / 0 == 1",
        "9223372036854775807 + 1 > 0",
        "[1][5] == 1",
        "[1][-1] == 1",
        "int('x' + '') == 1",  # no constant: int('x') alone fails at compile time
        "{'a': 1}[1] == 1",
        "-(-9223372036854775807 - 1) == 0",
        "dyn('a') + dyn(1) == 'a1'",
    ]:
        with pytest.raises(CelRuntimeError):
            match(engine, expr)
