"""A pod group through the worker: gated until whole, placed in one cycle, committed together."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.kube.cache import ClusterCache
from webhook.worker.podgroupscheduling import with_condition

from .harness import GPU, Cluster, device_class, gpu_slice, node, pod_group
from .workers import make_worker


def member(kube: Cluster, name: str, gpus: int = 2, group: str = "train") -> None:
    kube.pod(name, {GPU: gpus}, schedulingGroup={"podGroupName": group})


def initially_scheduled(kube: Cluster, name: str = "train") -> dict[str, str] | None:
    pg = kube.em.get("podgroups", name, "default")
    for c in (pg.get("status") or {}).get("conditions") or []:
        if c["type"] == "PodGroupInitiallyScheduled":
            return {k: c[k] for k in ("status", "reason", "message")}
    return None


def test_a_gang_of_four_pods_of_two_gpus_binds_whole(kube: Cluster) -> None:
    kube.apply(device_class(), node("n1"), node("n2"), gpu_slice("n1", 4), gpu_slice("n2", 4))
    kube.apply(pod_group("train", 4))
    kube.worker()
    for i in range(4):
        member(kube, f"m{i}")
    bound = kube.wait_bound(4)
    assert sorted(bound.values()) == ["n1", "n1", "n2", "n2"]
    kube.em.wait_for(lambda: initially_scheduled(kube) is not None, 10, "the PodGroup's condition")
    assert initially_scheduled(kube) == {"status": "True", "reason": "Scheduled", "message": ""}
    kube.check_consistent()
    assert len(kube.allocated()) == 8


def test_a_gang_that_cannot_fit_leaves_no_pod_bound_and_no_claim_allocated(kube: Cluster) -> None:
    kube.apply(device_class(), node("n1"), gpu_slice("n1", 4))
    kube.apply(pod_group("train", 3))
    kube.worker()
    for i in range(3):
        member(kube, f"m{i}")
    kube.em.wait_for(lambda: initially_scheduled(kube) is not None, 10, "the PodGroup's condition")
    condition = initially_scheduled(kube)
    assert condition is not None
    assert condition["status"] == "False"
    assert condition["reason"] == "Unschedulable"
    kube.em.wait_for(lambda: all(kube.condition(f"m{i}") for i in range(3)), 10, "every member told")
    assert kube.bound() == {}
    assert kube.allocated() == []
    assert kube.claims() == []


def test_members_wait_for_their_pod_group_and_for_min_count(kube: Cluster) -> None:
    kube.apply(device_class(), node("n1"), gpu_slice("n1", 8))
    kube.worker()
    for i in range(3):
        member(kube, f"m{i}")
    kube.apply(pod_group("train", 4))
    member(kube, "m3")
    assert sorted(kube.wait_bound(4)) == ["m0", "m1", "m2", "m3"]


def test_a_true_condition_never_goes_back_and_keeps_its_transition_time() -> None:
    pg = {
        "metadata": {"generation": 2},
        "status": {
            "conditions": [
                {"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled", "message": ""}
            ]
        },
    }
    failed = {
        "type": "PodGroupInitiallyScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "m",
    }
    assert with_condition(pg, failed, "t2") is None
    fresh = {"metadata": {}, "status": {"conditions": [{"type": "Other", "status": "True"}]}}
    out = with_condition(fresh, failed, "t1")
    assert out == [{"type": "Other", "status": "True"}, {**failed, "lastTransitionTime": "t1"}]
    fresh["status"]["conditions"] = out
    again = {**failed, "message": "n"}
    assert with_condition(fresh, again, "t3") == [
        {"type": "Other", "status": "True"},
        {**again, "lastTransitionTime": "t1"},
    ]
    assert with_condition(fresh, failed, "t3") is None  # nothing changed: nothing written


def test_a_later_member_joins_its_group_already_scheduled(kube: Cluster) -> None:
    kube.apply(device_class(), node("n1"), node("n2"), gpu_slice("n1", 4), gpu_slice("n2", 8))
    kube.apply(pod_group("train", 2))
    kube.worker()
    member(kube, "m0", 2)
    member(kube, "m1", 1)
    kube.wait_bound(2)
    member(kube, "m2", 8)
    bound = kube.wait_bound(3)
    assert bound["m2"] == "n2"


class Held:
    """An executor that holds what is submitted (binding cycles in flight) until ``run``."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, tuple[Any, ...]]] = []

    def submit(self, fn: Any, *args: Any) -> None:
        self.calls.append((fn, args))


def test_a_member_arriving_while_its_group_binds_counts_the_members_in_flight(kube: Cluster) -> None:
    """The group's first cycle placed two members whose binding is still under way: neither bound
    nor assumed yet, they are reserved in the engine and count as scheduled (upstream's assumed
    pods), so a third member joins rather than failing the group's minCount alone."""
    kube.apply(device_class(), node("n1"), gpu_slice("n1", 8))
    kube.apply(pod_group("train", 2))
    member(kube, "m0", 2)
    member(kube, "m1", 1)
    cache = ClusterCache.from_objects([*kube.snapshot(), *kube.em.list("podgroups", "default")])
    w = make_worker(kube.client(), cache)
    groups = w.scheduling.groups
    assert groups is not None
    held = Held()
    groups.pool = held  # type: ignore[assignment]
    try:
        first = w.queue
        for p in kube.pods():
            first.add(p["metadata"]["uid"])
        entry = first.pop(timeout=0)
        assert entry is not None
        w.schedule_one(entry.uid)
        assert len(held.calls) == 1  # the group's commit, not run yet
        member(kube, "m2", 4)
        m2 = kube.em.get("pods", "m2", "default")
        cache.handle("Pod", "ADDED", m2)
        first.add(m2["metadata"]["uid"])
        assert first.pop(timeout=0) is not None
        w.schedule_one(m2["metadata"]["uid"])
        assert len(held.calls) == 2  # m2 placed with its group, and committed
    finally:
        w.stop()


def _cond(state: str, reason: str, message: str = "", stamp: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {
        "type": "PodGroupInitiallyScheduled",
        "status": state,
        "reason": reason,
        "message": message,
    }
    if stamp is not None:
        c["lastTransitionTime"] = stamp
    return c


#: upstream's ``TestUpdatePodGroupCondition``: the PodGroup's condition before (None: none), the one
#: the cycle sets, and what is written (None: nothing), at time "new".
UPDATE_POD_GROUP_CONDITION = {
    "set Scheduled condition to True on empty status": (
        None,
        _cond("True", "SomeReason"),
        _cond("True", "SomeReason", stamp="new"),
    ),
    "set Scheduled condition to False with Unschedulable reason": (
        None,
        _cond("False", "Unschedulable"),
        _cond("False", "Unschedulable", stamp="new"),
    ),
    "set Scheduled condition to False with SchedulerError reason": (
        None,
        _cond("False", "SchedulerError"),
        _cond("False", "SchedulerError", stamp="new"),
    ),
    "transition from Unschedulable to Scheduled": (
        _cond("False", "Unschedulable", stamp="old"),
        _cond("True", "Scheduled"),
        _cond("True", "Scheduled", stamp="new"),
    ),
    "transition from SchedulerError to Scheduled": (
        _cond("False", "SchedulerError", stamp="old"),
        _cond("True", "Scheduled"),
        _cond("True", "Scheduled", stamp="new"),
    ),
    "do not regress Scheduled to Unschedulable": (
        _cond("True", "Scheduled", stamp="old"),
        _cond("False", "Unschedulable"),
        None,
    ),
    "do not regress Scheduled to SchedulerError": (
        _cond("True", "Scheduled", stamp="old"),
        _cond("False", "SchedulerError"),
        None,
    ),
    "transition from Unschedulable to SchedulerError preserves LastTransitionTime": (
        _cond("False", "Unschedulable", "not enough resources", stamp="old"),
        _cond("False", "SchedulerError", "internal error"),
        _cond("False", "SchedulerError", "internal error", stamp="old"),
    ),
    "transition from SchedulerError to Unschedulable preserves LastTransitionTime": (
        _cond("False", "SchedulerError", "internal error", stamp="old"),
        _cond("False", "Unschedulable", "not enough resources"),
        _cond("False", "Unschedulable", "not enough resources", stamp="old"),
    ),
    "Scheduled to Scheduled preserves LastTransitionTime": (
        _cond("True", "Scheduled", "All pods scheduled", stamp="old"),
        _cond("True", "Scheduled", "New condition message"),
        _cond("True", "Scheduled", "New condition message", stamp="old"),
    ),
}


@pytest.mark.parametrize("name", list(UPDATE_POD_GROUP_CONDITION))
def test_upstream_update_pod_group_condition(name: str) -> None:
    before, condition, written = UPDATE_POD_GROUP_CONDITION[name]
    pg: dict[str, Any] = {"metadata": {}, "status": {"conditions": [before] if before else []}}
    got = with_condition(pg, condition, "new")
    assert got == ([written] if written is not None else None), name


def test_upstream_observed_generation_is_set_from_pod_group_generation() -> None:
    pg = {"metadata": {"name": "pg-gen", "namespace": "ns1", "generation": 7}, "status": {}}
    got = with_condition(pg, _cond("True", "Scheduled", "All pods scheduled"), "new")
    assert got == [{**_cond("True", "Scheduled", "All pods scheduled", stamp="new"), "observedGeneration": 7}]


def test_a_gang_preempts_lower_priority_pods_and_runs_once_they_are_gone(kube: Cluster) -> None:
    kube.apply(device_class(), node("n1"), gpu_slice("n1", 4))
    kube.worker()
    for i in range(2):
        kube.pod(f"low-{i}", {GPU: 2}, priority=1)
    kube.wait_bound(2)
    group = pod_group("train", 2)
    group["spec"]["priority"] = 100
    kube.apply(group)
    for i in range(2):
        kube.pod(f"m{i}", {GPU: 2}, schedulingGroup={"podGroupName": "train"}, priority=100)

    def preempted() -> bool:
        return {p["metadata"]["name"] for p in kube.pods()} == {"m0", "m1"}

    kube.em.wait_for(preempted, 15, "both low-priority pods preempted")
    assert sorted(kube.wait_bound(2)) == ["m0", "m1"]

    # Each victim is told which group preempted it.
    def preempted_events() -> list[Any]:
        return [e for e in kube.em.list("events", "default") if e.get("reason") == "Preempted"]

    kube.em.wait_for(lambda: len(preempted_events()) == 2, 10, "two Preempted Events")
    events = preempted_events()
    assert sorted(e["involvedObject"]["name"] for e in events) == ["low-0", "low-1"]
    assert {e["message"] for e in events} == {"Preempted by pod group default/train"}


def test_a_1_35_workloads_gang_binds_whole(kube: Cluster) -> None:
    kube.apply(device_class(), node("n1"), gpu_slice("n1", 4))
    kube.em.create(
        "workloads",
        {
            "apiVersion": "scheduling.k8s.io/v1alpha1",
            "kind": "Workload",
            "metadata": {"name": "job", "namespace": "default"},
            "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 2}}}]},
        },
    )
    kube.worker()
    ref = {"name": "job", "podGroup": "workers"}
    kube.pod("w0", {GPU: 2}, workloadRef=ref)
    kube.pod("w1", {GPU: 2}, workloadRef=ref)
    assert sorted(kube.wait_bound(2)) == ["w0", "w1"]
    kube.check_consistent()
