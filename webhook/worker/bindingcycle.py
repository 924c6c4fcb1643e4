"""The binding cycle of one scheduled pod, on the binding pool (kube-scheduler's ``bindingCycle``).

PreBind and Bind are ``binder.py``'s API writes, after VolumeBinding's (``volumebinding.py``). Any
failure runs Unreserve, both halves: the API writes undone (``Binder.roll_back``), then the
decision's reservation (``SharedScheduler.unreserve``), and the pod goes back to the queue; a pod
PreBind finds bound already (this worker's view lagged) only loses the reservation and leaves the
queue. A bound pod is assumed until the cache shows its node, and its reservation is held until the
cache shows the claims the cycle wrote (``assumed.py``); then one log line, the ``Scheduled`` Event
and, for a relaxed alignment, ``AlignmentRelaxed``.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from ..core.api.objects import Obj, key, name, namespace, parse_time, uid
from ..core.scheduling.framework import Decision
from ..kube.cache import SharedScheduler
from ..kube.client import ApiError, NotLeader
from .assumed import AssumedClaims, AssumedPods
from .binder import AlreadyBound, Binder, BindError, Written
from .events import ALIGNMENT_RELAXED, EventRecorder, relaxed_alignment_message, scheduled_message
from .metrics import WorkerMetrics
from .queue import SchedulingQueue
from .volumebinding import VolumeBinder

log = logging.getLogger("draxr.worker")


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
        volumes: VolumeBinder | None = None,
    ) -> None:
        self.binder = binder
        self.scheduler = scheduler
        self.queue = queue
        self.events = events
        self.metrics = metrics
        self.assumed_pods = assumed_pods
        self.assumed_claims = assumed_claims
        self.volumes = volumes
        #: Pods bound by this worker.
        self.bound = 0

    def run(self, pod: Obj, decision: Decision, token: str, started: float | None = None) -> None:
        """PreBind and Bind; on any failure, Unreserve. ``started``: when the attempt began
        (``time.perf_counter``), for the decision's log line."""
        written = Written()
        assert decision.node is not None
        try:
            if self.volumes is not None:
                self.volumes.pre_bind(pod, decision)  # VolumeBinding's PreBind comes first upstream
            self.binder.pre_bind(pod, decision, written)
            self.binder.bind(pod, decision.node)
        except AlreadyBound as e:
            # This worker's view lagged (a new leader): nothing was written, nothing is undone but
            # the reservation, and the pod leaves the queue (its next event shows it bound).
            log.info("already bound", extra={"pod": key(pod), "reason": str(e)})
            self.scheduler.unreserve(decision, token)
            self.metrics.attempts.labels("already_bound").inc()
            self.queue.done(uid(pod))
            return
        except Exception as e:
            log.warning(
                "binding failed",
                extra={
                    "pod": key(pod),
                    "node": decision.node,
                    "devices": device_names(decision),
                    "reason": f"{type(e).__name__}: {e}"
                    if not isinstance(e, BindError | ApiError)
                    else str(e),
                },
            )
            self.unreserve(pod, decision, token, written)
            self.metrics.attempts.labels("bind_error").inc()
            if isinstance(e, NotLeader):
                self.queue.requeue(uid(pod))
            else:
                self.queue.failed(uid(pod), unschedulable=False)
            return
        self.assumed_pods.assume(uid(pod), decision.node)
        claim = written.special_claim or written.reused_claim
        # The reservation stays until the cache shows every claim this cycle wrote.
        self.assumed_claims.hold(token, written.claim_versions)
        self.queue.done(uid(pod))
        self.bound += 1
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
        """Unreserve: undo the binding cycle's API writes, then its in-memory reservation."""
        self.binder.roll_back(pod, written)
        self.scheduler.unreserve(decision, token)


def device_names(decision: Decision) -> list[str]:
    """``driver/pool/device`` of every device the decision allocates (the special claim's and the
    pod's own claims'), and ``<name> (device plugin)`` for names a device plugin serves."""
    out = [f"{driver}/{pool}/{device}" for driver, pool, device in decision.device_keys()]
    out += [f"{res} (device plugin)" for res, how in sorted(decision.served.items()) if how.via != "dra"]
    return out
