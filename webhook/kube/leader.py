"""Leader election on a ``coordination.k8s.io/v1`` Lease (client-go's ``leaderelection``).

Defaults (``LeaderElection``, client-go's): lease 15 s, renew deadline 10 s, retry period 2 s.
Followers judge expiry by their own clock from the moment they last saw the lease change (never by
the holder's timestamps), so clock skew cannot cut a lease short. A leader that fails to renew for
the renew deadline steps down before the lease can expire: ``is_leader()`` turns false on its own,
so writes are fenced even if the renewal thread is stuck. A write sent while leading is given no
longer than ``write_window()`` to arrive: one held up in the network past the lease would land after
a follower took over.

Each attempt to acquire or renew is bounded by the renew deadline (client-go runs ``renew`` under
``RenewDeadline``): its requests get what is left of it as their timeout and are not retried (the
elector tries again every retry period). A successful attempt counts from when it started, not from
its answer: a follower may have seen the lease before the answer arrived, and an answer that comes
after the renew deadline leaves the fence down.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .client import ApiError, KubeClient
from .resources import LEASES

log = logging.getLogger("draxr.leader")


@dataclass(frozen=True)
class LeaderElection:
    """kube-scheduler's ``leaderElection``: whether to elect, and the lease's timings in seconds."""

    leader_elect: bool = True
    lease_duration: float = field(
        default=15.0, metadata={"help": "how long followers wait after the last renewal before taking over"}
    )
    renew_deadline: float = field(
        default=10.0,
        metadata={
            "help": "a leader that cannot renew for this long stops writing (less than the lease duration)"
        },
    )
    retry_period: float = field(
        default=2.0, metadata={"help": "how often to try to acquire or renew the lease"}
    )


def _micro_time(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = LeaderElection.lease_duration,
        renew_deadline: float = LeaderElection.renew_deadline,
        retry_period: float = LeaderElection.retry_period,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("need lease_duration > renew_deadline > retry_period > 0")
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._clock = clock
        self._wall = wall
        self._on_change = on_change
        self._renewed_at: float | None = None  # our clock, last successful acquire/renew
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0
        self._leading = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.transitions = 0

    # -- the fence ----------------------------------------------------------------------------

    def is_leader(self) -> bool:
        """True only while the last renewal is younger than the renew deadline."""
        at = self._renewed_at
        return at is not None and self._clock() - at < self.renew_deadline

    def write_window(self) -> float:
        """Seconds a write sent now may take and still reach the API server before any follower
        can take the lease over (0 while not leading): a follower waits the lease duration from
        when it saw the last renewal, and that renewal was sent after ``_renewed_at``."""
        at = self._renewed_at
        if at is None or not self.is_leader():
            return 0.0
        return max(0.0, at + self.lease_duration - self._clock())

    # -- loop ---------------------------------------------------------------------------------

    def start(self) -> LeaderElector:
        self._thread = threading.Thread(target=self.run, name="leader-election", daemon=True)
        self._thread.start()
        return self

    def stop(self, release: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if release and self.is_leader():
            self._release()
        self._set_leading(False)

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                self.try_acquire_or_renew()
            except Exception as e:  # the API may be down; the fence handles stepping down
                log.warning("lease %s/%s: %s", self.namespace, self.name, e)
            self._set_leading(self.is_leader())
            self._stop.wait(self.retry_period)

    def _left(self, started: float) -> float:
        """Seconds left of an attempt that started at ``started``; ApiError (status 0) when none."""
        left = started + self.renew_deadline - self._clock()
        if left <= 0:
            raise ApiError(
                0, {"message": f"renew deadline of {self.renew_deadline}s passed"}, "renew", "lease"
            )
        return left

    def try_acquire_or_renew(self) -> bool:
        started = self._clock()
        now_wall = _micro_time(self._wall())
        try:
            lease = self.client.get(LEASES, self.name, self.namespace, timeout=self._left(started), retries=0)
        except ApiError as e:
            if not e.not_found:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(now_wall, acquire=now_wall, transitions=0),
            }
            try:
                self.client.create(LEASES, body, self.namespace, timeout=self._left(started), retries=0)
            except ApiError as ce:
                if ce.conflict:  # someone else created it first
                    return False
                raise
            self._renewed_at = started
            return True
        spec: dict[str, Any] = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        observed = (holder, str(spec.get("renewTime") or ""))
        if observed != self._observed:
            self._observed = observed
            self._observed_at = self._clock()
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        held_by_other = holder and holder != self.identity
        if held_by_other and self._clock() - self._observed_at < duration:
            self._renewed_at = None
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder != self.identity:
            transitions += 1
            acquire = now_wall
        else:
            acquire = str(spec.get("acquireTime") or now_wall)
        lease["spec"] = self._spec(now_wall, acquire=acquire, transitions=transitions)
        try:
            self.client.update(LEASES, lease, timeout=self._left(started), retries=0)
        except ApiError as e:
            if e.conflict:
                return False
            raise
        self._renewed_at = started
        self._observed = (self.identity, now_wall)
        self._observed_at = started
        return True

    def _spec(self, renew: str, *, acquire: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_duration),
            "acquireTime": acquire,
            "renewTime": renew,
            "leaseTransitions": transitions,
        }

    def _release(self) -> None:
        """Give the lease up on a clean shutdown so a follower takes over at once (within the renew
        deadline, as client-go's ``release``)."""
        started = self._clock()
        try:
            lease = self.client.get(LEASES, self.name, self.namespace, timeout=self._left(started), retries=0)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            spec["holderIdentity"] = ""
            spec["leaseDurationSeconds"] = 1
            lease["spec"] = spec
            self.client.update(LEASES, lease, timeout=self._left(started), retries=0)
        except ApiError as e:
            log.info("lease release: %s", e)
        self._renewed_at = None

    def _set_leading(self, leading: bool) -> None:
        if leading != self._leading:
            self._leading = leading
            self.transitions += 1
            log.info("leadership %s", "acquired" if leading else "lost", extra={"identity": self.identity})
            if self._on_change is not None:
                self._on_change(leading)
