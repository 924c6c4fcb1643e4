"""Preemption for a whole pod group (beyond upstream): victims only when the whole group then fits,
the least important first, a group disrupted together going as a whole."""

from typing import Any

from tests.core.harness import state_of
from tests.core.podfactory import container, node, pod
from webhook.core.api.objects import Obj, uid
from webhook.core.api.podgroups import GroupKey
from webhook.core.scheduling.podgroupcycle import PodGroupCycle, PodGroupInfo
from webhook.core.scheduling.podgrouppreemption import disrupted_together, preempt_for_group, units
from webhook.core.scheduling.scheduler import Scheduler


def running(name: str, cpu: str, priority: int, start: str = "2026-01-01T00:00:00Z", **spec: Any) -> Obj:
    p = pod(name, [container("c", {"cpu": cpu})], nodeName="n", priority=priority, **spec)
    p["status"] = {"phase": "Running", "startTime": start}
    return p


def gang(*cpus: str, priority: int = 100, **spec: Any) -> PodGroupInfo:
    group = {
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": len(cpus)}}, "priority": priority, **spec},
    }
    members = [
        pod(
            f"m{i}",
            [container("c", {"cpu": c})],
            priority=priority,
            schedulingGroup={"podGroupName": "train"},
        )
        for i, c in enumerate(cpus)
    ]
    return PodGroupInfo(group, members)


def cycle(*pods: Obj, cpu: str = "8") -> PodGroupCycle:
    return PodGroupCycle(Scheduler(state_of(node("n", {"cpu": cpu}), *pods)), topology_aware=False)


def names(victims: list[Obj]) -> list[str]:
    return sorted(v["metadata"]["name"] for v in victims)


def test_the_least_important_pods_go_and_only_as_many_as_the_group_needs() -> None:
    c = cycle(running("p1", "2", 1), running("p2", "2", 2), running("p3", "2", 3), running("p4", "2", 4))
    group = gang("2", "2")
    assert c.schedule(group).status == "Unschedulable"
    before = dict(c.scheduler.state.nodes.by_name["n"].requested)
    found = preempt_for_group(c, group, {})
    assert names(found.victims) == ["p1", "p2"]
    assert dict(c.scheduler.state.nodes.by_name["n"].requested) == before  # the dry run put all back


def test_no_victim_when_the_group_does_not_fit_even_without_them() -> None:
    c = cycle(running("p1", "2", 1), cpu="4")
    found = preempt_for_group(c, gang("4", "4"), {})
    assert found.victims == []
    assert "does not fit even without every lower-priority pod" in found.message


def test_pods_of_equal_or_higher_priority_are_never_victims() -> None:
    c = cycle(running("p1", "4", 100), running("p2", "4", 200))
    assert preempt_for_group(c, gang("4"), {}).victims == []


def test_a_group_that_never_preempts() -> None:
    c = cycle(running("p1", "8", 1))
    found = preempt_for_group(c, gang("4", preemptionPolicy="Never"), {})
    assert found.victims == []
    assert found.message == "not eligible due to preemptionPolicy=Never."


def test_a_group_disrupted_together_goes_as_a_whole() -> None:
    low_group = {"metadata": {"name": "low", "namespace": "default"}, "spec": {"disruptionMode": {"all": {}}}}
    members = [running(f"l{i}", "2", 1, schedulingGroup={"podGroupName": "low"}) for i in range(2)]
    single = running("single", "2", 5)
    c = cycle(*members, single, cpu="6")
    found = preempt_for_group(c, gang("2"), {GroupKey("default", "low"): low_group})
    assert names(found.victims) == ["l0", "l1"]  # one would do, but they go together
    plain = preempt_for_group(c, gang("2"), {})
    assert names(plain.victims) == ["l1"]  # without it, one of them is enough


def test_no_more_victims_while_earlier_ones_terminate() -> None:
    going = running("going", "4", 1)
    going["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:01Z"
    going["status"]["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
    ]
    c = cycle(going, running("other", "4", 1))
    found = preempt_for_group(c, gang("8"), {})
    assert found.victims == []
    assert found.message == "waiting for the pods preempted earlier to terminate."


def test_units_and_disruption_modes() -> None:
    together: Obj = {"spec": {"disruptionMode": {"all": {}}}}
    assert disrupted_together(together)
    assert disrupted_together({"spec": {"disruptionMode": "PodGroup"}})  # 1.36's
    assert not disrupted_together({"spec": {"disruptionMode": {"single": {}}}})
    a = running("a", "1", 1, schedulingGroup={"podGroupName": "g"})
    b = running("b", "1", 1, schedulingGroup={"podGroupName": "g"})
    c = running("c", "1", 1)
    found = units([a, b, c], {GroupKey("default", "g"): together})
    assert sorted([sorted(uid(p) for p in u) for u in found]) == [["uid-a", "uid-b"], ["uid-c"]]
