"""``worker.eventhandlers``: which pods are ours, and what each informer event does to the scheduling
and cleanup queues."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from tests.worker.harness import device_class, gpu_slice, node
from tests.worker.workers import GPU0, a_pod, cleanups, unschedulable_waiting
from webhook.core.api.constants import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from webhook.core.api.objects import Obj
from webhook.kube.cache import ClusterCache
from webhook.kube.client import KubeClient
from webhook.worker.config import WorkerConfig
from webhook.worker.metrics import WorkerMetrics
from webhook.worker.worker import Worker

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


# -- a pending pod's own updates ----------------------------------------------------------------------


def _waiting_pod(w: Worker) -> Obj:
    """A pending pod of ours that failed and waits for a cluster change (through the informer)."""
    p = a_pod("w", resourceVersion="1")
    w.cache.handle("Pod", "ADDED", p)
    entry = w.queue.pop(timeout=0)
    assert entry is not None
    w.queue.failed(entry.uid, unschedulable=True)
    assert w.queue.depth()["unschedulable"] == 1
    return p


def _status_update(p: Obj, status: Obj) -> Obj:
    return {**p, "metadata": {**p["metadata"], "resourceVersion": "2"}, "status": status}


def test_a_status_only_update_leaves_an_unschedulable_pod_waiting(offline: Worker) -> None:
    """The worker's own PodScheduled=False comes back as MODIFIED: it must not send the pod it
    just found unschedulable round again (kube-scheduler's queue requeues an unschedulable pod on
    its own update only when a queueing hint says the change may help: labels, resources,
    scheduling gates, tolerations, its claim statuses)."""
    p = _waiting_pod(offline)
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    echo = _status_update(p, {"phase": "Pending", "conditions": [condition]})
    offline.cache.handle("Pod", "MODIFIED", echo)
    assert offline.queue.depth()["unschedulable"] == 1


def test_a_status_only_update_while_in_flight_does_not_cancel_unschedulable(offline: Worker) -> None:
    p = a_pod("w", resourceVersion="1")
    offline.cache.handle("Pod", "ADDED", p)
    entry = offline.queue.pop(timeout=0)
    assert entry is not None
    offline.cache.handle("Pod", "MODIFIED", _status_update(p, {"conditions": [{"type": "PodScheduled"}]}))
    offline.queue.failed(entry.uid, unschedulable=True)
    assert offline.queue.depth()["unschedulable"] == 1


@pytest.mark.parametrize(
    "change",
    [
        {"metadata": {"labels": {"app": "x"}}},
        {"spec": {"tolerations": [{"key": "k", "operator": "Exists"}]}},
        {"status": {"extendedResourceClaimStatus": {"resourceClaimName": "c"}}},
        {"status": {"resourceClaimStatuses": [{"name": "r", "resourceClaimName": "c"}]}},
    ],
)
def test_an_update_that_may_help_sends_an_unschedulable_pod_back(offline: Worker, change: Obj) -> None:
    p = _waiting_pod(offline)
    changed: Obj = {**p, "metadata": {**p["metadata"], "resourceVersion": "2"}, "spec": dict(p["spec"])}
    for section, fields in change.items():
        changed[section] = {**changed.get(section, {}), **fields}
    offline.cache.handle("Pod", "MODIFIED", changed)
    assert offline.queue.depth()["unschedulable"] == 0


def test_resync_sends_unschedulable_pods_back(offline: Worker) -> None:
    _waiting_pod(offline)
    offline.resync()
    assert offline.queue.depth()["unschedulable"] == 0
