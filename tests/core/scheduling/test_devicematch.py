"""One device attribute across a pod group's members (beyond upstream)."""

from typing import Any

from tests.core.harness import state_of
from tests.core.podfactory import container, device, device_class, node, pod, resource_slice
from webhook.core.api.objects import Obj
from webhook.core.scheduling import devicematch
from webhook.core.scheduling.framework import SCHEDULED, UNSCHEDULABLE
from webhook.core.scheduling.podgroupcycle import PodGroupCycle, PodGroupInfo
from webhook.core.scheduling.scheduler import Scheduler

GPU = "example.com/gpu"
CLASS = device_class("gpu.example.com", ext=GPU, selectors=['device.driver == "gpu.example.com"'])
CLIQUE = "gpu.example.com/clique"


def clique_gpus(prefix: str, cliques: list[str | None]) -> list[Obj]:
    out = []
    for i, c in enumerate(cliques):
        attrs: dict[str, Any] = {"index": {"int": i}}
        if c is not None:
            attrs["clique"] = {"string": c}
        out.append(device(f"{prefix}-{i}", attrs))
    return out


def cluster() -> Scheduler:
    return Scheduler(
        state_of(
            CLASS,
            node("a"),
            node("b"),
            resource_slice("sa", clique_gpus("a", ["x", "x", "y", "y"]), node_name="a"),
            resource_slice("sb", clique_gpus("b", ["y", "y", "y", None]), node_name="b"),
        ),
        "binpack",
    )


def group(match: str | None, min_count: int = 3) -> Obj:
    pg: Obj = {
        "metadata": {"name": "g", "namespace": "default"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }
    if match is not None:
        pg["metadata"]["annotations"] = {devicematch.MATCH_ATTRIBUTE: match}
    return pg


def members(n: int, gpus: int = 2) -> list[Obj]:
    return [
        pod(f"m{i}", [container("c", {GPU: gpus})], schedulingGroup={"podGroupName": "g"}) for i in range(n)
    ]


def cliques_of(s: Scheduler, keys: list[tuple[str, str, str]]) -> set[str | None]:
    out: set[str | None] = set()
    for sl in s.state.devices.slices.values():
        for d in sl.devices:
            if d.key in keys:
                found = d.attribute(CLIQUE)
                out.add(found[1] if found else None)
    return out


def test_every_device_of_every_member_shares_the_attributes_value() -> None:
    s = cluster()
    d = PodGroupCycle(s, topology_aware=False).schedule(PodGroupInfo(group(CLIQUE, 2), members(2)))
    assert d.status == SCHEDULED
    keys = [k for x, _ in d.placed() for k in (x.special.device_keys if x.special else [])]
    assert len(keys) == 4
    assert len(cliques_of(s, keys)) == 1
    plain = PodGroupCycle(cluster(), topology_aware=False).schedule(PodGroupInfo(group(None, 2), members(2)))
    plain_keys = [k for x, _ in plain.placed() for k in (x.special.device_keys if x.special else [])]
    assert cliques_of(cluster(), plain_keys) == {"x", "y"}  # without it, binpacking takes both


def test_a_gang_larger_than_every_clique_is_unschedulable_and_holds_nothing_after() -> None:
    s = cluster()
    d = PodGroupCycle(s, topology_aware=False).schedule(PodGroupInfo(group(CLIQUE, 3), members(3)))
    assert d.status == UNSCHEDULABLE  # y has 5 devices: two members of 2 at most
    assert s.schedule(pod("probe", [container("c", {GPU: 4})])).status == SCHEDULED  # nothing held


def test_values_and_the_devices_each_holds_back() -> None:
    s = cluster()
    by_name = {v.name: v for v in devicematch.values(s.state, CLIQUE)}
    assert sorted(by_name) == ["x", "y"]
    assert len(by_name["x"].held) == 6  # every device of the driver but x's two
    assert ("gpu.example.com", "b", "b-3") in by_name["y"].held  # no attribute: matches no value
    assert devicematch.values(s.state, "other.example.com/clique") == []
    assert devicematch.match_attribute(group("  ")) is None
