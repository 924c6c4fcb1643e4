"""Which DeviceClasses a pod consumes through its own claims, and which of them draxr manages."""

from __future__ import annotations

from tests.core.podfactory import device_class, pod
from webhook.core.api.labels import parse_label_selector
from webhook.core.api.objects import Obj
from webhook.core.paths.consumed import (
    CLAIM,
    TEMPLATE,
    ClaimSource,
    ManagedClasses,
    claim_sources,
    gather,
    source_classes,
)

DEVICES: Obj = {
    "requests": [
        {"name": "a", "exactly": {"deviceClassName": "gpu.example.com", "count": 2}},
        {
            "name": "b",
            "firstAvailable": [
                {"name": "big", "deviceClassName": "big-gpu.example.com"},
                {"name": "small", "deviceClassName": "gpu.example.com"},
            ],
        },
        {"name": "c", "exactly": {"deviceClassName": "nic.example.com", "adminAccess": True}},
    ]
}


def test_the_sources_of_a_pods_claims_in_order() -> None:
    p = pod(
        resourceClaims=[
            {"name": "x", "resourceClaimName": "mine"},
            {"name": "y", "resourceClaimTemplateName": "per-pod"},
            {"name": "z"},  # neither: invalid, the apiserver refuses it
        ]
    )
    assert claim_sources(p) == [ClaimSource(CLAIM, "mine"), ClaimSource(TEMPLATE, "per-pod")]
    assert str(claim_sources(p)[1]) == "ResourceClaimTemplate per-pod"
    assert claim_sources(pod()) == []


def test_every_class_a_request_names_counts_once() -> None:
    expected = ["gpu.example.com", "big-gpu.example.com", "nic.example.com"]
    assert source_classes(CLAIM, {"spec": {"devices": DEVICES}}) == expected
    assert source_classes(TEMPLATE, {"spec": {"spec": {"devices": DEVICES}}}) == expected
    assert source_classes(CLAIM, {"spec": {}}) == []


def test_gather_keeps_what_is_missing_apart() -> None:
    claim = {"spec": {"devices": DEVICES}}
    out = gather([(ClaimSource(CLAIM, "a"), claim), (ClaimSource(TEMPLATE, "gone"), None)])
    assert out.classes == ["gpu.example.com", "big-gpu.example.com", "nic.example.com"]
    assert out.missing == [ClaimSource(TEMPLATE, "gone")]
    assert out.unknown
    assert not gather([(ClaimSource(CLAIM, "a"), claim)]).unknown


def test_managed_classes_by_label() -> None:
    labelled = device_class("gpu.example.com")
    labelled["metadata"]["labels"] = {"draxr.io/managed": "true"}
    classes = {"gpu.example.com": labelled, "nic.example.com": device_class("nic.example.com")}
    managed = ManagedClasses(parse_label_selector("draxr.io/managed=true"))
    assert managed.of(["nic.example.com", "gpu.example.com", "gone"], classes.get) == ["gpu.example.com"]
    # Empty: every class, even one the cluster does not have yet.
    assert ManagedClasses().of(["nic.example.com", "gone"], classes.get) == ["nic.example.com", "gone"]
    # A class not there yet is judged by having no labels.
    unlabelled = ManagedClasses(parse_label_selector("!draxr.io/unmanaged"))
    assert unlabelled.of(["gone", "gpu.example.com"], classes.get) == ["gone", "gpu.example.com"]
