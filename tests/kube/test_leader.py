"""``kube.leader``: each acquire or renew attempt is bounded by the renew deadline and counts from when
it started, as client-go's ``renew`` under ``RenewDeadline`` (the failover scenarios are in
tests/worker/test_resilience.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from e2e.emulator import Emulator
from webhook.kube.client import ApiError, KubeClient
from webhook.kube.leader import LeaderElector

NS, NAME = "draxr-system", "draxr-worker"


@pytest.fixture
def em() -> Iterator[Emulator]:
    with Emulator() as e:
        e.create("namespaces", {"metadata": {"name": NS}})
        yield e


class SlowServer:
    """A clock that each answer of the API server moves on by ``per_request`` seconds: a slow
    apiserver, deterministic (the client's hook runs after every answer)."""

    def __init__(self, per_request: float) -> None:
        self.now = 0.0
        self.per_request = per_request

    def __call__(self) -> float:
        return self.now

    def answered(self, verb: str, resource: str, code: int) -> None:
        self.now += self.per_request


def test_a_renewal_counts_from_when_it_started_not_from_its_answer(em: Emulator) -> None:
    """Acquired at 0 by a GET and a POST answered 4 s apart: the fence falls at 0 + renew deadline
    (10 s). Stamped at the answer (8 s) it stood until 18 s: past the 15 s after which a follower
    that saw the lease at 0 may take over."""
    clock = SlowServer(per_request=4.0)
    client = KubeClient(em.api_client(), hook=clock.answered)
    elector = LeaderElector(client, NS, NAME, "me", clock=clock)
    assert elector.try_acquire_or_renew()
    assert clock.now == 8.0
    assert elector.is_leader()
    clock.now = 9.9
    assert elector.is_leader()
    clock.now = 10.0
    assert not elector.is_leader()


def test_an_attempt_answered_after_the_renew_deadline_does_not_lead(em: Emulator) -> None:
    clock = SlowServer(per_request=6.0)
    client = KubeClient(em.api_client(), hook=clock.answered)
    elector = LeaderElector(client, NS, NAME, "me", clock=clock)
    elector.try_acquire_or_renew()  # answered at 12 s for an attempt started at 0: too late
    assert not elector.is_leader()


def test_a_renewal_attempt_gives_up_at_the_renew_deadline(em: Emulator) -> None:
    """Each request of the attempt gets what is left of the renew deadline as its timeout, and no
    retry: a hung apiserver cannot keep the elector (nor the fence) waiting 4 x 30 s."""
    client = KubeClient(em.api_client())
    elector = LeaderElector(client, NS, NAME, "me", lease_duration=1.5, renew_deadline=1.0, retry_period=0.2)
    assert elector.try_acquire_or_renew()
    em.inject(verbs=["get", "update"], resource="leases", latency=5.0)
    started = time.monotonic()
    with pytest.raises(ApiError):
        elector.try_acquire_or_renew()
    assert time.monotonic() - started < 2.5  # the renew deadline, with room for a loaded machine
    assert not elector.is_leader()


def test_a_write_s_window_runs_to_the_lease_s_end_from_when_the_renewal_started(em: Emulator) -> None:
    """Acquired at 0 (answered at 8): a write sent at 9 may take 6 s, to 15 s, when a follower
    that saw the lease at 0 may take over; none once the fence is down, none before leading."""
    clock = SlowServer(per_request=4.0)
    elector = LeaderElector(KubeClient(em.api_client(), hook=clock.answered), NS, NAME, "me", clock=clock)
    assert elector.write_window() == 0.0
    assert elector.try_acquire_or_renew()
    clock.now = 9.0
    assert elector.write_window() == pytest.approx(6.0)
    clock.now = 10.0  # the renew deadline: the fence is down
    assert elector.write_window() == 0.0
