"""``worker.leadership``: the fence, and what starting to lead sets off."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge

from tests.worker.harness import Cluster, device_class, gpu_slice, node
from tests.worker.workers import claim_events, make_worker
from webhook.core.api.objects import Obj
from webhook.kube.cache import ClusterCache
from webhook.kube.client import KubeClient
from webhook.kube.leader import LeaderElector
from webhook.worker.leadership import Leadership


def gauge() -> tuple[Gauge, CollectorRegistry]:
    registry = CollectorRegistry()
    return Gauge("draxr_leader", "leading", registry=registry), registry


def test_without_election_the_worker_leads_from_the_start() -> None:
    g, _ = gauge()
    leadership = Leadership(None, g, lambda: None)
    assert leadership.is_leader()
    leadership.start()
    assert leadership.leading.is_set()


def test_with_election_the_fence_is_the_electors() -> None:
    g, _ = gauge()
    leadership = Leadership(LeaderElector(KubeClient(None), "ns", "lease", "me"), g, lambda: None)
    assert not leadership.is_leader()  # never renewed
    leadership.start()
    assert not leadership.leading.is_set()


def test_leading_catches_up_and_losing_it_stops_the_loops() -> None:
    g, registry = gauge()
    caught_up: list[bool] = []
    leadership = Leadership(None, g, lambda: caught_up.append(True))
    leadership.changed(True)
    assert (leadership.leading.is_set(), caught_up, registry.get_sample_value("draxr_leader")) == (
        True,
        [True],
        1,
    )
    leadership.changed(False)
    assert (leadership.leading.is_set(), caught_up, registry.get_sample_value("draxr_leader")) == (
        False,
        [True],
        0,
    )


def test_a_worker_that_loses_the_lease_mid_write_sends_no_retry_and_nothing_more(kube: Cluster) -> None:
    """The fence falls (no renewal for the renew deadline) while a write of a binding cycle is
    answered 503: the worker's client, fenced, does not retry it, and sends none of the steps that
    follow nor the undo of those done; the next leader repairs what is left (issue 20, item 6)."""
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    pod = kube.pod("p")
    now = [0.0]
    elector = LeaderElector(kube.client(), "draxr-system", "draxr-worker", "me", clock=lambda: now[0])
    assert elector.try_acquire_or_renew()

    def lease_lost(verb: str, resource: str, code: int) -> None:
        if code == 503:
            now[0] = elector.renew_deadline  # no renewal since 0: the fence is down

    client = KubeClient(kube.em.api_client("worker"), hook=lease_lost)
    w = make_worker(client, ClusterCache.from_objects(kube.snapshot()), leader=elector)
    rule = kube.em.inject(verbs="update", resource="resourceclaims/status", error=503)
    try:
        w.schedule_one(pod["metadata"]["uid"])
    finally:
        w.stop()  # waits for the binding cycle
    assert rule.hits == 1
    writes = [(r.verb, r.resource) for r in kube.em.requests() if r.verb not in ("get", "list", "watch")]
    assert writes[-1] == ("update", "resourceclaims/status")  # the one answered 503, not sent again
    assert kube.bound() == {}


def test_a_claim_the_fenced_unreserve_could_not_delete_is_reused_by_the_next_attempt(kube: Cluster) -> None:
    """The lease lost for a moment right after PreBind created the special claim: Unreserve may not
    delete it. The next attempt, as soon as the worker leads again, may come before its informer
    shows that claim: it waits for it (writing nothing), then reuses it rather than creating a
    second claim for the pod."""
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    pod = kube.pod("p")
    pod_uid = pod["metadata"]["uid"]
    now = [0.0]
    elector = LeaderElector(kube.client(), "draxr-system", "draxr-worker", "me", clock=lambda: now[0])
    assert elector.try_acquire_or_renew()
    lagging = ClusterCache.from_objects(kube.snapshot())  # an informer that has not shown the claim
    w = make_worker(kube.client(), lagging, leader=elector)

    def lease_lost(step: str, _pod: Obj) -> None:
        if step == "claim-created":
            now[0] = elector.renew_deadline  # no renewal since 0: the fence is down

    w.binder.observer = lease_lost
    try:
        w.queue.add(pod_uid)
        assert w.queue.pop(timeout=0) is not None
        w.schedule_one(pod_uid)
        assert w.queue.pop(timeout=10) is not None  # given back once its binding cycle was undone
        [left] = kube.claims()
        assert kube.bound() == {}
        w.binder.observer = None
        assert elector.try_acquire_or_renew()  # leading again
        kube.em.reset_requests()
        assert w.schedule_one(pod_uid) is None  # waits for the claim its last attempt left
        assert [r for r in kube.em.requests() if r.verb not in ("get", "list", "watch")] == []
        claim_events(kube, lagging, left["metadata"]["name"], allocated=False)  # the watch shows it
        w.schedule_one(pod_uid)
    finally:
        w.stop()  # waits for the binding cycle
    assert kube.bound() == {"p": "n"}
    assert [c["metadata"]["uid"] for c in kube.claims()] == [left["metadata"]["uid"]]
