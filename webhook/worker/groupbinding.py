"""The binding of a pod group's placed members, committed in two phases (beyond upstream).

Upstream binds a gang's members one by one once Permit lets them through: a member whose PreBind
or Bind fails leaves the others bound, and the gang runs below its ``minCount``. draxr commits the
group as one:

1. **PreBind for every member** (VolumeBinding's, then the special claim written, allocated and
   reserved for the pod, and the request mapping): a failure undoes every member's writes and
   reservations (Unreserve, both halves) and sends the whole group back to the queue.
2. **Bind every member.** A bind that still fails after the client's retries leaves that member
   unbound. When the members bound (with those bound before the cycle) still reach ``minCount``,
   the failed ones go back to the queue as a lone pod would. When they do not, the group is
   released: the members bound in this cycle are deleted with a ``DisruptionTarget`` condition
   (their controller makes them anew) and every other member goes back to the queue, so no gang
   is left running below its ``minCount``.

Members whose devices carry binding conditions are bound as lone pods are, each after its wait
(``BindingCycle``): the group's all-or-nothing covers PreBind, not those waits (docs/limitations.md).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..core.api.objects import Obj, key, uid
from ..core.scheduling.framework import Decision
from ..kube.client import ApiError, KubeClient, NotLeader
from .binder import AlreadyBound, Written
from .bindingcycle import BindingCycle, waiting_claims
from .events import now_rfc3339
from .preemption import disruption_target, evict

log = logging.getLogger("draxr.worker")

#: The DisruptionTarget reason and message of a member released with its group.
RELEASED_REASON = "PodGroupReleased"


def released_message(group: str, min_count: int, bound: int) -> str:
    return f"draxr: pod group {group} released: {bound} of its pods bound, below its minCount ({min_count})"


@dataclass(slots=True)
class Member:
    """A placed member, its decision and its reservation; ``written``: what its PreBind wrote."""

    pod: Obj
    decision: Decision
    token: str
    written: Written = field(default_factory=Written)


class GroupBindingCycle:
    def __init__(self, client: KubeClient, binding: BindingCycle) -> None:
        self.client = client
        self.binding = binding
        #: Members this worker released: they count for their group no more, though the cache may
        #: show them bound and running until their deletion comes (``PodGroupScheduling`` reads it).
        self.released: set[str] = set()

    def run(
        self, group: str, min_count: int, scheduled: int, members: Sequence[Member], started: float
    ) -> bool:
        """Commit the group (``scheduled``: its pods bound before this cycle). True when every
        member was bound or left to its own binding-conditions wait."""
        if not self._pre_bind_all(group, members):
            return False
        bound: list[Member] = []
        failed: list[tuple[Member, Exception]] = []
        for m in members:
            waits = waiting_claims(m.decision, m.written)
            if waits and self.binding.conditions is not None:
                # Its devices wait for binding conditions: the lone pod's wait, then its Bind.
                self.binding.wait(m.pod, m.decision, m.token, m.written, started, waits)
                bound.append(m)
                continue
            try:
                assert m.decision.node is not None
                self.binding.binder.bind(m.pod, m.decision.node)
            except Exception as e:
                failed.append((m, e))
                continue
            bound.append(m)
            self.binding.bound(m.pod, m.decision, m.token, m.written, started)
        if not failed:
            return True
        if scheduled + len(bound) >= min_count:
            for m, error in failed:
                self.binding.failed(m.pod, m.decision, m.token, m.written, error)
            return False
        self._release(group, min_count, scheduled + len(bound), bound, failed)
        return False

    def _pre_bind_all(self, group: str, members: Sequence[Member]) -> bool:
        """Phase 1; on a failure every member's writes and reservations are undone."""
        done: list[Member] = []
        try:
            for m in members:
                done.append(m)
                if self.binding.volumes is not None:
                    self.binding.volumes.pre_bind(m.pod, m.decision)
                self.binding.binder.pre_bind(m.pod, m.decision, m.written)
        except Exception as e:
            log.warning(
                "pod group PreBind failed: every member's writes undone",
                extra={"pod_group": group, "pod": key(done[-1].pod), "reason": _why(e)},
            )
            for m in reversed(members):
                self._undo(m)
            for m in members:
                self._retry(m, e)
            self.binding.queue.cluster_changed()
            return False
        return True

    def _undo(self, m: Member) -> None:
        try:
            self.binding.unreserve(m.pod, m.decision, m.token, m.written)
        except Exception as e:  # the periodic repair frees what is left
            log.warning("pod group: undo: %s", _why(e), extra={"pod": key(m.pod)})

    def _retry(self, m: Member, e: Exception) -> None:
        queue = self.binding.queue
        if isinstance(e, NotLeader):
            queue.requeue(uid(m.pod))
        elif isinstance(e, AlreadyBound):
            queue.done(uid(m.pod))
        else:
            queue.failed(uid(m.pod), unschedulable=False)

    def _release(
        self,
        group: str,
        min_count: int,
        count: int,
        bound: list[Member],
        failed: list[tuple[Member, Exception]],
    ) -> None:
        """Below ``minCount`` after Bind: the members bound in this cycle are deleted, then the
        others unreserved and retried (without the released ones, the group waits for minCount)."""
        message = released_message(group, min_count, count)
        log.warning("pod group released below its minCount", extra={"pod_group": group, "reason": message})
        self.released |= {uid(m.pod) for m in bound}
        for m in bound:
            try:
                evict(self.client, m.pod, disruption_target(RELEASED_REASON, message, now_rfc3339()))
            except (ApiError, NotLeader) as e:
                log.warning("pod group: release: %s", _why(e), extra={"pod": key(m.pod)})
            self.binding.events.post(m.pod, "Warning", RELEASED_REASON, message)
        for m, error in failed:
            self.binding.failed(m.pod, m.decision, m.token, m.written, error)


def _why(e: Exception) -> str:
    return str(e) if isinstance(e, ApiError) else f"{type(e).__name__}: {e}"


__all__ = ["RELEASED_REASON", "GroupBindingCycle", "Member", "released_message"]
