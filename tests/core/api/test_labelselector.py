"""``metav1.LabelSelector`` matching: ``matchLabels`` and each operator of ``matchExpressions``,
the empty selector, and the selectors ``LabelSelectorAsSelector`` refuses (whatever the labels)."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core.api.labelselector import LabelSelectorError, label_selector_matches

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
