"""Alignment in rewrite mode, through the emulator with DRAExtendedResource off: a class's
``draxr.io/align-by`` reaches the ResourceClaimTemplate the worker writes, and the claim the
resourceclaim controller makes from it puts a pod's GPUs on one PCIe root, or keeps the pod
waiting while no root has room."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from e2e.emulator.sandbox import Sandbox
from tests.worker.harness import GPU, node
from tests.worker.test_alignment import PCIE_ROOT, aligned_class, held, root, topology_slice
from webhook.core.api.objects import Obj
from webhook.core.paths.rewrite import REWRITTEN_ANNOTATION
from webhook.kube.resources import BY_PLURAL, PODS


@pytest.fixture
def box() -> Iterator[Sandbox]:
    # No kube-scheduler in the emulator: rewritten pods are routed to draxr's worker.
    with Sandbox(feature_gates={"DRAExtendedResource": False}, route="always", leader_elect=False) as box:
        yield box


def kubelet_node() -> Obj:
    n = node("n", {"cpu": "16", "memory": "64Gi"})
    n["status"]["nodeInfo"] = {"kubeletVersion": "v1.35.4"}
    return n


def gpu_class() -> Obj:
    dc = aligned_class()
    dc["metadata"]["annotations"]["draxr.io/extended-resource-name"] = GPU
    del dc["spec"]["extendedResourceName"]  # the apiserver would drop it anyway
    return dc


def install(box: Sandbox, *objs: Obj) -> None:
    for obj in objs:
        plural = {"Node": "nodes", "DeviceClass": "deviceclasses", "ResourceSlice": "resourceslices"}
        kind = str(obj["kind"])
        if kind == "ResourceClaim":
            created = box.admin.create(
                BY_PLURAL["resourceclaims"], {k: v for k, v in obj.items() if k != "status"}, "default"
            )
            created["status"] = obj["status"]
            box.admin.update(BY_PLURAL["resourceclaims"], created, subresource="status")
        else:
            box.admin.create(BY_PLURAL[plural[kind]], obj)
    cache = box.webhook.cache
    box.em.wait_for(
        lambda: len(cache.state.devices.slices) >= 1 and cache.state.classes.get("gpu.example.com"), 10
    )


def gpu_pod(name: str, count: int) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {GPU: str(count)}}}]},
    }


def claims_of(box: Sandbox, pod: str) -> list[Obj]:
    return [
        c
        for c in box.em.list("resourceclaims", "default")
        if [r["name"] for r in c["metadata"].get("ownerReferences", [])] == [pod]
    ]


def roots_of(box: Sandbox, claim: Obj) -> set[str]:
    (slice_,) = box.em.list("resourceslices")
    root_of = {d["name"]: d["attributes"][PCIE_ROOT]["string"] for d in slice_["spec"]["devices"]}
    return {root_of[r["device"]] for r in claim["status"]["allocation"]["devices"]["results"]}


def test_a_rewritten_four_gpu_pod_gets_one_root(box: Sandbox) -> None:
    install(box, kubelet_node(), gpu_class(), topology_slice("n", "gpu", 8, 4), held("n", "gpu-0"))
    created = box.dev.create(PODS, gpu_pod("four", 4), "default")
    assert REWRITTEN_ANNOTATION in created["metadata"]["annotations"]
    (pc,) = created["spec"]["resourceClaims"]
    assert "-aligned-" in pc["resourceClaimTemplateName"]
    box.em.wait_for(lambda: box.em.get("pods", "four", "default")["spec"].get("nodeName"), 15, "not bound")
    template = box.em.get("resourceclaimtemplates", pc["resourceClaimTemplateName"], "default")
    assert template["spec"]["spec"]["devices"]["constraints"] == [
        {"requests": ["devices"], "matchAttribute": PCIE_ROOT}
    ]
    (claim,) = claims_of(box, "four")
    assert claim["spec"]["devices"]["constraints"] == template["spec"]["spec"]["devices"]["constraints"]
    assert len(roots_of(box, claim)) == 1  # both roots had 3 free: the pod's 4 never fit split-free...


def test_a_rewritten_pod_waits_while_no_root_has_room(box: Sandbox) -> None:
    install(
        box,
        kubelet_node(),
        gpu_class(),
        topology_slice("n", "gpu", 8, 4),
        held("n", "gpu-0", "gpu-1", "gpu-4", "gpu-5"),
    )
    box.dev.create(PODS, gpu_pod("four", 4), "default")
    box.dev.create(PODS, gpu_pod("two", 2), "default")
    box.em.wait_for(lambda: box.em.get("pods", "two", "default")["spec"].get("nodeName"), 15, "not bound")
    (claim,) = claims_of(box, "two")
    assert roots_of(box, claim) in ({root(0)}, {root(1)})
    # four free GPUs were left (two per root) before "two" took a root's pair; "four" never fits
    pod = box.em.get("pods", "four", "default")
    assert not pod["spec"].get("nodeName")
    box.em.wait_for(
        lambda: any(
            c["type"] == "PodScheduled" and c["status"] == "False"
            for c in box.em.get("pods", "four", "default").get("status", {}).get("conditions", [])
        ),
        15,
        "no unschedulable condition",
    )
