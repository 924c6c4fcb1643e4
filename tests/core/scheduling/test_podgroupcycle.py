"""The pod group cycle (upstream's ``schedule_one_podgroup.go``) on the pure engine."""

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.harness import state_of
from tests.core.podfactory import container, device, device_class, gpus, node, pod, resource_slice
from webhook.core.api.objects import Obj
from webhook.core.scheduling.framework import ERROR, SCHEDULED, UNSCHEDULABLE
from webhook.core.scheduling.plugins.gangscheduling import Code, Progress
from webhook.core.scheduling.podgroupcycle import (
    GroupDecision,
    PodGroupCycle,
    PodGroupInfo,
    validate_pod_group,
)
from webhook.core.scheduling.scheduler import Scheduler

GPU = "example.com/gpu"
CLASS = device_class("gpu.example.com", ext=GPU, selectors=['device.driver == "gpu.example.com"'])


def member(name: str, n: int = 2, **kw: Any) -> Obj:
    return pod(name, [container("c", {GPU: n})], schedulingGroup={"podGroupName": "train"}, **kw)


def gang(min_count: int | None, key: str | None = None, **spec: Any) -> Obj:
    policy = {"gang": {"minCount": min_count}} if min_count is not None else {"basic": {}}
    s: Obj = {"schedulingPolicy": policy, **spec}
    if key:
        s["schedulingConstraints"] = {"topology": [{"key": key}]}
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": s,
    }


def cluster(*racks: tuple[str, int, int], cpu: str = "16") -> Scheduler:
    """``(rack, nodes, GPUs per node)`` per rack; nodes ``<rack>-<i>``."""
    objs: list[Obj] = [CLASS]
    for rack, count, per in racks:
        for i in range(count):
            n = f"{rack}-{i}"
            objs.append(node(n, {"cpu": cpu}, labels={"rack": rack}))
            objs.append(resource_slice(f"s-{n}", gpus(per), node_name=n))
    return Scheduler(state_of(*objs), "binpack")


def devices_of(d: GroupDecision) -> list[Any]:
    return [k for x, _ in d.placed() for k in (x.special.device_keys if x.special else [])]


def test_a_gang_that_fits_is_placed_whole_and_its_members_stay_reserved() -> None:
    s = cluster(("a", 2, 4))
    d = PodGroupCycle(s).schedule(PodGroupInfo(gang(4), [member(f"m{i}") for i in range(4)]))
    assert d.status == SCHEDULED
    assert [x.node for x, _ in d.placed()] == ["a-0", "a-0", "a-1", "a-1"]
    assert len(set(devices_of(d))) == 8
    assert d.condition() == {
        "type": "PodGroupInitiallyScheduled",
        "status": "True",
        "reason": "Scheduled",
        "message": "",
    }
    assert s.schedule(pod("late", [container("c", {GPU: 1})])).status == UNSCHEDULABLE  # all 8 reserved


def test_a_gang_short_of_min_count_places_nobody_and_leaves_nothing_reserved() -> None:
    s = cluster(("a", 2, 4))
    members = [member(f"m{i}") for i in range(5)]
    d = PodGroupCycle(s, topology_aware=False).schedule(PodGroupInfo(gang(5), members))
    assert d.status == UNSCHEDULABLE
    assert d.placed() == []
    assert d.message == "minCount (5) cannot be satisfied: 4 scheduled, 0 remaining"
    # A member placed, then undone with its group: upstream's error ahead of the group's reason.
    assert [x.message for x in d.decisions[:4]] == [f"pod group is unschedulable, {d.message}"] * 4
    assert d.decisions[4].message.startswith("0/2 nodes are available")  # its own reason
    assert d.condition()["reason"] == "Unschedulable"
    free = s.schedule(pod("after", [container("c", {GPU: 4})]))
    assert free.status == SCHEDULED  # every device is free again


def test_the_gang_stops_early_once_min_count_cannot_be_reached() -> None:
    s = cluster(("a", 1, 2))
    members = [member(f"m{i}") for i in range(4)]
    d = PodGroupCycle(s, topology_aware=False).schedule(PodGroupInfo(gang(4), members))
    assert d.message == "minCount (4) cannot be satisfied: 1 scheduled, 2 remaining"
    assert [x.message for x in d.decisions[2:]] == [d.message] * 2  # never evaluated


def test_with_topology_aware_scheduling_every_node_is_one_placement() -> None:
    s = cluster(("a", 1, 2))
    d = PodGroupCycle(s).schedule(PodGroupInfo(gang(4), [member(f"m{i}") for i in range(4)]))
    assert d.message == (
        "pod group is unschedulable, 0/1 placements are available, "
        "first placement status: pod group is unschedulable"
    )
    assert d.decisions[0].message == f"pod group is unschedulable, {d.message}"  # placed, then undone
    assert d.decisions[1].message.startswith("0/1 nodes are available")  # its own reason
    assert [x.message for x in d.decisions[2:]] == [d.message] * 2


def test_a_basic_group_places_whom_it_can() -> None:
    s = cluster(("a", 1, 4))
    d = PodGroupCycle(s).schedule(PodGroupInfo(gang(None), [member(f"m{i}") for i in range(3)]))
    assert d.status == SCHEDULED
    assert [x.status for x in d.decisions] == [SCHEDULED, SCHEDULED, UNSCHEDULABLE]
    assert len(d.placed()) == 2


def test_every_member_lands_in_one_domain_of_the_topology_key() -> None:
    s = cluster(("a", 2, 2), ("b", 2, 4))  # a holds 4 GPUs, b 8
    d = PodGroupCycle(s).schedule(PodGroupInfo(gang(3, "rack"), [member(f"m{i}") for i in range(3)]))
    assert d.status == SCHEDULED
    assert d.placement == "b"
    assert {x.node for x, _ in d.placed()} <= {"b-0", "b-1"}


def test_of_two_feasible_domains_the_fuller_one_is_chosen() -> None:
    s = cluster(("a", 1, 8), ("b", 1, 8))
    s.reserve(s.schedule(pod("busy", [container("c", {"cpu": "8"})], nodeSelector={"rack": "b"})))
    d = PodGroupCycle(s).schedule(PodGroupInfo(gang(2, "rack"), [member("m0"), member("m1")]))
    assert d.placement == "b"  # MostAllocated over the placement: b is half used


def test_no_domain_fits_the_whole_gang() -> None:
    s = cluster(("a", 1, 4), ("b", 1, 4))
    d = PodGroupCycle(s).schedule(PodGroupInfo(gang(3, "rack"), [member(f"m{i}") for i in range(3)]))
    assert d.status == UNSCHEDULABLE
    assert d.message == (
        "pod group is unschedulable, 0/2 placements are available, "
        "first placement status: pod group is unschedulable"
    )
    assert d.placed() == []
    assert s.schedule(pod("after", [container("c", {GPU: 4})])).status == SCHEDULED


def test_a_gang_short_before_any_member_is_tried_waits_behind_upstreams_error() -> None:
    s = cluster(("a", 1, 8))
    d = PodGroupCycle(s, topology_aware=False).schedule(PodGroupInfo(gang(4), [member("m0"), member("m1")]))
    assert (
        d.message == "pod group is unschedulable, minCount (4) cannot be satisfied: 0 scheduled, 2 remaining"
    )
    assert [x.message for x in d.decisions] == [d.message] * 2


def test_a_gang_whose_min_count_is_met_before_with_nobody_placed_is_unschedulable() -> None:
    s = cluster(("a", 1, 2))
    d = PodGroupCycle(s).schedule(PodGroupInfo(gang(1), [member("m1", 4)], scheduled=[(member("m0"), "a-0")]))
    assert (d.status, d.message) == (UNSCHEDULABLE, "pod group is unschedulable")
    assert d.decisions[0].message.startswith("0/1 nodes are available")


def test_a_key_no_node_carries_leaves_no_placement() -> None:
    s = cluster(("a", 1, 4))
    d = PodGroupCycle(s).schedule(PodGroupInfo(gang(1, "zone"), [member("m0")]))
    assert (d.status, d.message) == (UNSCHEDULABLE, "no feasible placements found")


def test_later_members_join_the_domain_of_those_already_scheduled() -> None:
    s = cluster(("a", 1, 8), ("b", 1, 8))
    first = member("m0")
    d = PodGroupCycle(s).schedule(PodGroupInfo(gang(2, "rack"), [member("m1")], scheduled=[(first, "b-0")]))
    assert d.status == SCHEDULED
    assert d.placement == "b"


def test_members_that_disagree_are_a_scheduler_error() -> None:
    s = cluster(("a", 1, 8))
    members = [member("m0"), member("m1", schedulerName="other")]
    members[0]["spec"]["schedulerName"] = "draxr"
    d = PodGroupCycle(s).schedule(PodGroupInfo(gang(2), members))
    assert d.status == ERROR
    assert d.message == (
        "all pods in a single pod group should have the same .spec.schedulerName set, "
        'got: "other" and "draxr"'
    )
    assert d.condition()["reason"] == "SchedulerError"
    prio = PodGroupCycle(s).schedule(PodGroupInfo(gang(1), [member("m0", priority=5)]))
    assert prio.message == (
        "all pods in a single pod group should have the same priority as the pod group's priority, "
        "got 5 and 0"
    )
    policy = PodGroupCycle(s).schedule(
        PodGroupInfo(gang(2), [member("m0"), member("m1", preemptionPolicy="Never")])
    )
    assert policy.message == (
        "all pods in a single pod group should have the same preemption policy, "
        "got Never and PreemptLowerPriority"
    )


def _snapshot(s: Scheduler) -> tuple[dict[str, int], dict[str, tuple[dict[str, int], int]]]:
    nodes = {
        n: ({r: v for r, v in i.requested.items() if v}, len(i.pods))
        for n, i in s.state.nodes.by_name.items()
    }
    return s.state.capacity.free("gpu.example.com"), nodes


@settings(max_examples=60, deadline=None)
@given(
    racks=st.lists(st.tuples(st.integers(1, 3), st.sampled_from([1, 2, 4, 8])), min_size=1, max_size=3),
    sizes=st.lists(st.integers(1, 8), min_size=1, max_size=6),
    min_count=st.one_of(st.none(), st.integers(1, 6)),
    keyed=st.booleans(),
    topology_aware=st.booleans(),
)
def test_no_group_is_ever_placed_below_its_min_count(
    racks: list[tuple[int, int]], sizes: list[int], min_count: int | None, keyed: bool, topology_aware: bool
) -> None:
    s = cluster(*((f"r{i}", count, per) for i, (count, per) in enumerate(racks)))
    before = _snapshot(s)
    members = [member(f"m{i}", n) for i, n in enumerate(sizes)]
    group = gang(min_count, "rack" if keyed else None)
    d = PodGroupCycle(s, topology_aware=topology_aware).schedule(PodGroupInfo(group, members))
    assert len(d.decisions) == len(members)
    placed = d.placed()
    if d.status != SCHEDULED:
        assert placed == []
        assert _snapshot(s) == before  # nothing left reserved
        return
    assert len(placed) >= (min_count or 1)
    keys = [k for x, _ in placed for k in (x.special.device_keys if x.special else [])]
    assert (
        len(keys)
        == len(set(keys))
        == sum(x.pod["spec"]["containers"][0]["resources"]["requests"][GPU] for x, _ in placed)
    )
    if keyed and topology_aware:
        assert len({s.state.nodes.by_name[x.node].labels["rack"] for x, _ in placed if x.node}) == 1
    for x, token in placed:
        s.unreserve(x, token)
    assert _snapshot(s) == before


def _vpod(
    name: str,
    *,
    scheduler: str = "",
    priority: int | None = None,
    policy: str | None = None,
    node: str | None = None,
) -> Obj:
    spec: Obj = {"containers": [{"name": "c"}], "schedulingGroup": {"podGroupName": "pg"}}
    if scheduler:
        spec["schedulerName"] = scheduler
    if priority is not None:
        spec["priority"] = priority
    if policy is not None:
        spec["preemptionPolicy"] = policy
    if node is not None:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": spec}


def _vgroup(priority: int | None = None, policy: str | None = None) -> Obj:
    spec: Obj = {"schedulingPolicy": {"basic": {}}}
    if priority is not None:
        spec["priority"] = priority
    if policy is not None:
        spec["preemptionPolicy"] = policy
    return {"metadata": {"name": "pg", "namespace": "default"}, "spec": spec}


NEVER, LOWER = "Never", "PreemptLowerPriority"
#: upstream's ``TestValidatePodGroup`` (its PodGroup cases; the profile cases are kube-scheduler's own:
#: draxr's worker has one profile, its scheduler name): the PodGroup, its queued pods, its scheduled
#: pods, the PodGroupPreemptionPolicy gate, and whether validation fails.
VALIDATE_POD_GROUP = {
    "success for same scheduler name": (
        _vgroup(),
        [_vpod("p1", scheduler="s1"), _vpod("p2", scheduler="s1")],
        [],
        False,
        False,
    ),
    "failure for different scheduler names": (
        _vgroup(),
        [_vpod("p1", scheduler="s1"), _vpod("p2", scheduler="s2")],
        [],
        False,
        True,
    ),
    "success when priorities match": (
        _vgroup(10),
        [_vpod("p1", priority=10), _vpod("p2", priority=10)],
        [],
        False,
        False,
    ),
    "failure when different priorities across pods": (
        _vgroup(10),
        [_vpod("p1", priority=9), _vpod("p2", priority=10)],
        [],
        False,
        True,
    ),
    "failure when different priorities across pods and pod group": (
        _vgroup(9),
        [_vpod("p1", priority=10), _vpod("p2", priority=10)],
        [],
        False,
        True,
    ),
    "success when new pods match scheduled pods scheduler name and priority": (
        _vgroup(10),
        [_vpod("p1", scheduler="s1", priority=10)],
        [_vpod("p2", scheduler="s1", priority=10, node="node1")],
        False,
        False,
    ),
    "failure when new pod has different scheduler name than scheduled pod": (
        _vgroup(10),
        [_vpod("p1", scheduler="s1", priority=10)],
        [_vpod("p2", scheduler="s2", priority=10, node="node1")],
        False,
        True,
    ),
    "failure when new pod has different priority than scheduled pod": (
        _vgroup(10),
        [_vpod("p1", scheduler="s1", priority=10)],
        [_vpod("p2", scheduler="s1", priority=9, node="node1")],
        False,
        True,
    ),
    "success when preemption policies match": (
        _vgroup(policy=NEVER),
        [_vpod("p1", policy=NEVER), _vpod("p2", policy=NEVER)],
        [],
        True,
        False,
    ),
    "failure when different preemption policies across pods": (
        _vgroup(policy=NEVER),
        [_vpod("p1", policy=LOWER), _vpod("p2", policy=NEVER)],
        [],
        True,
        True,
    ),
    "failure when different preemption policies across pods and pod group": (
        _vgroup(policy=NEVER),
        [_vpod("p1", policy=LOWER), _vpod("p2", policy=LOWER)],
        [],
        True,
        True,
    ),
    "success when preemption policies between pods and podgroup do not match but "
    "PodGroupPreemptionPolicy is disabled": (
        _vgroup(policy=NEVER),
        [_vpod("p1", policy=LOWER), _vpod("p2", policy=LOWER)],
        [],
        False,
        False,
    ),
    "failure when preemption policies do not match across pods and PodGroupPreemptionPolicy is disabled": (
        _vgroup(policy=NEVER),
        [_vpod("p1", policy=LOWER), _vpod("p2", policy=NEVER)],
        [],
        False,
        True,
    ),
}


@pytest.mark.parametrize("name", list(VALIDATE_POD_GROUP))
def test_upstream_validate_pod_group(name: str) -> None:
    group, members, scheduled, gate, fails = VALIDATE_POD_GROUP[name]
    info = PodGroupInfo(group, members, [(p, p["spec"]["nodeName"]) for p in scheduled])
    assert (validate_pod_group(info, pod_group_preemption_policy=gate) is not None) is fails


# -- upstream's TestPodGroupSchedulingAlgorithm ---------------------------------------------------
# Its fake Filter plugin becomes pods that fit (``nil``), fit nowhere (``Unschedulable``) or meet a
# CEL error (``Error``); its fake PlacementFeasible plugin, a scripted sequence of codes (None: no
# such plugin, always feasible). Each case says the group's outcome and how many pods were
# evaluated, in both of upstream's algorithms (with and without TopologyAwareWorkloadScheduling).

FITS, NOWHERE, FAILS = "nil", "Unschedulable", "Error"
ALGORITHM_CASES: list[tuple[str, list[str], list[str] | None, str, int]] = [
    # name, each pod's Filter outcome, PlacementFeasible's codes, the group's code, pods evaluated
    ("All pods feasible", [FITS, FITS, FITS], None, SCHEDULED, 3),
    (
        "All pods feasible, podGroup already meeting quorum before any pod is evaluated",
        [FITS, FITS, FITS],
        ["Success", "Success", "Success", "Success"],
        SCHEDULED,
        3,
    ),
    (
        "All pods feasible, podGroup schedulable with 3 schedulable pods",
        [FITS, FITS, FITS],
        ["Wait", "Wait", "Wait", "Success"],
        SCHEDULED,
        3,
    ),
    (
        "All pods feasible, podGroup waiting",
        [FITS, FITS, FITS],
        ["Wait", "Wait", "Wait", "Wait"],
        UNSCHEDULABLE,
        3,
    ),
    (
        "All pods feasible, podGroup unschedulable",
        [FITS, FITS, FITS],
        ["Wait", "Unschedulable"],
        UNSCHEDULABLE,
        1,
    ),
    (
        "All pods feasible, podGroup unschedulable with 2 pods",
        [FITS, FITS, FITS],
        ["Wait", "Wait", "Unschedulable"],
        UNSCHEDULABLE,
        2,
    ),
    (
        "PodGroup schedulable with 2 schedulable pods",
        [NOWHERE, FITS, FITS],
        ["Wait", "Wait", "Wait", "Success"],
        SCHEDULED,
        3,
    ),
    (
        "All pods unschedulable",
        [NOWHERE, NOWHERE, NOWHERE],
        ["Wait", "Success", "Success", "Success"],
        UNSCHEDULABLE,
        3,
    ),
    ("Any filter returned Error", [FITS, FAILS, FITS], None, ERROR, 2),
    ("Any placementFeasible returned Error", [FITS, FITS, FITS], ["Wait", "Success", "Error"], ERROR, 2),
    (
        "First placementFeasible call returned Unschedulable",
        [FITS, FITS, FITS],
        ["Unschedulable"],
        UNSCHEDULABLE,
        0,
    ),
    ("First placementFeasible call returned Error", [FITS, FITS, FITS], ["Error"], ERROR, 0),
]

ERR = "err.example.com"


def _err_cluster() -> Scheduler:
    """One node, with one device whose class's selector fails at run time (the Error pods')."""
    broken = device_class(ERR, ext="example.com/err", selectors=['device.attributes["x"].missing > 1'])
    return Scheduler(
        state_of(node("node1"), broken, resource_slice("s", [device("d0")], driver=ERR, node_name="node1")),
        "upstream",
    )


def _alg_member(name: str, outcome: str) -> Obj:
    requests = {"example.com/err": 1} if outcome == FAILS else {"cpu": "1"}
    extra: Obj = {"nodeSelector": {"nowhere": "x"}} if outcome == NOWHERE else {}
    return pod(name, [container("c", requests)], schedulingGroup={"podGroupName": "pg"}, **extra)


def _scripted(
    codes: list[str] | None, calls: list[Progress]
) -> Callable[[int, Progress], tuple[Code, str] | None]:
    def feasible(_min_count: int, progress: Progress) -> tuple[Code, str] | None:
        calls.append(progress)
        if codes is None:
            return None
        code = codes[len(calls) - 1]
        return None if code == "Success" else (code, f"scripted {code}")  # type: ignore[return-value]

    return feasible


@pytest.mark.parametrize("topology_aware", [False, True])
@pytest.mark.parametrize(
    ("name", "filters", "codes", "expected", "evaluated"),
    ALGORITHM_CASES,
    ids=[c[0] for c in ALGORITHM_CASES],
)
def test_upstream_pod_group_scheduling_algorithm(
    name: str,
    filters: list[str],
    codes: list[str] | None,
    expected: str,
    evaluated: int,
    topology_aware: bool,
) -> None:
    calls: list[Progress] = []
    group = {"metadata": {"name": "pg", "namespace": "default"}, "spec": {"schedulingPolicy": {"basic": {}}}}
    members = [_alg_member(f"p{i + 1}", f) for i, f in enumerate(filters)]
    cycle = PodGroupCycle(
        _err_cluster(),
        topology_aware=topology_aware,
        search_steps=0,
        placement_feasible=_scripted(codes, calls),
    )
    d = cycle.schedule(PodGroupInfo(group, members, []))
    if topology_aware and name == "All pods unschedulable":
        # upstream's test profile has no PlacementScore plugin; draxr's always has PodGroupPodsCount,
        # whose normalization fails when no placement assigns a pod (which only a scripted
        # PlacementFeasible allows: a real one is feasible with nobody placed only when pods of the
        # group are scheduled already, and they count).
        assert d.status == ERROR
        return
    assert d.status == expected, name
    # One PlacementFeasible call before any pod, and one after each pod evaluated without an error.
    errored = 1 if FAILS in filters[:evaluated] else 0
    assert len(calls) == evaluated + 1 - errored, name
    assert [c.remaining for c in calls] == list(range(3, 3 - len(calls), -1)), name


def test_a_preferred_level_is_tried_before_the_required_one() -> None:
    """draxr.io/preferred-topology (beyond upstream): in the required rack, one clique if the group
    fits in one; otherwise anywhere in the rack."""
    objs: list[Obj] = [CLASS]
    for n, clique in (("a-0", "c1"), ("a-1", "c1"), ("a-2", "c2")):
        objs.append(node(n, labels={"rack": "a", "nvidia.com/gpu.clique": clique}))
        objs.append(resource_slice(f"s-{n}", gpus(4), node_name=n))
    group = gang(2, "rack")
    group["metadata"]["annotations"] = {"draxr.io/preferred-topology": "clique"}
    s = Scheduler(state_of(*objs), "spread")  # spreading alone would take a-0 and a-2
    d = PodGroupCycle(s).schedule(PodGroupInfo(group, [member("m0", 4), member("m1", 4)]))
    assert d.status == SCHEDULED
    assert d.placement == "a/nvidia.com/gpu.clique=c1"
    assert sorted(x.node or "" for x, _ in d.placed()) == ["a-0", "a-1"]
    three = gang(3, "rack")
    three["metadata"]["annotations"] = {"draxr.io/preferred-topology": "clique"}
    wide = PodGroupCycle(Scheduler(state_of(*objs), "spread")).schedule(
        PodGroupInfo(three, [member(f"m{i}", 4) for i in range(3)])
    )
    assert wide.status == SCHEDULED  # no clique holds three: the rack does
    assert wide.placement == "a"
