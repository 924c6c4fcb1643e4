"""Invariants of device-aware preemption on random GPU clusters: every victim has a lower priority
than the preemptor; with the victims gone (their devices with them) the scheduler's own Filter
fits the preemptor on the nominated node; no victim is superfluous (putting any one back makes the
preemptor not fit: what reprieving guarantees); the dry run leaves the state as it found it."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.core.api.objects import Obj
from webhook.core.cluster.state import ClusterState
from webhook.core.scheduling.framework import UNSCHEDULABLE
from webhook.core.scheduling.plugins.defaultpreemption import DefaultPreemption
from webhook.core.scheduling.plugins.defaultpreemption.simulation import Removal
from webhook.core.scheduling.scheduler import Scheduler

from .fixtures import bind, gpu_node, gpu_pod, holding, state_of

# per node: its GPU count and the pods on it as (priority, gpus), packed in order while they fit
NODE = st.tuples(st.integers(1, 4), st.lists(st.tuples(st.integers(-2, 3), st.integers(1, 2)), max_size=4))


def cluster(nodes: list[tuple[int, list[tuple[int, int]]]]) -> ClusterState:
    objects: list[Obj] = []
    for i, (size, pods) in enumerate(nodes):
        n = f"n{i}"
        objects += gpu_node(n, size)
        used = 0
        for j, (prio, want) in enumerate(pods):
            if used + want > size:
                continue
            p = bind(gpu_pod(f"p{i}-{j}", want, priority=prio), n, f"2026-01-01T00:00:{j:02d}Z")
            objects += [p, holding(p, [f"gpu-{used + k}" for k in range(want)])]
            used += want
    return state_of(*objects)


def taken(state: ClusterState) -> tuple[object, ...]:
    return (
        sorted(state.allocated.pods),
        sorted(state.allocated.claims),
        sorted(state.allocated.devices),
        {n: dict(state.nodes.by_name[n].requested) for n in state.nodes.names()},
    )


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(NODE, min_size=1, max_size=3),
    st.integers(-1, 4),
    st.integers(1, 4),
    st.sampled_from(["binpack", "spread", "upstream"]),
)
def test_preemption_invariants(
    nodes: list[tuple[int, list[tuple[int, int]]]], prio: int, want: int, policy: str
) -> None:
    state = cluster(nodes)
    sched = Scheduler(state, policy, percentage_of_nodes_to_score=100)
    preemptor = gpu_pod("preemptor", want, priority=prio)
    decision = sched.schedule(preemptor)
    if decision.status != UNSCHEDULABLE:
        return
    before = taken(state)
    plugin = DefaultPreemption(sched)
    result = plugin.post_filter(preemptor, decision)
    assert taken(state) == before
    if not result.success:
        return
    assert result.nominated_node is not None
    assert result.candidate is not None
    node = result.nominated_node
    assert result.victims
    assert all(v.priority < prio for v in result.candidate.victims)
    with Removal(state) as removal:
        for v in result.victims:
            removal.remove(v)
        assert plugin.fits(preemptor, node) == []
        for v in result.victims:
            removal.add(v)
            assert plugin.fits(preemptor, node) != [], f"victim {v['metadata']['name']} is superfluous"
            removal.remove(v)
    assert taken(state) == before
