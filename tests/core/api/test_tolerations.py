"""``draxr.io/extended-resource-tolerations``: validated as ``validateDeviceToleration``
(``pkg/apis/resource/validation/validation.go``, k8s.io/kubernetes v1.37.2) after the v1 defaulting;
the rows of its "tolerations" scenario (``validation_resourceclaim_test.go``) first."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.core.api.constants import EXTENDED_RESOURCE_TOLERATIONS_ANNOTATION as KEY
from webhook.core.api.objects import Obj
from webhook.core.api.tolerations import class_tolerations, tolerations_key, validate_class_tolerations

AT = f"metadata.annotations[{KEY}]"
SECONDS_MSG = "effect must be 'NoExecute' when `tolerationSeconds` is set"
GOOD, BAD = "foo", "!@#$%^"  # goodName, badName of the upstream test
KEY_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
    "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
    "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def dc(value: Any) -> Obj:
    raw = value if isinstance(value, str) else json.dumps(value)
    return {"metadata": {"name": "gpu", "annotations": {KEY: raw}}, "spec": {}}


def errors(value: Any) -> list[str]:
    return [str(e) for e in validate_class_tolerations(dc(value))]


@pytest.mark.parametrize(
    ("toleration", "expected"),
    [
        # "Minimal valid toleration: match all taints."
        ({"operator": "Exists"}, []),
        ({"key": "example.com/taint", "operator": "Exists", "effect": "NoExecute"}, []),
        ({"key": "example.com/taint", "operator": "Equal", "value": "tainted", "effect": "NoSchedule"}, []),
        # "Invalid, operator is required": internal validation; the v1 API defaults it to Equal first.
        ({"operator": ""}, []),
        ({}, []),
        (
            {"key": GOOD, "operator": "some-other-op"},
            [f'{AT}[0].operator: Unsupported value: "some-other-op": supported values: "Equal", "Exists"'],
        ),
        (
            {"key": BAD, "operator": "Equal", "value": BAD, "effect": "some-other-effect"},
            [
                f'{AT}[0].key: Invalid value: "{BAD}": {KEY_MSG}',
                f'{AT}[0].value: Invalid value: "{BAD}": {VALUE_MSG}',
                f'{AT}[0].effect: Unsupported value: "some-other-effect": supported values: '
                '"NoExecute", "NoSchedule", "None"',
            ],
        ),
        # the Exists branch
        (
            {"operator": "Exists", "value": "x"},
            [f'{AT}[0].value: Invalid value: "x": must be empty for operator `Exists`'],
        ),
        # DeviceTaintEffectNone is a valid effect from 1.37's validDeviceTaintEffects
        ({"operator": "Exists", "effect": "None"}, []),
        # tolerationSeconds: "must be of effect NoExecute, otherwise this field is ignored" (the
        # field's doc); draxr refuses it with core's ValidateTolerations message
        ({"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}, []),
        (
            {"operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 300},
            [f'{AT}[0].effect: Invalid value: "NoSchedule": {SECONDS_MSG}'],
        ),
        (
            {"operator": "Exists", "tolerationSeconds": 1},
            [f'{AT}[0].effect: Invalid value: "": {SECONDS_MSG}'],
        ),
        # shapes JSON allows and the Go type does not
        (
            {"operator": "Exists", "tolerationSeconds": "300"},
            [f'{AT}[0].tolerationSeconds: Invalid value: "300": must be an integer'],
        ),
        (
            {"operator": "Exists", "colour": "red"},
            [f"{AT}[0].colour: Forbidden: unknown field (not in DeviceToleration)"],
        ),
        ({"operator": 1}, [f"{AT}[0].operator: Invalid value: 1: must be a string"]),
    ],
)
def test_validateDeviceToleration(toleration: Obj, expected: list[str]) -> None:
    assert errors([toleration]) == expected


def test_the_annotation_is_a_json_list_of_at_most_16() -> None:
    assert errors("[")[0].startswith(f'{AT}: Invalid value: "[": must be a JSON list of DeviceTolerations: ')
    assert errors({"operator": "Exists"}) == [
        f'{AT}: Invalid value: "{{\\"operator\\": \\"Exists\\"}}": must be a JSON list of DeviceTolerations'
    ]
    assert errors(["Exists"]) == [f'{AT}[0]: Invalid value: "Exists": must be an object']
    assert errors([{"operator": "Exists"}] * 17) == [f"{AT}: Too many: 17: must have at most 16 items"]
    assert errors([]) == []
    assert validate_class_tolerations({"metadata": {"name": "gpu"}}) == []


def test_the_requests_get_the_defaulted_tolerations_and_an_invalid_annotation_gives_none() -> None:
    assert class_tolerations(dc([{"key": "k", "value": "v"}])) == [
        {"key": "k", "value": "v", "operator": "Equal"}
    ]
    assert class_tolerations(dc([{"operator": "Bogus"}])) == []
    assert class_tolerations(dc("not json")) == []
    assert class_tolerations(None) == []


@given(
    st.lists(
        st.fixed_dictionaries(
            {"operator": st.sampled_from(["Equal", "Exists"])},
            optional={
                "key": st.sampled_from(["a", "example.com/b"]),
                "effect": st.sampled_from(["NoSchedule", "NoExecute"]),
            },
        ),
        max_size=4,
    )
)
def test_the_key_of_equal_lists_is_equal_and_of_different_lists_different(tols: list[Obj]) -> None:
    shuffled = [dict(reversed(list(t.items()))) for t in tols]
    assert tolerations_key(tols) == tolerations_key(shuffled)
    if tols:
        assert tolerations_key(tols) != tolerations_key(tols[:-1])
