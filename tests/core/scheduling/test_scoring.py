"""core.scoring: kube-scheduler's default scores (``--policy upstream``) and binpack's fragmentation term."""

from __future__ import annotations

from typing import Any

import pytest

from tests.core.harness import state_of
from tests.core.podfactory import container, device, device_class, node, pod, resource_slice
from webhook.core.api.alignment import ALIGN_BY_ANNOTATION
from webhook.core.api.podresources import pod_requests_nonzero
from webhook.core.cluster.nodeinfo import NodeInfo
from webhook.core.scheduling.plugins.noderesources import balanced_allocation, least_allocated
from webhook.core.scheduling.scheduler import Scheduler
from webhook.core.scheduling.scoring import order_nodes, upstream_score

GIB = 1024**3


def info(cpu: str = "10", memory: str = "10Gi", *bound: dict[str, Any]) -> NodeInfo:
    ni = NodeInfo.of(node("n", {"cpu": cpu, "memory": memory}))
    for i, reqs in enumerate(bound):
        r, nz = pod_requests_nonzero(pod(f"b{i}", [container("c", reqs)]))
        ni.add_pod(f"b{i}", r, [], nz)
    return ni


def test_least_allocated_is_the_mean_free_share_of_cpu_and_memory() -> None:
    ni = info("10", "10Gi", {"cpu": "2", "memory": "5Gi"})
    reqs, nz = pod_requests_nonzero(pod("p", [container("c", {"cpu": "1", "memory": "1Gi"})]))
    # cpu: (10000 - 3000) * 100 // 10000 = 70; memory: (10 - 6) * 100 // 10 = 40; (70 + 40) // 2
    assert least_allocated(nz, ni) == 55
    # balanced: fractions 0.3 and 0.6, std 0.15: int((1 - 0.15) * 100)
    assert balanced_allocation(reqs, ni) == 85
    assert upstream_score(reqs, nz, ni) == 140


def test_missing_requests_count_as_100m_and_200mi_for_least_allocated_only() -> None:
    reqs, nz = pod_requests_nonzero(pod("p", [container("c", {"example.com/gpu": 1})]))
    assert nz == {"cpu": 100, "memory": 200 * 1024 * 1024}
    assert "cpu" not in reqs
    ni = info("1", "1Gi")
    # cpu (1000 - 100) * 100 // 1000 = 90; memory (1024 - 200) * 100 // 1024 = 80
    assert least_allocated(nz, ni) == 85
    assert balanced_allocation(reqs, ni) == 0  # a best-effort pod is not scored by BalancedAllocation


def test_overcommitted_resources_score_zero_and_absent_ones_are_skipped() -> None:
    ni = info("1", "1Gi")
    _, nz = pod_requests_nonzero(pod("p", [container("c", {"cpu": "2", "memory": "512Mi"})]))
    assert least_allocated(nz, ni) == (0 + 50) // 2
    no_memory = NodeInfo.of(node("m", {"cpu": "4"}))
    no_memory.allocatable.pop("memory")
    assert least_allocated({"cpu": 1000, "memory": GIB}, no_memory) == 75


@pytest.mark.parametrize(("policy", "first"), [("binpack", "b"), ("spread", "a"), ("upstream", "b")])
def test_order_nodes_best_first_then_by_name(policy: str, first: str) -> None:
    scores = {"a": 1.0, "b": 2.0, "c": 2.0}
    assert order_nodes(scores, policy)[0] == first


def gpu_node(name: str, cpu: str = "64") -> list[Any]:
    gpus = [
        device(f"gpu-{i}", {"resource.kubernetes.io/pcieRoot": {"string": f"r{i // 4}"}}) for i in range(8)
    ]
    return [node(name, {"cpu": cpu}), resource_slice(f"{name}-gpus", gpus, node_name=name, pool=name)]


def test_upstream_spreads_by_cpu_and_binpack_packs_gpus() -> None:
    dc = device_class("gpu", "example.com/gpu", selectors=["true"])
    objects = [dc, *gpu_node("a", "64"), *gpu_node("b", "32")]
    p = pod("p", [container("c", {"cpu": "4", "example.com/gpu": 1})])
    # Equal GPU use; node a has more cpu free: LeastAllocated prefers it.
    assert Scheduler(state_of(*objects), "upstream").schedule(p).node == "a"
    st_ = state_of(*objects)
    sched = Scheduler(st_, "binpack")
    first = sched.schedule(p)
    sched.reserve(first)
    second = sched.schedule(pod("q", [container("c", {"cpu": "4", "example.com/gpu": 1})], uid="q"))
    assert second.node == first.node  # binpack: the node already in use


def test_binpack_sends_a_1_gpu_pod_where_it_breaks_no_whole_group() -> None:
    dc = device_class("gpu", "example.com/gpu", selectors=["true"])
    dc["metadata"]["annotations"] = {ALIGN_BY_ANNOTATION: "resource.kubernetes.io/pcieRoot"}
    st_ = state_of(dc, *gpu_node("a"), *gpu_node("b"))
    sched = Scheduler(st_, "binpack")
    # a: root r0 full (4 used), r1 whole: utilisation after would be 5/8 but r1 would break.
    # b: 3 used on r0: utilisation after 4/8, no whole root broken.
    for where, n in (("a", 4), ("b", 3)):
        held = [("gpu.example.com", where, f"gpu-{j}") for j in range(n)]
        st_.reserve(
            f"fill-{where}", held, pod(f"fill-{where}", [container("c", {"example.com/gpu": n})]), where
        )
    d = sched.schedule(pod("one", [container("c", {"example.com/gpu": 1})]))
    assert d.node == "b"
    assert d.special is not None
    assert [r.device.name for r in d.special.results] == ["gpu-3"]
    # Without the annotation there are no groups: plain utilisation prefers the fuller node a.
    plain = device_class("gpu", "example.com/gpu", selectors=["true"])
    st_.apply("DeviceClass", plain)
    assert sched.schedule(pod("one", [container("c", {"example.com/gpu": 1})])).node == "a"
