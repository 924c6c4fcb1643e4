"""DynamicResources' PreFilter on the pod's own claims."""

from __future__ import annotations

from tests.core.harness import claim, exactly, scheduler
from tests.core.podfactory import node, pod
from webhook.core.api.objects import Obj
from webhook.core.scheduling.framework import SCHEDULED, UNSCHEDULABLE

PINNED: Obj = {
    "devices": {"results": []},
    "nodeSelector": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}]
    },
}


def shared(users: int, *, with_pod: bool = False) -> Obj:
    reserved = [{"resource": "pods", "name": f"u{i}", "uid": f"u{i}"} for i in range(users)]
    if with_pod:
        reserved[-1] = {"resource": "pods", "name": "p", "uid": "uid-p"}
    return claim("shared", [exactly("r", "gpu.example.com")], allocation=PINNED, reservedFor=reserved)


def using_it() -> Obj:
    return pod("p", resourceClaims=[{"name": "x", "resourceClaimName": "shared"}])


def test_a_claim_reserved_for_256_other_consumers_is_in_use() -> None:
    """``ResourceClaimReservedForMaxSize`` (256): upstream's apiserver refuses a 257th entry, so the
    pod could only fail in PreBind; draxr refuses it in PreFilter, with the reason upstream's
    PreFilter gives a claim that cannot be reserved (``resourceclaim in use``)."""
    d = scheduler(node("a"), shared(256)).schedule(using_it())
    assert d.status == UNSCHEDULABLE
    assert d.message == "0/1 nodes are available: resourceclaim in use."


def test_a_claim_with_room_or_already_reserved_for_the_pod_is_usable() -> None:
    assert scheduler(node("a"), shared(255)).schedule(using_it()).status == SCHEDULED
    assert scheduler(node("a"), shared(256, with_pod=True)).schedule(using_it()).status == SCHEDULED
