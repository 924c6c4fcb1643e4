"""The informers' events, turned into work (kube-scheduler's ``eventhandlers.go``).

A pending pod of ours enters the scheduling queue and leaves it once bound or gone; an event that may
free or add capacity sends unschedulable pods back; a finished or deleted pod's special claims, and
an orphan's (``core/api/orphans.py``), go to the maintenance thread to be freed (a bound pod whose
status names no claim frees none: it is reported, ``unmapped.py``); a rewritten pod's
missing templates are wanted; a claim the cache now shows written ends its assumption. Events run
on the informers' threads and only queue work: nothing here writes to the API.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from ..core.api.objects import Obj, as_dict, is_terminating, key, meta, name, namespace, spec, status, uid
from ..core.api.orphans import orphaned, owner_pod_uid, pod_is_done, special_claim_name, unmapped
from ..core.api.podgroups import group_of
from ..core.api.specialclaims import is_special_claim
from ..kube.cache import ClusterCache
from .assumed import AssumedClaims, AssumedPods
from .maintenance import Cleanup
from .queue import SchedulingQueue
from .templates import TemplateKeeper
from .unmapped import UnmappedPods


def is_ours(pod: Obj, scheduler_name: str) -> bool:
    """A pod this worker schedules (kube-scheduler's ``responsibleForPod`` and the pending checks):
    our ``schedulerName``, no node, not terminating, pending, no scheduling gates."""
    s = spec(pod)
    return (
        s.get("schedulerName") == scheduler_name
        and not s.get("nodeName")
        and not is_terminating(pod)
        and status(pod).get("phase") in (None, "", "Pending")
        and not s.get("schedulingGates")
    )


def scheduling_signature(pod: Obj) -> str:
    """What of a pending pod its scheduling depends on: its labels, annotations and spec, and the
    claim statuses of its status (kube-scheduler's pod update events: labels, resources,
    scheduling gates, tolerations, generated claims). Conditions, phase and the rest of the status
    are not in it: updating them alone does not send an unschedulable pod round again."""
    m, st = meta(pod), status(pod)
    parts = (
        m.get("labels"),
        m.get("annotations"),
        spec(pod),
        st.get("extendedResourceClaimStatus"),
        st.get("resourceClaimStatuses"),
    )
    return json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)


class EventHandlers:
    def __init__(
        self,
        cache: ClusterCache,
        queue: SchedulingQueue,
        templates: TemplateKeeper,
        assumed_pods: AssumedPods,
        assumed_claims: AssumedClaims,
        clean_up: Callable[[Cleanup], None],
        scheduler_name: str,
        unmapped: UnmappedPods,
    ) -> None:
        self.cache = cache
        self.queue = queue
        self.templates = templates
        self.assumed_pods = assumed_pods
        self.assumed_claims = assumed_claims
        self.clean_up = clean_up
        self.scheduler_name = scheduler_name
        self.unmapped = unmapped

    def resync(self) -> None:
        """Every cached pod again, as if modified: pending pods are queued, finished pods' claims
        freed (after start or on leading)."""
        for pod in self.cache.all_pods().values():
            self._on_pod("MODIFIED", pod, resync=True)

    def on_event(self, kind: str, etype: str, obj: Obj) -> None:
        if kind == "Pod":
            self._on_pod(etype, obj)
        elif kind == "ResourceClaim":
            self._on_claim(etype, obj)
            if etype == "DELETED" or not as_dict(status(obj).get("allocation")):
                self.queue.cluster_changed()
        else:
            self.queue.cluster_changed()

    def _on_pod(self, etype: str, pod: Obj, *, resync: bool = False) -> None:
        """``resync``: queue a pending pod as changed, whatever changed."""
        pod_uid = uid(pod)
        if etype != "DELETED":
            self.templates.want(pod)  # a rewritten pod's templates, if any are missing
        if self.assumed_pods.stale(etype, pod):
            return
        group = group_of(pod)
        if group is not None and etype == "ADDED":
            # One more pod of the group: its members waiting for minCount may go (GangScheduling's
            # queueing hint for an added pod).
            self.queue.activate(uid(p) for p in self.cache.group_members(group))
        if etype != "DELETED" and is_ours(pod, self.scheduler_name):
            prio = spec(pod).get("priority")
            signature = None if resync else scheduling_signature(pod)
            self.queue.add(pod_uid, prio if isinstance(prio, int) else 0, key(pod), signature)
            return
        self.queue.remove(pod_uid)
        if etype == "DELETED" or pod_is_done(pod):
            self.unmapped.forget(pod_uid)
            # Every special claim the pod owns goes, the one its status names first.
            names = [n for n in (special_claim_name(pod),) if n]
            names += [name(c) for c in self.cache.special_claims_of(pod) if name(c) not in names]
            for claim_name in names:
                self.clean_up(Cleanup(namespace(pod), claim_name, pod_uid))
            if spec(pod).get("nodeName"):
                self.queue.cluster_changed()
        elif spec(pod).get("nodeName"):
            # Bound: special claims besides the one its status names are leftovers of a failed cycle;
            # one that names none keeps them all, and is reported.
            claims = self.cache.special_claims_of(pod)
            if claims and unmapped(pod):
                self.unmapped.observe(pod, [name(c) for c in claims])
            else:
                self.unmapped.forget(pod_uid)
            for claim in claims:
                if orphaned(claim, pod):
                    self.clean_up(Cleanup(namespace(claim), name(claim), pod_uid, claim))

    def _on_claim(self, etype: str, claim: Obj) -> None:
        if etype != "DELETED" and is_special_claim(claim):
            self._check_owner(claim)
        self.assumed_claims.seen(etype, claim)

    def _check_owner(self, claim: Obj) -> None:
        """A special claim whose pod is gone, finished, or bound with another claim is freed at
        once (after asking the API), not at the next periodic repair."""
        owner_uid = owner_pod_uid(claim)
        if owner_uid is None or not self.cache.synced(["Pod"]):
            return
        if orphaned(claim, self.cache.pod(owner_uid)):
            self.clean_up(Cleanup(namespace(claim), name(claim), owner_uid, claim))
