"""Who may be preempted, and in which order (upstream's ``preemption/util.go``).

A victim is a bound pod of strictly lower priority than the preemptor (``isPreemptionAllowed`` for
single pods). ``MoreImportantVictim`` for two pods: the higher priority, then the one that started
first (longer runtime) is more important. A pod without ``status.startTime`` sorts as started last
(upstream reads the clock there; the core reads none)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from ....api.objects import Obj, as_dict, as_list, is_terminating, parse_time, pod_priority, status

#: ``v1.DisruptionTarget`` and ``v1.PodReasonPreemptionByScheduler``.
DISRUPTION_TARGET: Final = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER: Final = "PreemptionByScheduler"

_LATEST: Final = datetime.max.replace(tzinfo=UTC)


def start_time(pod: Obj) -> datetime:
    """``status.startTime``; unknown: the latest possible."""
    raw = status(pod).get("startTime")
    return parse_time(raw) if isinstance(raw, str) and raw else _LATEST


@dataclass(frozen=True, slots=True)
class Victim:
    pod: Obj
    priority: int
    start: datetime

    @classmethod
    def of(cls, pod: Obj) -> Victim:
        return cls(pod, pod_priority(pod), start_time(pod))

    def importance(self) -> tuple[int, datetime]:
        """Sort key, most important first (``MoreImportantVictim``)."""
        return (-self.priority, self.start)


def by_importance(victims: list[Victim]) -> list[Victim]:
    return sorted(victims, key=Victim.importance)


def terminating_by_preemption(pod: Obj) -> bool:
    """``PodTerminatingByPreemption``: being deleted, with a true ``DisruptionTarget`` condition of
    reason ``PreemptionByScheduler`` (the first such condition decides)."""
    if not is_terminating(pod):
        return False
    for c in as_list(status(pod).get("conditions")):
        cond = as_dict(c)
        if cond.get("type") == DISRUPTION_TARGET:
            return cond.get("status") == "True" and cond.get("reason") == PREEMPTION_BY_SCHEDULER
    return False
