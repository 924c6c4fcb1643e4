"""``worker.bindingcycle``: the line a failed binding logs (its PreBind and Bind writes are in
test_binder, Unreserve end to end in test_resilience)."""

from __future__ import annotations

import logging

import pytest

from tests.worker.harness import GPU, Cluster, device_class, gpu_slice, node
from tests.worker.workers import GPU0, bind_one, log_lines, make_worker, unschedulable_waiting
from webhook.kube.cache import ClusterCache


def test_a_failed_binding_is_one_line_with_its_reason(
    kube: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="draxr")
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    kube.em.inject(verbs="create", resource="pods/binding", error=403, message="nope", times=1)
    kube.worker()
    kube.pod("p", {GPU: 1})
    kube.em.wait_for(lambda: log_lines(caplog, "bound"), 10, "bound by the retry after the failure")
    # Under a loaded machine a later attempt may fail for another reason (a lapsed test lease):
    # the injected rejection is one line, with its reason.
    [failed] = [e for e in log_lines(caplog, "binding failed") if e["reason"] == "binding rejected: nope"]
    assert failed["pod"] == "default/p"
    assert failed["node"] == "n"
    assert failed["devices"] == ["gpu.example.com/n-gpu/gpu-0"]
    assert failed["reason"] == "binding rejected: nope"


def test_a_worker_with_a_lagging_view_never_touches_a_pod_already_bound(kube: Cluster) -> None:
    """A new leader whose cache still shows pending a pod the old leader bound: its binding cycle
    reads the pod first and writes nothing. It used to write a claim of its own, overwrite the
    running pod's mapping with it and (Bind failing, or 'succeeding' on the same node) leave the
    pod's real claim to be found superseded and deleted."""
    kube.apply(node("n"), device_class(), gpu_slice("n", 2))
    pod = kube.pod("p")
    lagging = ClusterCache.from_objects(kube.snapshot())  # the new leader's view: p pending
    bind_one(kube, pod)  # the old leader binds it
    (claim,) = kube.claims()
    w = make_worker(kube.client(), lagging)
    kube.em.reset_requests()
    w.queue.add(pod["metadata"]["uid"])
    assert w.queue.pop(timeout=0) is not None
    w.schedule_one(pod["metadata"]["uid"])
    w.stop()  # waits for the binding cycle
    assert [r for r in kube.em.requests() if r.verb not in ("get", "list", "watch")] == []
    assert len(w.queue) == 0  # it left the queue: the cache catches up
    assert not lagging.state.allocated.is_allocated(GPU0)  # the reservation went with the attempt
    live = kube.em.get("pods", "p", "default")
    assert live["status"]["extendedResourceClaimStatus"]["resourceClaimName"] == claim["metadata"]["name"]
    # Cleanup, from the API's view, finds nothing to free.
    fresh = make_worker(kube.client(), ClusterCache.from_objects(kube.snapshot()))
    assert fresh.maintenance.repair_orphans() == 0
    fresh.stop()
    assert [c["metadata"]["uid"] for c in kube.claims()] == [claim["metadata"]["uid"]]


def test_a_resumed_allocation_has_waited_since_its_allocation_timestamp() -> None:
    """A worker that continues an allocated special claim (a new leader) times the wait for its
    binding conditions from ``allocationTimestamp``, as upstream; a fresh allocation from zero."""
    from datetime import UTC, datetime

    from webhook.core.scheduling.framework import SCHEDULED, Decision, UserClaim
    from webhook.worker.bindingcycle import waited_already

    now = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
    resumed = {"status": {"allocation": {"allocationTimestamp": "2026-01-01T00:00:00Z"}}}
    assert waited_already(Decision({}, SCHEDULED, "n1", resumed=resumed), now) == 600.0
    older = {"status": {"allocation": {"allocationTimestamp": "2025-12-31T23:59:00Z"}}}
    both = Decision({}, SCHEDULED, "n1", resumed=resumed, user_claims=[UserClaim(older)])
    assert waited_already(both, now) == 660.0
    assert waited_already(Decision({}, SCHEDULED, "n1"), now) == 0.0
    assert waited_already(Decision({}, SCHEDULED, "n1", resumed={"status": {"allocation": {}}}), now) == 0.0


def test_a_failed_binding_retries_the_pods_waiting_for_its_devices(kube: Cluster) -> None:
    """Unreserve frees the devices the failed cycle held: pods that found them taken are retried
    now, as kube-scheduler moves every unschedulable pod after a binding error, not left waiting
    for some later change (a quiet cluster has none: such a pod waited forever)."""
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    pod = kube.pod("p")
    cache = ClusterCache.from_objects(kube.snapshot())  # no informers: no event moves anyone
    w = make_worker(kube.client(), cache)
    unschedulable_waiting(w)  # found gpu-0 held by p's reservation
    kube.em.inject(verbs="create", resource="pods/binding", error=403, message="nope", times=1)
    w.queue.add(pod["metadata"]["uid"])
    assert w.queue.pop(timeout=0) is not None
    w.schedule_one(pod["metadata"]["uid"])
    w.stop()  # waits for the binding cycle: it failed, and Unreserve freed gpu-0
    assert not cache.state.allocated.is_allocated(GPU0)
    assert w.queue.depth()["unschedulable"] == 0
