"""Build a ClusterState from objects and run the allocator or the scheduler on it."""

from __future__ import annotations

from typing import Any

from webhook.core.allocation.allocator import Allocator
from webhook.core.allocation.results import ClaimAllocation
from webhook.core.api.objects import Obj
from webhook.core.cluster.state import ClusterState
from webhook.core.scheduling.scheduler import Scheduler


def state_of(*objects: Obj) -> ClusterState:
    """The cluster of these objects and no others (storage kinds included: a claim not given is
    missing)."""
    st = ClusterState()
    st.volumes.watched = True
    for o in objects:
        if not st.apply(o["kind"], o):
            raise ValueError(o["kind"])
    return st


def allocate(st: ClusterState, node: str, claims: list[Obj]) -> list[ClaimAllocation]:
    nd = st.node_devices(node)
    assert nd is not None
    return Allocator(
        nd, st.classes.get, st.cel, st.allocated.devices, binding_conditions=st.devices.binding_conditions
    ).allocate(claims)


def claim(
    name: str,
    requests: list[Obj],
    constraints: list[Obj] | None = None,
    namespace: str = "default",
    config: list[Obj] | None = None,
    **status: Any,
) -> Obj:
    devices: Obj = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    c: Obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {"devices": devices},
    }
    if status:
        c["status"] = dict(status)
    return c


def exactly(name: str, cls: str, count: int = 1, **extra: Any) -> Obj:
    body: Obj = {"deviceClassName": cls, "allocationMode": "ExactCount", "count": count}
    body.update(extra)
    return {"name": name, "exactly": body}


def all_of(name: str, cls: str, **extra: Any) -> Obj:
    body: Obj = {"deviceClassName": cls, "allocationMode": "All"}
    body.update(extra)
    return {"name": name, "exactly": body}


def picked(alloc: ClaimAllocation) -> list[str]:
    return [f"{r.device.pool}/{r.device.name}" for r in alloc.results]


def scheduler(*objects: Obj, policy: str = "binpack") -> Scheduler:
    return Scheduler(state_of(*objects), policy)
