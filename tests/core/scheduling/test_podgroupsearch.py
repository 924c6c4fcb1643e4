"""The bounded search for a gang's placement (beyond upstream), against exhaustive enumeration."""

from itertools import product

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.harness import state_of
from tests.core.podfactory import container, device_class, gpus, node, pod, resource_slice
from webhook.core.api.objects import Obj
from webhook.core.scheduling.framework import SCHEDULED, UNSCHEDULABLE
from webhook.core.scheduling.podgroupcycle import PodGroupCycle, PodGroupInfo
from webhook.core.scheduling.podgroupsearch import search
from webhook.core.scheduling.scheduler import Scheduler

GPU = "example.com/gpu"
CLASS = device_class("gpu.example.com", ext=GPU, selectors=['device.driver == "gpu.example.com"'])
GANG = {
    "metadata": {"name": "g", "namespace": "default"},
    "spec": {"schedulingPolicy": {"gang": {"minCount": 0}}},
}


def gang(min_count: int) -> Obj:
    return {**GANG, "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}}


def member(name: str, n: int, **kw: object) -> Obj:
    return pod(name, [container("c", {GPU: n})], schedulingGroup={"podGroupName": "g"}, **kw)  # type: ignore[arg-type]


def cluster(
    sizes: list[int], policy: str = "binpack", labels: dict[str, dict[str, str]] | None = None
) -> Scheduler:
    objs: list[Obj] = [CLASS]
    for i, size in enumerate(sizes):
        n = f"n{i}"
        objs.append(node(n, labels=(labels or {}).get(n)))
        objs.append(resource_slice(f"s{i}", gpus(size), node_name=n))
    return Scheduler(state_of(*objs), policy)


def test_the_spread_that_strands_the_last_member_is_undone() -> None:
    """kubernetes/kubernetes#138765's shape: spreading two members of 2 over two nodes of 4 leaves
    no node for the member of 4; placing both on one node leaves the other whole."""
    members = [member("a", 2), member("b", 2), member("c", 4)]
    upstream = PodGroupCycle(cluster([4, 4], "spread"), topology_aware=False, search_steps=0)
    assert upstream.schedule(PodGroupInfo(gang(3), members)).status == UNSCHEDULABLE
    s = cluster([4, 4], "spread")
    d = PodGroupCycle(s, topology_aware=False).schedule(PodGroupInfo(gang(3), members))
    assert d.status == SCHEDULED
    nodes = [x.node for x, _ in d.placed()]
    assert nodes[0] == nodes[1] != nodes[2]


def test_a_member_whose_node_selector_fits_only_where_an_earlier_member_went() -> None:
    s = cluster([4, 4], labels={"n0": {"big": "yes"}})
    members = [member("a", 1), member("b", 4, nodeSelector={"big": "yes"})]
    assert (
        PodGroupCycle(s, topology_aware=False, search_steps=0).schedule(PodGroupInfo(gang(2), members)).status
        == UNSCHEDULABLE
    )
    d = PodGroupCycle(s, topology_aware=False).schedule(PodGroupInfo(gang(2), members))
    assert [x.node for x, _ in d.placed()] == ["n1", "n0"]


def test_a_member_that_fits_nowhere_is_left_out_while_min_count_allows() -> None:
    s = cluster([2])
    found = search(s, [member("a", 1), member("huge", 8), member("b", 1)], ["n0"], min_count=2, already=0)
    assert found is not None
    assert found.nodes == ["n0", None, "n0"]
    assert s.schedule(pod("probe", [container("c", {GPU: 2})])).status == SCHEDULED  # all undone


def test_the_search_stops_at_its_step_budget() -> None:
    s = cluster([1, 1, 1, 1])
    members = [member(f"m{i}", 1) for i in range(4)] + [member("x", 2)]
    assert search(s, members, ["n0", "n1", "n2", "n3"], min_count=5, already=0, steps=40) is None


def _packable(nodes: list[int], sizes: list[int]) -> bool:
    for assignment in product(range(len(nodes)), repeat=len(sizes)):
        used = [0] * len(nodes)
        for member_index, n in enumerate(assignment):
            used[n] += sizes[member_index]
        if all(u <= c for u, c in zip(used, nodes, strict=True)):
            return True
    return False


@settings(max_examples=80, deadline=None)
@given(
    nodes=st.lists(st.integers(1, 6), min_size=1, max_size=3),
    sizes=st.lists(st.integers(1, 6), min_size=1, max_size=4),
    policy=st.sampled_from(["binpack", "spread", "upstream"]),
)
def test_a_gang_is_placed_whenever_some_assignment_exists(
    nodes: list[int], sizes: list[int], policy: str
) -> None:
    """Against exhaustive enumeration on small clusters: whenever the members can all be put on the
    nodes by GPU count, the cycle places them all (and never places them when they cannot)."""
    s = cluster(nodes, policy)
    members = [member(f"m{i}", n) for i, n in enumerate(sizes)]
    d = PodGroupCycle(s, topology_aware=False).schedule(PodGroupInfo(gang(len(sizes)), members))
    assert (d.status == SCHEDULED) == _packable(nodes, sizes)
    if d.status == SCHEDULED:
        assert len(d.placed()) == len(sizes)
