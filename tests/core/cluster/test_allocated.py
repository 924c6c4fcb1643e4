"""AllocatedState: which devices are taken (claims and in-flight reservations, counted by
reference), the flips derived counts follow, special claims by owner, and what pods take from
their nodes."""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

import pytest

from tests.core.harness import claim, exactly, state_of
from tests.core.podfactory import container, device, device_class, node, pod, resource_slice
from webhook.core.api.constants import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from webhook.core.api.objects import Obj
from webhook.core.api.quantity import Quantity
from webhook.core.cluster.allocated import AllocatedState, Share, allocated_devices, claim_key, holdings
from webhook.core.cluster.nodeinfo import Nodes
from webhook.core.cluster.slices import DeviceKey
from webhook.core.cluster.state import ClusterState

DRIVER = "gpu.example.com"
D0: DeviceKey = (DRIVER, "p", "d0")
D1: DeviceKey = (DRIVER, "p", "d1")
D2: DeviceKey = (DRIVER, "p", "d2")


def result(key: DeviceKey, request: str = "r", **extra: Any) -> Obj:
    return {"request": request, "driver": key[0], "pool": key[1], "device": key[2], **extra}


def allocated_claim(name: str, *results: Obj, namespace: str = "default") -> Obj:
    return claim(
        name,
        [exactly("r", "gpu", len(results))],
        namespace=namespace,
        allocation={"devices": {"results": list(results)}},
    )


def special(name: str, owner: Obj, *, annotation: str = "true", controller: bool = True) -> Obj:
    c = claim(name, [exactly("r", "gpu")])
    c["metadata"]["annotations"] = {EXTENDED_RESOURCE_CLAIM_ANNOTATION: annotation}
    c["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
            "controller": controller,
        }
    ]
    return c


class Flips:
    def __init__(self) -> None:
        self.seen: list[tuple[DeviceKey, bool]] = []

    def __call__(self, key: DeviceKey, taken: bool) -> None:
        self.seen.append((key, taken))


def tracked(*node_names: str) -> tuple[AllocatedState, Nodes, Flips]:
    nodes = Nodes()
    for n in node_names:
        nodes.upsert(node(n))
    flips = Flips()
    return AllocatedState(nodes, on_flip=flips), nodes, flips


def cpu_pod(name: str, cpu: str = "1", node_name: str | None = None, phase: str | None = None) -> Obj:
    p = pod(name, [container("c", {"cpu": cpu})])
    if node_name:
        p["spec"]["nodeName"] = node_name
    if phase:
        p["status"] = {"phase": phase}
    return p


# -- claims -------------------------------------------------------------------------------------


def test_allocated_devices_reads_results_and_skips_admin_access_and_malformed_ones() -> None:
    c = allocated_claim(
        "c",
        result(D0),
        result(D1, adminAccess=True),
        {"request": "r", "driver": DRIVER, "pool": "p"},  # no device name
        result(D2, adminAccess=False),
    )
    assert allocated_devices(c) == [D0, D2]
    assert allocated_devices(claim("unallocated", [exactly("r", "gpu")])) == []


def test_a_claims_devices_are_taken_until_the_claim_goes() -> None:
    st, _, flips = tracked()
    st.upsert_claim(allocated_claim("c", result(D0), result(D1)))
    assert st.is_allocated(D0)
    assert st.is_allocated(D1)
    assert D0 in st.devices
    assert sorted(st.devices) == [D0, D1]
    assert flips.seen == [(D0, True), (D1, True)]
    st.remove_claim("default", "c")
    assert not st.is_allocated(D0)
    assert len(st.devices) == 0
    assert flips.seen[2:] == [(D0, False), (D1, False)]
    assert ("default", "c") not in st.claims


def test_an_updated_claim_releases_the_devices_it_no_longer_holds() -> None:
    st, _, flips = tracked()
    st.upsert_claim(allocated_claim("c", result(D0), result(D1)))
    st.upsert_claim(allocated_claim("c", result(D1), result(D2)))
    assert sorted(st.devices) == [D1, D2]
    assert (D0, False) in flips.seen
    assert (D2, True) in flips.seen
    st.upsert_claim(claim("c", [exactly("r", "gpu")]))  # deallocated
    assert len(st.devices) == 0


def test_admin_access_results_do_not_take_devices() -> None:
    st, _, flips = tracked()
    st.upsert_claim(allocated_claim("admin", result(D0, adminAccess=True)))
    assert not st.is_allocated(D0)
    assert flips.seen == []


def test_claims_are_keyed_by_namespace_and_name() -> None:
    st, _, _ = tracked()
    st.upsert_claim(allocated_claim("c", result(D0), namespace="one"))
    st.upsert_claim(allocated_claim("c", result(D1), namespace="two"))
    assert claim_key(st.claims[("one", "c")]) == ("one", "c")
    st.remove_claim("one", "c")
    assert not st.is_allocated(D0)
    assert st.is_allocated(D1)
    st.remove_claim("three", "c")  # unknown: nothing happens
    assert st.is_allocated(D1)


# -- in-flight reservations ------------------------------------------------------------------------


def test_a_reservation_takes_devices_until_its_token_is_released() -> None:
    st, _, flips = tracked()
    st.reserve_devices("t1", [D0, D1])
    assert st.is_allocated(D0)
    assert st.is_allocated(D1)
    st.unreserve_devices("t1")
    assert len(st.devices) == 0
    assert flips.seen == [(D0, True), (D1, True), (D0, False), (D1, False)]
    st.unreserve_devices("t1")  # twice: nothing more
    st.unreserve_devices("never")
    assert len(flips.seen) == 4


def test_reserving_a_token_again_replaces_its_devices() -> None:
    st, _, flips = tracked()
    st.reserve_devices("t", [D0, D1])
    st.reserve_devices("t", [D1, D2])
    assert sorted(st.devices) == [D1, D2]
    assert (D0, False) in flips.seen
    assert (D2, True) in flips.seen
    st.unreserve_devices("t")
    assert len(st.devices) == 0


def test_a_device_held_twice_flips_only_when_the_last_holder_lets_go() -> None:
    st, _, flips = tracked()
    st.reserve_devices("t", [D0])
    st.upsert_claim(allocated_claim("c", result(D0)))
    assert flips.seen == [(D0, True)]
    st.unreserve_devices("t")
    assert st.is_allocated(D0)  # the claim still holds it
    assert flips.seen == [(D0, True)]
    st.remove_claim("default", "c")
    assert not st.is_allocated(D0)
    assert flips.seen == [(D0, True), (D0, False)]


def test_two_tokens_on_one_device_count_separately() -> None:
    st, _, flips = tracked()
    st.reserve_devices("a", [D0])
    st.reserve_devices("b", [D0])
    st.unreserve_devices("a")
    assert st.is_allocated(D0)
    st.unreserve_devices("b")
    assert not st.is_allocated(D0)
    assert flips.seen == [(D0, True), (D0, False)]


def test_without_a_listener_flips_are_silent() -> None:
    nodes = Nodes()
    st = AllocatedState(nodes)
    st.reserve_devices("t", [D0])
    assert st.is_allocated(D0)
    st.unreserve_devices("t")
    assert not st.is_allocated(D0)


# -- special claims --------------------------------------------------------------------------------


def test_special_claim_for_matches_owner_uid_and_name() -> None:
    st, _, _ = tracked()
    p = pod("p")
    c = special("p-extended-resources-abcde", p)
    st.upsert_claim(c)
    assert st.special_claim_for(p) is c
    assert st.special_claim_for(pod("p", uid="other-uid")) is None  # a newer pod of the same name
    assert st.special_claim_for(pod("q", uid=p["metadata"]["uid"])) is None  # same uid, other name


@pytest.mark.parametrize(
    "variant",
    [
        {"annotation": "false"},  # the annotation's single valid value is "true"
        {"controller": False},  # an owner, but not the controller
    ],
)
def test_only_annotated_claims_controlled_by_the_pod_are_special_claims(variant: dict[str, Any]) -> None:
    st, _, _ = tracked()
    p = pod("p")
    st.upsert_claim(special("c", p, **variant))
    assert st.special_claim_for(p) is None


def test_a_removed_or_no_longer_special_claim_is_not_found() -> None:
    st, _, _ = tracked()
    p = pod("p")
    st.upsert_claim(special("c", p))
    st.remove_claim("default", "c")
    assert st.special_claim_for(p) is None
    st.upsert_claim(special("d", p))
    plain = special("d", p)
    plain["metadata"]["annotations"] = {}
    st.upsert_claim(plain)
    assert st.special_claim_for(p) is None


def test_the_other_special_claim_of_a_pod_is_still_found_after_one_goes() -> None:
    st, _, _ = tracked()
    p = pod("p")
    older, newer = special("p-extended-resources-aaaaa", p), special("p-extended-resources-bbbbb", p)
    st.upsert_claim(older)
    st.upsert_claim(newer)
    st.remove_claim("default", "p-extended-resources-bbbbb")
    assert st.special_claim_for(p) is older


# -- pods ----------------------------------------------------------------------------------------------


def test_bound_non_terminal_pods_count_on_their_node() -> None:
    st, nodes, _ = tracked("n")
    p = cpu_pod("p", "2", node_name="n")
    st.upsert_pod(p)
    assert nodes["n"].requested == {"cpu": 2000}
    assert st.pods == {"uid-p": p}
    st.remove_pod("uid-p")
    assert nodes["n"].requested == {"cpu": 0}
    assert st.pods == {}


def test_pending_pods_do_not_count() -> None:
    st, nodes, _ = tracked("n")
    st.upsert_pod(cpu_pod("p"))
    assert nodes["n"].requested == {}
    assert st.pods == {}


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_a_pod_that_terminates_stops_counting(phase: str) -> None:
    st, nodes, _ = tracked("n")
    st.upsert_pod(cpu_pod("p", node_name="n", phase="Running"))
    assert nodes["n"].requested == {"cpu": 1000}
    st.upsert_pod(cpu_pod("p", node_name="n", phase=phase))
    assert nodes["n"].requested == {"cpu": 0}
    assert st.pods == {}


def test_an_updated_pod_is_counted_once_with_its_new_requests() -> None:
    st, nodes, _ = tracked("n")
    st.upsert_pod(cpu_pod("p", "1", node_name="n"))
    st.upsert_pod(cpu_pod("p", "3", node_name="n"))
    assert nodes["n"].requested == {"cpu": 3000}


def test_an_assumed_pod_counts_until_it_is_forgotten() -> None:
    st, nodes, _ = tracked("n")
    p = cpu_pod("p")
    st.assume_pod(p, "n")
    assert nodes["n"].requested == {"cpu": 1000}
    st.forget_pod(p)
    assert nodes["n"].requested == {"cpu": 0}


def test_a_pod_counts_on_its_node_when_assumed_and_when_bound() -> None:
    st, _, _ = tracked("n")
    p = cpu_pod("p")
    assert st.node_of("uid-p") is None
    st.assume_pod(p, "n")
    assert st.node_of("uid-p") == "n"
    st.upsert_pod(cpu_pod("p", node_name="n"))
    assert st.node_of("uid-p") == "n"
    st.remove_pod("uid-p")
    assert st.node_of("uid-p") is None


def test_an_assumed_pod_seen_bound_counts_once_and_forget_keeps_it() -> None:
    st, nodes, _ = tracked("n")
    p = cpu_pod("p")
    st.assume_pod(p, "n")
    st.upsert_pod(cpu_pod("p", node_name="n"))
    assert nodes["n"].requested == {"cpu": 1000}
    assert list(nodes["n"].pods) == ["uid-p"]
    st.forget_pod(p)  # Unreserve after the binding went through: the bound pod stays
    assert nodes["n"].requested == {"cpu": 1000}


def test_assuming_a_bound_pod_or_on_an_unknown_node_does_nothing() -> None:
    st, nodes, _ = tracked("n")
    bound = cpu_pod("b", node_name="n")
    st.upsert_pod(bound)
    st.assume_pod(bound, "n")
    assert nodes["n"].requested == {"cpu": 1000}
    st.assume_pod(cpu_pod("p"), "elsewhere")
    nodes.upsert(node("elsewhere"))
    st.node_added("elsewhere")
    assert nodes["elsewhere"].requested == {}  # only bound pods wait for their node


def test_an_update_of_the_pending_pod_keeps_its_assumption() -> None:
    st, nodes, _ = tracked("n")
    p = cpu_pod("p")
    st.assume_pod(p, "n")
    patched = copy.deepcopy(p)
    patched["status"] = {"extendedResourceClaimStatus": {"resourceClaimName": "c", "requestMappings": []}}
    st.upsert_pod(patched)
    assert nodes["n"].requested == {"cpu": 1000}


def test_a_pod_bound_to_a_node_that_appears_later_counts_once_it_does() -> None:
    nodes = Nodes()
    st = AllocatedState(nodes)
    st.upsert_pod(cpu_pod("p", "2", node_name="late"))
    st.node_added("late")  # not there yet: nothing to do
    nodes.upsert(node("late"))
    st.node_added("late")
    assert nodes["late"].requested == {"cpu": 2000}
    st.remove_pod("uid-p")
    assert nodes["late"].requested == {"cpu": 0}


def test_through_cluster_state_pod_before_node_counts_and_survives_node_replacement() -> None:
    state = ClusterState()
    state.apply("Pod", cpu_pod("p", "2", node_name="n"))
    state.apply("Node", node("n"))
    assert state.nodes["n"].requested == {"cpu": 2000}
    state.apply("Node", node("n"), deleted=True)
    state.apply("Node", node("n"))
    assert state.nodes["n"].requested == {"cpu": 2000}


# -- counters --------------------------------------------------------------------------------------


def _counter_state() -> ClusterState:
    shared = [{"name": "mem", "counters": {"memory": {"value": "80Gi"}}}]
    devs = [
        device(
            f"part-{i}", consumesCounters=[{"counterSet": "mem", "counters": {"memory": {"value": "20Gi"}}}]
        )
        for i in range(3)
    ]
    devs.append(device("whole"))
    return state_of(
        node("n"),
        device_class("gpu"),
        resource_slice("s", devs, node_name="n", pool="p", sharedCounters=shared),
    )


def test_allocated_counters_sum_what_taken_devices_consume() -> None:
    state = _counter_state()
    nd = state.node_devices("n")
    assert nd is not None
    (pool,) = nd.pools
    assert state.allocated.allocated_counters(pool) == {}
    state.allocated.reserve_devices("t", [(DRIVER, "p", "part-0"), (DRIVER, "p", "whole")])
    state.allocated.upsert_claim(allocated_claim("c", result((DRIVER, "p", "part-2"))))
    assert state.allocated.allocated_counters(pool) == {"mem": {"memory": Quantity.parse("40Gi")}}
    state.allocated.unreserve_devices("t")
    assert state.allocated.allocated_counters(pool) == {"mem": {"memory": Quantity.parse("20Gi")}}


# -- what pod placement reads: the placed pods --------------------------------------------------


def test_placed_pods_follow_bound_assumed_and_forgotten_pods() -> None:
    st = state_of(node("n1"))
    bound = pod("bound", nodeName="n1")
    bound["metadata"]["labels"] = {"app": "x"}
    elsewhere = pod("elsewhere", nodeName="unseen")  # a node not seen yet: indexed, callers skip it
    st.apply("Pod", bound)
    st.apply("Pod", elsewhere)
    placed = st.allocated.placed
    assert {u: p.node for u, p in placed.by_uid.items()} == {"uid-bound": "n1", "uid-elsewhere": "unseen"}
    assert placed.by_uid["uid-bound"].labels is bound["metadata"]["labels"]
    assumed = pod("assumed")
    st.reserve("t", [], assumed, "n1")
    assert placed.by_uid["uid-assumed"].node == "n1"
    st.unreserve("t", assumed)
    assert "uid-assumed" not in placed.by_uid
    done = copy.deepcopy(bound)
    done["status"] = {"phase": "Succeeded"}
    st.apply("Pod", done)
    st.apply("Pod", elsewhere, deleted=True)
    assert len(placed) == 0


# -- shares (consumable capacity) -----------------------------------------------------------------

SHARE_A = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"
SHARE_B = "bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb"


def test_holdings_split_taken_devices_from_shares() -> None:
    """``foreachAllocatedDevice``: admin results hold nothing, a ``shareID`` makes a share (with
    what it consumes), anything else takes the device; ``allocated_devices`` still lists both."""
    c = allocated_claim(
        "c",
        result(D0),
        result(D1, shareID=SHARE_A, consumedCapacity={"memory": "10Gi", "bad": "lots"}),
        result(D2, shareID=SHARE_B, adminAccess=True, consumedCapacity={"memory": "1Gi"}),
        result(D2, shareID=SHARE_B),
    )
    taken, shares = holdings(c)
    assert taken == [D0]
    assert shares == [Share(D1, SHARE_A, {"memory": Quantity.parse("10Gi")}), Share(D2, SHARE_B, {})]
    assert allocated_devices(c) == [D0, D1, D2]


class Changes:
    def __init__(self) -> None:
        self.seen: list[DeviceKey] = []

    def __call__(self, key: DeviceKey) -> None:
        self.seen.append(key)


def test_shares_sum_what_they_consume_and_never_take_the_device() -> None:
    changes = Changes()
    st = AllocatedState(Nodes(), on_shares=changes)
    st.upsert_claim(allocated_claim("a", result(D0, shareID=SHARE_A, consumedCapacity={"memory": "10Gi"})))
    st.upsert_claim(
        allocated_claim("b", result(D0, shareID=SHARE_B, consumedCapacity={"memory": "5Gi", "n": "1"}))
    )
    assert not st.is_allocated(D0)
    assert D0 not in st.devices
    assert st.shares[D0].shares == 2
    assert st.consumed(D0) == {"memory": Fraction(15 * 2**30), "n": Fraction(1)}
    st.remove_claim("default", "a")
    assert st.consumed(D0) == {"memory": Fraction(5 * 2**30), "n": Fraction(1)}
    st.upsert_claim(allocated_claim("b", result(D1)))  # b now takes D1 instead
    assert st.consumed(D0) is None
    assert D0 not in st.shares
    assert st.is_allocated(D1)
    assert changes.seen == [D0, D0, D0, D0]


def test_reserved_shares_are_held_until_the_token_goes() -> None:
    changes = Changes()
    st = AllocatedState(Nodes(), on_shares=changes)
    held = [
        Share(D0, SHARE_A, {"memory": Quantity.parse("1Gi")}),
        Share(D0, SHARE_B, {"memory": Quantity.parse("2Gi")}),
    ]
    st.reserve_devices("t", [D1], held)
    assert st.consumed(D0) == {"memory": Fraction(3 * 2**30)}
    assert st.is_allocated(D1)
    st.reserve_devices("t", [], held[:1])  # the token again: replaced
    assert st.consumed(D0) == {"memory": Fraction(2**30)}
    assert not st.is_allocated(D1)
    st.unreserve_devices("t")
    assert st.consumed(D0) is None
    assert len(changes.seen) == 6  # two shares held, let go, one held, let go


def test_allocated_counters_count_a_shared_device_once() -> None:
    """``IsDeviceAllocated``: a device with shares consumes its counters, once however many."""
    state = _counter_state()
    nd = state.node_devices("n")
    assert nd is not None
    (pool,) = nd.pools
    key = (DRIVER, "p", "part-1")
    state.allocated.upsert_claim(allocated_claim("a", result(key, shareID=SHARE_A)))
    state.allocated.upsert_claim(allocated_claim("b", result(key, shareID=SHARE_B)))
    assert state.allocated.allocated_counters(pool) == {"mem": {"memory": Quantity.parse("20Gi")}}
    state.allocated.remove_claim("default", "a")
    state.allocated.remove_claim("default", "b")
    assert state.allocated.allocated_counters(pool) == {}


def test_a_share_held_by_a_reservation_and_its_written_claim_counts_once() -> None:
    """Between the write of a claim and Unreserve both hold the same share (same shareID): it
    consumes once. Another share of the device (another shareID) adds to it."""
    st = AllocatedState(Nodes())
    dev: DeviceKey = ("d", "p", "gpu")
    ten = {"memory": Quantity.parse("10Gi")}
    st.reserve_devices("t", [], [Share(dev, "id-1", ten)])
    result = {"request": "r", "driver": "d", "pool": "p", "device": "gpu", "shareID": "id-1"}
    written = claim(
        "c",
        [exactly("r", "gpu")],
        allocation={"devices": {"results": [{**result, "consumedCapacity": {"memory": "10Gi"}}]}},
    )
    st.upsert_claim(written)
    assert st.consumed(dev) == {"memory": Quantity.parse("10Gi").value}
    st.reserve_devices("u", [], [Share(dev, "id-2", ten)])
    assert st.consumed(dev) == {"memory": Quantity.parse("20Gi").value}
    st.unreserve_devices("t")
    st.unreserve_devices("u")
    assert st.consumed(dev) == {"memory": Quantity.parse("10Gi").value}
    st.remove_claim("default", "c")
    assert st.consumed(dev) is None
