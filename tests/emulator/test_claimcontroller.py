"""The emulator's resourceclaim controller makes claims from templates as kube-controller-manager does
on 1.35 and 1.36 (the same assertions as e2e/controlplane/test_controlplane.py's
``test_claim_generated_from_a_template``, which runs them against the real one)."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core.objects import Obj
from webhook.emulator import Emulator
from webhook.emulator.claimcontroller import generate_name

TEMPLATE: Obj = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "tmpl"},
    "spec": {
        "metadata": {"labels": {"from": "template"}},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}
        },
    },
}


def _pod(name: str, claims: list[Obj]) -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {"name": "main", "image": "i", "resources": {"claims": [{"name": c["name"]} for c in claims]}}
            ],
            "resourceClaims": claims,
        },
    }


def _claims(em: Emulator) -> list[Obj]:
    return em.list("resourceclaims", namespace="default")


def _recorded(em: Emulator, pod: str) -> Any:
    return (em.get("pods", pod, "default").get("status") or {}).get("resourceClaimStatuses")


def test_a_claim_is_made_from_the_template_and_recorded_in_the_pod() -> None:
    with Emulator() as em:
        stored_template = em.create("resourceclaimtemplates", TEMPLATE, namespace="default")
        pod = em.create(
            "pods", _pod("consumer", [{"name": "gpu", "resourceClaimTemplateName": "tmpl"}]), "default"
        )
        em.wait_for(lambda: _recorded(em, "consumer"), 5, "the pod's status names no claim")
        [claim] = _claims(em)
        meta = claim["metadata"]
        assert meta["generateName"] == "consumer-gpu-"
        assert meta["name"].startswith("consumer-gpu-")
        assert len(meta["name"]) == len("consumer-gpu-") + 5
        assert meta["annotations"] == {"resource.kubernetes.io/pod-claim-name": "gpu"}
        assert meta["labels"] == {"from": "template"}
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": "consumer",
                "uid": pod["metadata"]["uid"],
                "controller": True,
            }
        ]
        assert claim["spec"] == stored_template["spec"]["spec"]
        assert claim["spec"]["devices"]["requests"][0]["exactly"]["allocationMode"] == "ExactCount"
        assert _recorded(em, "consumer") == [{"name": "gpu", "resourceClaimName": meta["name"]}]
        # Its owner gone, the garbage collector takes the claim.
        em.delete("pods", "consumer", "default")
        em.wait_for(lambda: not _claims(em), 5, "the generated claim was not garbage-collected")


def test_a_template_created_after_the_pod_is_used_then() -> None:
    with Emulator() as em:
        em.create("pods", _pod("early", [{"name": "gpu", "resourceClaimTemplateName": "tmpl"}]), "default")
        em.settle()
        assert not _claims(em)
        assert not _recorded(em, "early")
        em.create("resourceclaimtemplates", TEMPLATE, namespace="default")
        em.wait_for(lambda: _recorded(em, "early"), 5, "the pod's status names no claim")
        assert len(_claims(em)) == 1


def test_named_claims_and_recorded_entries_are_left_alone() -> None:
    with Emulator() as em:
        em.create("resourceclaimtemplates", TEMPLATE, namespace="default")
        claims = [
            {"name": "mine", "resourceClaimName": "existing"},
            {"name": "made", "resourceClaimTemplateName": "tmpl"},
        ]
        em.create("pods", _pod("p", claims), "default")
        em.wait_for(lambda: _recorded(em, "p"), 5)
        assert _recorded(em, "p") == [
            {"name": "made", "resourceClaimName": _claims(em)[0]["metadata"]["name"]}
        ]
        # Later pod updates make no second claim.
        pod = em.get("pods", "p", "default")
        pod["metadata"]["labels"] = {"touched": "yes"}
        em.update("pods", pod)
        em.settle()
        assert len(_claims(em)) == 1


def test_the_controller_can_be_turned_off() -> None:
    with Emulator(resource_claim_controller=False) as em:
        em.create("resourceclaimtemplates", TEMPLATE, namespace="default")
        em.create("pods", _pod("p", [{"name": "gpu", "resourceClaimTemplateName": "tmpl"}]), "default")
        em.settle()
        assert not _claims(em)


@pytest.mark.parametrize(
    ("pod", "claim", "expected"),
    [
        ("consumer", "gpu", "consumer-gpu-"),
        ("p" * 39, "c" * 16, "p" * 39 + "-" + "c" * 16 + "-"),  # 57 characters: kept
        ("p" * 40, "c" * 16, "p" * 39 + "-" + "c" * 15),  # 58: 40*57//58 = 39, 16*57//58 = 15
        ("p" * 100, "claim", "p" * 53 + "-" + "cl"),  # 107: 100*57//107 = 53, 5*57//107 = 2
    ],
)
def test_generate_name_cuts_both_parts_in_proportion(pod: str, claim: str, expected: str) -> None:
    assert generate_name(pod, claim) == expected
