"""The compile-time cost estimate against upstream's figures.

Each expected figure follows cel-go's ``checker/cost.go`` rules by hand (worked through in the
comments) and is what upstream's DRA compiler reported as ``MaxCost`` for the same expression
(through the project's CEL oracle, ``estimatedCost``).
"""

from __future__ import annotations

import pytest

from tests.core.cel.cases import TOO_COMPLEX
from webhook.core.cel.cost import CEL_SELECTOR_EXPRESSION_MAX_COST
from webhook.core.cel.environment import compile_expression
from webhook.core.cel.estimate import MAX, estimated_cost, exceeds_limit

UPSTREAM_ESTIMATES = [
    ("true", 0),  # constants cost nothing
    ('"abc" == "abc"', 1),  # ceil(min(3, 3) * 0.1)
    ('"" == ""', 0),  # both sizes 0: no traversal
    ("!true", 1),  # a call: 1 plus its arguments
    ("true ? true : false", 0),  # condition plus the dearer branch
    ("[1].size() == 1", 12),  # list literal 10, size() 1, == 1
    ("[].all(i, true)", 11),  # range 10 + result 1, no elements
    ("[1,2,3].all(i, true)", 20),  # 10 + 1 + 3 * (condition 2 + step 1)
    ("[1,2].all(i, i > 0)", 21),  # 10 + 1 + 2 * (2 + 1 + (1 + 1))
    ("[1,2].exists(i, i < 0)", 23),  # 10 + 1 + 2 * (3 + 1 + 2)
    ("[1,2].exists_one(i, i < 0)", 20),  # 10 + 2 + 2 * (2 + 2)
    ("[1,2].map(i, i).size() == 2", 49),
    ("[1,2].filter(i, i > 0).size() == 2", 53),
    ("[1,2].all(i, v, v > 0)", 21),
    ("cel.bind(x, 1, x == 1)", 12),  # bind's empty range list 10, x == 1 costs 2
    ("lists.range(10).size() == 0", 23),  # 10 + call 1 + list 10, size 1, == 1
    ('device.driver == "gpu.example.com"', 4),  # device 1, .driver 1, ceil(min(63, 15) * 0.1) 2
    ('device.attributes["x"].count == 8', 5),  # 1 + 1 + index 1 + select on a map 1, == 1
    ("device.attributes.x.count == 8", 5),
    ('device.driver.startsWith("x")', 3),
    ('device.attributes["x"].names.contains("abc")', 11),  # 4 + ceil(6.4) * ceil(0.3)
    ('device.attributes["x"].names.matches("abc")', 11),  # 4 + ceil(65 * 0.1) * ceil(3 * 0.25)
    ('device.attributes["x"].names.lowerAscii() == ""', 11),
    ('device.capacity["x"].memory == quantity("16Gi")', 6),  # quantity equality costs 1
    ('"a" in device.attributes["x"].names', 68),  # a list of at most 64 values
    ('device.attributes.exists_one(d, d.startsWith("x"))', 132),  # 2 + 2 + 32 * (2 + 2)
    (  # 2 + 1 + 32 * (3 + (4 + 1 + 32 * (3 + 7)))
        'device.attributes.all(d, device.attributes[d].all(k, device.attributes[d][k] == "abc"))',
        10_499,
    ),
    ("lists.range(1000).all(i, lists.range(100).all(j, i + j >= 0))", 816_012),
    ("sets.contains([1, 2], [1])", 23),
    ('"%s".format(["a"]) == "a"', 12),
    ("device.attributes.transformMap(k, v, k).size() > 0", 163),
    ("!!device.allowMultipleAllocations == false", 3),  # cel-go's parser drops the pair of !
    # the planner folds ``x in []`` to false, but the estimate is of the checked expression
    ("[1,2,3].map(x, x * 2) in []", 73),
    # string(dyn): the bytes overload is the dearest and bounds the result by the attribute's 64
    ('url("/relative").getPort() == string(device.attributes["other.example.com"].index)', 20),
    ("[-3, 1, -5, -2, 4].sortBy(e, -(e * e)) == [-5, 4, -3, -2, 1]", 185),
    ('format.named("dns1123Label").value() == format.named("dns1123Label").value()', 11),
    ('optional.of(device.attributes["d"].count).orValue(0) != device.attributes["d"].count', 17),
    ("[[1,2,3,4].slice(3, 0)].size() == 1", MAX),  # end - start wraps as uint64
    ('[].sum() == device.attributes["x"].y', 15),  # an empty list's sum is typed a number
    # sorting attribute values gives dyn: index and value of unknown size, compared as strings
    ('[device.attributes["d"].count].sort().all(i, v, v >= i)', 1_844_674_407_370_955_298),
    ("[2147483648].slice(0, 1).sort().all(i, v, v >= i)", 42),  # ints stay ints through both
    # optional entries cost what their value costs; optMap/optFlatMap as cel-go expands them
    ("[?optional.of(1), 2] == [1, 2]", 22),
    ("{?'a': optional.of(1)} == {'a': 1}", 62),
    ("optional.of(1).optMap(x, x + 1) == optional.of(2)", 19),
    ("optional.of(1).optFlatMap(x, optional.of(x + 1)) == optional.of(2)", 19),
    ('device.attributes["dra.example.com"].?model.optMap(m, m.size() > 2).orValue(false)', 25),
    ("optional.of(1) != optional.of(2)", 3),
    (
        "cel.bind(l, ['hello', 'world', 'hello!', 'worlds'], l.exists(i, v, v.startsWith('hello')"
        " && l[?(i+1)].optMap(next, next.endsWith('world')).orValue(false)))",
        142,
    ),
]


@pytest.mark.parametrize(("expression", "cost"), UPSTREAM_ESTIMATES)
def test_estimate_is_upstreams(expression: str, cost: int) -> None:
    assert estimated_cost(compile_expression(expression)) == cost


def test_nested_comprehension_over_attributes_exceeds_the_limit() -> None:
    compiled = compile_expression(TOO_COMPLEX)
    assert estimated_cost(compiled) == 24_387_779  # upstream's figure
    assert exceeds_limit(compiled)


@pytest.mark.parametrize(
    "expression",
    [
        'device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "a100"',
        'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0',
        'cel.bind(g, device.attributes["gpu.example.com"], g.model.startsWith("a") && g.count >= 2)',
        'device.attributes["gpu.example.com"].version.isGreaterThan(semver("1.2.0"))',
        'device.attributes.exists(d, d.endsWith(".example.com"))',
    ],
)
def test_typical_selectors_are_far_under_the_limit(expression: str) -> None:
    assert estimated_cost(compile_expression(expression)) < CEL_SELECTOR_EXPRESSION_MAX_COST // 100


def test_an_unbounded_comparison_saturates_as_upstream() -> None:
    # A field selected on the outer attributes map has no declared size: both sides are unbounded,
    # so upstream's estimate is ceil(2^64 * 0.1) plus the selections, and the API server refuses it.
    compiled = compile_expression("device.attributes.x.a == device.attributes.x.b")
    assert estimated_cost(compiled) == 1_844_674_407_370_955_272
    assert exceeds_limit(compiled)
    assert estimated_cost(compile_expression("lists.range(device.attributes.x.n).size() == 0")) == MAX
