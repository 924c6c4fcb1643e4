"""Label selectors as apimachinery reads them: ``LabelSelectorAsSelector`` (null matches nothing,
``{}`` everything), each operator, requirements ANDed, and ``mergeLabelSetWithSelector``."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core.api.labelselector import (
    EVERYTHING,
    NOTHING,
    LabelSelectorError,
    label_selector,
    label_selector_matches,
    with_labels,
)


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


# apimachinery pkg/labels/selector_test.go, TestRequirementMatches / TestEverything / TestNothing,
# and pkg/apis/meta/v1/helpers_test.go, TestLabelSelectorAsSelector, in the LabelSelector form.
@pytest.mark.parametrize(
    ("selector", "labels", "want"),
    [
        (None, {}, False),
        (None, {"a": "b"}, False),
        ({}, {}, True),
        ({}, {"a": "b"}, True),
        ({"matchLabels": {"foo": "bar"}}, {"foo": "bar"}, True),
        ({"matchLabels": {"foo": "bar"}}, {"foo": "baz"}, False),
        ({"matchLabels": {"foo": "bar"}}, {}, False),
        ({"matchLabels": {"foo": "bar", "x": "y"}}, {"foo": "bar"}, False),
        ({"matchExpressions": [expr("x", "In", "foo", "bar")]}, {"x": "bar"}, True),
        ({"matchExpressions": [expr("x", "In", "foo", "bar")]}, {"x": "baz"}, False),
        ({"matchExpressions": [expr("x", "In", "foo")]}, {"y": "foo"}, False),
        ({"matchExpressions": [expr("x", "NotIn", "foo")]}, {"x": "bar"}, True),
        ({"matchExpressions": [expr("x", "NotIn", "foo")]}, {"x": "foo"}, False),
        ({"matchExpressions": [expr("x", "NotIn", "foo")]}, {}, True),
        ({"matchExpressions": [expr("x", "Exists")]}, {"x": ""}, True),
        ({"matchExpressions": [expr("x", "Exists")]}, {"y": "z"}, False),
        ({"matchExpressions": [expr("x", "DoesNotExist")]}, {"y": "z"}, True),
        ({"matchExpressions": [expr("x", "DoesNotExist")]}, {"x": "z"}, False),
        (
            {"matchLabels": {"foo": "bar"}, "matchExpressions": [expr("x", "NotIn", "a")]},
            {"foo": "bar", "x": "a"},
            False,
        ),
    ],
)
def test_a_selector_matches_labels_as_apimachinery_does(
    selector: Any, labels: dict[str, str], want: bool
) -> None:
    assert label_selector(selector).matches(labels) is want


def test_only_the_empty_selector_is_empty() -> None:
    assert label_selector({}) is EVERYTHING
    assert EVERYTHING.empty
    assert label_selector(None) is NOTHING
    assert not NOTHING.empty
    assert not label_selector({"matchLabels": {"a": "b"}}).empty
    assert NOTHING.matches(None) is False
    assert EVERYTHING.matches(None) is True


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ({"matchExpressions": [expr("x", "In")]}, "values set can't be empty"),
        ({"matchExpressions": [expr("x", "NotIn")]}, "values set can't be empty"),
        ({"matchExpressions": [expr("x", "Exists", "a")]}, "values set must be empty"),
        ({"matchExpressions": [expr("x", "Gt", "1")]}, "not a valid label selector operator"),
        ("app=x", "must be an object"),
    ],
)
def test_a_selector_the_apiserver_would_refuse_raises(selector: Any, message: str) -> None:
    with pytest.raises(LabelSelectorError, match=message):
        label_selector(selector)


# podtopologyspread common.go, mergeLabelSetWithSelector (filtering_test.go's matchLabelKeys cases).
def test_labels_merged_into_a_selector_are_required_too() -> None:
    merged = with_labels(label_selector({"matchExpressions": [expr("foo", "Exists")]}), {"bar": "a"})
    assert merged.matches({"foo": "", "bar": "a"})
    assert not merged.matches({"foo": "", "bar": "b"})
    assert not merged.matches({"bar": "a"})
    assert with_labels(NOTHING, {"bar": "a"}) is NOTHING
    assert with_labels(EVERYTHING, {"bar": "a"}).matches({"bar": "a"})


# -- label_selector_matches: the volume plugins' reading (a missing selector is empty) ----------------

LABELS = {"tier": "fast", "zone": "a"}


@pytest.mark.parametrize(
    ("selector", "want"),
    [
        ({}, True),
        (None, True),
        ({"matchLabels": {"tier": "fast"}}, True),
        ({"matchLabels": {"tier": "slow"}}, False),
        ({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}, True),
        ({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}, False),
        ({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["b"]}]}, True),
        ({"matchExpressions": [{"key": "absent", "operator": "NotIn", "values": ["b"]}]}, True),
        ({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "absent", "operator": "Exists"}]}, False),
        ({"matchExpressions": [{"key": "absent", "operator": "DoesNotExist"}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, False),
        (
            {
                "matchLabels": {"tier": "fast"},
                "matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}],
            },
            False,
        ),
    ],
)
def test_selectors(selector: Any, want: bool) -> None:
    assert label_selector_matches(selector, LABELS) is want


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ({"key": "k", "operator": "Gt", "values": ["1"]}, '"Gt" is not a valid label selector operator'),
        (
            {"key": "k", "operator": "In", "values": []},
            "for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            {"key": "k", "operator": "Exists", "values": ["x"]},
            "values set must be empty for exists and does not exist",
        ),
    ],
)
def test_unreadable_selectors_fail_before_any_label_is_compared(expression: Any, message: str) -> None:
    selector = {"matchLabels": {"tier": "slow"}, "matchExpressions": [expression]}
    with pytest.raises(LabelSelectorError) as e:
        label_selector_matches(selector, LABELS)
    assert str(e.value) == message
