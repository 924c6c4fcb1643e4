"""``worker.leadership``: the fence, and what starting to lead sets off."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge

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
