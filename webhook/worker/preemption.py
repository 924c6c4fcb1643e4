"""PostFilter's API half: carry out DefaultPreemption's choice (upstream's ``Executor`` and the
nomination ``schedule_one`` writes).

The decision (victims and node) is the pure core's (``core/scheduling/plugins/defaultpreemption``),
taken under the cache lock on the same state as the failed decision. Then, per victim, as
upstream's ``PreemptPod``: a ``DisruptionTarget`` condition (reason ``PreemptionByScheduler``) on
its status, a graceful delete (no grace period given: the pod's own
``terminationGracePeriodSeconds``) and a ``Preempted`` Event; on the preemptor,
``status.nominatedNodeName``. A pod that cannot preempt has its nomination cleared when no node
would help (upstream's ``ModeOverride`` with ""). The preemptor goes back to the queue as
unschedulable: the victims' deletions move it (``eventhandlers``), and while they terminate it
does not preempt again (``PodEligibleToPreemptOthers``).
"""

from __future__ import annotations

import logging

from ..core.api.objects import Obj, key, name, namespace, status, uid
from ..core.scheduling.framework import Decision
from ..core.scheduling.plugins.defaultpreemption import PostFilterResult
from ..kube.cache import ClusterCache, SharedScheduler
from ..kube.client import STRATEGIC_PATCH, ApiError, KubeClient, NotLeader
from ..kube.resources import PODS
from .events import EventRecorder, PodPatch, now_rfc3339

log = logging.getLogger("draxr.worker")


def disruption_target_patch(scheduler_name: str, now: str) -> PodPatch:
    """Upstream's condition on a victim (strategic merge: conditions merge by ``type``)."""
    message = f"{scheduler_name}: preempting to accommodate a higher priority pod"
    return disruption_target("PreemptionByScheduler", message, now)


def disruption_target(reason: str, message: str, now: str) -> PodPatch:
    return {
        "status": {
            "conditions": [
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": reason,
                    "message": message,
                    "lastTransitionTime": now,
                }
            ]
        }
    }


def evict(client: KubeClient, pod: Obj, condition: PodPatch) -> None:
    """The ``DisruptionTarget`` condition, then a graceful delete of that very pod (its uid)."""
    client.patch(
        PODS, name(pod), condition, namespace=namespace(pod), subresource="status", patch_type=STRATEGIC_PATCH
    )
    client.delete(PODS, name(pod), namespace(pod), uid=uid(pod))


def preempted_message(preemptor: Obj, node: str) -> str:
    """The victim's ``Preempted`` Event, upstream's words."""
    return f"Preempted by pod {uid(preemptor)} on node {node}"


class PreemptionExecutor:
    def __init__(
        self,
        client: KubeClient,
        cache: ClusterCache,
        scheduler: SharedScheduler,
        events: EventRecorder,
        scheduler_name: str,
    ) -> None:
        self.client = client
        self.cache = cache
        self.scheduler = scheduler
        self.events = events
        self.scheduler_name = scheduler_name
        #: The nominations this worker wrote, by pod uid (upstream's in-memory nominator): the cache
        #: may not show a pod's ``nominatedNodeName`` yet when a victim's deletion already requeued
        #: it, and a preemptor that does not know it was nominated preempts again.
        self.nominated: dict[str, str] = {}

    def post_filter(self, pod: Obj, decision: Decision) -> PostFilterResult:
        """Decide (under the lock) and carry out; the result's message goes into the pod's
        ``FailedScheduling`` message, as upstream's ``PostFilterMsg``."""
        pod = self._as_nominated(pod)
        result = self.scheduler.preempt(pod, decision, self.cache.pod_disruption_budgets())
        if result.success and result.nominated_node is not None:
            for victim in result.victims:
                self._preempt(pod, victim, result.nominated_node)
            self._nominate(pod, result.nominated_node)
        elif result.nominated_node == "" and status(pod).get("nominatedNodeName"):
            self._nominate(pod, None)
        return result

    def _preempt(self, preemptor: Obj, victim: Obj, node: str) -> None:
        try:
            evict(self.client, victim, disruption_target_patch(self.scheduler_name, now_rfc3339()))
        except NotLeader as e:  # the lease went meanwhile: the next leader decides again
            log.warning("preemption of a victim failed", extra={"pod": key(victim), "reason": str(e)})
            return
        except ApiError as e:
            if not e.not_found:
                log.warning("preemption of a victim failed", extra={"pod": key(victim), "reason": str(e)})
            return
        log.info("preempted", extra={"pod": key(victim), "preemptor": key(preemptor), "node": node})
        self.events.post(victim, "Normal", "Preempted", preempted_message(preemptor, node))

    def forget(self, pod_uid: str) -> None:
        """The pod was scheduled or is gone: its nomination is over."""
        self.nominated.pop(pod_uid, None)

    def _as_nominated(self, pod: Obj) -> Obj:
        node = self.nominated.get(uid(pod))
        if node is None or status(pod).get("nominatedNodeName") == node:
            return pod
        return {**pod, "status": {**status(pod), "nominatedNodeName": node}}

    def _nominate(self, pod: Obj, node: str | None) -> None:
        if node is None:
            self.nominated.pop(uid(pod), None)
        else:
            # A pod deleted while nominated is never scheduled to be forgotten: dropped here, so
            # the record holds live pods only (a few: those waiting for their victims).
            for gone in [u for u in self.nominated if self.cache.pod(u) is None]:
                del self.nominated[gone]
            self.nominated[uid(pod)] = node
        nomination: PodPatch = {"status": {"nominatedNodeName": node}}
        try:
            self.client.patch(
                PODS,
                name(pod),
                nomination,
                namespace=namespace(pod),
                subresource="status",
                patch_type=STRATEGIC_PATCH,
            )
        except (ApiError, NotLeader) as e:
            log.warning("nominatedNodeName not written", extra={"pod": key(pod), "reason": str(e)})
