"""Shared GPUs through the worker and the emulator (issue 23): a class with
``draxr.io/capacity-requests`` serves several ``example.com/gpu: 1`` pods from one
multi-allocatable device; each written special claim records its share (``shareID``,
``consumedCapacity``), and a pod that no longer fits waits."""

from __future__ import annotations

import uuid

from tests.scenarios.worker.test_alignment import annotated_pod, claim_of
from tests.worker.harness import GPU, Cluster, device_class, node
from webhook.core.api.capacityrequests import CAPACITY_REQUESTS_ANNOTATION
from webhook.core.api.objects import Obj


def shared_class() -> Obj:
    dc = device_class()
    dc["metadata"]["annotations"] = {CAPACITY_REQUESTS_ANNOTATION: '{"requests": {"memory": "10Gi"}}'}
    return dc


def shared_slice(node_name: str) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-gpu"},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": node_name,
            "pool": {"name": f"{node_name}-gpu", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": "gpu-0", "allowMultipleAllocations": True, "capacity": {"memory": {"value": "40Gi"}}}
            ],
        },
    }


def test_four_pods_take_four_shares_of_one_device_and_a_fifth_waits(kube: Cluster) -> None:
    kube.apply(node("n"), shared_class(), shared_slice("n"))
    kube.worker()
    for i in range(4):
        annotated_pod(kube, f"p{i}", {GPU: 1}, None)
    assert kube.wait_bound(4) == {f"p{i}": "n" for i in range(4)}
    shares = []
    for i in range(4):
        claim = claim_of(kube, f"p{i}")
        (request,) = claim["spec"]["devices"]["requests"]
        assert request["exactly"]["capacity"] == {"requests": {"memory": "10Gi"}}
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert (result["device"], result["consumedCapacity"]) == ("gpu-0", {"memory": "10Gi"})
        assert uuid.UUID(result["shareID"]).version == 4
        shares.append(result["shareID"])
    assert len(set(shares)) == 4
    annotated_pod(kube, "p4", {GPU: 1}, None)
    kube.em.wait_for(lambda: kube.condition("p4") is not None, 10, "the fifth pod is marked unschedulable")
    cond = kube.condition("p4")
    assert cond is not None
    assert cond["status"] == "False"
    assert "p4" not in kube.bound()
