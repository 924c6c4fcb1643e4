"""Placement of a pod's devices inside a node: alignment constraints, the policies' device choice and
how a decision explains it (core.placement, through core.scheduler). Hypothesis properties first."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.harness import claim, exactly, state_of
from tests.core.podfactory import container, device, device_class, node, pod, resource_slice
from webhook.core.allocation.allocator import Allocator
from webhook.core.allocation.errors import Unsatisfiable
from webhook.core.allocation.placement import alignment_text, describe
from webhook.core.api.alignment import ALIGN_ANNOTATION, ALIGN_BY_ANNOTATION
from webhook.core.api.objects import Obj
from webhook.core.cluster.state import ClusterState
from webhook.core.scheduling.framework import SCHEDULED, UNSCHEDULABLE, Decision
from webhook.core.scheduling.scheduler import Scheduler

GPU = "example.com/gpu"
NIC = "example.com/nic"
ROOT = "resource.kubernetes.io/pcieRoot"


def aligned_class(name: str, ext: str, driver: str) -> Obj:
    dc = device_class(name, ext, selectors=[f'device.driver == "{driver}"'])
    dc["metadata"]["annotations"] = {ALIGN_BY_ANNOTATION: ROOT}
    return dc


def gpu_state(roots: list[list[int]], taken: list[int], nics: list[int] | None = None) -> ClusterState:
    """One node ``n``: GPU ``gpu-i`` on the roots ``roots[i]`` (one value: a scalar attribute;
    more: a list-typed one); ``taken`` GPUs held by another claim; a NIC per entry of ``nics``."""
    gpus = []
    for i, rs in enumerate(roots):
        attr = {"string": f"r{rs[0]}"} if len(rs) == 1 else {"strings": [f"r{r}" for r in rs]}
        gpus.append(device(f"gpu-{i}", {ROOT: attr}))
    objects = [
        node("n"),
        aligned_class("gpu", GPU, "gpu.example.com"),
        resource_slice("gpus", gpus, node_name="n", pool="gpus"),
    ]
    if nics is not None:
        objects += [
            aligned_class("nic", NIC, "nic.example.com"),
            resource_slice(
                "nics",
                [device(f"nic-{i}", {ROOT: {"string": f"r{r}"}}) for i, r in enumerate(nics)],
                driver="nic.example.com",
                node_name="n",
                pool="nics",
            ),
        ]
    if taken:
        results = [
            {"request": "r", "driver": "gpu.example.com", "pool": "gpus", "device": f"gpu-{i}"} for i in taken
        ]
        objects.append(
            claim("held", [exactly("r", "gpu", len(taken))], allocation={"devices": {"results": results}})
        )
    return state_of(*objects)


def gpu_pod(counts: list[int], align: str | None = None, nic: int = 0) -> Obj:
    containers = []
    for i, n in enumerate(counts):
        reqs: dict[str, Any] = {GPU: n}
        if nic and i == 0:
            reqs[NIC] = nic
        containers.append(container(f"c{i}", reqs))
    p = pod("p", containers)
    if align is not None:
        p["metadata"]["annotations"] = {ALIGN_ANNOTATION: align}
    return p


def whole_after(roots: list[list[int]], taken: set[int]) -> int:
    """Whole free groups of the GPUs once ``taken`` are in use."""
    members: dict[int, list[int]] = {}
    for i, rs in enumerate(roots):
        for r in rs:
            members.setdefault(r, []).append(i)
    return sum(1 for devs in members.values() if not any(i in taken for i in devs))


def chosen(d: Decision, prefix: str = "gpu-") -> list[int]:
    assert d.special is not None
    return [int(r.device.name.split("-")[1]) for r in d.special.results if r.device.name.startswith(prefix)]


def request_devices(d: Decision, request: str) -> list[int]:
    assert d.special is not None
    return [int(r.device.name.split("-")[1]) for r in d.special.results if r.request == request]


# --- properties ------------------------------------------------------------------------------------


@st.composite
def nodes(draw: st.DrawFn, lists: bool) -> tuple[list[list[int]], list[int]]:
    n = draw(st.integers(1, 8))
    if lists:
        roots = [sorted(draw(st.sets(st.integers(0, 2), min_size=1, max_size=2))) for _ in range(n)]
    else:
        roots = [[draw(st.integers(0, 2))] for _ in range(n)]
    taken = sorted(draw(st.sets(st.integers(0, n - 1), max_size=n)))
    return roots, taken


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes(lists=True),
    st.lists(st.integers(1, 4), min_size=1, max_size=2),
    st.sampled_from(["binpack", "spread"]),
)
def test_every_allocation_under_required_alignment_satisfies_the_constraint(
    shape: tuple[list[list[int]], list[int]], counts: list[int], policy: str
) -> None:
    roots, taken = shape
    st_ = gpu_state(roots, taken)
    d = Scheduler(st_, policy).schedule(gpu_pod(counts))  # required: the default
    largest = max(
        sum(1 for rs in roots if r in rs) for r in {r for rs in roots for r in rs}
    )  # the largest group of the cluster
    if d.status == SCHEDULED:
        for i, count in enumerate(counts):
            devs = request_devices(d, f"container-{i}-request-0")
            assert len(devs) == count
            if 2 <= count <= largest:
                common = set.intersection(*(set(roots[j]) for j in devs))
                assert common, f"container {i} got {devs} on roots {[roots[j] for j in devs]}"
                constraint = {"requests": [f"container-{i}-request-0"], "matchAttribute": ROOT}
                assert constraint in d.constraints
        assert not set(chosen(d)) & set(taken)
        return
    assert d.status == UNSCHEDULABLE
    if len(counts) == 1:  # nothing would do: no free set of that size shares a root
        free = [i for i in range(len(roots)) if i not in taken]
        (count,) = counts
        aligned_sets = [
            c
            for c in itertools.combinations(free, count)
            if count < 2 or set.intersection(*(set(roots[j]) for j in c))
        ]
        assert not aligned_sets or count > largest


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes(lists=False), st.integers(1, 8), st.sampled_from(["none", "required"]))
def test_binpack_never_leaves_fewer_whole_groups_than_upstream(
    shape: tuple[list[list[int]], list[int]], count: int, align: str
) -> None:
    roots, taken = shape
    free = [i for i in range(len(roots)) if i not in taken]
    binpack = Scheduler(gpu_state(roots, taken), "binpack").schedule(gpu_pod([count], align))
    if align == "none":
        # The same pod on the same node under --policy upstream: no constraint, first fit.
        upstream = Scheduler(gpu_state(roots, taken), "upstream").schedule(gpu_pod([count], align))
        assert (binpack.status == SCHEDULED) == (upstream.status == SCHEDULED) == (len(free) >= count)
        if upstream.status != SCHEDULED:
            return
        left = whole_after(roots, set(taken) | set(chosen(binpack)))
        assert left >= whole_after(roots, set(taken) | set(chosen(upstream)))
        candidates: Iterable[tuple[int, ...]] = itertools.combinations(free, count)
    else:
        # Aligned, against upstream's allocator given the same constraint.
        st_ = gpu_state(roots, taken)
        nd = st_.node_devices("n")
        assert nd is not None
        cons = [{"requests": ["r"], "matchAttribute": ROOT}] if count > 1 else None
        try:
            (alloc,) = Allocator(nd, st_.classes.get, st_.cel, st_.allocated.devices).allocate(
                [claim("x", [exactly("r", "gpu", count)], cons)]
            )
        except Unsatisfiable:
            largest = max(sum(1 for rs in roots if rs == [r]) for r in range(3))
            assert binpack.status == UNSCHEDULABLE or count > largest
            return
        assert binpack.status == SCHEDULED
        left = whole_after(roots, set(taken) | set(chosen(binpack)))
        first_fit = {int(r.device.name.split("-")[1]) for r in alloc.results}
        assert left >= whole_after(roots, set(taken) | first_fit)
        candidates = (
            c for c in itertools.combinations(free, count) if count < 2 or len({roots[j][0] for j in c}) == 1
        )
    # binpack's choice is the best there is (groups are disjoint here).
    assert left == max(whole_after(roots, set(taken) | set(c)) for c in candidates)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes(lists=False), st.integers(1, 3))
def test_decisions_are_deterministic(shape: tuple[list[list[int]], list[int]], count: int) -> None:
    roots, taken = shape
    results = []
    for _ in range(2):
        d = Scheduler(gpu_state(roots, taken), "binpack").schedule(gpu_pod([count]))
        results.append((d.status, chosen(d) if d.special else None, d.constraints))
    assert results[0] == results[1]


# --- examples --------------------------------------------------------------------------------------

HALF_USED = [[0]] * 4 + [[1]] * 4  # two roots of four


def test_a_4_gpu_pod_on_two_half_used_roots_waits_when_required() -> None:
    d = Scheduler(gpu_state(HALF_USED, [0, 1, 4, 5]), "binpack").schedule(gpu_pod([4]))
    assert d.status == UNSCHEDULABLE
    assert d.message == f"0/1 nodes are available: 1 cannot align devices by {ROOT}."


def test_preferred_falls_back_to_a_split_set_and_records_it() -> None:
    d = Scheduler(gpu_state(HALF_USED, [0, 1, 4, 5]), "binpack").schedule(gpu_pod([4], "preferred"))
    assert d.status == SCHEDULED
    assert sorted(chosen(d)) == [2, 3, 6, 7]
    assert d.constraints == []  # the claim carries no constraint its devices do not satisfy
    assert d.placement is not None
    assert d.placement.relaxed
    assert alignment_text(d.placement) == "container-0: split pcieRoot=r0|r1 (preferred)"


def test_none_opts_out_of_the_constraint_but_keeps_the_device_order() -> None:
    d = Scheduler(gpu_state(HALF_USED, [0, 1, 2, 4]), "binpack").schedule(gpu_pod([2], "none"))
    assert d.constraints == []
    assert sorted(chosen(d)) == [3, 5]  # unaligned: the last GPU of the fuller root first, then r1
    d = Scheduler(gpu_state(HALF_USED, [0]), "binpack").schedule(gpu_pod([2], "none"))
    assert sorted(chosen(d)) == [1, 2]  # the root already in use, not the whole one


def test_binpack_keeps_whole_groups_and_upstream_takes_the_first() -> None:
    st_ = gpu_state(HALF_USED, [4])
    binpack = Scheduler(st_, "binpack").schedule(gpu_pod([1]))
    assert chosen(binpack) == [5]
    upstream = Scheduler(gpu_state(HALF_USED, [4]), "upstream").schedule(gpu_pod([1]))
    assert chosen(upstream) == [0]
    spread = Scheduler(gpu_state(HALF_USED, [4]), "spread").schedule(gpu_pod([1]))
    assert chosen(spread) == [0]


def test_gpu_and_nic_of_one_container_share_one_constraint() -> None:
    st_ = gpu_state(HALF_USED, [], nics=[0, 1])
    nd = st_.node_devices("n")
    assert nd is not None
    # The NIC of root r0 is taken: the pod must go to r1 although r0 comes first.
    held = claim(
        "nic-held",
        [exactly("r", "nic")],
        allocation={
            "devices": {
                "results": [{"request": "r", "driver": "nic.example.com", "pool": "nics", "device": "nic-0"}]
            }
        },
    )
    st_.apply("ResourceClaim", held)
    d = Scheduler(st_, "binpack").schedule(gpu_pod([2], nic=1))
    assert d.status == SCHEDULED
    assert d.constraints == [
        {"requests": ["container-0-request-0", "container-0-request-1"], "matchAttribute": ROOT}
    ]
    assert sorted(chosen(d)) == [4, 5]
    assert chosen(d, "nic-") == [1]


def test_an_8_gpu_pod_on_roots_of_four_is_not_aligned_and_the_note_says_why() -> None:
    d = Scheduler(gpu_state(HALF_USED, []), "binpack").schedule(gpu_pod([8]))
    assert d.status == SCHEDULED
    assert d.constraints == []
    assert d.placement is not None
    assert d.placement.notes == [
        f"container-0: 8 devices of class gpu cannot share {ROOT} (the largest group has 4)"
    ]


def test_upstream_adds_no_constraint_even_when_the_class_asks() -> None:
    d = Scheduler(gpu_state(HALF_USED, [0, 1, 4, 5]), "upstream").schedule(gpu_pod([4]))
    assert d.status == SCHEDULED
    assert d.constraints == []
    assert chosen(d) == [2, 3, 6, 7]


def test_describe_says_which_devices_and_why() -> None:
    d = Scheduler(gpu_state(HALF_USED, [4]), "binpack").schedule(gpu_pod([2]))
    assert d.special is not None
    assert describe(d.placement, d.special.results) == (
        f"devices gpus/gpu-5, gpus/gpu-6: container-0 aligned on {ROOT}=r1 (required); binpack fills the "
        f"fullest {ROOT} group with room: 1 of 2 groups left whole (1 before)"
    )
    assert alignment_text(d.placement) == "container-0: pcieRoot=r1"
    spread = Scheduler(gpu_state(HALF_USED, [4]), "spread").schedule(gpu_pod([2]))
    assert spread.special is not None
    assert describe(spread.placement, spread.special.results).endswith(
        f"spread takes the emptiest {ROOT} group: 0 of 2 groups left whole (1 before)"
    )
    assert describe(None, []) == ""


def test_preferred_goes_where_it_can_be_aligned_before_falling_back() -> None:
    # Node "n": two half-used roots (a split set there breaks no whole root); node "m": empty.
    st_ = gpu_state(HALF_USED, [0, 1, 4, 5])
    st_.apply("Node", node("m"))
    st_.apply(
        "ResourceSlice",
        resource_slice(
            "m-gpus",
            [device(f"gpu-{i}", {ROOT: {"string": f"r{i // 4}"}}) for i in range(8)],
            node_name="m",
            pool="m",
        ),
    )
    d = Scheduler(st_, "binpack").schedule(gpu_pod([4], "preferred"))
    assert d.node == "m"
    assert d.placement is not None
    assert not d.placement.relaxed
    assert d.constraints == [{"requests": ["container-0-request-0"], "matchAttribute": ROOT}]


def test_a_cel_error_still_aborts_where_alignment_is_impossible() -> None:
    st_ = gpu_state(HALF_USED, [0, 1, 4, 5])
    broken = aligned_class("gpu", GPU, "gpu.example.com")
    broken["spec"]["selectors"] = [{"cel": {"expression": 'device.attributes["gpu.example.com"].x == 1'}}]
    st_.apply("DeviceClass", broken)
    d = Scheduler(st_, "binpack").schedule(gpu_pod([4]))
    assert d.status == "Error"
    assert "CEL runtime error" in d.message
