"""Topology alignment through the emulator: draxr.io/align-by on the classes, draxr.io/align on the pod,
the special claim's constraint, and the Events that explain the devices."""

from __future__ import annotations

from typing import Any

from tests.worker.harness import GPU, Cluster, device_class, node
from webhook.core.api.alignment import ALIGN_ANNOTATION, ALIGN_BY_ANNOTATION
from webhook.core.api.objects import Obj

PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
NIC = "example.com/nic"


def aligned_class(name: str = "gpu.example.com", ext: str = GPU) -> Obj:
    dc = device_class(name, ext)
    dc["spec"]["selectors"] = [{"cel": {"expression": f'device.driver == "{name}"'}}]
    dc["metadata"]["annotations"] = {ALIGN_BY_ANNOTATION: PCIE_ROOT}
    return dc


def root(i: int) -> str:
    return f"pci-{i}"


def topology_slice(node_name: str, kind: str, count: int, per_root: int) -> Obj:
    """``count`` devices of ``kind``, ``per_root`` on each PCIe root in order."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-{kind}"},
        "spec": {
            "driver": f"{kind}.example.com",
            "nodeName": node_name,
            "pool": {"name": f"{node_name}-{kind}", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": f"{kind}-{i}", "attributes": {PCIE_ROOT: {"string": root(i // per_root)}}}
                for i in range(count)
            ],
        },
    }


def held(node_name: str, *devices: str) -> Obj:
    """A user claim already allocated the given GPUs (another workload holds them)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "held", "namespace": "default"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "r",
                        "exactly": {
                            "deviceClassName": "gpu.example.com",
                            "allocationMode": "ExactCount",
                            "count": len(devices),
                        },
                    }
                ]
            }
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "r", "driver": "gpu.example.com", "pool": f"{node_name}-gpu", "device": d}
                        for d in devices
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
                    ]
                },
            }
        },
    }


def annotated_pod(kube: Cluster, name: str, requests: dict[str, Any], align: str | None) -> Obj:
    """A pod of ours, created with its ``draxr.io/align`` (if any) in one write."""
    body: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "draxr",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": dict(requests)}}],
        },
    }
    if align is not None:
        body["metadata"]["annotations"] = {ALIGN_ANNOTATION: align}
    return kube.em.create("pods", body)


def events(kube: Cluster, pod_name: str) -> list[Obj]:
    return [e for e in kube.em.list("events", "default") if e["involvedObject"]["name"] == pod_name]


def claim_of(kube: Cluster, pod_name: str) -> Obj:
    (claim,) = [c for c in kube.claims() if c["metadata"]["ownerReferences"][0]["name"] == pod_name]
    return claim


def devices_of(claim: Obj) -> list[str]:
    return [r["device"] for r in claim["status"]["allocation"]["devices"]["results"]]


def half_used(kube: Cluster) -> None:
    """One node, two roots of four GPUs, two GPUs of each root held by another claim."""
    kube.apply(
        node("n"),
        aligned_class(),
        topology_slice("n", "gpu", 8, 4),
        held("n", "gpu-0", "gpu-1", "gpu-4", "gpu-5"),
    )


def test_required_alignment_waits_when_each_root_is_half_used(kube: Cluster) -> None:
    half_used(kube)
    kube.worker()
    annotated_pod(kube, "four", {GPU: 4}, None)  # required is the default when the class asks
    kube.em.wait_for(lambda: kube.condition("four") is not None, 10, "the pod is marked unschedulable")
    cond = kube.condition("four")
    assert cond is not None
    assert cond["status"] == "False"
    assert cond["message"] == f"0/1 nodes are available: 1 cannot align devices by {PCIE_ROOT}."
    assert "four" not in kube.bound()
    assert kube.claims() == []  # nothing was written for it
    kube.em.wait_for(
        lambda: any(e["reason"] == "FailedScheduling" for e in events(kube, "four")), 10, "the Event"
    )
    failed = [e for e in events(kube, "four") if e["reason"] == "FailedScheduling"]
    assert failed[0]["message"] == cond["message"]


def test_preferred_alignment_takes_a_split_set_and_says_so(kube: Cluster) -> None:
    half_used(kube)
    kube.worker()
    annotated_pod(kube, "four", {GPU: 4}, "preferred")
    assert kube.wait_bound(1) == {"four": "n"}
    claim = claim_of(kube, "four")
    assert sorted(devices_of(claim)) == ["gpu-2", "gpu-3", "gpu-6", "gpu-7"]
    assert "constraints" not in claim["spec"]["devices"]  # the claim says what its devices satisfy
    kube.em.wait_for(
        lambda: {"AlignmentRelaxed", "Scheduled"} <= {e["reason"] for e in events(kube, "four")}, 10, "Events"
    )
    (relaxed,) = [e for e in events(kube, "four") if e["reason"] == "AlignmentRelaxed"]
    assert relaxed["type"] == "Normal"
    assert relaxed["message"] == (
        f"draxr.io/align: preferred: no free set of devices on n shares {PCIE_ROOT} for container-0; "
        "placed on devices spanning pci-0, pci-1"
    )
    (scheduled,) = [e for e in events(kube, "four") if e["reason"] == "Scheduled"]
    assert scheduled["message"].startswith("Successfully assigned default/four to n; devices ")
    assert f"container-0 not aligned by {PCIE_ROOT}, spanning pci-0, pci-1" in scheduled["message"]
    kube.check_consistent()


def test_gpu_and_nic_pods_land_on_one_root(kube: Cluster) -> None:
    kube.apply(
        node("n"),
        aligned_class(),
        aligned_class("nic.example.com", NIC),
        topology_slice("n", "gpu", 8, 4),
        topology_slice("n", "nic", 2, 1),
    )
    kube.worker()
    for i in range(2):
        kube.pod(f"train-{i}", {GPU: 2, NIC: 1})
    kube.wait_bound(2)
    kube.em.wait_for(
        lambda: all(any(e["reason"] == "Scheduled" for e in events(kube, f"train-{i}")) for i in range(2)),
        10,
        "the Events",
    )
    roots = set()
    for i in range(2):
        claim = claim_of(kube, f"train-{i}")
        # GPU request and NIC request of the one container share one constraint ...
        assert claim["spec"]["devices"]["constraints"] == [
            {"requests": ["container-0-request-0", "container-0-request-1"], "matchAttribute": PCIE_ROOT}
        ]
        # ... so the NIC sits on the root of both GPUs.
        got = devices_of(claim)
        gpus = [int(d.split("-")[1]) // 4 for d in got if d.startswith("gpu")]
        nics = [int(d.split("-")[1]) for d in got if d.startswith("nic")]
        assert len(gpus) == 2
        assert len(nics) == 1
        assert set(gpus) == set(nics)
        roots |= set(nics)
        (scheduled,) = [e for e in events(kube, f"train-{i}") if e["reason"] == "Scheduled"]
        assert f"container-0 aligned on {PCIE_ROOT}={root(nics[0])} (required)" in scheduled["message"]
    assert roots == {0, 1}  # one NIC per root: the second pod had to take the other root
    kube.check_consistent()


def test_upstream_policy_adds_no_constraint(kube: Cluster) -> None:
    half_used(kube)
    kube.worker(policy="upstream")
    kube.pod("four", {GPU: 4})
    kube.wait_bound(1)
    kube.em.wait_for(lambda: any(e["reason"] == "Scheduled" for e in events(kube, "four")), 10, "the Event")
    claim = claim_of(kube, "four")
    assert "constraints" not in claim["spec"]["devices"]
    assert devices_of(claim) == ["gpu-2", "gpu-3", "gpu-6", "gpu-7"]  # first fit in slice order
    (scheduled,) = [e for e in events(kube, "four") if e["reason"] == "Scheduled"]
    assert scheduled["message"].endswith("upstream: first fit in allocation order")
