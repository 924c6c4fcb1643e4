"""Clusters for the preemption tests: nodes, GPU slices, and bound pods holding their devices
through special claims or their own ResourceClaims, as the worker leaves them."""

from __future__ import annotations

from typing import Any

from tests.core.podfactory import container, device_class, gpus, node, pod, resource_slice
from webhook.core.allocation.claims import as_obj, special_claim
from webhook.core.api.objects import Obj
from webhook.core.cluster.state import ClusterState

GPU = "example.com/gpu"
CLASS = device_class("gpu.example.com", ext=GPU, selectors=['device.driver == "gpu.example.com"'])
DRIVER = "gpu.example.com"


def gpu_node(name: str, n: int) -> list[Obj]:
    return [node(name, {GPU: 0}), resource_slice(f"{name}-slice", gpus(n), node_name=name)]


def gpu_pod(name: str, n: int = 1, priority: int | None = None, **kw: Any) -> Obj:
    p = pod(name, [container("c", {GPU: n})], **kw)
    if priority is not None:
        p["spec"]["priority"] = priority
    return p


def bind(p: Obj, node_name: str, start: str = "2026-01-01T00:00:00Z", **labels: str) -> Obj:
    p["spec"]["nodeName"] = node_name
    p.setdefault("status", {})["startTime"] = start
    if labels:
        p["metadata"]["labels"] = dict(labels)
    return p


def results(node_name: str, devices: list[str], request: str = "container-0-request-0") -> Obj:
    return {
        "devices": {
            "results": [
                {"request": request, "driver": DRIVER, "pool": node_name, "device": d} for d in devices
            ]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
            ]
        },
    }


def holding(p: Obj, devices: list[str]) -> Obj:
    """The special claim of bound pod ``p`` with ``devices`` of its node allocated."""
    node_name = p["spec"]["nodeName"]
    c = as_obj(special_claim(p, [], claim_name=f"{p['metadata']['name']}-gpu"))
    c["metadata"]["uid"] = f"uid-{p['metadata']['name']}-gpu"
    c["status"] = {
        "allocation": results(node_name, devices),
        "reservedFor": [{"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}],
    }
    return c


def user_claim(claim_name: str, node_name: str, devices: list[str], *users: Obj) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": claim_name, "namespace": "default", "uid": f"uid-{claim_name}"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": DRIVER}}]}},
        "status": {
            "allocation": results(node_name, devices, "r"),
            "reservedFor": [
                {"resource": "pods", "name": u["metadata"]["name"], "uid": u["metadata"]["uid"]}
                for u in users
            ],
        },
    }


def pdb(name: str, allowed: int, **match: str) -> Obj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": dict(match)}},
        "status": {"disruptionsAllowed": allowed},
    }


def state_of(*objects: Obj) -> ClusterState:
    st = ClusterState()
    for o in (CLASS, *objects):
        assert st.apply(o["kind"], o), o["kind"]
    return st
