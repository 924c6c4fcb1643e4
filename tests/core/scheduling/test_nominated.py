"""Nominated pods in Filter (upstream's ``RunFilterPluginsWithNominatedPods``): pods nominated to a
node with a priority at least the pod's count there, whoever nominated them: their requests, pod count
and host ports (NodeResourcesFit, NodePorts), their labels and terms (InterPodAffinity,
PodTopologySpread through ``add_pod``) and their devices (draxr's count); Filter runs with them and,
when that passes, without them, and both must pass."""

from __future__ import annotations

from typing import Any

from tests.core.harness import state_of
from tests.core.podfactory import container, device_class, gpus, node, pod, resource_slice
from webhook.core.api.objects import Obj
from webhook.core.cluster.state import ClusterState
from webhook.core.scheduling.framework import SCHEDULED, UNSCHEDULABLE
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
