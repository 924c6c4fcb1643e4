"""The binding cycle of one scheduled pod, on the binding pool (kube-scheduler's ``bindingCycle``).

PreBind and Bind are ``binder.py``'s API writes, after VolumeBinding's (``volumebinding.py``). Any
failure runs Unreserve, both halves: the API writes undone (``Binder.roll_back``), then the
decision's reservation (``SharedScheduler.unreserve``), and the pod goes back to the queue with
every unschedulable pod (what they found held is free again, and no event says so); a pod
PreBind finds bound already (this worker's view lagged) only loses the reservation and leaves the
queue. A bound pod is assumed until the cache shows its node, and its reservation is held until the
cache shows the claims the cycle wrote (``assumed.py``); then one log line, the ``Scheduled`` Event
and, for a relaxed alignment, ``AlignmentRelaxed``.

Binding conditions (KEP-5007): when an allocation PreBind wrote carries ``bindingConditions``, the
cycle posts ``BindingConditionsPending``, hands the pod to ``bindingconditions.py`` and returns its
thread; the wait's end comes back on the pool: Bind, or (a failure condition, a deleted claim or
``bindingTimeout``) Unreserve with the special claim deleted even when reused, a
``FailedScheduling`` Event with upstream's PreBind error, and the pod retried after its backoff.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime

from ..core.allocation.bindingconditions import BINDING_TIMEOUT, has_binding_conditions
from ..core.api.objects import Obj, as_dict, key, name, namespace, parse_time, status, uid
from ..core.scheduling.framework import Decision
from ..kube.cache import SharedScheduler
from ..kube.client import ApiError, NotLeader
from .assumed import AssumedClaims, AssumedPods, LeftClaims
from .binder import AlreadyBound, Binder, BindError, Written
from .bindingconditions import BindingConditionWaiter, ClaimKey
from .events import (
    ALIGNMENT_RELAXED,
    BINDING_CONDITIONS_PENDING,
    FAILED_SCHEDULING,
    EventRecorder,
    binding_conditions_pending_message,
    prebind_failed_message,
    relaxed_alignment_message,
    scheduled_message,
)
from .metrics import WorkerMetrics
from .queue import SchedulingQueue
from .volumebinding import VolumeBinder

log = logging.getLogger("draxr.worker")


class BindingConditionsFailed(BindError):
    """The wait for binding conditions ended without them: a failure condition, a deleted claim or
    pod, or ``bindingTimeout``."""


def _inline(call: Callable[[], object]) -> None:
    call()


class BindingCycle:
    def __init__(
        self,
        binder: Binder,
        scheduler: SharedScheduler,
        queue: SchedulingQueue,
        events: EventRecorder,
        metrics: WorkerMetrics,
        assumed_pods: AssumedPods,
        assumed_claims: AssumedClaims,
        left: LeftClaims,
        volumes: VolumeBinder | None = None,
        conditions: BindingConditionWaiter | None = None,
        submit: Callable[[Callable[[], object]], object] = _inline,
    ) -> None:
        """``left``: the special claims Unreserve left in place, for the pods' next attempts to
        wait for; ``conditions``: the wait for binding conditions (None: bind at once, as before);
        ``submit``: where a wait's end runs (the binding pool)."""
        self.binder = binder
        self.scheduler = scheduler
        self.queue = queue
        self.events = events
        self.metrics = metrics
        self.assumed_pods = assumed_pods
        self.assumed_claims = assumed_claims
        self.volumes = volumes
        self.conditions = conditions
        self.submit = submit
        self.left = left
        #: Pods bound by this worker.
        self.bound_total = 0

    def run(self, pod: Obj, decision: Decision, token: str, started: float | None = None) -> None:
        """PreBind and Bind; on any failure, Unreserve. ``started``: when the attempt began
        (``time.perf_counter``), for the decision's log line."""
        written = Written()
        assert decision.node is not None
        try:
            if self.volumes is not None:
                self.volumes.pre_bind(pod, decision)  # VolumeBinding's PreBind comes first upstream
            self.binder.pre_bind(pod, decision, written)
            waits = waiting_claims(decision, written)
            if waits and self.conditions is not None:
                self.wait(pod, decision, token, written, started, waits)
                return
            self.binder.bind(pod, decision.node)
        except Exception as e:
            self.failed(pod, decision, token, written, e)
            return
        self.bound(pod, decision, token, written, started)

    def wait(
        self,
        pod: Obj,
        decision: Decision,
        token: str,
        written: Written,
        started: float | None,
        claims: list[ClaimKey],
    ) -> None:
        """Hand the pod to the waiter; its end resumes the cycle on the pool."""
        assert self.conditions is not None
        assert decision.node is not None
        self.events.post(
            pod, "Normal", BINDING_CONDITIONS_PENDING, binding_conditions_pending_message(decision.node)
        )
        self.metrics.binding_conditions_pending.inc()
        waited = time.monotonic()

        def done(failure: str | None) -> None:
            def resume() -> None:
                self._resume(pod, decision, token, written, started, failure, waited)

            try:
                self.submit(resume)
            except RuntimeError:  # the pool shut down: the worker stops, a new leader resumes the pod
                self.metrics.binding_conditions_pending.dec()

        self.conditions.wait(pod, claims, done, elapsed=waited_already(decision))

    def _resume(
        self,
        pod: Obj,
        decision: Decision,
        token: str,
        written: Written,
        started: float | None,
        failure: str | None,
        waited: float,
    ) -> None:
        """The wait ended: Bind, or undo and retry."""
        assert decision.node is not None
        self.metrics.binding_conditions_pending.dec()
        result = "ready" if failure is None else "timeout" if failure == BINDING_TIMEOUT else "failed"
        self.metrics.binding_conditions.labels(result).inc()
        self.metrics.plugin_duration.labels(
            "DynamicResources", "PreBind", "Success" if failure is None else "Error"
        ).observe(time.monotonic() - waited)
        try:
            if failure is not None:
                raise BindingConditionsFailed(failure)
            self.binder.bind(pod, decision.node)
        except Exception as e:
            self.failed(pod, decision, token, written, e)
            return
        self.bound(pod, decision, token, written, started)

    def failed(self, pod: Obj, decision: Decision, token: str, written: Written, e: Exception) -> None:
        """Unreserve, and the pod back to the queue (or out of it, when it is bound already)."""
        if isinstance(e, AlreadyBound):
            # This worker's view lagged (a new leader): nothing was written, nothing is undone but
            # the reservation, and the pod leaves the queue (its next event shows it bound).
            log.info("already bound", extra={"pod": key(pod), "reason": str(e)})
            self.scheduler.unreserve(decision, token)
            self.metrics.attempts.labels("already_bound").inc()
            self.queue.done(uid(pod))
            return
        log.warning(
            "binding failed",
            extra={
                "pod": key(pod),
                "node": decision.node,
                "devices": device_names(decision),
                "reason": f"{type(e).__name__}: {e}" if not isinstance(e, BindError | ApiError) else str(e),
            },
        )
        if isinstance(e, BindingConditionsFailed):
            self._release_reused(pod, written)
            self.events.post(pod, "Warning", FAILED_SCHEDULING, prebind_failed_message(str(e)))
        self.unreserve(pod, decision, token, written)
        self.metrics.attempts.labels("bind_error").inc()
        if isinstance(e, NotLeader):
            self.queue.requeue(uid(pod))
        else:
            self.queue.failed(uid(pod), unschedulable=False)
        # Unreserve freed what the cycle held, and no event will say so: the pods that found it
        # taken go round again (kube-scheduler's move of every pod after a binding error).
        self.queue.cluster_changed(but=uid(pod))

    def _release_reused(self, pod: Obj, written: Written) -> None:
        """A special claim this cycle reused holds the device whose binding failed: it goes too (one
        it created, Unreserve deletes anyway), so the next attempt allocates afresh."""
        claim = written.reused_claim
        if claim is None:
            return
        try:
            live = self.binder.read_pod(pod)
            if live is not None and live.get("spec", {}).get("nodeName"):
                return  # bound after all: it runs with the claim
            self.binder.claims.delete(namespace(claim), name(claim), uid(claim))
        except Exception as e:
            log.warning(
                "binding conditions: delete claim: %s", e, extra={"pod": key(pod), "claim": name(claim)}
            )

    def bound(
        self, pod: Obj, decision: Decision, token: str, written: Written, started: float | None
    ) -> None:
        assert decision.node is not None
        self.assumed_pods.assume(uid(pod), decision.node)
        claim = written.special_claim or written.reused_claim
        # The reservation stays until the cache shows every claim this cycle wrote.
        self.assumed_claims.hold(token, written.claim_versions)
        self.left.forget(uid(pod))
        self.queue.done(uid(pod))
        self.bound_total += 1
        created = parse_time(pod.get("metadata", {}).get("creationTimestamp"))
        if created.year > 1970:
            self.metrics.e2e.observe(max((datetime.now(UTC) - created).total_seconds(), 0.0))
        log.info(
            "bound",
            extra={
                "pod": key(pod),
                "node": decision.node,
                "devices": device_names(decision),
                "claim": f"{namespace(claim)}/{name(claim)}" if claim is not None else None,
                "latency_ms": round((time.perf_counter() - started) * 1000, 3)
                if started is not None
                else None,
            },
        )
        self.events.post(pod, "Normal", "Scheduled", scheduled_message(pod, decision))
        relaxed = relaxed_alignment_message(decision)
        if relaxed is not None:
            self.events.post(pod, "Normal", ALIGNMENT_RELAXED, relaxed)

    def unreserve(self, pod: Obj, decision: Decision, token: str, written: Written) -> None:
        """Unreserve: undo the binding cycle's API writes, then its in-memory reservation; a special
        claim left in place is waited for by the pod's next attempt (``LeftClaims``)."""
        left = self.binder.roll_back(pod, written)
        if left is not None:
            self.left.leave(uid(pod), left)
        self.scheduler.unreserve(decision, token)


def waiting_claims(decision: Decision, written: Written) -> list[ClaimKey]:
    """The claims whose allocation waits for binding conditions: the special claim written (or
    continued), and the pod's own claims, allocated by this decision or before it."""
    out: list[ClaimKey] = []
    special = written.special_claim or written.reused_claim
    if special is not None and has_binding_conditions(decision.special_allocation()):
        out.append((namespace(special), name(special)))
    for uc in decision.user_claims:
        allocation = (
            uc.allocation.to_api() if uc.allocation is not None else status(uc.claim).get("allocation")
        )
        if has_binding_conditions(allocation):
            out.append((namespace(uc.claim), name(uc.claim)))
    return out


def waited_already(decision: Decision, now: datetime | None = None) -> float:
    """Seconds since the oldest ``allocationTimestamp`` of an allocation this decision continues (a
    special claim resumed, a claim allocated before): upstream times the wait from there. A fresh
    allocation has waited 0 s."""
    stamps: list[object] = []
    if decision.special is None and decision.resumed is not None:
        stamps.append(as_dict(status(decision.resumed).get("allocation")).get("allocationTimestamp"))
    stamps += [
        as_dict(status(uc.claim).get("allocation")).get("allocationTimestamp")
        for uc in decision.user_claims
        if uc.allocation is None
    ]
    moments = [parse_time(s) for s in stamps if isinstance(s, str) and s]
    if not moments:
        return 0.0
    return max(((now or datetime.now(UTC)) - min(moments)).total_seconds(), 0.0)


def device_names(decision: Decision) -> list[str]:
    """``driver/pool/device`` of every device the decision allocates (the special claim's and the
    pod's own claims'), and ``<name> (device plugin)`` for names a device plugin serves."""
    out = [f"{driver}/{pool}/{device}" for driver, pool, device in decision.device_keys()]
    out += [f"{res} (device plugin)" for res, how in sorted(decision.served.items()) if how.via != "dra"]
    return out
