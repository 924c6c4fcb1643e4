"""``POST /validate/resourceclaims`` over TLS: extended resource claims belong to the scheduler."""

from __future__ import annotations

import copy

import pytest

from webhook.admission.advice import FitAdvisor
from webhook.admission.app import ENDPOINTS
from webhook.admission.blocking import MAY_BLOCK
from webhook.admission.claims import review_claim
from webhook.admission.classreads import ClassReader
from webhook.admission.config import AdmissionConfig
from webhook.admission.context import ClaimWaiter, Context
from webhook.admission.review import parse_request
from webhook.core.api.constants import EXTENDED_RESOURCE_CLAIM_ANNOTATION as ANNOTATION
from webhook.core.api.objects import Obj, name
from webhook.kube.cache import ClusterCache

from .builders import GPU_CLASS, RESOURCE_CLAIM, USER, WORKER, causes, gpu_pod, review, special_claim
from .conftest import Webhook

PATH = "/validate/resourceclaims"
OWNER = gpu_pod("p")


def _create(claim: Obj, user: str = WORKER) -> Obj:
    return review(claim, resource=RESOURCE_CLAIM, user=user)


def _update(old: Obj, new: Obj, user: str = USER) -> Obj:
    return review(new, operation="UPDATE", old=old, resource=RESOURCE_CLAIM, user=user)


def test_ordinary_claims_are_not_this_hooks_business(webhook: Webhook) -> None:
    plain = special_claim("mine", OWNER, annotation=None)
    plain["spec"]["devices"]["requests"][0]["exactly"]["allocationMode"] = "All"
    assert webhook.respond(PATH, _create(plain, user=USER))["allowed"] is True


def test_users_may_not_create_extended_resource_claims(webhook: Webhook) -> None:
    # kubernetes/kubernetes#135404: such a claim escapes ResourceQuota.
    response = webhook.respond(PATH, _create(special_claim("fake", OWNER), user=USER))
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    assert response["status"]["reason"] == "Forbidden"
    assert response["status"]["message"] == (
        f'resourceclaims.resource.k8s.io "fake" is forbidden: a ResourceClaim annotated {ANNOTATION} '
        'may only be written by the scheduler (draxr --allowed-writers), not by user "alice"'
    )
    assert response["status"]["details"] == {
        "name": "fake",
        "group": "resource.k8s.io",
        "kind": "resourceclaims",
    }


def test_any_annotation_value_makes_it_guarded(webhook: Webhook) -> None:
    response = webhook.respond(PATH, _create(special_claim("fake", OWNER, annotation="false"), user=USER))
    assert response["status"]["code"] == 403


def test_the_scheduler_creates_them(webhook: Webhook) -> None:
    claim = special_claim("", OWNER)
    del claim["metadata"]["name"]
    claim["metadata"]["generateName"] = "p-extended-resources-"
    assert webhook.respond(PATH, _create(claim))["allowed"] is True


def _mangle(claim: Obj, how: str) -> Obj:
    claim = copy.deepcopy(claim)
    refs = claim["metadata"]["ownerReferences"]
    request = claim["spec"]["devices"]["requests"][0]
    if how == "two-controllers":
        refs.append({**refs[0], "name": "q", "uid": "uid-q"})
    elif how == "not-a-pod":
        refs[0]["kind"] = "Job"
    elif how == "no-controller":
        refs[0]["controller"] = False
    elif how == "all-mode":
        request["exactly"]["allocationMode"] = "All"
    elif how == "admin":
        request["exactly"]["adminAccess"] = True
    elif how == "first-available":
        del request["exactly"]
        request["firstAvailable"] = [{"name": "a", "deviceClassName": GPU_CLASS}]
    elif how == "value":
        claim["metadata"]["annotations"][ANNOTATION] = "yes"
    return claim


@pytest.mark.parametrize(
    ("how", "field", "reason"),
    [
        ("two-controllers", "metadata.ownerReferences", "FieldValueInvalid"),
        ("not-a-pod", "metadata.ownerReferences[0].kind", "FieldValueInvalid"),
        ("no-controller", "metadata.ownerReferences", "FieldValueRequired"),
        ("all-mode", "spec.devices.requests[0].exactly.allocationMode", "FieldValueNotSupported"),
        ("admin", "spec.devices.requests[0].exactly.adminAccess", "FieldValueForbidden"),
        ("first-available", "spec.devices.requests[0].firstAvailable", "FieldValueForbidden"),
        ("value", f"metadata.annotations[{ANNOTATION}]", "FieldValueInvalid"),
    ],
)
def test_they_must_look_like_the_schedulers(webhook: Webhook, how: str, field: str, reason: str) -> None:
    claim = _mangle(special_claim("c", OWNER), how)
    response = webhook.respond(PATH, _create(claim))
    assert response["allowed"] is False
    assert response["status"]["code"] == 422
    assert response["status"]["message"].startswith('ResourceClaim.resource.k8s.io "c" is invalid: ')
    assert [(f, r) for f, r, _ in causes(response)] == [(field, reason)]


def test_all_mode_message(webhook: Webhook) -> None:
    response = webhook.respond(PATH, _create(_mangle(special_claim("c", OWNER), "all-mode")))
    assert response["status"]["message"] == (
        'ResourceClaim.resource.k8s.io "c" is invalid: spec.devices.requests[0].exactly.allocationMode: '
        'Unsupported value: "All": supported values: "ExactCount"'
    )


def test_a_pod_has_at_most_one(webhook: Webhook) -> None:
    webhook.install([special_claim("p-extended-resources-aaaaa", OWNER)])
    response = webhook.respond(PATH, _create(special_claim("p-extended-resources-bbbbb", OWNER)))
    assert response["allowed"] is False
    assert causes(response) == [
        (
            "metadata.ownerReferences[0].uid",
            "FieldValueDuplicate",
            'Duplicate value: "uid-p": Pod "p" already has the extended resource claim '
            '"p-extended-resources-aaaaa"',
        )
    ]


def _aged(claim: Obj, created: str) -> Obj:
    claim["metadata"]["creationTimestamp"] = created
    return claim


@pytest.mark.parametrize(("version", "allowed"), [("v1.37.2", True), ("v1.36.3", True), ("v1.35.4", False)])
def test_the_pods_claim_is_the_one_quota_verifies(webhook: Webhook, version: str, allowed: bool) -> None:
    """``getVerifiedPodUsage`` (1.36 on): with no pod status, the earliest owned claim is the pod's;
    a writer's update of it is no duplicate of a later one (a failed cycle's leftover), whatever
    their names. Under 1.35's rules every owned claim is discounted: one only."""
    earliest = _aged(special_claim("p-extended-resources-zzzzz", OWNER), "2026-10-01T00:00:00Z")
    later = _aged(special_claim("p-extended-resources-aaaaa", OWNER), "2026-10-01T00:00:09Z")
    webhook.install([earliest, later], apiserver_version=version)
    changed = copy.deepcopy(earliest)
    changed["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    response = webhook.respond(PATH, _update(earliest, changed, user=WORKER))
    assert response["allowed"] is allowed
    if not allowed:
        assert "already has the extended resource claim" in causes(response)[0][2]


def test_a_new_claim_names_the_claim_quota_verifies(webhook: Webhook) -> None:
    earliest = _aged(special_claim("p-extended-resources-zzzzz", OWNER), "2026-10-01T00:00:00Z")
    later = _aged(special_claim("p-extended-resources-aaaaa", OWNER), "2026-10-01T00:00:09Z")
    webhook.install([earliest, later])
    response = webhook.respond(PATH, _create(special_claim("p-extended-resources-bbbbb", OWNER)))
    assert causes(response)[0][2].endswith(
        'already has the extended resource claim "p-extended-resources-zzzzz"'
    )


def test_a_claim_being_deleted_does_not_block_its_successor(webhook: Webhook) -> None:
    stale = special_claim("p-extended-resources-aaaaa", OWNER)
    stale["metadata"]["deletionTimestamp"] = "2025-06-01T00:00:00Z"
    webhook.install([stale])
    assert webhook.respond(PATH, _create(special_claim("p-extended-resources-bbbbb", OWNER)))["allowed"]


def test_claims_of_other_pods_do_not_count(webhook: Webhook) -> None:
    webhook.install([special_claim("q-extended-resources-aaaaa", gpu_pod("q"))])
    assert webhook.respond(PATH, _create(special_claim("p-extended-resources-bbbbb", OWNER)))["allowed"]


@pytest.mark.parametrize("change", ["finalizers", "labels", "status"])
def test_bookkeeping_updates_by_anyone_stay_allowed(webhook: Webhook, change: str) -> None:
    # The resourceclaim controller and the garbage collector remove finalizers; even a claim
    # that would be denied today (made before draxr was installed) must be able to go away.
    old = _mangle(special_claim("c", OWNER), "all-mode")
    old["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    new = copy.deepcopy(old)
    if change == "finalizers":
        new["metadata"]["finalizers"] = []
    elif change == "labels":
        new["metadata"]["labels"] = {"a": "b"}
    else:
        new["status"] = {"reservedFor": []}
    assert webhook.respond(PATH, _update(old, new, user="system:serviceaccount:kube-system:gc"))["allowed"]


@pytest.mark.parametrize("change", ["add-annotation", "remove-annotation", "owners", "spec"])
def test_changing_what_makes_it_special_is_for_writers_only(webhook: Webhook, change: str) -> None:
    special = special_claim("c", OWNER)
    plain = special_claim("c", OWNER, annotation=None)
    old, new = (plain, special) if change == "add-annotation" else (special, copy.deepcopy(special))
    if change == "remove-annotation":
        new = plain
    elif change == "owners":
        new["metadata"]["ownerReferences"][0]["uid"] = "uid-other"
    elif change == "spec":
        new["spec"]["devices"]["requests"][0]["exactly"]["count"] = 4
    assert webhook.respond(PATH, _update(old, new))["status"]["code"] == 403
    assert webhook.respond(PATH, _update(old, new, user=WORKER))["allowed"] is True


def test_a_writers_update_must_still_be_valid(webhook: Webhook) -> None:
    old = special_claim("c", OWNER)
    new = _mangle(old, "admin")
    response = webhook.respond(PATH, _update(old, new, user=WORKER))
    assert response["status"]["code"] == 422


def test_v1beta1_requests_without_exactly(webhook: Webhook) -> None:
    claim = special_claim("c", OWNER)
    claim["apiVersion"] = "resource.k8s.io/v1beta1"
    claim["spec"]["devices"]["requests"] = [
        {"name": "r", "deviceClassName": GPU_CLASS, "allocationMode": "ExactCount", "count": 1}
    ]
    resource = ("resource.k8s.io", "v1beta1", "resourceclaims")
    assert webhook.respond(PATH, review(claim, resource=resource, user=WORKER))["allowed"] is True


def _review_directly(claim: Obj, installed: list[Obj], api: dict[str, Obj]) -> bool:
    """The hook on a cache holding ``installed`` while the API holds ``api`` (by name)."""
    cache = ClusterCache.from_objects(installed)
    waiter = ClaimWaiter(cache, 2.0, reader=lambda ns, n: api.get(n))
    ctx = Context(cache, AdmissionConfig(), FitAdvisor(cache), waiter, ClassReader(cache, 0))
    (endpoint,) = [e for e in ENDPOINTS if e.path == PATH]
    req = parse_request(_create(claim), endpoint.expected)
    token = MAY_BLOCK.set(True)
    try:
        return review_claim(req, ctx).allowed
    finally:
        MAY_BLOCK.reset(token)


def test_a_sibling_the_api_no_longer_has_does_not_refuse_the_scheduler() -> None:
    """The worker deleted its failed cycle's claim and creates the next one before the webhook's
    informer saw the deletion: the API's answer decides, not the lagging cache."""
    old = special_claim("p-extended-resources-aaaaa", OWNER)
    new = special_claim("p-extended-resources-bbbbb", OWNER)
    assert _review_directly(new, [old], api={}) is True
    assert _review_directly(new, [old], api={name(old): old}) is False  # it really is there
