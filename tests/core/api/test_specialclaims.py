"""``verified_special_claim``: the special claim ResourceQuota discounts by its pod's usage, row by row
as ``getVerifiedPodUsage`` and ``extendedResourceClaimPodUIDOwnerIndex`` decide it
(``pkg/quota/v1/evaluator/core/resource_claims.go``, k8s.io/kubernetes v1.37.2; the same file in
v1.36.3; v1.35.4 lacks the earliest-owned rule: PR #135434)."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core.api.constants import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from webhook.core.api.objects import Obj
from webhook.core.api.specialclaims import owned_by, pod_owner, verified_claims, verified_special_claim

T0, T1 = "2026-10-01T00:00:00Z", "2026-10-01T00:00:05Z"


def pod(name: str = "p", uid: str = "u", ns: str = "default", status: Any = None) -> Obj:
    p: Obj = {"metadata": {"name": name, "namespace": ns, "uid": uid}, "spec": {}, "status": {}}
    if status is not None:
        p["status"]["extendedResourceClaimStatus"] = status
    return p


def claim(
    name: str = "c",
    *,
    created: str = T0,
    annotation: str | None = "true",
    owner: Obj | None = None,
    ns: str = "default",
) -> Obj:
    meta: Obj = {"name": name, "namespace": ns, "creationTimestamp": created}
    if annotation is not None:
        meta["annotations"] = {EXTENDED_RESOURCE_CLAIM_ANNOTATION: annotation}
    ref = {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u", "controller": True}
    meta["ownerReferences"] = [ref if owner is None else owner]
    return {"metadata": meta, "spec": {}}


def names(status_claim: str) -> Obj:
    return {"resourceClaimName": status_claim, "requestMappings": []}


OWNER = {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u", "controller": True}


@pytest.mark.parametrize(
    ("case", "c", "found", "others", "verified"),
    [
        # claim.Annotations[ExtendedResourceClaimAnnotation] != "true" -> nil
        ("no annotation", claim(annotation=None), pod(), [], False),
        ("annotation not true", claim(annotation="yes"), pod(), [], False),
        # GetControllerOfNoCopy(claim) == nil -> nil
        ("no controller", claim(owner={**OWNER, "controller": False}), pod(), [], False),
        # controllerRef.Kind != "Pod" || controllerRef.APIVersion != "v1" -> nil
        ("controller not a Pod", claim(owner={**OWNER, "kind": "Job"}), pod(), [], False),
        ("controller not v1", claim(owner={**OWNER, "apiVersion": "apps/v1"}), pod(), [], False),
        # podsGetter.Pods(ns).Get(controllerRef.Name) fails -> nil
        ("pod not found", claim(), None, [], False),
        ("pod of another namespace", claim(), pod(ns="other"), [], False),
        # controllerRef.UID != pod.UID -> nil (a new pod of the same name)
        ("pod replaced", claim(), pod(uid="newer"), [], False),
        # status set and naming another claim -> nil
        ("status names another", claim(), pod(status=names("other")), [], False),
        ("status names it", claim(), pod(status=names("c")), [claim("a", created=T0)], True),
        ("status set without a name", claim(), pod(status={}), [], False),
        # status nil: the earliest owned claim, ties by the smaller name
        ("the only owned claim", claim(), pod(), [claim()], True),
        ("an older owned claim", claim(created=T1), pod(), [claim("z", created=T0)], False),
        ("a newer owned claim", claim(created=T0), pod(), [claim("a", created=T1)], True),
        ("same time, smaller name", claim("b"), pod(), [claim("a")], False),
        ("same time, larger name", claim("b"), pod(), [claim("c")], True),
    ],
)
def test_getVerifiedPodUsage(case: str, c: Obj, found: Obj | None, others: list[Obj], verified: bool) -> None:
    assert verified_special_claim(c, found, [c, *others]) is verified, case


def test_under_135s_rules_every_owned_claim_is_verified_while_the_status_is_unset() -> None:
    """v1.35.4 has no claimGetter: the loophole of kubernetes/kubernetes#135404 (one pod, many
    discounted claims) that PR #135434 closed in 1.36."""
    older, newer = claim("a", created=T0), claim("b", created=T1)
    assert verified_claims(pod(), [older, newer], earliest_owned=False) == [older, newer]
    assert verified_claims(pod(), [older, newer]) == [older]
    assert verified_claims(pod(status=names("b")), [older, newer], earliest_owned=False) == [newer]


def test_the_owner_index_keys_on_namespace_and_uid_not_the_owners_name() -> None:
    """``extendedResourceClaimPodUIDOwnerIndex``: namespace + controllerRef.UID."""
    renamed = claim(owner={**OWNER, "name": "someone-else"})
    assert owned_by(renamed, pod())
    assert not owned_by(renamed, pod(uid="x"))
    assert not owned_by(claim(ns="other"), pod())
    assert not owned_by(claim(owner={**OWNER, "kind": "Job"}), pod())
    assert pod_owner(claim(annotation="false")) is None
    # the index holds it, but the pod found by the owner's name is not this uid's: not verified
    assert not verified_special_claim(renamed, pod(), [renamed])
