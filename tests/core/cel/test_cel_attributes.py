"""``parse_attribute``: ResourceSlice attribute JSON -> (kind, value)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.core.api.constants import MAX_ATTRIBUTE_VALUES_PER_DEVICE
from webhook.core.api.quantity import Quantity
from webhook.core.api.semver import Semver
from webhook.core.cel import CelRuntimeError, SimpleDevice, parse_attribute
from webhook.core.cel.values import device_value, unusable_value


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"int": 5}, ("int", 5)),
        ({"int": -(2**63)}, ("int", -(2**63))),
        ({"bool": True}, ("bool", True)),
        ({"string": "x"}, ("string", "x")),
        ({"version": "1.2.3-rc.1+b"}, ("version", Semver.parse("1.2.3-rc.1"))),
        ({"ints": [1, 2]}, ("ints", (1, 2))),
        ({"bools": [False]}, ("bools", (False,))),
        ({"strings": ["a", "b"]}, ("strings", ("a", "b"))),
        ({"versions": ["1.0.0", "2.0.0"]}, ("versions", (Semver.parse("1.0.0"), Semver.parse("2.0.0")))),
        ({"string": "x", "int": None}, ("string", "x")),  # null is unset, like a nil Go pointer
        ({"string": "x", "unknownField": 1}, ("string", "x")),
    ],
)
def test_valid(raw: dict[str, Any], expected: tuple[str, Any]) -> None:
    assert parse_attribute(raw) == expected


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({}, "exactly one value must be specified"),
        ({"int": 1, "string": "x"}, "exactly one value must be specified"),
        ({"int": None}, "exactly one value must be specified"),
        ({"int": "5"}, "must be an integer"),
        ({"int": True}, "must be an integer"),
        ({"int": 1.5}, "must be an integer"),
        ({"int": 2**63}, "out of the int64 range"),
        ({"bool": "true"}, "must be a boolean"),
        ({"string": 5}, "must be a string"),
        ({"version": "1.2"}, "must be a semantic version"),
        ({"version": 1}, "must be a string"),
        ({"ints": []}, "must not be empty"),
        ({"ints": 1}, "must be a list"),
        ({"ints": [1, "2"]}, r"ints\[1\]: must be an integer"),
        ({"versions": ["1.0.0", "x"]}, r"versions\[1\]: must be a semantic version"),
        ({"ints": list(range(MAX_ATTRIBUTE_VALUES_PER_DEVICE + 1))}, "at most 32 values"),
    ],
)
def test_invalid(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_attribute(raw)


def test_not_an_object() -> None:
    with pytest.raises(ValueError, match="must be an object"):
        parse_attribute([1])  # type: ignore[arg-type]


def test_list_of_exactly_32_values_is_valid() -> None:
    kind, values = parse_attribute({"ints": list(range(MAX_ATTRIBUTE_VALUES_PER_DEVICE))})
    assert kind == "ints"
    assert len(values) == MAX_ATTRIBUTE_VALUES_PER_DEVICE


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=10,
)
fields = st.sampled_from(["int", "bool", "string", "version", "ints", "bools", "strings", "versions", "x"])


# The first draw of text builds Hypothesis's Unicode tables (slow on a fresh checkout, no .hypothesis/).
@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(fields, json_values, max_size=3))
def test_fuzz_only_value_error_escapes(raw: dict[str, Any]) -> None:
    try:
        kind, value = parse_attribute(raw)
    except ValueError as e:
        message = str(e)
    else:
        message = ""
    if message:
        return
    assert (
        sum(raw.get(k) is not None for k in ("int", "bool", "string", "version"))
        + sum(raw.get(k) is not None for k in ("ints", "bools", "strings", "versions"))
        == 1
    )
    assert kind in raw
    if kind.endswith("s"):
        assert isinstance(value, tuple)
        assert 1 <= len(value) <= MAX_ATTRIBUTE_VALUES_PER_DEVICE


def test_simple_device_from_json_qualifies_names() -> None:
    d = SimpleDevice.from_json(
        "gpu.example.com",
        {
            "name": "gpu-0",
            "attributes": {"model": {"string": "A100"}, "numa.example.org/node": {"int": 1}},
            "capacity": {"memory": {"value": "80Gi"}},
            "allowMultipleAllocations": True,
        },
    )
    assert d.attributes == {"gpu.example.com/model": ("string", "A100"), "numa.example.org/node": ("int", 1)}
    assert d.capacity == {"gpu.example.com/memory": Quantity.parse("80Gi")}
    assert d.allow_multiple_allocations
    same = SimpleDevice.from_json(
        "gpu.example.com",
        {
            "attributes": {"numa.example.org/node": {"int": 1}, "model": {"string": "A100"}},
            "capacity": {"memory": {"value": "81920Mi"}},
            "allowMultipleAllocations": True,
        },
    )
    assert d.fingerprint == same.fingerprint  # equal content, equal selector results
    with pytest.raises(ValueError, match="attribute model"):
        SimpleDevice.from_json("d", {"attributes": {"model": {}}})
    with pytest.raises(ValueError, match="capacity memory"):
        SimpleDevice.from_json("d", {"capacity": {"memory": {"value": 5}}})


BAD_VALUES: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"d/x": ("float", 1.5)}, {}),
    ({"d/x": ("int", 2**63)}, {}),
    ({"d/x": ("int", True)}, {}),
    ({"d/x": ("strings", ("a", 1))}, {}),
    ({"d/x": ("version", "1.0.0")}, {}),
    ({"d/x": "not a pair"}, {}),
    ({}, {"d/mem": "16Gi"}),
]


@pytest.mark.parametrize(("attributes", "capacity"), BAD_VALUES)
def test_a_device_with_an_unusable_value_is_not_checked_and_says_what_device_value_says(
    attributes: dict[str, Any], capacity: dict[str, Any]
) -> None:
    device = SimpleDevice("d", attributes, capacity)
    assert device.checked is False
    message = unusable_value(device)
    with pytest.raises(CelRuntimeError) as info:
        device_value(device)
    assert message == str(info.value)


def test_usable_devices_are_checked_when_made() -> None:
    assert SimpleDevice("d", {"d/x": ("ints", (1, 2)), "d/v": ("version", Semver(1, 0, 0))}).checked
    assert SimpleDevice.from_json("d", {"attributes": {"a": {"string": "x"}}}).checked
