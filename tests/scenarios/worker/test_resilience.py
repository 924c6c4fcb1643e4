"""Faults, crashes in the middle of a binding cycle, leader election (issue 4's resilience proof)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.worker.harness import GPU, Cluster, device_class, gpu_slice, node
from webhook.kube.client import KubeClient
from webhook.kube.leader import LeaderElector
from webhook.kube.resources import LEASES


def _setup(kube: Cluster) -> None:
    kube.apply(device_class(), node("dp", {GPU: 4}))
    for i in range(4):
        kube.apply(node(f"n{i}"), gpu_slice(f"n{i}", 4))


def _end_state(kube: Cluster) -> tuple[set[str], int, set[tuple[str, str, str]]]:
    return set(kube.bound()), len(kube.claims()), set(kube.allocated())


def _run_scenario(kube: Cluster, pods: int = 20) -> tuple[set[str], int, set[tuple[str, str, str]]]:
    for i in range(pods):
        kube.pod(f"p{i:02d}")
    kube.wait_bound(pods, timeout=120)
    # Leftovers of failed cycles (claims of bound pods that they do not use) are repaired.
    kube.em.wait_for(lambda: len(kube.claims()) == pods - 4, 60, "one claim per DRA pod")
    kube.check_consistent()
    return _end_state(kube)


def test_injected_conflicts_and_errors_reach_the_clean_end_state(tmp_path: Any) -> None:
    from tests.worker.harness import cluster

    with cluster(tmp_path / "clean") as clean:
        _setup(clean)
        clean.worker()
        expected = _run_scenario(clean)
    with cluster(tmp_path / "faulty") as kube:
        _setup(kube)
        writes = ["create", "update", "patch", "delete"]
        kube.em.inject(verbs=writes, error=409, probability=0.30, message="injected conflict")
        kube.em.inject(verbs=writes, error=500, probability=0.05, message="injected error")
        kube.worker(orphan_interval=0.5)
        got = _run_scenario(kube)
        assert kube.em.counts().get(("update", "resourceclaims/status"), 0) > 16  # retries happened
    assert got == expected  # same pods bound, same number of claims, same devices allocated


@pytest.mark.parametrize("step", ["claim-created", "claim-allocated", "pod-status", "bound"])
def test_worker_killed_after_each_prebind_step_converges(kube: Cluster, step: str) -> None:
    kube.apply(node("n"), device_class(), gpu_slice("n", 2))
    first = kube.worker("first")
    assert first.worker is not None
    crashed = threading.Event()

    class Killed(BaseException):
        pass

    def die(at: str, pod: dict[str, Any]) -> None:
        if at == step:
            crashed.set()
            raise Killed(at)  # the binding thread stops dead: no Unreserve, like a killed process

    first.worker.binder.observer = die
    kube.pod("victim")
    assert crashed.wait(10)
    first.kill()
    second = kube.worker("second", orphan_interval=0.2)
    assert second.worker is not None
    assert kube.wait_bound(1) == {"victim": "n"}
    kube.em.wait_for(lambda: len(kube.claims()) == 1, 15, "exactly one special claim")
    kube.check_consistent()
    assert len(kube.allocated()) == 1
    kube.pod("next")  # the second device is still free: nothing leaked
    assert kube.wait_bound(2)["next"] == "n"


def test_bind_failure_unreserves_and_retries(kube: Cluster) -> None:
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    # 403 is not transient: the client does not retry it, the binding cycle fails and is undone.
    rule = kube.em.inject(verbs="create", resource="pods/binding", error=403, times=2)
    proc = kube.worker()
    kube.pod("p")
    kube.wait_bound(1, timeout=30)
    assert rule.hits == 2  # both bindings were refused before the third went through
    assert proc.registry.get_sample_value("draxr_resourceclaim_deletes_total") == 2
    created = proc.registry.get_sample_value("draxr_resourceclaim_creates_total", {"status": "success"})
    assert created == 3  # one claim per attempt: the failed attempts' claims were deleted
    assert len(kube.claims()) == 1
    kube.check_consistent()


def test_transient_errors_are_retried_by_the_client(kube: Cluster) -> None:
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    kube.em.inject(verbs="create", resource="pods/binding", error=503, times=3)
    proc = kube.worker()
    kube.pod("p")
    kube.wait_bound(1, timeout=30)
    assert proc.registry.get_sample_value("draxr_resourceclaim_creates_total", {"status": "success"}) == 1
    assert proc.registry.get_sample_value("draxr_api_errors_total", {"verb": "create", "code": "503"}) == 3


def test_claim_creation_failure_is_retried(kube: Cluster) -> None:
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    kube.em.inject(verbs="create", resource="resourceclaims", error=403, times=1)
    proc = kube.worker()
    kube.pod("p")
    kube.wait_bound(1, timeout=30)
    assert proc.registry.get_sample_value("draxr_resourceclaim_creates_total", {"status": "failure"}) == 1
    assert len(kube.claims()) == 1


def _holder(kube: Cluster) -> str:
    lease = kube.em.find("leases", "draxr-worker", "draxr-system")
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


#: Short leases for failover through the emulator: the mechanism is the same, the wait is not.
FAST_LEASE = (1.5, 1.0, 0.2)


@pytest.mark.timed
def test_the_follower_takes_over_a_dead_leaders_work(kube: Cluster) -> None:
    kube.apply(node("n"), device_class(), gpu_slice("n", 4))
    a = kube.worker("a", leader_elect=True, lease=FAST_LEASE)
    b = kube.worker("b", leader_elect=True, lease=FAST_LEASE)
    kube.em.wait_for(lambda: _holder(kube) in ("a", "b"), 10)
    leader, follower = (a, b) if _holder(kube) == "a" else (b, a)
    kube.pod("before")
    kube.wait_bound(1)
    leader.kill()  # dies without releasing the lease
    killed_at = time.monotonic()
    kube.pod("after")
    kube.em.wait_for(lambda: "after" in kube.bound(), 25, "the follower takes over")
    # Lease duration plus a retry period, with room for a loaded machine.
    assert time.monotonic() - killed_at < FAST_LEASE[0] + FAST_LEASE[2] + 3
    assert _holder(kube) == (follower.opts.identity)
    kube.check_consistent()


def test_with_the_default_timings_a_follower_takes_over_within_20_seconds(kube: Cluster) -> None:
    """15 s lease, 2 s retry: the follower acquires at its first retry after 15 s of silence."""
    now = [0.0]
    client = KubeClient(kube.em.api_client("worker"))
    holder = LeaderElector(client, "draxr-system", "draxr-worker", "holder", clock=lambda: now[0])
    follower = LeaderElector(client, "draxr-system", "draxr-worker", "follower", clock=lambda: now[0])
    assert holder.try_acquire_or_renew()
    dead_at = 3.0  # the holder renews until it dies
    took_over = None
    while took_over is None and now[0] < 60:
        if now[0] <= dead_at:
            holder.try_acquire_or_renew()
        if follower.try_acquire_or_renew():
            took_over = now[0]
        now[0] += follower.retry_period
    assert took_over is not None
    assert dead_at + follower.lease_duration <= took_over <= dead_at + follower.lease_duration + 2 * 2.0
    assert took_over - dead_at < 20


def test_a_leader_that_cannot_renew_stops_writing_before_its_lease_ends(kube: Cluster) -> None:
    now = [0.0]
    client = KubeClient(kube.em.api_client("worker"), retries=0)  # the elector retries, not the client
    elector = LeaderElector(client, "draxr-system", "draxr-worker", "me", clock=lambda: now[0])
    assert elector.try_acquire_or_renew()
    assert elector.is_leader()
    kube.em.inject(verbs="update", resource="leases", error=500)
    for t in (2.0, 4.0, 6.0, 8.0):
        now[0] = t
        with pytest.raises(Exception, match="500"):
            elector.try_acquire_or_renew()
        assert elector.is_leader()  # within the renew deadline (10 s)
    now[0] = 10.0
    assert not elector.is_leader()  # fenced at 10 s, before the 15 s lease could expire
    lease = kube.em.get("leases", "draxr-worker", "draxr-system")
    assert lease["spec"]["holderIdentity"] == "me"
    assert lease["spec"]["leaseDurationSeconds"] == 15


def test_follower_waits_for_expiry_by_its_own_clock(kube: Cluster) -> None:
    now = [100.0]
    client = KubeClient(kube.em.api_client("worker"))
    holder = LeaderElector(client, "draxr-system", "draxr-worker", "holder", clock=lambda: now[0])
    other = LeaderElector(client, "draxr-system", "draxr-worker", "other", clock=lambda: now[0])
    assert holder.try_acquire_or_renew()
    assert not other.try_acquire_or_renew()  # first sighting starts its own 15 s timer
    now[0] += 14.0
    assert not other.try_acquire_or_renew()
    now[0] += 1.5
    assert other.try_acquire_or_renew()
    lease = kube.em.get(LEASES.plural, "draxr-worker", "draxr-system")
    assert lease["spec"]["holderIdentity"] == "other"
    assert lease["spec"]["leaseTransitions"] == 1
    assert not holder.try_acquire_or_renew()
