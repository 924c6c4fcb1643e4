"""``admission.review``: resource.k8s.io objects reach the hooks in the v1 shape; what a response
may carry, however hostile the request."""

from __future__ import annotations

import copy

import pytest

from webhook.admission.app import ENDPOINTS
from webhook.admission.review import (
    TRUNCATE_AT_TOTAL_RUNES,
    TRUNCATE_ITEM_RUNES,
    Expected,
    parse_request,
    truncate_warnings,
)
from webhook.core.api.objects import Obj

from .builders import (
    GPU_CLASS,
    WORKER,
    causes,
    container,
    device_class,
    gpu_cluster,
    gpu_pod,
    pod,
    review,
    special_claim,
)
from .conftest import Webhook

CLAIMS: Expected = next(e.expected for e in ENDPOINTS if e.path == "/validate/resourceclaims")
CLASSES: Expected = next(e.expected for e in ENDPOINTS if e.path == "/validate/deviceclasses")
PODS: Expected = next(e.expected for e in ENDPOINTS if e.path == "/validate/pods")
OWNER = gpu_pod("p")
FLAT = {"name": "r", "deviceClassName": GPU_CLASS, "allocationMode": "ExactCount", "count": 1}


def v1beta1_claim(**request: object) -> Obj:
    claim = special_claim("c", OWNER)
    claim["apiVersion"] = "resource.k8s.io/v1beta1"
    claim["spec"]["devices"]["requests"] = [{**FLAT, **request}]
    return claim


def v1beta2_claim(count: int) -> Obj:
    """v1beta2 has v1's shape: ``exactly`` already."""
    exactly = {k: v for k, v in FLAT.items() if k != "name"} | {"count": count}
    claim = special_claim("c", OWNER, [{"name": "r", "exactly": exactly}])
    claim["apiVersion"] = "resource.k8s.io/v1beta2"
    return claim


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_parse_request_converts_object_and_old_object(version: str) -> None:
    if version == "v1beta1":
        new, old = v1beta1_claim(), v1beta1_claim(count=2)
    else:
        new, old = v1beta2_claim(1), v1beta2_claim(2)
    body = review(new, operation="UPDATE", old=old, resource=("resource.k8s.io", version, "resourceclaims"))
    before = copy.deepcopy(body)
    req = parse_request(body, CLAIMS)
    assert req.version == version  # what was sent stays on record
    assert req.obj is not None
    assert req.old is not None
    assert req.obj["apiVersion"] == req.old["apiVersion"] == "resource.k8s.io/v1"
    exact = {"deviceClassName": GPU_CLASS, "allocationMode": "ExactCount"}
    assert req.obj["spec"]["devices"]["requests"] == [{"name": "r", "exactly": {**exact, "count": 1}}]
    assert req.old["spec"]["devices"]["requests"] == [{"name": "r", "exactly": {**exact, "count": 2}}]
    assert body == before  # the review itself is not touched


def test_parse_request_converts_device_classes_and_leaves_pods_as_sent() -> None:
    cls = device_class(GPU_CLASS, "example.com/gpu", ["true"])
    cls["apiVersion"] = "resource.k8s.io/v1beta1"
    req = parse_request(review(cls, resource=("resource.k8s.io", "v1beta1", "deviceclasses")), CLASSES)
    assert req.obj == {**cls, "apiVersion": "resource.k8s.io/v1"}
    body = review(gpu_pod("p"))
    assert parse_request(body, PODS).obj is body["request"]["object"]  # no copy off the resource group


def test_a_v1beta1_extended_claim_is_validated_as_v1_and_never_patched(webhook: Webhook) -> None:
    """The hook reads the converted claim: a flat ``allocationMode: All`` is found in ``exactly``,
    where upstream's validation of the internal type finds it, and the answer carries no patch."""
    resource = ("resource.k8s.io", "v1beta1", "resourceclaims")
    ok = webhook.respond("/validate/resourceclaims", review(v1beta1_claim(), resource=resource, user=WORKER))
    assert ok == {"uid": ok["uid"], "allowed": True}
    bad = v1beta1_claim(allocationMode="All")
    del bad["spec"]["devices"]["requests"][0]["count"]
    response = webhook.respond("/validate/resourceclaims", review(bad, resource=resource, user=WORKER))
    assert response["allowed"] is False
    assert "patch" not in response
    assert [(f, r) for f, r, _ in causes(response)] == [
        ("spec.devices.requests[0].exactly.allocationMode", "FieldValueNotSupported")
    ]


def test_truncation_follows_the_apiservers_warning_recorder() -> None:
    # k8s.io/apiserver/pkg/endpoints/filters/warning.go TestTruncation, with its limits of 25 and 5.
    def run(*texts: str) -> list[str]:
        return truncate_warnings(list(texts), total=25, item=5)

    assert run("aaaaaaaaaa", "aaaaaaaaaa", "bb", "ccc", "Iñtërnâtiô") == [
        "aaaaaaaaaa",
        "bb",
        "ccc",
        "Iñtërnâtiô",
    ]
    # one more long item passes the total: everything is replayed truncated to 5 runes
    assert run("aaaaaaaaaa", "bb", "ccc", "Iñtërnâtiô", "dddddd") == ["aaaaa", "bb", "ccc", "Iñtër", "ddddd"]
    # once truncating, later items are cut too, and dropped after the total is reached
    assert run("aaaaaaaaaa", "bb", "ccc", "Iñtërnâtiô", "dddddd", "eeeeeee", "ff", "gg") == [
        "aaaaa",
        "bb",
        "ccc",
        "Iñtër",
        "ddddd",
        "eeeee",
    ]


def test_the_defaults_are_upstreams() -> None:
    assert (TRUNCATE_AT_TOTAL_RUNES, TRUNCATE_ITEM_RUNES) == (4096, 256)
    few = ["x" * 300, "y" * 300]
    assert truncate_warnings(few) == few
    many = [f"warning {i}: " + "z" * 300 for i in range(1000)]
    kept = truncate_warnings(many)
    assert all(len(w) == TRUNCATE_ITEM_RUNES for w in kept)
    assert sum(map(len, kept)) < TRUNCATE_AT_TOTAL_RUNES + TRUNCATE_ITEM_RUNES
    assert kept == [w[:TRUNCATE_ITEM_RUNES] for w in many[: len(kept)]]


def test_a_pod_provoking_thousands_of_warnings_gets_4_kib_of_them(webhook: Webhook) -> None:
    names = 3000  # extended resources no class and no node serves: one warning each
    webhook.install(gpu_cluster())
    p: Obj = pod("p", [container("c", {f"example.com/r{i}": "1" for i in range(names)})])
    response = webhook.respond("/mutate/pods", review(p))
    assert response["allowed"] is True
    warnings = response["warnings"]
    assert warnings[0].startswith("example.com/r0")
    assert 1 < len(warnings) < names
    assert sum(map(len, warnings)) <= TRUNCATE_AT_TOTAL_RUNES + TRUNCATE_ITEM_RUNES
