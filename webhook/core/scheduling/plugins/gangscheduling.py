"""GangScheduling (upstream ``plugins/gangscheduling``): all or nothing for a gang's pods.

PreEnqueue: a pod of a group waits outside the queue until its PodGroup exists and, for a gang,
until ``minCount`` of its pods exist (scheduled or not). PlacementFeasible: in the group cycle,
after each member, whether the members placed so far and those left can still reach ``minCount``
(Unschedulable ends the cycle early), have reached it (success), or may yet (Wait). A basic group
counts as minCount 1. draxr has no Permit: the group's members are placed together in one cycle and
committed together (the worker's group binding), so no member waits for the others at Permit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Literal, NamedTuple

from ...api.fielderrors import go_quote

NAME: Final = "GangScheduling"

WAIT: Final = "Wait"
UNSCHEDULABLE: Final = "Unschedulable"
#: A PlacementFeasible plugin's failure (not a verdict): it ends the cycle with an error.
ERROR: Final = "Error"
Code = Literal["Wait", "Unschedulable", "Error"]

WAITING_FOR_MIN_COUNT: Final = "waiting for minCount pods from a gang to appear in scheduling queue"


def waiting_for_pod_group(name: str) -> str:
    return f"waiting for pods's pod group {go_quote(name)} to appear in scheduling queue"


def pre_enqueue(pod_group_name: str, exists: bool, gang_min_count: int | None, all_pods: int) -> str | None:
    """Why a pod of the group ``pod_group_name`` may not enter the queue yet (None: it may).

    ``gang_min_count``: the PodGroup's ``gang.minCount`` (None for a basic group); ``all_pods``: the
    group's pods that exist, scheduled or not (upstream's ``AllPodsCount``)."""
    if not exists:
        return waiting_for_pod_group(pod_group_name)
    if gang_min_count is not None and all_pods < gang_min_count:
        return WAITING_FOR_MIN_COUNT
    return None


class Progress(NamedTuple):
    """``PlacementProgress``: the members not evaluated yet, and the group's pods placed so far
    (already scheduled before the cycle, and placed in it)."""

    remaining: int
    scheduled: int


#: The PlacementFeasible phase: min count and progress in, None (feasible) or a code and reason out.
PlacementFeasible = Callable[[int, "Progress"], "tuple[Code, str] | None"]


def placement_feasible(min_count: int, progress: Progress) -> tuple[Code, str] | None:
    """Whether the group can still meet ``min_count`` (None: it has)."""
    remaining, scheduled = progress
    if remaining + scheduled < min_count:
        return UNSCHEDULABLE, (
            f"minCount ({min_count}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining"
        )
    if scheduled < min_count:
        return WAIT, (
            f"minCount ({min_count}) is not yet satisfied: {scheduled} scheduled, {remaining} remaining"
        )
    return None


__all__ = [
    "ERROR",
    "NAME",
    "UNSCHEDULABLE",
    "WAIT",
    "WAITING_FOR_MIN_COUNT",
    "PlacementFeasible",
    "Progress",
    "placement_feasible",
    "pre_enqueue",
    "waiting_for_pod_group",
]
