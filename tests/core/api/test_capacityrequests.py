"""``draxr.io/capacity-requests``: what the DeviceClass hook accepts, and what a class's requests get."""

from __future__ import annotations

import json
from typing import Any

import pytest

from webhook.core.api.capacityrequests import (
    CAPACITY_REQUESTS_ANNOTATION,
    annotation_problems,
    capacity_by_class,
    class_capacity_requests,
)
from webhook.core.api.objects import Obj
from webhook.core.api.validation import validate_device_class


def annotated(value: str, field: Any = None) -> Obj:
    cls: Obj = {"metadata": {"name": "gpu", "annotations": {CAPACITY_REQUESTS_ANNOTATION: value}}, "spec": {}}
    if field is not None:
        cls["spec"]["extendedResourceCapacityRequests"] = field
    return cls


@pytest.mark.parametrize(
    "value",
    [
        '{"requests": {"memory": "10Gi"}}',
        '{"requests": {"memory": "10Gi", "gpu.example.com/cores": "2"}}',
        '{"requests": {"memory": "0"}}',
        '{"requests": {"bandwidth": "500m"}}',
    ],
)
def test_valid_annotations(value: str) -> None:
    assert annotation_problems(value) == []
    assert validate_device_class(annotated(value)) == ([], [])


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("memory=10Gi", "must be JSON"),
        ('["memory"]', "must be a JSON object"),
        ("{}", "requests: must be a non-empty object"),
        ('{"requests": {}}', "requests: must be a non-empty object"),
        ('{"requests": {"memory": "10Gi"}, "limits": {}}', "limits: unknown field"),
        ('{"requests": {"memory": "-1Gi"}}', "requests[memory]: must be greater than or equal to 0"),
        ('{"requests": {"memory": "ten"}}', "requests[memory]: quantities must match"),
        ('{"requests": {"memory": 10}}', "requests[memory]: must be a quantity string"),
        ('{"requests": {"9memory": "1"}}', "requests[9memory]: must be a C identifier"),
        ('{"requests": {"a/b/c": "1"}}', "requests[a/b/c]: must be a domain and a name"),
        ('{"requests": {"' + "m" * 33 + '": "1"}}', "must be no more than 32 characters"),
    ],
)
def test_invalid_annotations_are_denied_at_the_path(value: str, problem: str) -> None:
    assert any(p.startswith(problem) or problem in p for p in annotation_problems(value)), (
        annotation_problems(value)
    )
    errors, _ = validate_device_class(annotated(value))
    assert errors
    assert {e.field for e in errors} == {f"metadata.annotations[{CAPACITY_REQUESTS_ANNOTATION}]"}


def test_a_bad_annotation_stored_before_draxr_does_not_block_other_edits() -> None:
    old = annotated("memory=10Gi")
    new = annotated("memory=10Gi")
    new["metadata"]["labels"] = {"team": "a"}
    errors, warnings = validate_device_class(new, old)
    assert errors == []
    assert any("draxr ignores" in w for w in warnings)
    assert class_capacity_requests(new) is None


def test_the_kep_6406_field_wins_over_the_annotation() -> None:
    cls = annotated('{"requests": {"memory": "10Gi"}}', field={"requests": {"memory": "20Gi"}})
    assert class_capacity_requests(cls) == {"memory": "20Gi"}
    assert class_capacity_requests(annotated('{"requests": {"memory": "10Gi"}}')) == {"memory": "10Gi"}
    assert class_capacity_requests({"metadata": {"name": "plain"}}) is None
    assert class_capacity_requests(None) is None


def test_capacity_by_class_names_only_classes_with_requests() -> None:
    classes = {"gpu": annotated(json.dumps({"requests": {"memory": "10Gi"}})), "plain": {"metadata": {}}}
    assert capacity_by_class(["gpu", "plain", "gone", "gpu"], classes.get) == {"gpu": {"memory": "10Gi"}}
