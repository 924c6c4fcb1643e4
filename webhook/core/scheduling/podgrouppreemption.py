"""Beyond upstream: preemption for a whole pod group.

A gang that does not fit preempts only when the whole group then fits. Pods preempted for one pod
would leave the other members no room, and the victims would go for nothing. The candidates are
the bound pods of lower priority than the group's. A victim whose PodGroup asks
``disruptionMode: all`` (1.36: ``PodGroup``) is a unit with every bound pod of its group: they go
together or stay together.

The steps follow upstream's DefaultPreemption:
1. Remove every candidate unit and run the group cycle on what is left (``Removal``: a dry run,
   device-aware, everything put back after). If the group does not fit even then, nothing is
   preempted.
2. Otherwise, reprieve: from the most important unit down (priority, then the oldest start), put
   the unit back and keep it if the group still fits.
3. The units that could not be put back are the victims.

A group whose preemption policy is ``Never`` preempts nothing, nor does one while pods preempted
earlier still terminate (upstream's ``PodEligibleToPreemptOthers``). At most ``MAX_UNITS`` units are
weighed; beyond that the group does not preempt.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from ..api import podgroups
from ..api.objects import Obj, as_dict, pod_priority, spec, uid
from ..api.podgroups import GroupKey
from .framework import SCHEDULED
from .plugins.defaultpreemption.simulation import Removal
from .plugins.defaultpreemption.victims import Victim, terminating_by_preemption
from .podgroupcycle import PodGroupCycle, PodGroupInfo

#: Victim units a group's preemption weighs at most (each costs a group cycle in the reprieve).
MAX_UNITS: Final = 64
NEVER: Final = "Never"


@dataclass(slots=True)
class GroupPreemption:
    """The pods to evict so the group fits (empty: it cannot preempt), and why not when empty."""

    victims: list[Obj]
    message: str


def disrupted_together(pod_group: Obj) -> bool:
    """``disruptionMode: {all: {}}`` (1.37) or ``PodGroup`` (1.36): the group's pods go together."""
    mode = spec(pod_group).get("disruptionMode")
    return "all" in as_dict(mode) or mode == "PodGroup"


def units(candidates: Iterable[Obj], pod_groups: Mapping[GroupKey, Obj]) -> list[list[Obj]]:
    """The candidates by unit: the bound pods of a group disrupted together form one, any other pod
    is one alone."""
    out: list[list[Obj]] = []
    together: dict[GroupKey, list[Obj]] = {}
    for pod in candidates:
        group = podgroups.group_of(pod)
        if group is not None and group in pod_groups and disrupted_together(pod_groups[group]):
            together.setdefault(group, []).append(pod)
        else:
            out.append([pod])
    return out + list(together.values())


def _importance(unit: list[Obj]) -> tuple[int, datetime]:
    """A unit's importance, most important first: its most important pod's (``MoreImportantPod``)."""
    return min(Victim.of(p).importance() for p in unit)


def preempt_for_group(
    cycle: PodGroupCycle,
    group: PodGroupInfo,
    pod_groups: Mapping[GroupKey, Obj],
    *,
    max_units: int = MAX_UNITS,
) -> GroupPreemption:
    """The victims for ``group`` (see the module's docstring); the cycle's state is left as it was."""
    if _policy(group) == NEVER:
        return GroupPreemption([], "not eligible due to preemptionPolicy=Never.")
    state = cycle.scheduler.state
    priority = podgroups.priority(group.pod_group)
    members = {uid(p) for p in group.members} | {uid(p) for p, _ in group.scheduled}
    candidates = [
        p for u, p in state.allocated.pods.items() if u not in members and pod_priority(p) < priority
    ]
    if any(terminating_by_preemption(p) for p in candidates):  # upstream's PodEligibleToPreemptOthers
        return GroupPreemption([], "waiting for the pods preempted earlier to terminate.")
    found = sorted(units(candidates, pod_groups), key=_importance)
    if not found:
        return GroupPreemption([], "No preemption victims found for incoming pod group.")
    if len(found) > max_units:
        return GroupPreemption([], f"too many preemption candidates ({len(found)} > {max_units}).")
    with Removal(state) as removal:
        for unit in found:
            for pod in unit:
                removal.remove(pod)
        if not _fits(cycle, group):
            return GroupPreemption([], "the pod group does not fit even without every lower-priority pod.")
        victims: list[Obj] = []
        for unit in found:  # most important first: each is reprieved when the group still fits
            for pod in unit:
                removal.add(pod)
            if _fits(cycle, group):
                continue
            for pod in unit:
                removal.remove(pod)
            victims += unit
    return GroupPreemption(victims, "")


def _fits(cycle: PodGroupCycle, group: PodGroupInfo) -> bool:
    """Whether the group cycle places the group (its reservations undone at once)."""
    decision = cycle.schedule(group)
    for d, token in reversed(decision.placed()):
        cycle.scheduler.unreserve(d, token)
    return decision.status == SCHEDULED


def _policy(group: PodGroupInfo) -> str:
    """The PodGroup's preemption policy, or its first member's (the validation made them agree)."""
    for source in (group.pod_group, *group.members[:1]):
        policy = spec(source).get("preemptionPolicy")
        if isinstance(policy, str) and policy:
            return policy
    return podgroups.PREEMPT_LOWER_PRIORITY


__all__ = ["MAX_UNITS", "GroupPreemption", "disrupted_together", "preempt_for_group", "units"]
