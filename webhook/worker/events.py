"""Pod conditions and Events, written the way kube-scheduler writes them, rate limited.

A scheduled pod's ``Scheduled`` Event keeps kube-scheduler's words and adds which devices it got and
why (``core.placement.describe``); a ``draxr.io/align: preferred`` pod that got no aligned set also
gets an ``AlignmentRelaxed`` Event.

The scheduling and binding cycles ``post`` their Events as kube-scheduler's recorder does: queued
(client-go's broadcaster, 1,000 queued at most, more dropped and counted), so a binding never waits
for its Event's round trip. A few sender threads drain the one queue, each on a connection of its
own (the worker gives the recorder a client with its own pool and rate limit, as kube-scheduler's
event client is its own): one sender writing one round trip at a time fell behind the binds and
the queue overflowed (issue 35). Reporters that must know whether the Event was written
(``doubles.py``, ``nodevices.py``) call ``event``, which writes at once.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, NotRequired, TypedDict

from ..core.allocation.placement import describe, relaxed_message
from ..core.api.objects import Obj, format_time, key, name, namespace, uid
from ..core.scheduling.framework import Decision
from ..kube.client import STRATEGIC_PATCH, ApiError, KubeClient, NotLeader
from ..kube.resources import EVENTS, PODS

log = logging.getLogger("draxr.events")

#: client-go's ``maxQueuedEvents``: Events waiting for the sender beyond this are dropped.
MAX_QUEUED_EVENTS = 1000
#: Sender threads: each Event is one round trip, so N senders write about N times what one does
#: while the API server, not this process, is what takes time (one fell behind 46 binds/s against
#: a real API server, issue 35; with an 8 ms create through the emulator 4 wrote 400/s, one 107/s).
#: 4 dropped a quarter of the Events of 86 binds/s on a real 2-core API server (32 binding cycles
#: at once, bench/versus_scheduler.py); 8 keep an Event burst to at most 8 requests in flight, on
#: a connection pool of 8.
EVENT_SENDERS = 8
#: What a sender takes from the queue at once (its share of what is queued, at most this): a
#: burst costs fewer queue hand-offs, and at most ``EVENT_SENDERS * EVENT_BATCH`` Events are out
#: of the queue and unsent at any time (memory beyond the queue's bound, what ``stop`` may leave).
EVENT_BATCH = 16


def now_rfc3339(wall: Callable[[], datetime] = lambda: datetime.now(UTC)) -> str:
    return format_time(wall())


class PodCondition(TypedDict):
    """A condition draxr writes on a pod (PodScheduled here, DisruptionTarget in preemption.py)."""

    type: str
    status: str
    reason: str
    message: str
    #: Written as null on PodScheduled, as kube-scheduler's ``PodCondition`` serialises it.
    lastProbeTime: NotRequired[None]
    lastTransitionTime: str


class PodStatusPatch(TypedDict, total=False):
    """The ``status`` of a strategic merge patch on ``pods/status`` (conditions merge by type)."""

    conditions: list[PodCondition]
    nominatedNodeName: str | None


class UidPrecondition(TypedDict):
    uid: str


class PodPatch(TypedDict):
    """A patch of ``pods/status``; ``metadata.uid`` makes it refused for a pod recreated under the name."""

    status: PodStatusPatch
    metadata: NotRequired[UidPrecondition]


def pod_scheduled_condition(pod: Obj) -> Obj | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == "PodScheduled":
            return c
    return None


def unschedulable_patch(reason: str, message: str, now: str, pod_uid: str | None = None) -> PodPatch:
    """Strategic merge patch: conditions merge by ``type``, so other conditions stay. ``pod_uid``:
    a precondition, as in upstream's ``PatchPodStatus`` (refused for a pod recreated under the name)."""
    patch: PodPatch = {
        "status": {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": reason,
                    "message": message,
                    "lastProbeTime": None,
                    "lastTransitionTime": now,
                }
            ]
        }
    }
    if pod_uid:
        patch["metadata"] = {"uid": pod_uid}
    return patch


#: client-go's ``EventSourceObjectSpamFilter``: each object a burst of 25 Events, then one every
#: 5 minutes (one bucket for all, 5/s, left 27 ``Scheduled`` Events for 1,000 binds).
SPAM_BURST = 25
SPAM_QPS = 1.0 / 300.0


class EventRecorder:
    """Creates core/v1 Events; the same (object, reason, message) at most once per ``interval``, and
    per object at most ``burst`` at once then ``qps`` (client-go's spam filter)."""

    def __init__(
        self,
        client: KubeClient,
        component: str,
        instance: str,
        *,
        interval: float = 30.0,
        qps: float = SPAM_QPS,
        burst: int = SPAM_BURST,
        clock: Callable[[], float] = time.monotonic,
        max_queued: int = MAX_QUEUED_EVENTS,
        senders: int = EVENT_SENDERS,
        batch: int = EVENT_BATCH,
    ) -> None:
        if senders < 1 or batch < 1:
            raise ValueError("senders and batch must be >= 1")
        self.client = client
        self.component = component
        self.instance = instance
        self.interval = interval
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._last: dict[tuple[str, str, str], float] = {}
        #: Each object's bucket: (tokens, when last counted).
        self._spam: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()
        self.dropped = 0
        #: Events ``post`` dropped because the sender's queue was full.
        self.overflowed = 0
        #: Events ``stop`` left unsent when its time was up.
        self.abandoned = 0
        self.max_queued = max_queued
        self.senders = senders
        self.batch = batch
        self._queue: queue.Queue[Obj | None] = queue.Queue(max_queued)
        self._senders: list[threading.Thread] = []
        self._closed = threading.Event()

    def allow(self, obj_uid: str, reason: str, message: str) -> bool:
        key = (obj_uid, reason, message)
        now = self._clock()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.interval:
                self.dropped += 1
                return False
            tokens, counted = self._spam.get(obj_uid, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - counted) * self.qps)
            if tokens < 1:  # a dropped Event costs no token (TryAccept)
                self._spam[obj_uid] = (tokens, now)
                self.dropped += 1
                return False
            self._spam[obj_uid] = (tokens - 1, now)
            self._last[key] = now
            if len(self._last) > 10_000:
                self._last = {k: t for k, t in self._last.items() if now - t < self.interval}
            if len(self._spam) > 10_000:  # a full bucket is what a new object gets anyway
                self._spam = {
                    k: (t, c) for k, (t, c) in self._spam.items() if t + (now - c) * self.qps < self.burst
                }
            return True

    def event(
        self,
        pod: Obj,
        event_type: str,
        reason: str,
        message: str,
        *,
        kind: str = "Pod",
        api_version: str = "v1",
    ) -> bool:
        """An Event about ``pod`` (or another namespaced object of ``kind``), written now; False when
        filtered or the create failed."""
        body = self._body(pod, event_type, reason, message, kind, api_version)
        return body is not None and self._send(body)

    def post(
        self,
        pod: Obj,
        event_type: str,
        reason: str,
        message: str,
        *,
        kind: str = "Pod",
        api_version: str = "v1",
    ) -> None:
        """An Event about ``pod``, fire and forget: filtered as ``event``, then queued for the sender
        threads (written at once when none runs); dropped and counted when the queue is full."""
        body = self._body(pod, event_type, reason, message, kind, api_version)
        if body is None:
            return
        if not self._senders:
            self._send(body)
            return
        try:
            self._queue.put_nowait(body)
        except queue.Full:
            with self._lock:
                self.overflowed += 1

    def start(self) -> EventRecorder:
        """``post`` queues from now on, for ``senders`` threads of their own."""
        if not self._senders:
            # A fresh queue and stop signal: what an earlier ``stop`` left behind is not sent now.
            self._queue = queue.Queue(self.max_queued)
            self._closed = threading.Event()
            self._senders = [
                threading.Thread(
                    target=self._run, args=(self._queue, self._closed), name=f"events-{i}", daemon=True
                )
                for i in range(self.senders)
            ]
            for t in self._senders:
                t.start()
        return self

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait (bounded) until every queued Event was sent or failed; True when none waits."""
        deadline = time.monotonic() + timeout
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._queue.all_tasks_done.wait(left)
        return True

    def stop(self, timeout: float = 5.0) -> None:
        """Send what is queued (bounded by ``timeout``: what is left then is counted in
        ``abandoned``), then end the senders; ``post`` writes at once again."""
        senders, self._senders = self._senders, []
        if not senders:
            return
        deadline = time.monotonic() + timeout
        self.flush(timeout)
        self._closed.set()  # a sender still busy ends after its current Event
        left = 0
        while True:  # what the senders did not reach in time
            try:
                body = self._queue.get_nowait()
            except queue.Empty:
                break
            left += body is not None
            self._queue.task_done()
        with self._lock:
            self.abandoned += left
        for _ in senders:  # one None wakes and ends each idle sender
            try:
                self._queue.put(None, timeout=max(0.0, deadline - time.monotonic()))
            except queue.Full:
                break
        for t in senders:
            t.join(max(0.0, deadline - time.monotonic()))

    def _run(self, q: queue.Queue[Obj | None], closed: threading.Event) -> None:
        """One sender: takes its share of what is queued (at most ``batch``) and writes it back to
        back on its connection; ends at a None or once ``closed``."""
        while not closed.is_set():
            batch = [q.get()]
            share = min(self.batch, -(-q.qsize() // self.senders) + 1)
            while len(batch) < share and batch[-1] is not None:
                try:
                    batch.append(q.get_nowait())
                except queue.Empty:
                    break
            for body in batch:
                try:
                    if body is None:
                        continue
                    if closed.is_set():
                        with self._lock:
                            self.abandoned += 1
                        continue
                    self._send(body)
                except Exception:  # a sender outlives any one Event
                    log.exception("event not written")
                finally:
                    q.task_done()
            if batch[-1] is None:
                return

    def _body(
        self, pod: Obj, event_type: str, reason: str, message: str, kind: str, api_version: str
    ) -> Obj | None:
        if not self.allow(uid(pod), reason, message):
            return None
        involved = {
            "apiVersion": api_version,
            "kind": kind,
            "name": name(pod),
            "namespace": namespace(pod),
            "uid": uid(pod),
        }
        return event_body(
            involved,
            event_type,
            reason,
            message,
            now=now_rfc3339(),
            component=self.component,
            instance=self.instance,
        )

    def _send(self, body: Obj) -> bool:
        try:
            self.client.create(EVENTS, body, body["metadata"]["namespace"])
        except (ApiError, NotLeader, OSError) as e:
            # Best effort, like client-go's broadcaster (and fenced).
            log.debug("event not written: %s", e, extra={"reason": body.get("reason")})
            return False
        return True


def create_event(
    client: KubeClient,
    involved: Obj,
    event_type: str,
    reason: str,
    message: str,
    *,
    now: str,
    component: str = "draxr",
    instance: str | None = None,
) -> None:
    """Create one core/v1 Event about ``involved`` (an object reference with ``name`` and
    ``namespace``) in its namespace, named after it; raises what the API call raises."""
    body = event_body(involved, event_type, reason, message, now=now, component=component, instance=instance)
    client.create(EVENTS, body, involved["namespace"])


def event_body(
    involved: Obj,
    event_type: str,
    reason: str,
    message: str,
    *,
    now: str,
    component: str = "draxr",
    instance: str | None = None,
) -> Obj:
    """A core/v1 Event about ``involved``, named after it."""
    ns = involved["namespace"]
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{involved['name']}.", "namespace": ns},
        "involvedObject": involved,
        "type": event_type,
        "reason": reason,
        "message": message[:1024],
        "source": {"component": component},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    if instance is not None:
        body["reportingComponent"] = component
        body["reportingInstance"] = instance
    return body


ALIGNMENT_RELAXED = "AlignmentRelaxed"
#: KEP-5007: kube-scheduler's Event while PreBind waits for devices' binding conditions.
BINDING_CONDITIONS_PENDING = "BindingConditionsPending"
FAILED_SCHEDULING = "FailedScheduling"


def binding_conditions_pending_message(node: str) -> str:
    """Upstream's ``BindingConditionsPending`` message (DynamicResources' PreBind)."""
    return f"waiting for binding conditions for device on node {node}"


def prebind_failed_message(error: str) -> str:
    """kube-scheduler's ``FailedScheduling`` message for a PreBind error (``RunPreBindPlugins``)."""
    return f'running PreBind plugin "DynamicResources": {error}'


def scheduled_message(pod: Obj, decision: Decision) -> str:
    """kube-scheduler's "Successfully assigned <ns>/<pod> to <node>", then the devices and why."""
    message = f"Successfully assigned {key(pod)} to {decision.node}"
    why = describe(decision.placement, decision.special.results if decision.special is not None else [])
    return f"{message}; {why}" if why else message


def relaxed_alignment_message(decision: Decision) -> str | None:
    """The ``AlignmentRelaxed`` Event's message, when the decision dropped a preferred alignment."""
    placement = decision.placement
    if placement is None or not placement.relaxed or decision.node is None:
        return None
    return relaxed_message(placement, decision.node)


def set_unschedulable(client: KubeClient, pod: Obj, reason: str, message: str) -> bool:
    """Write PodScheduled=False unless the pod already says exactly that (no write storms)."""
    current = pod_scheduled_condition(pod)
    if (
        current
        and current.get("status") == "False"
        and current.get("reason") == reason
        and current.get("message") == message
    ):
        return False
    client.patch(
        PODS,
        name(pod),
        unschedulable_patch(reason, message, now_rfc3339(), uid(pod)),
        namespace=namespace(pod),
        subresource="status",
        patch_type=STRATEGIC_PATCH,
    )
    return True
