"""Decisions over multi-allocatable devices (consumable capacity): a pod's containers sharing one
device, Filter's counts in share slots, Reserve holding shares until the written claim shows them,
user claims with capacity requests, and where share IDs come from."""

from __future__ import annotations

import json
import uuid

from tests.core.harness import claim, exactly, state_of
from tests.core.podfactory import container, device, device_class, node, pod, resource_slice
from webhook.core.allocation.claims import as_obj, reserved_for, special_claim_after_prebind
from webhook.core.allocation.results import share_id_sequence
from webhook.core.api.objects import Obj
from webhook.core.api.quantity import Quantity
from webhook.core.cluster.state import ClusterState
from webhook.core.scheduling.framework import SCHEDULED, UNSCHEDULABLE
from webhook.core.scheduling.scheduler import Scheduler

GPU = "example.com/gpu"
DRIVER = "gpu.example.com"
CLASS = device_class(DRIVER, ext=GPU, selectors=[f'device.driver == "{DRIVER}"'])
SHARED = (DRIVER, "n", "shared")


def shared_gpu(name: str = "shared", memory: str = "40Gi", default: str = "10Gi") -> Obj:
    policy = {"default": default, "validRange": {"min": "1Gi", "step": "1Gi"}}
    return device(
        name, capacity={"memory": {"value": memory, "requestPolicy": policy}}, allowMultipleAllocations=True
    )


def cluster(*devices: Obj, nodes: tuple[str, ...] = ("n",)) -> ClusterState:
    slices = [resource_slice(f"{n}-gpus", list(devices), node_name=n, pool=n) for n in nodes]
    return state_of(*(node(n) for n in nodes), CLASS, *slices)


def containers_pod(name: str, n: int) -> Obj:
    return pod(name, [container(f"c{i}", {GPU: 1}) for i in range(n)])


def test_containers_share_one_device_and_reserve_holds_their_shares() -> None:
    st = cluster(shared_gpu())
    s = Scheduler(st, share_ids=share_id_sequence())
    first = s.schedule(containers_pod("p", 2))
    assert first.status == SCHEDULED, first.message
    assert first.special is not None
    api = first.special.to_api()["devices"]["results"]
    assert [(r["device"], r["shareID"], r["consumedCapacity"]) for r in api] == [
        ("shared", "00000000-0000-0000-0000-000000000001", {"memory": "10Gi"}),
        ("shared", "00000000-0000-0000-0000-000000000002", {"memory": "10Gi"}),
    ]
    assert first.dedicated_keys() == []
    assert [sh.device for sh in first.shares()] == [SHARED, SHARED]
    assert first.device_keys() == [SHARED, SHARED]
    assert st.capacity.free(DRIVER) == {"n": 4}
    token = s.reserve(first)
    assert st.capacity.free(DRIVER) == {"n": 2}
    assert not st.allocated.is_allocated(SHARED)
    # 20Gi left: three more 10Gi shares do not fit, and Filter says so from the counts.
    crowded = s.schedule(containers_pod("q", 3))
    assert crowded.status == UNSCHEDULABLE
    assert crowded.message == "0/1 nodes are available: 1 cannot allocate all claims."
    assert s.schedule(containers_pod("q", 2)).status == SCHEDULED
    s.unreserve(first, token)
    assert st.capacity.free(DRIVER) == {"n": 4}


def test_the_written_claim_holds_what_the_reservation_held() -> None:
    """The worker writes ``ClaimAllocation.to_api()``; once the cache shows it, the reservation goes
    and the counts stay where Reserve put them."""
    st = cluster(shared_gpu())
    s = Scheduler(st, share_ids=share_id_sequence())
    d = s.schedule(containers_pod("p", 3))
    assert d.special is not None
    token = s.reserve(d)
    reserved = st.capacity.free(DRIVER).copy()
    written = special_claim_after_prebind(d.pod, d.requests, d.special, "p-gpu-abcde")
    assert written["status"] == {"allocation": d.special.to_api(), "reservedFor": [reserved_for(d.pod)]}
    st.apply("ResourceClaim", as_obj(written))
    # Held by both the reservation and the written claim until Unreserve: each share counts once
    # (by its shareID), or the next pod would be refused meanwhile (a flaky worker test found it).
    assert st.capacity.free(DRIVER) == reserved
    assert st.allocated.consumed(SHARED) == {"memory": Quantity.parse("30Gi").value}
    st.unreserve(token)
    assert st.capacity.free(DRIVER) == reserved == {"n": 1}
    assert st.allocated.consumed(SHARED) == {"memory": Quantity.parse("30Gi").value}


def test_filter_counts_shares_where_a_plain_count_would_refuse() -> None:
    """Two containers, one device: counted as one device the node would be refused, though the
    allocator (upstream's too) puts both on it."""
    st = cluster(shared_gpu(), nodes=("a", "b"))
    st.apply("ResourceClaim", _written_share("held", ("gpu.example.com", "b", "shared"), "35Gi"))
    d = Scheduler(st, share_ids=share_id_sequence()).schedule(containers_pod("p", 2))
    assert d.status == SCHEDULED
    assert d.node == "a"  # b has 5Gi left: no 10Gi share fits there
    assert st.capacity.free(DRIVER) == {"a": 4, "b": 0}


def test_a_user_claim_with_capacity_requests_gets_its_share() -> None:
    user = claim(
        "mine",
        [exactly("r", DRIVER, capacity={"requests": {"memory": "15Gi"}})],
    )
    st = state_of(node("n"), CLASS, resource_slice("n-gpus", [shared_gpu()], node_name="n", pool="n"), user)
    s = Scheduler(st, share_ids=share_id_sequence(7))
    d = s.schedule(pod("p", resourceClaims=[{"name": "x", "resourceClaimName": "mine"}]))
    assert d.status == SCHEDULED, d.message
    allocation = d.user_claims[0].allocation
    assert allocation is not None
    (result,) = allocation.to_api()["devices"]["results"]
    assert result["shareID"] == "00000000-0000-0000-0000-000000000007"
    assert result["consumedCapacity"] == {"memory": "15Gi"}
    s.reserve(d)
    assert st.allocated.consumed(SHARED) == {"memory": Quantity.parse("15Gi").value}


def test_by_default_share_ids_are_random_uids() -> None:
    """What a written allocation needs: unique everywhere, in the form validation requires."""
    st = cluster(shared_gpu())
    d = Scheduler(st).schedule(containers_pod("p", 2))
    assert d.special is not None
    ids = [r.share_id for r in d.special.results]
    assert len(set(ids)) == 2
    for share_id in ids:
        assert share_id is not None
        assert uuid.UUID(share_id).version == 4
        assert share_id == share_id.lower()


def _written_share(name: str, key: tuple[str, str, str], memory: str) -> Obj:
    result = {
        "request": "r",
        "driver": key[0],
        "pool": key[1],
        "device": key[2],
        "shareID": "cccccccc-cccc-cccc-cccc-cccccccccccc",
        "consumedCapacity": {"memory": memory},
    }
    return claim(name, [exactly("r", DRIVER)], allocation={"devices": {"results": [result]}})


# -- draxr.io/capacity-requests: extended-resource pods asking for shares (issue 23) ----------------

SHARED_CLASS = {
    **CLASS,
    "metadata": {
        **CLASS["metadata"],
        "annotations": {"draxr.io/capacity-requests": '{"requests": {"memory": "10Gi"}}'},
    },
}


def plain_shared_gpu(name: str = "shared", memory: str = "40Gi") -> Obj:
    """No request policy: without capacity requests a share takes the whole 40Gi."""
    return device(name, capacity={"memory": {"value": memory}}, allowMultipleAllocations=True)


def test_four_pods_share_one_device_through_the_class_annotation() -> None:
    """The issue's row: a class with ``draxr.io/capacity-requests`` serves four
    ``example.com/gpu: 1`` pods from one 40Gi device, four 10Gi shares, and refuses a fifth."""
    st = state_of(
        node("n"), SHARED_CLASS, resource_slice("n-gpus", [plain_shared_gpu()], node_name="n", pool="n")
    )
    s = Scheduler(st, share_ids=share_id_sequence())
    assert st.capacity.free(DRIVER) == {"n": 4}
    shares = []
    for i in range(4):
        d = s.schedule(containers_pod(f"p{i}", 1))
        assert d.status == SCHEDULED, d.message
        assert d.special is not None
        assert d.requests[0]["exactly"]["capacity"] == {"requests": {"memory": "10Gi"}}
        (result,) = d.special.to_api()["devices"]["results"]
        assert (result["device"], result["consumedCapacity"]) == ("shared", {"memory": "10Gi"})
        shares.append(result["shareID"])
        s.reserve(d)
    assert len(set(shares)) == 4
    assert st.capacity.free(DRIVER) == {"n": 0}
    assert st.allocated.consumed(SHARED) == {"memory": Quantity.parse("40Gi").value}
    assert s.schedule(containers_pod("p4", 1)).status == UNSCHEDULABLE


def test_without_the_annotation_one_pod_takes_the_whole_device() -> None:
    st = cluster(plain_shared_gpu())
    s = Scheduler(st, share_ids=share_id_sequence())
    d = s.schedule(containers_pod("p", 1))
    assert d.special is not None
    assert d.special.to_api()["devices"]["results"][0]["consumedCapacity"] == {"memory": "40Gi"}
    s.reserve(d)
    assert s.schedule(containers_pod("q", 1)).status == UNSCHEDULABLE


def test_a_count_of_two_takes_two_shares() -> None:
    """KEP-6406: ``example.com/gpu: 2`` means two independent 10Gi shares (one request takes one
    share of a device, so on two devices)."""
    st = state_of(
        node("n"),
        SHARED_CLASS,
        resource_slice("n-gpus", [plain_shared_gpu("a"), plain_shared_gpu("b")], node_name="n", pool="n"),
    )
    s = Scheduler(st, share_ids=share_id_sequence())
    d = s.schedule(pod("p", [container("c", {GPU: 2})]))
    assert d.status == SCHEDULED, d.message
    assert d.special is not None
    results = d.special.to_api()["devices"]["results"]
    assert sorted(r["device"] for r in results) == ["a", "b"]
    assert [r["consumedCapacity"] for r in results] == [{"memory": "10Gi"}, {"memory": "10Gi"}]


def test_changing_the_annotation_recounts_free_shares() -> None:
    st = cluster(plain_shared_gpu())
    assert st.capacity.free(DRIVER) == {"n": 1}
    st.apply("DeviceClass", SHARED_CLASS)
    assert st.capacity.free(DRIVER) == {"n": 4}


def test_a_class_with_tolerations_and_capacity_requests_puts_both_on_the_special_claim() -> None:
    """Both of issue 23's class annotations at once: the special claim's request carries the
    class's tolerations and its capacity requests, so a tainted multi-allocatable device serves
    four pods, a 10Gi share each; without the tolerations, none."""
    taint = {"key": "example.com/maintenance", "value": "planned", "effect": "NoSchedule"}
    toleration = {"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}
    tainted = {**plain_shared_gpu(), "taints": [taint]}
    both = {
        **CLASS,
        "metadata": {
            **CLASS["metadata"],
            "annotations": {
                "draxr.io/capacity-requests": '{"requests": {"memory": "10Gi"}}',
                "draxr.io/extended-resource-tolerations": json.dumps([toleration]),
            },
        },
    }
    untolerated = state_of(
        node("n"), SHARED_CLASS, resource_slice("n-gpus", [tainted], node_name="n", pool="n")
    )
    assert Scheduler(untolerated, share_ids=share_id_sequence()).schedule(containers_pod("p", 1)).status == (
        UNSCHEDULABLE
    )
    st = state_of(node("n"), both, resource_slice("n-gpus", [tainted], node_name="n", pool="n"))
    s = Scheduler(st, share_ids=share_id_sequence())
    assert st.capacity.free(DRIVER) == {"n": 4}
    for i in range(4):
        d = s.schedule(containers_pod(f"p{i}", 1))
        assert d.status == SCHEDULED, d.message
        assert d.requests[0]["exactly"]["tolerations"] == [toleration]
        assert d.requests[0]["exactly"]["capacity"] == {"requests": {"memory": "10Gi"}}
        assert d.special is not None
        (result,) = d.special.to_api()["devices"]["results"]
        assert (result["device"], result["consumedCapacity"]) == ("shared", {"memory": "10Gi"})
        assert result["tolerations"] == [toleration]
        s.reserve(d)
    assert s.schedule(containers_pod("p4", 1)).status == UNSCHEDULABLE
