"""The hooks' CEL matchConditions select exactly what they should (evaluated as kube-apiserver does,
by the emulator's evaluator)."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.emulator.admission.conditions import ConditionEvaluator
from webhook.core.api.objects import Obj
from webhook.install.matchconditions import (
    CLAIM_GUARDED_CHANGE,
    ERCS_CHANGED,
    HAS_EXTENDED_NAME,
    REQUESTS_DRA_NAME,
    SPECIAL_CLAIM,
)

EVAL = ConditionEvaluator()


def matches(expression: str, obj: Obj | None, old: Obj | None = None, operation: str = "CREATE") -> bool:
    from celpy.adapter import json_to_cel

    act = {
        "object": json_to_cel(obj),
        "oldObject": json_to_cel(old),
        "request": json_to_cel({"operation": operation}),
    }
    outcome = EVAL.evaluate([{"name": "c", "expression": expression}], act)
    assert not outcome.error, outcome.error
    return outcome.matched


def pod(requests: dict[str, Any] | None = None, init: dict[str, Any] | None = None, **status: Any) -> Obj:
    c: Obj = {"name": "c"}
    if requests is not None:
        c["resources"] = {"requests": requests}
    p: Obj = {"spec": {"containers": [c]}}
    if init is not None:
        p["spec"]["initContainers"] = [{"name": "i", "resources": {"limits": init}}]
    if status:
        p["status"] = status
    return p


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (pod({"example.com/gpu": "1"}), True),
        (pod({"deviceclass.resource.kubernetes.io/gpu": "1"}), True),
        (pod({"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "2Mi"}), False),
        (pod({"kubernetes.io/something": "1"}), False),
        (pod(), False),
        (pod({"cpu": "1"}, init={"example.com/gpu": "1"}), True),
    ],
)
def test_pod_match_condition(obj: Obj, expected: bool) -> None:
    assert matches(REQUESTS_DRA_NAME, obj) is expected


def test_claim_status_match_condition_only_fires_on_changes() -> None:
    erc = {"resourceClaimName": "x", "requestMappings": []}
    assert matches(ERCS_CHANGED, pod(extendedResourceClaimStatus=erc), pod(), "UPDATE")
    assert matches(ERCS_CHANGED, pod(), pod(extendedResourceClaimStatus=erc), "UPDATE")
    assert not matches(
        ERCS_CHANGED,
        pod(phase="Running", extendedResourceClaimStatus=erc),
        pod(extendedResourceClaimStatus=erc),
        "UPDATE",
    )
    assert not matches(ERCS_CHANGED, pod(phase="Running"), pod(), "UPDATE")


def test_special_claim_and_device_class_match_conditions() -> None:
    special = {"metadata": {"annotations": {"resource.kubernetes.io/extended-resource-claim": "true"}}}
    plain: Obj = {"metadata": {}}
    assert matches(SPECIAL_CLAIM, special)
    assert not matches(SPECIAL_CLAIM, plain)
    assert matches(SPECIAL_CLAIM, plain, special, "UPDATE")  # removing the annotation is checked too
    claim = {**special, "spec": {"devices": {"requests": []}}}
    assert matches(CLAIM_GUARDED_CHANGE, claim)
    finalized = {"metadata": {**special["metadata"], "finalizers": []}, "spec": claim["spec"]}
    assert not matches(CLAIM_GUARDED_CHANGE, finalized, claim, "UPDATE")  # Unreserve needs no webhook
    assert matches(CLAIM_GUARDED_CHANGE, {"metadata": {}, "spec": claim["spec"]}, claim, "UPDATE")
    owned = {"metadata": {**special["metadata"], "ownerReferences": [{"uid": "u"}]}, "spec": claim["spec"]}
    assert matches(CLAIM_GUARDED_CHANGE, owned, claim, "UPDATE")
    assert matches(CLAIM_GUARDED_CHANGE, {**claim, "spec": {"devices": {}}}, claim, "UPDATE")
    named = {"metadata": {"name": "gpu"}}
    assert matches(HAS_EXTENDED_NAME, {**named, "spec": {"extendedResourceName": "example.com/gpu"}})
    assert not matches(HAS_EXTENDED_NAME, {**named, "spec": {}})
    assert matches(
        HAS_EXTENDED_NAME, {**named, "spec": {}}, {"spec": {"extendedResourceName": "x/y"}}, "UPDATE"
    )
    # draxr.io/capacity-requests is validated on classes with only the implicit name too (issue 23)
    annotated = {"metadata": {"name": "gpu", "annotations": {"draxr.io/capacity-requests": "{}"}}, "spec": {}}
    assert matches(HAS_EXTENDED_NAME, annotated)
    # too long for the implicit name: the webhook's warning must be able to reach the user
    assert matches(HAS_EXTENDED_NAME, {"metadata": {"name": "a" * 64}, "spec": {}})
