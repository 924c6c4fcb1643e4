"""Alignment in rewrite mode, where the apiserver's DRAExtendedResource is off: a class's
``draxr.io/align-by`` reaches the ResourceClaimTemplate draxr's worker writes, and the claim the
resourceclaim controller makes from it puts a pod's GPUs on one PCIe root, or keeps the pod waiting
while no root has room. (Once tests/worker/test_rewrite_alignment.py, on the emulator's imitation of
that controller; the emulator target skips these now.)"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from webhook.core.api.alignment import ALIGN_BY_ANNOTATION
from webhook.core.api.constants import EXTENDED_RESOURCE_NAME_ANNOTATION
from webhook.core.api.objects import Obj
from webhook.core.paths.rewrite import REWRITTEN_ANNOTATION
from webhook.kube.resources import PODS

from .target import DRIVER, RESOURCES, Target

pytestmark = pytest.mark.gate_off

PCIE_ROOT = "resource.kubernetes.io/pcieRoot"


def root(i: int) -> str:
    return f"pci-{i}"


def install(target: Target, *held: str) -> str:
    """An aligned class mapping this run's name (by annotation: the apiserver drops the field), eight
    GPUs on the first node, four on each PCIe root, and a user claim already holding ``held``.
    Returns the slice's pool."""
    target.create(
        "deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {
                "name": target.class_name(),
                "annotations": {
                    ALIGN_BY_ANNOTATION: PCIE_ROOT,
                    EXTENDED_RESOURCE_NAME_ANNOTATION: target.ext,
                },
            },
            "spec": {
                "selectors": [
                    {
                        "cel": {
                            "expression": f'device.driver == "{DRIVER}" && '
                            f'device.attributes["{DRIVER}"].run == "{target.run_id}"'
                        }
                    }
                ]
            },
        },
    )
    node = target.nodes[0]
    pool = f"{node}-e2e-{target.run_id}"
    target.create(
        "resourceslices",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": pool},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {
                        "name": f"gpu-{i}",
                        "attributes": {"run": {"string": target.run_id}, PCIE_ROOT: {"string": root(i // 4)}},
                    }
                    for i in range(8)
                ],
            },
        },
    )
    claims = RESOURCES["resourceclaims"]
    request = {"name": "r", "exactly": {"deviceClassName": target.class_name(), "count": len(held)}}
    claim = target.create(
        "resourceclaims",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "held"},
            "spec": {"devices": {"requests": [request]}},
        },
    )
    claim["status"] = {
        "allocation": {
            "devices": {
                "results": [{"request": "r", "driver": DRIVER, "pool": pool, "device": d} for d in held]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            },
        }
    }
    target.admin.update(claims, claim, subresource="status")
    return pool


def bound(name: str) -> Callable[[list[Obj]], list[Obj]]:
    def check(pods: list[Obj]) -> list[Obj]:
        return [p for p in pods if p["metadata"]["name"] == name and p["spec"].get("nodeName")]

    return check


def claims_of(target: Target, pod: str) -> list[Obj]:
    return [
        c
        for c in target.objects("resourceclaims")
        if [r["name"] for r in c["metadata"].get("ownerReferences", [])] == [pod]
    ]


def roots_of(claim: Obj) -> set[str]:
    return {
        root(int(r["device"].split("-")[1]) // 4) for r in claim["status"]["allocation"]["devices"]["results"]
    }


def test_a_rewritten_four_gpu_pod_gets_one_root(target: Target) -> None:
    target.require_controllers("claims from draxr's templates")
    install(target, "gpu-0")
    created = target.pod("four", {target.ext: "4"})
    assert REWRITTEN_ANNOTATION in created["metadata"]["annotations"]
    (pc,) = created["spec"]["resourceClaims"]
    assert "-aligned-" in pc["resourceClaimTemplateName"]
    target.wait("pods", bound("four"), timeout=60)
    template = target.admin.get(
        RESOURCES["resourceclaimtemplates"], pc["resourceClaimTemplateName"], target.namespace
    )
    assert template["spec"]["spec"]["devices"]["constraints"] == [
        {"requests": ["devices"], "matchAttribute": PCIE_ROOT}
    ]
    (claim,) = claims_of(target, "four")
    assert claim["spec"]["devices"]["constraints"] == template["spec"]["spec"]["devices"]["constraints"]
    assert len(roots_of(claim)) == 1  # both roots had 3 free: the pod's 4 never fit split-free...


def test_a_rewritten_pod_waits_while_no_root_has_room(target: Target) -> None:
    target.require_controllers("claims from draxr's templates")
    install(target, "gpu-0", "gpu-1", "gpu-4", "gpu-5")
    target.pod("four", {target.ext: "4"})
    target.pod("two", {target.ext: "2"})
    target.wait("pods", bound("two"), timeout=60)
    (claim,) = claims_of(target, "two")
    assert roots_of(claim) in ({root(0)}, {root(1)})
    # four free GPUs were left (two per root) before "two" took a root's pair; "four" never fits
    pod = target.admin.get(PODS, "four", target.namespace)
    assert not pod["spec"].get("nodeName")
    target.wait(
        "pods",
        lambda pods: any(
            c["type"] == "PodScheduled" and c["status"] == "False"
            for p in pods
            if p["metadata"]["name"] == "four"
            for c in (p.get("status") or {}).get("conditions") or []
        ),
        timeout=30,
    )
