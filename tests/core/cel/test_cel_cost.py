"""The runtime cost model against upstream's figures: each expected cost is what cel-go reported
(``EvalDetails.ActualCost``, through the project's CEL oracle) for the same expression and device."""

from __future__ import annotations

import pytest

from webhook.core.cel import SimpleDevice
from webhook.core.cel.cost import call_cost, size
from webhook.core.cel.environment import compile_expression
from webhook.core.cel.evaluator import evaluation_cost, prepare_activation
from webhook.core.cel.values import device_value

DEVICE = SimpleDevice.from_json(
    "x",
    {
        "driver": "x",
        "attributes": {"model": {"string": "a100"}, "count": {"int": 8}, "names": {"string": "abcdefghij"}},
        "capacity": {"memory": {"value": "16Gi"}},
    },
)


def _doubling(times: int) -> str:
    """'ab' doubled ``times`` times by nested binds, true when not empty."""
    expr = f"x{times}.size() > 0"
    for i in range(times, 0, -1):
        expr = f"cel.bind(x{i}, x{i - 1} + x{i - 1}, {expr})"
    return f"cel.bind(x0, 'ab', {expr})"


UPSTREAM_COSTS = [
    ("true", 0),
    ("[1].size() == 1", 2),
    ("lists.range(10).size() == 0", 23),
    ("lists.range(100).size() == 0", 113),
    ("[].all(i, true)", 1),
    ("[1,2,3].all(i, true)", 10),
    ("[1,2].all(i, i > 0)", 11),
    ("[1,2].exists(i, i < 0)", 13),
    ("[1,2].exists_one(i, i < 0)", 6),
    ("[1,2].map(i, i).size() == 2", 29),
    ("[1,2].filter(i, i > 0).size() == 2", 33),
    ("[1,2].map(i, i > 0, i).size() == 2", 33),
    ("[1,2].all(i, v, v > 0)", 11),
    ('"abc" == "abc"', 1),
    ('"" == ""', 0),
    ('"abcdefghijklmnopqrstuvwxyz" == "abcdefghijklmnopqrstuvwxyz"', 3),
    ('device.attributes["x"].count == 8', 5),
    ("device.attributes.x.count == 8", 5),
    ("!true", 1),
    ("true ? true : false", 0),
    ("cel.bind(x, 1, x == 1)", 2),
    ('device.driver.startsWith("x")', 3),
    ('device.attributes.x.names.contains("abc")', 5),
    ('device.attributes.x.names + "abc" == ""', 6),
    ('device.attributes.x.names.lowerAscii() == ""', 5),
    ('device.attributes.x.names.matches("abc")', 6),
    ('device.capacity["x"].memory.compareTo(quantity("16Gi")) == 0', 7),
    ("lists.range(1000).all(i, lists.range(100).all(j, i + j >= 0))", 816_012),
    ("lists.range(10).all(i, lists.range(3000).all(j, i + j >= 0))", 240_172),
    # 'ab' doubled 20 and 21 times by nested binds: a string's + costs a tenth of its length
    (_doubling(20), 419_483),
    (_doubling(21), 838_916),
]


@pytest.mark.parametrize(("expression", "cost"), UPSTREAM_COSTS)
def test_runtime_cost_is_upstreams(expression: str, cost: int) -> None:
    activation = prepare_activation(device_value(DEVICE))
    assert evaluation_cost(compile_expression(expression), activation) == cost


def test_a_costly_evaluation_stops_just_past_the_limit() -> None:
    activation = prepare_activation(device_value(DEVICE))
    spent = evaluation_cost(
        compile_expression("lists.range(1000).all(i, lists.range(1000).all(j, true))"), activation
    )
    assert 1_000_000 < spent < 1_001_100


def test_size_factors() -> None:
    assert size("héllo") == 5  # code points, as cel-go counts runes
    assert call_cost("_==_", ["a" * 25, "a" * 40]) == 3
    assert call_cost("matches", ["a" * 9, "abcdefgh"]) == 2
    assert call_cost("no.such.function", []) == 1
