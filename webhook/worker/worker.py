"""The worker: schedules every pending pod whose ``spec.schedulerName`` is ours.

Threads: the informers (in ``ClusterCache``) call ``_on_event``; one scheduling loop makes
decisions one at a time under the cache lock (Reserve included, so the next decision already sees
the devices); a pool runs binding cycles (API writes) concurrently; a maintenance thread frees the
claims of finished pods and repairs orphans. Only the leader writes.
"""

from __future__ import annotations

import logging
import queue as stdqueue
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime

from ..core.api.objects import (
    Obj,
    as_dict,
    is_terminating,
    key,
    name,
    namespace,
    parse_time,
    spec,
    status,
    uid,
)
from ..core.api.orphans import orphaned, owner_pod_uid, pod_is_done, special_claim_name
from ..core.api.specialclaims import is_special_claim
from ..core.cluster.allocated import allocated_devices
from ..core.scheduling.scheduler import SCHEDULED, UNSCHEDULABLE, Decision
from ..kube.cache import ClusterCache
from ..kube.client import ApiError, KubeClient
from ..kube.leader import LeaderElector
from .binder import Binder, BindError, NotLeader, Written
from .cleanup import Cleaner
from .events import (
    ALIGNMENT_RELAXED,
    EventRecorder,
    relaxed_alignment_message,
    scheduled_message,
    set_unschedulable,
)
from .metrics import WorkerMetrics
from .queue import INITIAL_BACKOFF, MAX_BACKOFF, SchedulingQueue
from .templates import TemplateKeeper

log = logging.getLogger("draxr.worker")


@dataclass(frozen=True, slots=True)
class Cleanup:
    """A special claim to release; ``confirm``: ask the API first whether its pod still uses it."""

    namespace: str
    claim: str
    pod_uid: str
    confirm: Obj | None = None


@dataclass
class WorkerConfig:
    scheduler_name: str = "draxr"
    policy: str = "binpack"
    bind_workers: int = 8
    orphan_interval: float = 60.0
    identity: str = socket.gethostname()
    #: kube-scheduler's podInitialBackoffSeconds and podMaxBackoffSeconds.
    initial_backoff: float = INITIAL_BACKOFF
    max_backoff: float = MAX_BACKOFF
    #: An unused ResourceClaimTemplate of the rewrite is deleted after this many seconds.
    template_grace: float = 60.0
    #: ``--percentage-of-nodes-to-score`` (``core.scheduling.sampling``): 0 adaptive, 100 every node.
    percentage_of_nodes_to_score: int = 0


class Worker:
    def __init__(
        self,
        client: KubeClient,
        cache: ClusterCache,
        config: WorkerConfig,
        metrics: WorkerMetrics,
        leader: LeaderElector | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.cache = cache
        self.config = config
        self.metrics = metrics
        self.leader = leader
        self.queue = SchedulingQueue(clock, config.initial_backoff, config.max_backoff)
        self.scheduler = cache.scheduler(
            config.policy, config.scheduler_name, config.percentage_of_nodes_to_score
        )
        self.binder = Binder(client, config.scheduler_name, self.is_leader, metrics.on_claim)
        self.cleaner = Cleaner(client, self.binder)
        self.events = EventRecorder(client, config.scheduler_name, config.identity)
        self.templates = TemplateKeeper(client, cache, self.is_leader, grace=config.template_grace)
        self._cleanup: stdqueue.Queue[Cleanup] = stdqueue.Queue()
        self._repair_now = threading.Event()
        self._pending_tokens: dict[str, set[tuple[str, str]]] = {}
        self._pending_lock = threading.Lock()
        # Pods this worker bound that the cache still shows unbound (upstream's assumed pods): a
        # late event of such a pod (its mapping's status write, say) must not schedule it again,
        # or PostFilter would take the claim of a bound pod for a stale one and delete it.
        self._assumed: dict[str, str] = {}
        self._assumed_lock = threading.Lock()
        self._stop = threading.Event()
        self._leading = threading.Event()
        self._threads: list[threading.Thread] = []
        self._pool = ThreadPoolExecutor(max_workers=config.bind_workers, thread_name_prefix="bind")
        self.bound = 0
        cache.subscribe(self._on_event)

    # -- lifecycle ------------------------------------------------------------------------------

    def is_leader(self) -> bool:
        return self.leader is None or self.leader.is_leader()

    def on_leadership(self, leading: bool) -> None:
        """Leading (or starting without election, once the cache has synced): queue every pending
        pod and repair orphans at once: claims of pods deleted while no worker led still hold
        their devices."""
        self.metrics.leader.set(1 if leading else 0)
        if leading:
            self._leading.set()
            self.resync()
            self._repair_now.set()
        else:
            self._leading.clear()

    def start(self) -> Worker:
        if self.leader is None:
            self._leading.set()
        for target, tname in ((self._schedule_loop, "schedule"), (self._maintenance_loop, "maintenance")):
            t = threading.Thread(target=target, name=tname, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        self._stop.set()
        self._leading.set()
        self.queue.close()
        for t in self._threads:
            t.join(timeout=10)
        self._pool.shutdown(wait=True, cancel_futures=False)

    def resync(self) -> None:
        """Queue every pending pod and every finished pod's claim (after start or leadership)."""
        for pod in self.cache.all_pods().values():
            self._on_event("Pod", "MODIFIED", pod)

    # -- events ---------------------------------------------------------------------------------

    def is_ours(self, pod: Obj) -> bool:
        s = spec(pod)
        return (
            s.get("schedulerName") == self.config.scheduler_name
            and not s.get("nodeName")
            and not is_terminating(pod)
            and status(pod).get("phase") in (None, "", "Pending")
            and not s.get("schedulingGates")
        )

    def _on_event(self, kind: str, etype: str, obj: Obj) -> None:
        if kind == "Pod":
            self._on_pod(etype, obj)
        elif kind == "ResourceClaim":
            self._on_claim(etype, obj)
            if etype == "DELETED" or not as_dict(status(obj).get("allocation")):
                self.queue.cluster_changed()
        else:
            self.queue.cluster_changed()

    def _on_pod(self, etype: str, pod: Obj) -> None:
        pod_uid = uid(pod)
        if etype != "DELETED":
            self.templates.want(pod)  # a rewritten pod's templates, if any are missing
        if self._still_assumed(etype, pod):
            return
        if etype != "DELETED" and self.is_ours(pod):
            prio = spec(pod).get("priority")
            self.queue.add(pod_uid, prio if isinstance(prio, int) else 0, key(pod))
            return
        self.queue.remove(pod_uid)
        if etype == "DELETED" or pod_is_done(pod):
            # Every special claim the pod owns goes, the one its status names first.
            names = [n for n in (special_claim_name(pod),) if n]
            names += [name(c) for c in self.cache.special_claims_of(pod) if name(c) not in names]
            for claim_name in names:
                self._cleanup.put(Cleanup(namespace(pod), claim_name, pod_uid))
            if spec(pod).get("nodeName"):
                self.queue.cluster_changed()
        elif spec(pod).get("nodeName"):
            # Bound: special claims besides the one its status names are leftovers of a failed cycle.
            for claim in self.cache.special_claims_of(pod):
                if orphaned(claim, pod):
                    self._cleanup.put(Cleanup(namespace(claim), name(claim), pod_uid, claim))

    def _still_assumed(self, etype: str, pod: Obj) -> bool:
        """True for an event older than this worker's binding of the pod (it shows no node yet);
        the event that shows the node, or the deletion, ends the assumption."""
        with self._assumed_lock:
            if uid(pod) not in self._assumed:
                return False
            if etype != "DELETED" and not spec(pod).get("nodeName"):
                return True
            del self._assumed[uid(pod)]
            return False

    def assumed(self, pod_uid: str) -> str | None:
        """The node this worker bound the pod to, while the cache does not show it yet."""
        with self._assumed_lock:
            return self._assumed.get(pod_uid)

    def _on_claim(self, etype: str, claim: Obj) -> None:
        if etype != "DELETED" and is_special_claim(claim):
            self._check_owner(claim)
        self._forget_written(etype, claim)

    def _check_owner(self, claim: Obj) -> None:
        """A special claim whose pod is gone, finished, or bound with another claim is released
        at once (after asking the API), not at the next periodic repair."""
        owner_uid = owner_pod_uid(claim)
        if owner_uid is None or not self.cache.synced(["Pod"]):
            return
        if orphaned(claim, self.cache.pod(owner_uid)):
            self._cleanup.put(Cleanup(namespace(claim), name(claim), owner_uid, claim))

    def _forget_written(self, etype: str, claim: Obj) -> None:
        """The cache now holds what a binding cycle wrote (or the claim is gone, which a relist
        may show without the update in between): its in-flight reservation can go."""
        if etype != "DELETED" and not allocated_devices(claim):
            return
        written = (namespace(claim), name(claim))
        done: list[str] = []
        with self._pending_lock:
            for token, keys in self._pending_tokens.items():
                keys.discard(written)
                if not keys:
                    done.append(token)
            for token in done:
                del self._pending_tokens[token]
        for token in done:
            self.cache.forget_reservation(token)

    # -- scheduling -----------------------------------------------------------------------------

    def _schedule_loop(self) -> None:
        while not self._stop.is_set():
            if not self._leading.wait(timeout=0.5):
                continue
            if not self.is_leader():  # the fence dropped before the elector noticed: do not pop
                self._stop.wait(0.2)
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
        if pod is None or not self.is_ours(pod) or self.assumed(pod_uid) is not None:
            self.queue.done(pod_uid)
            return None
        if not self.is_leader():
            self.queue.requeue(pod_uid)
            return None
        started = time.perf_counter()
        decision, token = self.scheduler.schedule_and_reserve(pod)
        decided = time.perf_counter() - started
        self.metrics.attempt_duration.observe(decided)
        self.metrics.attempts.labels(decision.status.lower()).inc()
        if decision.status == SCHEDULED:
            assert token is not None
            self._pool.submit(self._binding_cycle, pod, decision, token, started)
        elif decision.stale_claim is not None:
            self._post_filter(pod, decision.stale_claim)
        else:
            self._unschedulable(pod, decision, decided)
        return decision

    def _post_filter(self, pod: Obj, claim: Obj) -> None:
        """A special claim from an earlier cycle blocks the pod: delete it and retry at once."""
        try:
            self.binder.delete_claim(namespace(claim), name(claim), uid(claim))
            self.cache.forget_claim(claim)
            log.info("deletion of ResourceClaim completed", extra={"pod": key(pod), "claim": name(claim)})
            self.queue.failed(uid(pod), retry_now=True)
        except (ApiError, BindError, NotLeader) as e:
            log.warning("PostFilter failed", extra={"pod": key(pod), "claim": name(claim), "reason": str(e)})
            self.queue.failed(uid(pod), unschedulable=False)

    def _unschedulable(self, pod: Obj, decision: Decision, decided: float = 0.0) -> None:
        reason = "Unschedulable" if decision.status == UNSCHEDULABLE else "SchedulerError"
        # Errors (a CEL runtime error, say) go back after the backoff, as in kube-scheduler.
        delay = self.queue.failed(uid(pod), unschedulable=decision.status == UNSCHEDULABLE)
        log.info(
            "unschedulable" if decision.status == UNSCHEDULABLE else "scheduling error",
            extra={
                "pod": key(pod),
                "reason": decision.message,
                "latency_ms": round(decided * 1000, 3),
                "retry_in_s": round(delay, 3),
            },
        )
        if not self.is_leader():
            return
        try:
            set_unschedulable(self.client, pod, reason, decision.message)
        except ApiError as e:
            log.warning("set PodScheduled=False: %s", e, extra={"pod": key(pod)})
        self.events.event(pod, "Warning", "FailedScheduling", decision.message)

    # -- binding cycle --------------------------------------------------------------------------

    def _binding_cycle(self, pod: Obj, decision: Decision, token: str, started: float | None = None) -> None:
        """PreBind and Bind; on any failure, Unreserve. ``started``: when the attempt began
        (``time.perf_counter``), for the decision's log line."""
        written = Written()
        assert decision.node is not None
        try:
            self.binder.pre_bind(pod, decision, written)
            self.binder.bind(pod, decision.node)
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
        with self._assumed_lock:
            current = self.cache.pod(uid(pod))
            if current is not None and not spec(current).get("nodeName"):
                self._assumed[uid(pod)] = decision.node
        claim = written.special_claim or written.reused_claim
        # The reservation stays until the cache shows every claim this cycle wrote (``_on_claim``).
        with self._pending_lock:
            waiting = set(written.claim_keys) - self.cache.allocated(written.claim_keys)
            if waiting:
                self._pending_tokens[token] = waiting
        if not waiting:
            self.cache.forget_reservation(token)
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
        self.events.event(pod, "Normal", "Scheduled", scheduled_message(pod, decision))
        relaxed = relaxed_alignment_message(decision)
        if relaxed is not None:
            self.events.event(pod, "Normal", ALIGNMENT_RELAXED, relaxed)

    def unreserve(self, pod: Obj, decision: Decision, token: str, written: Written) -> None:
        """Unreserve: undo the binding cycle's API writes, then its in-memory reservation."""
        self.binder.roll_back(pod, written)
        self.scheduler.unreserve(decision, token)

    # -- maintenance ----------------------------------------------------------------------------

    def _maintenance_loop(self) -> None:
        next_repair = time.monotonic() + self.config.orphan_interval
        collect_every = min(max(self.config.template_grace / 2, 0.1), 5.0)
        next_collect = time.monotonic() + collect_every
        while not self._stop.is_set():
            try:
                item = self._cleanup.get(timeout=0.1)
            except stdqueue.Empty:
                item = None
            if item is not None and self.is_leader() and not self._clean(item):
                self._retry_later(item)
            if self.templates.wanted() and self.is_leader():
                self.templates.ensure()
            if time.monotonic() >= next_collect:
                next_collect = time.monotonic() + collect_every
                if self.is_leader():
                    self.templates.collect()
            if self._repair_now.is_set() or time.monotonic() >= next_repair:
                self._repair_now.clear()
                next_repair = time.monotonic() + self.config.orphan_interval
                if self.is_leader():
                    self.repair_orphans()

    def _clean(self, item: Cleanup) -> bool:
        """Release one special claim; True when nothing is left to do."""
        if item.confirm is not None and not self.cleaner.confirm_gone(item.confirm):
            return True  # the API says its pod still uses it
        return self.cleaner.unreserve_and_delete(item.namespace, item.claim, item.pod_uid)

    def _retry_later(self, item: Cleanup) -> None:
        timer = threading.Timer(2.0, self._cleanup.put, args=(item,))
        timer.daemon = True
        timer.start()

    def repair_orphans(self) -> int:
        repaired = self.cleaner.repair(self.cache.special_claims(), self.cache.all_pods().get)
        self.metrics.orphans.set(self.cleaner.unrepaired)
        if repaired:
            self.metrics.orphans_repaired.inc(repaired)
        return repaired


def device_names(decision: Decision) -> list[str]:
    """``driver/pool/device`` of every device the decision allocates (the special claim's and the
    pod's own claims'), and ``<name> (device plugin)`` for names a device plugin serves."""
    out = [f"{driver}/{pool}/{device}" for driver, pool, device in decision.device_keys()]
    out += [f"{res} (device plugin)" for res, route in sorted(decision.routes.items()) if route.via != "dra"]
    return out
