"""Worker behaviour between the cache and the queue that the end-to-end tests (test_scheduling,
test_resilience) do not pin down: which pods are ours, what each event does to the scheduling and
cleanup queues, and when a binding cycle's in-flight reservation goes."""

from __future__ import annotations

import logging
import queue
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from tests.worker.harness import GPU, Cluster, device_class, gpu_slice, node
from webhook.core.api.constants import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from webhook.core.api.objects import Obj
from webhook.core.cluster.slices import DeviceKey
from webhook.core.scheduling.framework import SCHEDULED
from webhook.kube.cache import ClusterCache
from webhook.kube.client import KubeClient
from webhook.kube.leader import LeaderElector
from webhook.runtime import logs
from webhook.worker.metrics import WorkerMetrics
from webhook.worker.worker import Worker, WorkerConfig

GPU0: DeviceKey = ("gpu.example.com", "n-gpu", "gpu-0")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make_worker(client: KubeClient, cache: ClusterCache, clock: Clock | None = None, **kwargs: Any) -> Worker:
    return Worker(
        client,
        cache,
        WorkerConfig(bind_workers=1, identity="test"),
        WorkerMetrics(CollectorRegistry()),
        clock=clock or Clock(),
        **kwargs,
    )


@pytest.fixture
def offline() -> Iterator[Worker]:
    """A worker over an empty static cache and a client that is never used."""
    w = make_worker(KubeClient(None), ClusterCache.from_objects([]))
    yield w
    w.stop()


def a_pod(name: str = "p", uid: str | None = None, **spec: Any) -> Obj:
    s: Obj = {"schedulerName": "draxr", "containers": [{"name": "c"}]}
    s.update(spec)
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}"},
        "spec": s,
    }


def cleanups(w: Worker) -> list[tuple[str, str, str]]:
    """What the events queued for the maintenance thread to release (drained):
    (namespace, claim, pod uid)."""
    out = []
    while True:
        try:
            item = w._cleanup.get_nowait()
            entry = (item.namespace, item.claim, item.pod_uid)
            if entry not in out:  # a claim event and a pod event may both queue it: release is idempotent
                out.append(entry)
        except queue.Empty:
            return out


def unschedulable_waiting(w: Worker, uid: str = "waiting") -> None:
    """A pod that failed and waits for a cluster change."""
    w.queue.add(uid)
    entry = w.queue.pop(timeout=0)
    assert entry is not None
    w.queue.failed(uid, unschedulable=True)
    assert w.queue.depth()["unschedulable"] == 1


# -- is_ours ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "ours"),
    [
        ({}, True),
        ({"spec": {"schedulerName": "default-scheduler"}}, False),
        ({"spec": {"schedulerName": None}}, False),
        ({"spec": {"nodeName": "n"}}, False),
        ({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}, False),
        ({"status": {"phase": "Pending"}}, True),
        ({"status": {"phase": ""}}, True),
        ({"status": {"phase": "Running"}}, False),
        ({"status": {"phase": "Succeeded"}}, False),
        ({"spec": {"schedulingGates": [{"name": "hold"}]}}, False),
        ({"spec": {"schedulingGates": []}}, True),
    ],
)
def test_is_ours(offline: Worker, change: Obj, ours: bool) -> None:
    p = a_pod()
    for section, fields in change.items():
        p.setdefault(section, {}).update(fields)
    assert offline.is_ours(p) is ours


def test_a_worker_with_another_name_owns_other_pods() -> None:
    w = Worker(
        KubeClient(None),
        ClusterCache.from_objects([]),
        WorkerConfig(scheduler_name="other", bind_workers=1),
        WorkerMetrics(CollectorRegistry()),
    )
    try:
        assert not w.is_ours(a_pod())
        assert w.is_ours(a_pod(schedulerName="other"))
    finally:
        w.stop()


# -- pod events and the queues ------------------------------------------------------------------------


def test_a_pending_pod_of_ours_is_queued_and_leaves_once_bound(offline: Worker) -> None:
    offline.cache.handle("Pod", "ADDED", a_pod())
    offline.cache.handle("Pod", "ADDED", a_pod("theirs", schedulerName="default-scheduler"))
    assert len(offline.queue) == 1
    offline.cache.handle("Pod", "MODIFIED", a_pod(nodeName="n"))
    assert len(offline.queue) == 0
    assert offline.queue.pop(timeout=0) is None


def test_higher_priority_pods_are_popped_first(offline: Worker) -> None:
    offline.cache.handle("Pod", "ADDED", a_pod("low", priority=1))
    offline.cache.handle("Pod", "ADDED", a_pod("high", priority=100))
    offline.cache.handle("Pod", "ADDED", a_pod("junk", priority="7"))  # unreadable: 0
    popped = [offline.queue.pop(timeout=0) for _ in range(3)]
    assert [e.uid for e in popped if e is not None] == ["uid-high", "uid-low", "uid-junk"]


def test_a_finished_pods_claim_is_queued_for_cleanup(offline: Worker) -> None:
    done = a_pod(nodeName="n")
    done["status"] = {
        "phase": "Succeeded",
        "extendedResourceClaimStatus": {"resourceClaimName": "p-er-abcde"},
    }
    offline.cache.handle("Pod", "MODIFIED", done)
    assert cleanups(offline) == [("default", "p-er-abcde", "uid-p")]


def test_a_deleted_pod_without_a_status_is_cleaned_up_by_its_cached_special_claim(offline: Worker) -> None:
    p = a_pod()
    claim = {
        "kind": "ResourceClaim",
        "metadata": {
            "name": "p-extended-resources-xyz",
            "namespace": "default",
            "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
            "ownerReferences": [{"kind": "Pod", "name": "p", "uid": "uid-p", "controller": True}],
        },
    }
    offline.cache.handle("ResourceClaim", "ADDED", claim)
    offline.cache.handle("Pod", "DELETED", p)
    assert cleanups(offline) == [("default", "p-extended-resources-xyz", "uid-p")]


def test_pods_without_a_claim_or_still_running_queue_no_cleanup(offline: Worker) -> None:
    offline.cache.handle("Pod", "DELETED", a_pod("plain"))
    running = a_pod("running", nodeName="n")
    running["status"] = {"phase": "Running", "extendedResourceClaimStatus": {"resourceClaimName": "c"}}
    offline.cache.handle("Pod", "MODIFIED", running)
    assert cleanups(offline) == []


def test_a_bound_pod_that_finishes_retries_unschedulable_pods(offline: Worker) -> None:
    unschedulable_waiting(offline)
    done = a_pod("done", nodeName="n")
    done["status"] = {"phase": "Failed"}
    offline.cache.handle("Pod", "MODIFIED", done)
    assert offline.queue.depth()["unschedulable"] == 0


def test_an_unbound_pod_that_goes_away_frees_nothing_and_retries_nobody(offline: Worker) -> None:
    unschedulable_waiting(offline)
    offline.cache.handle("Pod", "DELETED", a_pod("never-bound"))
    assert offline.queue.depth()["unschedulable"] == 1


@pytest.mark.parametrize(
    ("kind", "etype", "obj"),
    [
        ("Node", "ADDED", node("n")),
        ("ResourceSlice", "MODIFIED", gpu_slice("n", 1)),
        ("DeviceClass", "ADDED", device_class()),
        ("DeviceTaintRule", "DELETED", {"kind": "DeviceTaintRule", "metadata": {"name": "r"}}),
        ("ResourceClaim", "DELETED", {"kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "d"}}),
        ("ResourceClaim", "MODIFIED", {"kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "d"}}),
    ],
)
def test_cluster_events_that_may_free_capacity_retry_unschedulable_pods(
    offline: Worker, kind: str, etype: str, obj: Obj
) -> None:
    unschedulable_waiting(offline)
    offline.cache.handle(kind, etype, obj)
    assert offline.queue.depth()["unschedulable"] == 0


def test_a_newly_allocated_claim_does_not_retry_unschedulable_pods(offline: Worker) -> None:
    unschedulable_waiting(offline)
    result = {"request": "r", "driver": GPU0[0], "pool": GPU0[1], "device": GPU0[2]}
    claim = {
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "default"},
        "status": {"allocation": {"devices": {"results": [result]}}},
    }
    offline.cache.handle("ResourceClaim", "MODIFIED", claim)
    assert offline.queue.depth()["unschedulable"] == 1


def test_resync_queues_pending_pods_and_finished_pods_claims(offline: Worker) -> None:
    done = a_pod("done", nodeName="n")
    done["status"] = {"phase": "Succeeded", "extendedResourceClaimStatus": {"resourceClaimName": "c"}}
    offline.cache.handle("Pod", "ADDED", a_pod("pending"), notify=False)
    offline.cache.handle("Pod", "ADDED", done, notify=False)
    assert len(offline.queue) == 0
    offline.resync()
    assert len(offline.queue) == 1
    assert cleanups(offline) == [("default", "c", "uid-done")]


# -- schedule_one's guards ------------------------------------------------------------------------------


def test_a_pod_that_is_no_longer_ours_is_dropped(offline: Worker) -> None:
    offline.cache.handle("Pod", "ADDED", a_pod())
    entry = offline.queue.pop(timeout=0)
    assert entry is not None
    offline.cache.handle("Pod", "MODIFIED", a_pod(nodeName="elsewhere"), notify=False)
    assert offline.schedule_one(entry.uid) is None
    assert len(offline.queue) == 0


def test_a_follower_gives_the_pod_back_untouched() -> None:
    client = KubeClient(None)
    cache = ClusterCache.from_objects([a_pod()])
    w = make_worker(client, cache, leader=LeaderElector(client, "ns", "lease", "me"))
    try:
        w.resync()
        entry = w.queue.pop(timeout=0)
        assert entry is not None
        assert w.schedule_one(entry.uid) is None
        again = w.queue.pop(timeout=0)
        assert again is not None
        assert again.uid == entry.uid
        assert again.attempts == 0  # not counted as a failed attempt
    finally:
        w.stop()


# -- the in-flight reservation and the cache ------------------------------------------------------------


def _bind_one(kube: Cluster, pod: Obj) -> tuple[Worker, ClusterCache]:
    """Schedule ``pod`` through a worker over a static cache and wait for its binding cycle."""
    cache = ClusterCache.from_objects(kube.snapshot())
    w = make_worker(kube.client(), cache)
    decision = w.schedule_one(pod["metadata"]["uid"])
    assert decision is not None
    assert decision.status == SCHEDULED, decision.message
    w.stop()  # waits for the binding cycle
    assert kube.bound() == {pod["metadata"]["name"]: "n"}
    return w, cache


def _claim_events(kube: Cluster, cache: ClusterCache, name: str, *, allocated: bool) -> None:
    claim = kube.em.get("resourceclaims", name, "default")
    if not allocated:
        claim["status"] = {}
    cache.handle("ResourceClaim", "MODIFIED", {**claim, "kind": "ResourceClaim"})


def test_the_reservation_stays_until_the_cache_shows_the_claim_allocated(kube: Cluster) -> None:
    kube.apply(node("n"), device_class(), gpu_slice("n", 2))
    pod = kube.pod("p")
    _, cache = _bind_one(kube, pod)
    (claim,) = kube.claims()
    name = claim["metadata"]["name"]
    assert cache.state.allocated.is_allocated(GPU0)  # only the reservation holds it so far
    assert cache.allocated([("default", name)]) == set()
    _claim_events(kube, cache, name, allocated=False)  # the creation, before the status write
    _claim_events(kube, cache, name, allocated=False)
    assert cache.state.allocated.is_allocated(GPU0)  # still reserved: the claim shows no devices yet
    _claim_events(kube, cache, name, allocated=True)  # the reservation goes
    assert cache.allocated([("default", name)]) == {("default", name)}
    _claim_events(kube, cache, name, allocated=False)  # deallocated later (the pod finished, say)
    assert not cache.state.allocated.is_allocated(GPU0)  # nothing else held it


def test_a_claim_deletion_also_ends_the_reservation(kube: Cluster) -> None:
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    pod = kube.pod("p")
    _, cache = _bind_one(kube, pod)
    (claim,) = kube.claims()
    cache.handle("ResourceClaim", "DELETED", {**claim, "kind": "ResourceClaim"})  # a relist saw only the end
    assert not cache.state.allocated.is_allocated(GPU0)


def test_a_claim_the_cache_already_shows_releases_the_reservation_at_once(kube: Cluster) -> None:
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    pod = kube.pod("p")
    holder: list[ClusterCache] = []

    def cache_catches_up(step: str, _: Obj) -> None:
        if step == "bound":  # the watch was faster than the binding cycle
            (claim,) = kube.claims()
            holder[0].handle("ResourceClaim", "MODIFIED", {**claim, "kind": "ResourceClaim"}, notify=False)

    cache = ClusterCache.from_objects(kube.snapshot())
    holder.append(cache)
    w = make_worker(kube.client(), cache)
    w.binder.observer = cache_catches_up
    w.schedule_one(pod["metadata"]["uid"])
    w.stop()
    (claim,) = kube.claims()
    _claim_events(kube, cache, claim["metadata"]["name"], allocated=False)
    assert not cache.state.allocated.is_allocated(GPU0)


def test_the_reservation_waits_for_every_claim_the_cycle_wrote(kube: Cluster) -> None:
    kube.apply(node("n"), device_class(), gpu_slice("n", 2))
    kube.em.create(
        "resourceclaims",
        {
            "metadata": {"name": "mine", "namespace": "default"},
            "spec": {
                "devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.example.com"}}]}
            },
        },
    )
    pod = kube.pod("p", {GPU: 1}, resourceClaims=[{"name": "x", "resourceClaimName": "mine"}])
    _, cache = _bind_one(kube, pod)
    (special,) = kube.claims()
    special_name = special["metadata"]["name"]
    special_device = tuple(
        special["status"]["allocation"]["devices"]["results"][0][k] for k in ("driver", "pool", "device")
    )
    _claim_events(kube, cache, special_name, allocated=True)
    _claim_events(kube, cache, special_name, allocated=False)
    assert cache.state.allocated.is_allocated(special_device)  # the user claim is not seen yet
    _claim_events(kube, cache, "mine", allocated=True)
    assert not cache.state.allocated.is_allocated(special_device)


def test_a_late_event_of_a_pod_just_bound_does_not_schedule_it_again(kube: Cluster) -> None:
    """Found on a real apiserver (200 pods at once): the pod's mapping write reached the cache
    after the binding cycle had ended, showing the pod still unbound; scheduled again, its claim
    looked stale to PostFilter and was deleted under the bound pod. Bound pods are assumed until
    the cache shows their node, as kube-scheduler assumes them."""
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    pod = kube.pod("p")
    w, cache = _bind_one(kube, pod)
    pod_uid = pod["metadata"]["uid"]
    assert w.assumed(pod_uid) == "n"
    live = kube.em.get("pods", "p", "default")
    stale = {**live, "kind": "Pod", "spec": {k: v for k, v in live["spec"].items() if k != "nodeName"}}
    cache.handle("Pod", "MODIFIED", stale)  # the mapping's status write, seen after the bind
    assert len(w.queue) == 0
    assert w.schedule_one(pod_uid) is None
    (claim,) = kube.claims()
    assert claim["status"]["reservedFor"][0]["uid"] == pod_uid  # still there, still the pod's
    cache.handle("Pod", "MODIFIED", {**live, "kind": "Pod"})  # the binding, at last
    assert w.assumed(pod_uid) is None


# -- one log line per decision, one per failure --------------------------------------------------------


def _lines(caplog: pytest.LogCaptureFixture, message: str) -> list[dict[str, Any]]:
    return [
        {"msg": r.getMessage(), **logs.context(r)}
        for r in caplog.records
        if r.name == "draxr.worker" and r.getMessage() == message
    ]


def test_each_decision_is_one_log_line_with_pod_node_devices_claim_and_latency(
    kube: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="draxr")
    kube.apply(node("n"), device_class(), gpu_slice("n", 2))
    kube.worker()
    kube.pod("two", {GPU: 2})
    kube.pod("more", {GPU: 1})
    kube.em.wait_for(lambda: _lines(caplog, "bound"), 10, "the bound line")
    kube.em.wait_for(lambda: _lines(caplog, "unschedulable"), 10, "the unschedulable line")
    [bound] = _lines(caplog, "bound")
    erc = kube.em.get("pods", "two", "default")["status"]["extendedResourceClaimStatus"]
    claim = erc["resourceClaimName"]
    assert bound["pod"] == "default/two"
    assert bound["node"] == "n"
    assert bound["devices"] == ["gpu.example.com/n-gpu/gpu-0", "gpu.example.com/n-gpu/gpu-1"]
    assert bound["claim"] == f"default/{claim}"
    assert bound["latency_ms"] > 0
    waiting = _lines(caplog, "unschedulable")[0]
    assert waiting["pod"] == "default/more"
    assert waiting["reason"].startswith("0/1 nodes are available: 1 ")
    assert waiting["latency_ms"] >= 0
    assert waiting["retry_in_s"] > 0


def test_a_failed_binding_is_one_line_with_its_reason(
    kube: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="draxr")
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    kube.em.inject(verbs="create", resource="pods/binding", error=403, message="nope", times=1)
    kube.worker()
    kube.pod("p", {GPU: 1})
    kube.em.wait_for(lambda: _lines(caplog, "bound"), 10, "bound by the retry after the failure")
    [failed] = _lines(caplog, "binding failed")
    assert failed["pod"] == "default/p"
    assert failed["node"] == "n"
    assert failed["devices"] == ["gpu.example.com/n-gpu/gpu-0"]
    assert failed["reason"] == "binding rejected: nope"
