"""The scheduling loop: one pod at a time, as kube-scheduler's ``scheduleOne``.

While this worker leads, it pops the next pod and decides under the cache lock (PreFilter, Filter,
Score and Reserve in one hold: the next decision already sees the devices). A scheduled pod goes to
its binding cycle on the pool; a pod that a stale special claim of an earlier cycle blocks gets
PostFilter (the claim deleted, the pod retried at once); any other unschedulable pod gets
DefaultPreemption's PostFilter (``preemption``: victims evicted, the pod nominated), then
``PodScheduled=False``, a ``FailedScheduling`` Event (upstream's message, the PostFilter's after the
fit error), and waits in the queue for a change or its backoff.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor

from ..core.api.objects import Obj, key, name, namespace, uid
from ..core.api.podgroups import group_of
from ..core.scheduling.framework import SCHEDULED, UNSCHEDULABLE, Decision
from ..kube.cache import ClusterCache, SharedScheduler
from ..kube.client import ApiError, KubeClient, NotLeader
from .assumed import AssumedPods
from .binder import Binder, BindError
from .bindingcycle import BindingCycle
from .eventhandlers import is_ours
from .events import EventRecorder, set_unschedulable
from .metrics import WorkerMetrics
from .podgroupscheduling import PodGroupScheduling
from .preemption import PreemptionExecutor
from .queue import SchedulingQueue

log = logging.getLogger("draxr.worker")


class SchedulingLoop:
    def __init__(
        self,
        client: KubeClient,
        cache: ClusterCache,
        scheduler: SharedScheduler,
        queue: SchedulingQueue,
        binder: Binder,
        binding: BindingCycle,
        pool: Executor,
        events: EventRecorder,
        metrics: WorkerMetrics,
        assumed_pods: AssumedPods,
        is_leader: Callable[[], bool],
        scheduler_name: str,
    ) -> None:
        self.client = client
        self.cache = cache
        self.scheduler = scheduler
        self.queue = queue
        self.binder = binder
        self.binding = binding
        self.pool = pool
        self.events = events
        self.metrics = metrics
        self.assumed_pods = assumed_pods
        self.is_leader = is_leader
        self.scheduler_name = scheduler_name
        self.preemption = PreemptionExecutor(client, cache, scheduler, events, scheduler_name)
        #: The path of a pod of a pod group (None: every pod alone).
        self.groups: PodGroupScheduling | None = None

    def run(self, stop: threading.Event, leading: threading.Event) -> None:
        while not stop.is_set():
            if not leading.wait(timeout=0.5):
                continue
            if not self.is_leader():  # the fence dropped before the elector noticed: do not pop
                stop.wait(0.2)
                continue
            entry = self.queue.pop(timeout=0.5)
            if entry is None:
                continue
            try:
                self.schedule_one(entry.uid)
            except Exception as e:  # one pod must never stop the loop
                log.exception(
                    "scheduling attempt crashed",
                    extra={"pod": entry.key, "reason": f"{type(e).__name__}: {e}"},
                )
                self.queue.failed(entry.uid, unschedulable=False)

    def schedule_one(self, pod_uid: str) -> Decision | None:
        pod = self.cache.pod(pod_uid)
        if (
            pod is None
            or not is_ours(pod, self.scheduler_name)
            or self.assumed_pods.node(pod_uid) is not None
        ):
            self.binding.left.forget(pod_uid)
            self.queue.done(pod_uid)
            return None
        if not self.is_leader():
            self.queue.requeue(pod_uid)
            return None
        if self.binding.left.waits(pod_uid):  # a claim its last attempt left: not in the cache yet
            self.queue.failed(pod_uid, unschedulable=False)
            return None
        group = group_of(pod)
        if group is not None and self.groups is not None:
            self.groups.schedule(pod, group)
            return None
        started = time.perf_counter()
        decision, token = self.scheduler.schedule_and_reserve(pod)
        decided = time.perf_counter() - started
        self.metrics.attempt_duration.observe(decided)
        self.metrics.attempts.labels(decision.status.lower()).inc()
        if decision.status == SCHEDULED:
            assert token is not None
            self.preemption.forget(pod_uid)
            self.pool.submit(self.binding.run, pod, decision, token, started)
        elif decision.stale_claim is not None:
            self.post_filter(pod, decision.stale_claim)
        else:
            self._unschedulable(pod, decision, decided)
        return decision

    def post_filter(self, pod: Obj, claim: Obj) -> None:
        """PostFilter: a special claim from an earlier cycle blocks the pod; delete it and retry at once."""
        try:
            self.binder.claims.delete(namespace(claim), name(claim), uid(claim))
            self.cache.forget_claim(claim)
            log.info("deletion of ResourceClaim completed", extra={"pod": key(pod), "claim": name(claim)})
            self.queue.failed(uid(pod), retry_now=True)
        except (ApiError, BindError, NotLeader) as e:
            log.warning("PostFilter failed", extra={"pod": key(pod), "claim": name(claim), "reason": str(e)})
            self.queue.failed(uid(pod), unschedulable=False)

    def unschedulable_member(self, pod: Obj, decision: Decision, decided: float = 0.0) -> None:
        """A pod group's member left unplaced: its answer, without preemption (a member preempts
        only with its whole group, which draxr does not do yet)."""
        self._unschedulable(pod, decision, decided, preempt=False)

    def _unschedulable(
        self, pod: Obj, decision: Decision, decided: float = 0.0, *, preempt: bool = True
    ) -> None:
        reason = "Unschedulable" if decision.status == UNSCHEDULABLE else "SchedulerError"
        message = decision.message
        if preempt and decision.status == UNSCHEDULABLE and self.is_leader():
            post = self.preemption.post_filter(pod, decision).message
            message = f"{message} {post}" if post else message
        # Errors (a CEL runtime error, say) go back after the backoff, as in kube-scheduler.
        delay = self.queue.failed(uid(pod), unschedulable=decision.status == UNSCHEDULABLE)
        log.info(
            "unschedulable" if decision.status == UNSCHEDULABLE else "scheduling error",
            extra={
                "pod": key(pod),
                "reason": message,
                "latency_ms": round(decided * 1000, 3),
                "retry_in_s": round(delay, 3),
            },
        )
        if not self.is_leader():
            return
        try:
            set_unschedulable(self.client, pod, reason, message)
        except (ApiError, NotLeader) as e:
            log.warning("set PodScheduled=False: %s", e, extra={"pod": key(pod)})
        self.events.post(pod, "Warning", "FailedScheduling", message)
