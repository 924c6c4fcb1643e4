"""Nominated pods in Filter (upstream's ``RunFilterPluginsWithNominatedPods``): pods nominated to a
node with a priority at least the pod's count there, whoever nominated them: their requests, pod count
and host ports (NodeResourcesFit, NodePorts), their labels and terms (InterPodAffinity,
PodTopologySpread through ``add_pod``) and their devices (draxr's count); Filter runs with them and,
when that passes, without them, and both must pass."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.harness import claim, exactly, state_of
from tests.core.podfactory import container, device_class, gpus, node, pod, resource_slice
from webhook.core.api.objects import Obj
from webhook.core.cluster.nodeinfo import NodeInfo
from webhook.core.cluster.podinfo import PodInfo
from webhook.core.cluster.state import ClusterState
from webhook.core.scheduling.framework import SCHEDULED, UNSCHEDULABLE, FilterPlugin
from webhook.core.scheduling.plugins.dynamicresources.filter import CANNOT_ALLOCATE
from webhook.core.scheduling.plugins.interpodaffinity.filtering import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
)
from webhook.core.scheduling.plugins.nodeports import REASON as PORTS
from webhook.core.scheduling.scheduler import Scheduler

GPU = "example.com/gpu"
CLASS = device_class("gpu.example.com", ext=GPU, selectors=['device.driver == "gpu.example.com"'])


def cluster(cpu: str = "4", devices: int = 2, nodes: int = 2) -> ClusterState:
    objs: list[Obj] = [CLASS]
    for i in range(nodes):
        objs += [
            node(f"n{i}", {GPU: 0, "cpu": cpu}),
            resource_slice(f"s{i}", gpus(devices, prefix=f"n{i}-gpu"), node_name=f"n{i}"),
        ]
    return state_of(*objs)


def pending(
    name: str,
    requests: dict[str, Any],
    priority: int = 0,
    nominated: str | None = None,
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> Obj:
    p = pod(name, [container("c", requests)], **spec)
    p["spec"]["priority"] = priority
    if nominated:
        p["status"] = {"nominatedNodeName": nominated}
    if labels:
        p["metadata"]["labels"] = labels
    return p


def test_a_nominated_pod_of_equal_or_higher_priority_keeps_its_room() -> None:
    st = cluster()
    st.apply("Pod", pending("big", {"cpu": "3"}, priority=10, nominated="n0"))
    s = Scheduler(st, percentage_of_nodes_to_score=100)
    for prio in (0, 10):
        d = s.schedule(pending(f"p{prio}", {"cpu": "2", GPU: 1}, priority=prio))
        assert (d.status, d.node) == (SCHEDULED, "n1")
    # With n1 full too, n0's reason is its nominated pod's cpu.
    st.apply("Pod", pending("other", {"cpu": "3"}, priority=10, nominated="n1"))
    d = s.schedule(pending("p", {"cpu": "2", GPU: 1}))
    assert d.status == UNSCHEDULABLE
    assert d.reasons == {"n0": ["Insufficient cpu"], "n1": ["Insufficient cpu"]}


def test_a_lower_priority_nomination_and_the_pod_s_own_are_not_counted() -> None:
    st = cluster(nodes=1)
    st.apply("Pod", pending("low", {"cpu": "3"}, priority=1, nominated="n0"))
    me = pending("me", {"cpu": "3", GPU: 1}, priority=5, nominated="n0")
    st.apply("Pod", me)
    assert Scheduler(st).schedule(me).node == "n0"


def test_a_nominated_pod_takes_the_free_devices_it_would_ask_for() -> None:
    """Two free GPUs on each node; a pod nominated to n0 asks for both: a usual GPU pod goes to n1,
    and with n1's devices taken as well, n0 is refused for want of devices."""
    st = cluster(devices=2)
    st.apply("Pod", pending("two", {GPU: 2}, priority=0, nominated="n0"))
    s = Scheduler(st)
    first = s.schedule(pending("a", {GPU: 1}))
    assert (first.status, first.node) == (SCHEDULED, "n1")
    s.reserve(first)
    second = s.schedule(pending("b", {GPU: 1}))
    assert (second.status, second.node) == (SCHEDULED, "n1")
    s.reserve(second)
    third = s.schedule(pending("c", {GPU: 1}))
    assert third.status == UNSCHEDULABLE
    assert third.reasons["n0"] == [CANNOT_ALLOCATE]


def with_own_claim(p: Obj, claim_name: str, from_template: bool = True) -> Obj:
    """``p`` asking for its devices through a claim of its own (draxr's rewrite: a claim made from a
    template, named in the pod's status), not through an extended resource."""
    if from_template:
        p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
        made = [{"name": "gpu", "resourceClaimName": claim_name}]
        p.setdefault("status", {})["resourceClaimStatuses"] = made
    else:
        p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim_name}]
    return p


def test_a_nominated_pod_s_own_claims_keep_their_devices() -> None:
    """CI on 1.35 gate off (the rewrite path): a preemptor nominated to the node asks for its device
    through its own claim, still unallocated, so it counted no device; a pod of the same priority
    took the device the victim freed, and the preemptor evicted a second victim. The devices a
    nominated pod's unallocated claims ask for are taken on its node, for a pod asking through a
    claim of its own as for one asking through an extended resource."""
    st = cluster(devices=1, nodes=1)
    st.apply("ResourceClaim", claim("high-gpu", [exactly("r", CLASS["metadata"]["name"])]))
    st.apply("Pod", with_own_claim(pending("high", {}, priority=1000, nominated="n0"), "high-gpu"))
    st.apply("ResourceClaim", claim("patient-gpu", [exactly("r", CLASS["metadata"]["name"])]))
    s = Scheduler(st)
    for p in (
        with_own_claim(pending("patient", {}, priority=1000), "patient-gpu", from_template=False),
        pending("ext", {GPU: 1}, priority=1000),
    ):
        d = s.schedule(p)
        assert d.status == UNSCHEDULABLE, p["metadata"]["name"]
        assert d.reasons == {"n0": [CANNOT_ALLOCATE]}
    # A nomination of lower priority keeps nothing from it.
    low = with_own_claim(pending("low", {}, priority=1), "patient-gpu", from_template=False)
    assert Scheduler(st).schedule(low).node is None
    st.apply("Pod", with_own_claim(pending("high", {}, priority=0, nominated="n0"), "high-gpu"))
    assert Scheduler(st).schedule(low).node == "n0"


#: A pod asking for devices: (priority, devices, through a claim of its own rather than the name).
asking = st.tuples(st.integers(0, 2), st.integers(1, 2), st.booleans())


def _asking(state: ClusterState, name: str, prio: int, n: int, own: bool, nominated: str | None) -> Obj:
    if not own:
        return pending(name, {GPU: n}, priority=prio, nominated=nominated)
    state.apply("ResourceClaim", claim(f"{name}-gpu", [exactly("r", CLASS["metadata"]["name"], n)]))
    # The nominated pods' claims come from a template; the pod's own is named (PreFilter would want
    # a template's claim owned by the pod).
    p = pending(name, {}, priority=prio, nominated=nominated)
    return with_own_claim(p, f"{name}-gpu", from_template=nominated is not None)


@settings(max_examples=150, deadline=None)
@given(
    devices=st.lists(st.integers(0, 3), min_size=1, max_size=3),
    others=st.lists(st.tuples(asking, st.integers(0, 2)), max_size=4),
    me=asking,
)
def test_nominated_pods_devices_are_never_given_away(
    devices: list[int], others: list[tuple[tuple[int, int, bool], int]], me: tuple[int, int, bool]
) -> None:
    """Property: the pod goes only to a node whose free devices, less what the pods nominated there
    with a priority at least its own ask for (by name or by claim), still hold its own; and when
    some node does, it is placed."""
    state = cluster(devices=0, nodes=0)
    for i, n in enumerate(devices):
        state.apply("Node", node(f"n{i}", {GPU: 0}))
        state.apply("ResourceSlice", resource_slice(f"s{i}", gpus(n, prefix=f"n{i}-gpu"), node_name=f"n{i}"))
    taken = [0] * len(devices)
    prio, want, own = me
    for j, ((p, n, by_claim), at) in enumerate(others):
        target = at % len(devices)
        state.apply("Pod", _asking(state, f"o{j}", p, n, by_claim, f"n{target}"))
        if p >= prio:
            taken[target] += n
    room = [f"n{i}" for i, n in enumerate(devices) if n - taken[i] >= want]
    mine = _asking(state, "me", prio, want, own, None)
    d = Scheduler(state, percentage_of_nodes_to_score=100).schedule(mine)
    if room:
        assert d.node in room
    else:
        assert d.status == UNSCHEDULABLE


def test_a_nominated_pod_s_host_ports_are_taken() -> None:
    st = cluster(nodes=1)
    port = [container("c", {"cpu": "1"})]
    port[0]["ports"] = [{"containerPort": 80, "hostPort": 80}]
    holder = pod("holder", port)
    holder["status"] = {"nominatedNodeName": "n0"}
    st.apply("Pod", holder)
    wants = pod("wants", [{**port[0], "resources": {"requests": {GPU: 1}}}])
    d = Scheduler(st).schedule(wants)
    assert d.status == UNSCHEDULABLE
    assert d.reasons == {"n0": [PORTS]}


def anti(name: str, nominated: str | None = None, **extra: Any) -> Obj:
    p = pending(name, {GPU: 1}, nominated=nominated, labels={"app": "infer"}, **extra)
    p["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "infer"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    return p


def test_a_nominated_pod_counts_for_pod_anti_affinity() -> None:
    st = cluster(nodes=2)
    st.apply("Pod", anti("r0", nominated="n0"))
    s = Scheduler(st, percentage_of_nodes_to_score=100)
    d = s.schedule(anti("r1"))
    assert (d.status, d.node) == (SCHEDULED, "n1")
    s.reserve(d)
    d = s.schedule(anti("r2"))
    assert d.status == UNSCHEDULABLE
    assert d.reasons["n0"] == [ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH]


def test_filter_must_pass_without_the_nominated_pods_too() -> None:
    """The only pod the affinity term matches is nominated to n0, not running: with it added n0
    passes, without it n0 fails, so n0 is refused (upstream's conservative second pass)."""
    st = cluster(nodes=2)
    st.apply("Pod", pending("leader", {"cpu": "1"}, nominated="n0", labels={"role": "leader"}))
    follower = pending("follower", {GPU: 1})
    follower["spec"]["affinity"] = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"role": "leader"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    d = Scheduler(st).schedule(follower)
    assert d.status == UNSCHEDULABLE
    assert d.reasons == {
        "n0": [ERR_REASON_AFFINITY_RULES_NOT_MATCH],
        "n1": [ERR_REASON_AFFINITY_RULES_NOT_MATCH],
    }
    # Once the leader runs on n0, the follower goes there.
    leader = pending("leader", {"cpu": "1"}, labels={"role": "leader"}, nodeName="n0")
    st.apply("Pod", leader)
    assert Scheduler(st).schedule(follower).node == "n0"


def test_no_nominated_pod_no_cost_and_the_usual_pod_stays_usual() -> None:
    st = cluster()
    s = Scheduler(st)
    cycle = s.pre_filter(pending("u", {GPU: 1}))
    assert cycle.nominated == {}
    assert s._usual(cycle, True) is not None


# -- upstream's TestFilterPluginsWithNominatedPods (framework/runtime/framework_test.go) --------------
# Its TestPlugin1 (a PreFilter whose AddPod returns an injected status) and TestPlugin2 (a Filter
# returning one) as one profile plugin: its add_pod marks the state; its filter refuses a node when
# told to, or when AddPod was told to fail and was called. Upstream's "pre filters fail" case (AddPod
# returns an Error, the cycle errs) has no counterpart: draxr's add_pod returns a state, never a status.

LOW, HIGH = 0, 1000  # upstream's lowPriority, highPriority
INJECTED = "injected filter status"


def _injected(add_pod_fails: bool, filter_fails: bool) -> FilterPlugin[dict[str, bool]]:
    def add_pod(pre: dict[str, bool], _pod: PodInfo, _info: NodeInfo) -> dict[str, bool]:
        return {**pre, "added": True}

    def filter_node(pre: dict[str, bool], _node: str, _info: NodeInfo) -> str | None:
        if filter_fails or (add_pod_fails and pre["added"]):
            return INJECTED
        return None

    return FilterPlugin("TestPlugin", lambda _st, _p: {"added": False}, filter_node, add_pod)


@pytest.mark.parametrize(
    ("name", "plugin", "priority", "nominated", "fits"),
    [
        ("node has no nominated pod", None, LOW, None, True),
        ("node has a high-priority nominated pod and all filters succeed", (False, False), LOW, HIGH, True),
        ("node has a high-priority nominated pod and filters fail", (False, True), LOW, HIGH, False),
        (
            "node has a low-priority nominated pod and pre filters return unschedulable",
            (True, False),
            HIGH,
            LOW,
            True,
        ),
    ],
)
def test_filter_plugins_with_nominated_pods(
    name: str, plugin: tuple[bool, bool] | None, priority: int, nominated: int | None, fits: bool
) -> None:
    st = cluster(nodes=1)
    if nominated is not None:
        st.apply("Pod", pending("nominated", {"cpu": "1"}, priority=nominated, nominated="n0"))
    filters = [] if plugin is None else [_injected(*plugin)]
    d = Scheduler(st, filters=filters).schedule(pending("p", {"cpu": "1", GPU: 1}, priority=priority))
    if fits:
        assert (d.status, d.node) == (SCHEDULED, "n0"), name
    else:
        assert d.status == UNSCHEDULABLE, name
        assert d.reasons == {"n0": [INJECTED]}, name
