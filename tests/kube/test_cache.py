"""ClusterCache: the one state behind one lock that the webhook and the worker share; events keep
its pod index and engine state in step and reach its listeners; SharedScheduler's Reserve is
visible to the next decision."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bench.memory import cache_docs, cache_of, cache_pods, cache_units, tracing
from tests.core.podfactory import container, device_class, gpus, node, pod, resource_slice
from webhook.core.api.constants import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from webhook.core.api.objects import Obj
from webhook.core.scheduling.framework import SCHEDULED, UNSCHEDULABLE
from webhook.kube.cache import ALL_KINDS, ClusterCache

GPU = "example.com/gpu"
CLASS = device_class("gpu.example.com", ext=GPU)


def claim(name: str, *, device: str | None = None, owner: Obj | None = None) -> Obj:
    c: Obj = {
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
    }
    if device is not None:
        result = {"request": "r", "driver": "gpu.example.com", "pool": "n", "device": device}
        c["status"] = {"allocation": {"devices": {"results": [result]}}}
    if owner is not None:
        c["metadata"]["annotations"] = {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"}
        c["metadata"]["ownerReferences"] = [
            {
                "kind": "Pod",
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
            }
        ]
    return c


def gpu_pod(name: str, n: int = 1, cpu: str | None = None) -> Obj:
    requests: dict[str, object] = {GPU: n}
    if cpu is not None:
        requests["cpu"] = cpu
    return pod(name, [container("c", requests)])


class Recorder:
    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache
        self.events: list[tuple[str, str, str]] = []
        self.saw_pod_in_cache: list[bool] = []

    def __call__(self, kind: str, etype: str, obj: Obj) -> None:
        self.events.append((kind, etype, obj["metadata"]["name"]))
        if kind == "Pod":
            self.saw_pod_in_cache.append(self.cache.pod(obj["metadata"]["uid"]) is not None)


# -- sources ---------------------------------------------------------------------------------------


def test_from_objects_is_synced_and_skips_kinds_it_does_not_read() -> None:
    cache = ClusterCache.from_objects(
        [
            node("n"),
            CLASS,
            pod("p"),
            {"kind": "ConfigMap", "metadata": {"name": "x"}},
            {"metadata": {"name": "y"}},
        ]
    )
    assert cache.synced()
    assert cache.synced(ALL_KINDS)
    assert cache.wait_synced(ALL_KINDS, timeout=0)
    assert list(cache.state.nodes) == ["n"]
    assert cache.state.classes.get("gpu.example.com") is not None
    assert cache.device_class("gpu.example.com") is cache.state.classes.get("gpu.example.com")
    assert cache.device_class("other.example.com") is None
    assert list(cache.all_pods()) == ["uid-p"]


def test_a_cache_without_informers_is_not_synced() -> None:
    cache = ClusterCache()
    assert not cache.synced()
    assert not cache.wait_synced(["Node"], timeout=0)


# -- events ------------------------------------------------------------------------------------------


def test_pod_events_keep_the_index_and_the_state_in_step() -> None:
    cache = ClusterCache.from_objects([node("n")])
    pending = pod("p", [container("c", {"cpu": "1"})])
    cache.handle("Pod", "ADDED", pending)
    assert cache.pod("uid-p") is pending  # every pod: the worker needs pending ones
    assert cache.state.allocated.pods == {}
    bound = copy.deepcopy(pending)
    bound["spec"]["nodeName"] = "n"
    cache.handle("Pod", "MODIFIED", bound)
    assert cache.pod("uid-p") is bound
    assert cache.state.nodes["n"].requested == {"cpu": 1000}
    cache.handle("Pod", "DELETED", bound)
    assert cache.pod("uid-p") is None
    assert cache.state.nodes["n"].requested == {"cpu": 0}


def test_listeners_hear_every_event_after_the_state_took_it() -> None:
    cache = ClusterCache()
    first, second = Recorder(cache), Recorder(cache)
    cache.subscribe(first)
    cache.subscribe(second)
    cache.handle("Node", "ADDED", node("n"))
    cache.handle("Pod", "ADDED", pod("p"))
    cache.handle("Pod", "DELETED", pod("p"))
    expected = [("Node", "ADDED", "n"), ("Pod", "ADDED", "p"), ("Pod", "DELETED", "p")]
    assert first.events == second.events == expected
    assert first.saw_pod_in_cache == [True, False]


def test_without_notify_the_listeners_hear_nothing() -> None:
    cache = ClusterCache()
    rec = Recorder(cache)
    cache.subscribe(rec)
    cache.handle("Node", "ADDED", node("n"), notify=False)
    assert rec.events == []
    assert "n" in cache.state.nodes


def test_all_pods_is_a_copy_of_the_index() -> None:
    cache = ClusterCache.from_objects([pod("p")])
    pods = cache.all_pods()
    pods.clear()
    assert list(cache.all_pods()) == ["uid-p"]


# -- claims -----------------------------------------------------------------------------------------


def test_special_claims_and_special_claim_for() -> None:
    owner = pod("p")
    special = claim("p-extended-resources-x", owner=owner)
    cache = ClusterCache.from_objects([claim("user"), special, owner])
    assert cache.special_claims() == [special]
    assert cache.special_claim_for(owner) is special
    assert cache.special_claim_for(pod("q")) is None


def test_allocated_answers_which_claims_the_cache_shows_allocated() -> None:
    cache = ClusterCache.from_objects([claim("done", device="gpu-0"), claim("pending")])
    keys = [("default", "done"), ("default", "pending"), ("default", "unknown")]
    assert cache.allocated(keys) == {("default", "done")}
    assert cache.allocated([]) == set()


def test_forget_claim_drops_it_without_telling_the_listeners() -> None:
    c = claim("c", device="gpu-0")
    cache = ClusterCache.from_objects([c])
    rec = Recorder(cache)
    cache.subscribe(rec)
    cache.forget_claim(c)
    assert cache.allocated([("default", "c")]) == set()
    assert not cache.state.allocated.is_allocated(("gpu.example.com", "n", "gpu-0"))
    assert rec.events == []


# -- SharedScheduler ---------------------------------------------------------------------------------


def gpu_cache(devices: int, cpu: str = "16") -> ClusterCache:
    return ClusterCache.from_objects(
        [node("n", {GPU: 0, "cpu": cpu}), CLASS, resource_slice("s", gpus(devices), node_name="n", pool="n")]
    )


def test_a_reserved_device_is_not_given_to_the_next_pod() -> None:
    cache = gpu_cache(2)
    sched = cache.scheduler()
    first, t1 = sched.schedule_and_reserve(gpu_pod("a"))
    second, t2 = sched.schedule_and_reserve(gpu_pod("b"))
    assert first.status == second.status == SCHEDULED
    assert t1 is not None
    assert t2 is not None
    assert t1 != t2
    assert set(first.device_keys()).isdisjoint(second.device_keys())
    third, t3 = sched.schedule_and_reserve(gpu_pod("c"))
    assert third.status == UNSCHEDULABLE
    assert t3 is None


def test_release_undoes_the_reservation() -> None:
    cache = gpu_cache(1)
    sched = cache.scheduler()
    first, token = sched.schedule_and_reserve(gpu_pod("a", cpu="1"))
    assert token is not None
    assert cache.state.nodes["n"].requested["cpu"] == 1000
    assert sched.schedule_and_reserve(gpu_pod("b"))[0].status == UNSCHEDULABLE
    sched.unreserve(first, token)
    assert cache.state.nodes["n"].requested["cpu"] == 0
    again, _ = sched.schedule_and_reserve(gpu_pod("b"))
    assert again.status == SCHEDULED
    assert again.device_keys() == first.device_keys()


def test_cache_release_drops_only_the_devices() -> None:
    cache = gpu_cache(1)
    decision, token = cache.scheduler().schedule_and_reserve(gpu_pod("a", cpu="1"))
    assert token is not None
    cache.forget_reservation(token)  # what the worker does once the cache shows the written claim
    (key,) = decision.device_keys()
    assert not cache.state.allocated.is_allocated(key)
    assert cache.state.nodes["n"].requested["cpu"] == 1000  # the pod stays assumed until seen bound


def test_the_scheduler_carries_policy_and_writer() -> None:
    sched = gpu_cache(1).scheduler("spread", writer="draxr")
    assert sched.engine.policy == "spread"
    assert sched.engine.writer == "draxr"
    assert sched.engine.percentage_of_nodes_to_score == 0  # adaptive, as kube-scheduler's default
    assert gpu_cache(1).scheduler(percentage_of_nodes_to_score=30).engine.percentage_of_nodes_to_score == 30


def test_a_status_update_of_a_reserved_pod_does_not_free_its_cpu() -> None:
    cache = gpu_cache(2, cpu="1")
    sched = cache.scheduler()
    first = gpu_pod("a", cpu="1")
    decision, _ = sched.schedule_and_reserve(first)
    assert decision.status == SCHEDULED
    patched = copy.deepcopy(first)
    patched["status"] = {"extendedResourceClaimStatus": {"resourceClaimName": "a-x", "requestMappings": []}}
    cache.handle("Pod", "MODIFIED", patched)  # PreBind wrote the mapping; the binding is not seen yet
    second, _ = sched.schedule_and_reserve(gpu_pod("b", cpu="1"))
    assert second.status == UNSCHEDULABLE
    assert second.message == "0/1 nodes are available: 1 Insufficient cpu."


def test_wait_synced_gives_up_when_the_informers_cannot_sync() -> None:
    """Informers that cannot reach their apiserver never sync: the wait ends, saying so."""
    from e2e.emulator import Emulator
    from webhook.kube.client import KubeClient

    with Emulator(tokens={"admin": ("admin", ["system:masters"])}) as em:
        client = KubeClient(em.api_client("admin"))
    cache = ClusterCache()  # the emulator is gone: every list fails
    cache.start(client, ALL_KINDS)
    try:
        assert not cache.wait_synced(ALL_KINDS, timeout=0.2)
        assert not cache.synced(ALL_KINDS)
    finally:
        cache.stop()


# -- memory --------------------------------------------------------------------------------------------
#
# ``bench/memory.py``'s figures (``cache_units``): ``tracemalloc`` growth from N to 2N units of a
# cache fed as its informers feed it (each object decoded from its own JSON document, then trimmed):
# realistic nodes without devices, realistic devices (seven attributes, a UUID each), running pods
# the cache's scheduler placed, each with its special claim. The bounds leave 1.5 to 2 times what was
# measured (CPython 3.11, cel-python; docs/install.md, "Sizing").

KIB = 1024
#: A node as the kubelet reports it, trimmed (measured 6.5 to 6.6 KB).
WORKER_CACHE_BYTES_PER_NODE = 12 * KIB
#: A GPU with seven attributes, a UUID among them (measured 10.9 KB, 5.5 KB with cel-rust).
WORKER_CACHE_BYTES_PER_DEVICE = 16 * KIB
#: A running pod of a Deployment, trimmed, and its special claim (measured 14.4 KB).
WORKER_CACHE_BYTES_PER_POD = 24 * KIB


@pytest.fixture(scope="module")
def cache_memory() -> dict[str, Any]:
    """100 and 200 nodes; 100 nodes with 4 and 8 devices each; 100 and 200 running pods."""
    with tracing():
        return cache_units(nodes=100, devices_per_node=4, pods=100)


def test_a_node_costs_the_cache_less_than_its_bound(cache_memory: dict[str, Any]) -> None:
    assert 0 < cache_memory["worker_cache_bytes_per_node"] < WORKER_CACHE_BYTES_PER_NODE


def test_a_device_costs_the_cache_less_than_its_bound(cache_memory: dict[str, Any]) -> None:
    assert 0 < cache_memory["worker_cache_bytes_per_device"] < WORKER_CACHE_BYTES_PER_DEVICE


def test_a_running_pod_costs_the_cache_less_than_its_bound(cache_memory: dict[str, Any]) -> None:
    assert 0 < cache_memory["worker_cache_bytes_per_pod"] < WORKER_CACHE_BYTES_PER_POD


def test_the_pod_index_and_the_engine_share_each_running_pod() -> None:
    """One object per running pod: the cache's pod index and the engine's accounting hold the same
    trimmed pod, and every taken device is the device index's own key tuple."""
    cache = cache_of(cache_docs(3, 4))
    cache_pods(cache, 0, 10)
    running = cache.state.allocated.pods
    assert len(running) == 10
    for pod_uid, pod_obj in running.items():
        assert cache.pods[pod_uid] is pod_obj
    keys = {id(d.key): d.key for sl in cache.state.devices.slices.values() for d in sl.devices}
    taken = list(cache.state.allocated.devices)
    assert len(taken) == 10
    assert all(keys.get(id(key)) is key for key in taken)
