"""The scheduling loop's path for a pod of a pod group (upstream's ``scheduleOnePodGroup``).

A member popped from the queue first passes GangScheduling's PreEnqueue: its PodGroup must exist
and, for a gang, ``minCount`` of its pods; until then it waits, unschedulable and unwritten (as
upstream's gated pods), for a PodGroup or pod event. Then every queued member of the group comes
into one cycle with it (``SchedulingQueue.take``, queue order), and the pure group cycle
(``core/scheduling/podgroupcycle.py``) places them on one snapshot under the cache lock. The
``PodGroupInitiallyScheduled`` condition is written as upstream writes it (never back from True).
A scheduled group's placed members are committed together (``groupbinding.py``); every other
member gets ``PodScheduled=False`` and a ``FailedScheduling`` Event with its reason, and waits.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Executor

from ..core.api import podgroups
from ..core.api.objects import Obj, as_list, is_terminating, key, meta, spec, status, uid
from ..core.api.podgroups import GroupKey
from ..core.scheduling.framework import SCHEDULED, UNSCHEDULABLE, Decision
from ..core.scheduling.plugins import gangscheduling
from ..core.scheduling.podgroupcycle import GroupDecision, PodGroupInfo
from ..core.scheduling.podgroupsearch import DEFAULT_STEPS
from ..kube.cache import ClusterCache, SharedScheduler
from ..kube.client import MERGE_PATCH, ApiError, KubeClient, NotLeader
from ..kube.resources import POD_GROUP_VERSIONS, Resource, pod_groups
from .eventhandlers import is_ours
from .events import EventRecorder, now_rfc3339
from .groupbinding import GroupBindingCycle, Member
from .metrics import WorkerMetrics
from .preemption import disruption_target_patch, evict
from .queue import SchedulingQueue

log = logging.getLogger("draxr.worker")


def with_condition(pod_group: Obj, condition: Obj, now: str) -> list[Obj] | None:
    """The PodGroup's conditions with ``condition`` set (``meta.SetStatusCondition``), or None
    when nothing changes or the group was scheduled already (a True condition never goes back)."""
    current = podgroups.condition(pod_group, condition["type"])
    if current is not None and current.get("status") == "True" and condition["status"] != "True":
        return None
    generation = meta(pod_group).get("generation")
    wanted = dict(condition)
    if isinstance(generation, int):
        wanted["observedGeneration"] = generation
    if current is not None and all(current.get(k) == v for k, v in wanted.items()):
        return None
    same = current is not None and current.get("status") == wanted["status"]
    kept = (current or {}).get("lastTransitionTime") if same else None
    wanted["lastTransitionTime"] = kept or now
    conditions = as_list(status(pod_group).get("conditions"))
    others = [c for c in conditions if isinstance(c, dict) and c.get("type") != condition["type"]]
    return [*others, wanted]


class PodGroupScheduling:
    def __init__(
        self,
        client: KubeClient,
        cache: ClusterCache,
        scheduler: SharedScheduler,
        queue: SchedulingQueue,
        binding: GroupBindingCycle,
        pool: Executor,
        events: EventRecorder,
        metrics: WorkerMetrics,
        scheduler_name: str,
        unschedulable: Callable[[Obj, Decision, float], None],
        *,
        topology_aware: bool = True,
        search_steps: int = DEFAULT_STEPS,
        two_phase_commit: bool = True,
        preempt: bool = True,
    ) -> None:
        self.client = client
        self.cache = cache
        self.scheduler = scheduler
        self.queue = queue
        self.binding = binding
        self.pool = pool
        self.events = events
        self.metrics = metrics
        self.scheduler_name = scheduler_name
        self.unschedulable = unschedulable
        self.topology_aware = topology_aware
        self.search_steps = search_steps
        self.two_phase_commit = two_phase_commit
        #: Preemption for the whole group when it does not fit (beyond upstream).
        self.preempt = preempt

    def schedule(self, pod: Obj, group: GroupKey) -> GroupDecision | None:
        """One cycle for ``pod``'s group (``pod`` is in flight); None when it is gated."""
        pod_group = self.cache.pod_group(group)
        everyone = self.cache.group_members(group)
        released = self.binding.released
        # A released pod counts no more; once it is gone or terminating, it needs no remembering.
        released -= {u for u in list(released) if (p := self.cache.pod(u)) is None or is_terminating(p)}
        pods = [p for p in everyone if not is_terminating(p) and uid(p) not in released]
        gang_min = podgroups.min_count(pod_group) if pod_group and podgroups.is_gang(pod_group) else None
        gated = gangscheduling.pre_enqueue(group.name, pod_group is not None, gang_min, len(pods))
        if gated is not None or pod_group is None:
            log.info("waiting", extra={"pod": key(pod), "pod_group": str(group), "reason": gated})
            self.queue.failed(uid(pod))  # back when a PodGroup or pod event comes
            return None
        queued, scheduled = self._members(pod, pods)
        info = PodGroupInfo(pod_group, queued, scheduled)
        started = time.perf_counter()
        decision = self.scheduler.schedule_group_and_reserve(
            info, topology_aware=self.topology_aware, search_steps=self.search_steps
        )
        decided = time.perf_counter() - started
        self.metrics.attempt_duration.observe(decided)
        self.metrics.attempts.labels(decision.status.lower()).inc()
        if decision.status == UNSCHEDULABLE and self.preempt:
            self._post_filter(info, group, decision)
        self._write_condition(pod_group, decision)
        placed = {uid(d.pod) for d, _ in decision.placed()}
        for d in decision.decisions:
            if uid(d.pod) not in placed:
                self.unschedulable(d.pod, d, decided)
        if decision.status == SCHEDULED and not self.two_phase_commit:
            for d, token in decision.placed():  # upstream: each member binds on its own
                self.pool.submit(self.binding.binding.run, d.pod, d, token, started)
        elif decision.status == SCHEDULED:
            members = [Member(d.pod, d, token) for d, token in decision.placed()]
            self.pool.submit(
                self.binding.run,
                str(group),
                podgroups.min_count(pod_group),
                len(scheduled),
                members,
                started,
            )
        log.info(
            "pod group cycle",
            extra={
                "pod_group": str(group),
                "reason": decision.message or decision.status,
                "placement": decision.placement,
                "placed": len(placed),
                "latency_ms": round(decided * 1000, 3),
            },
        )
        return decision

    def _post_filter(self, info: PodGroupInfo, group: GroupKey, decision: GroupDecision) -> None:
        """The group's PostFilter (``core/scheduling/podgrouppreemption.py``): the victims evicted
        as DefaultPreemption's are; its words appended to the group's reason, as upstream's."""
        found = self.scheduler.preempt_group(
            info, self.cache.pod_groups(), topology_aware=self.topology_aware, search_steps=self.search_steps
        )
        for victim in found.victims:
            try:
                evict(self.client, victim, disruption_target_patch(self.scheduler_name, now_rfc3339()))
            except (ApiError, NotLeader) as e:
                why = {"pod": key(victim), "reason": str(e)}
                log.warning("pod group preemption of a victim failed", extra=why)
                continue
            log.info("preempted", extra={"pod": key(victim), "pod_group": str(group)})
            self.events.post(victim, "Normal", "Preempted", f"Preempted by pod group {group}")
        text = found.message or f"{len(found.victims)} pods preempted"
        old = decision.message
        decision.message = f"{old}, pod group preemption: {text}"
        for d in decision.decisions:
            if d.message == old:
                d.message = decision.message

    def _members(self, pod: Obj, pods: list[Obj]) -> tuple[list[Obj], list[tuple[Obj, str]]]:
        """The members to place (``pod`` and the queued ones, queue order) and those already
        placed (bound, or reserved by a cycle whose binding is under way: upstream's assumed pods),
        each with its node."""
        scheduled: list[tuple[Obj, str]] = []
        waiting: dict[str, Obj] = {}
        for p in pods:
            node = spec(p).get("nodeName") or self.cache.node_of(uid(p))
            if isinstance(node, str) and node:
                scheduled.append((p, node))
            elif is_ours(p, self.scheduler_name):
                waiting[uid(p)] = p
        taken = self.queue.take(u for u in waiting if u != uid(pod))
        return [pod, *(waiting[e.uid] for e in taken)], scheduled

    def _write_condition(self, pod_group: Obj, decision: GroupDecision) -> None:
        if pod_group.get("kind") == "Workload":
            return  # 1.35's Workload has no status for a group: its scheduler wrote none
        resource = self._resource()
        kind = podgroups.condition_type(resource.version)
        conditions = with_condition(pod_group, decision.condition(kind), now_rfc3339())
        if conditions is None:
            return
        m = meta(pod_group)
        try:
            self.client.patch(
                resource,
                str(m.get("name")),
                {"status": {"conditions": conditions}},
                namespace=str(m.get("namespace")),
                subresource="status",
                patch_type=MERGE_PATCH,
            )
        except (ApiError, NotLeader) as e:
            log.warning("PodGroup status: %s", e, extra={"pod_group": str(podgroups.key_of(pod_group))})

    def _resource(self) -> Resource:
        """PodGroups as the informer found them served (the newest version without one)."""
        informer = self.cache.informers.get("PodGroup")
        return informer.resource if informer is not None else pod_groups(POD_GROUP_VERSIONS[0])


__all__ = ["PodGroupScheduling", "with_condition"]
