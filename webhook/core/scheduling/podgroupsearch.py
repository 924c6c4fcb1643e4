"""Beyond upstream: a bounded search for a gang's placement where upstream's one pass finds none.

Upstream places a gang's members once, in queue order, each on the best node for it alone; when a
later member no longer fits, the gang fails although another assignment may exist
(kubernetes/kubernetes#138765: two members of 2 GPUs spread over two nodes of 4, and a third of 4
fits nowhere; or a member whose node selector only fits where an earlier member was put).

The search walks the members in the same order, each through the pod's own PreFilter, Filter,
Score and Reserve (``Scheduler.schedule``) among the placement's nodes it has not excluded for
that member. A member that does not fit is left unplaced when ``minCount`` stays reachable without
it; otherwise the search backtracks: the member before it is undone and tried again without the
node it had. It ends at the first assignment that places at least ``minCount`` (with the group's
members already scheduled), or after ``steps`` decisions, or when no member is left to move. Every
reservation it made is undone before it returns: it answers with the node of each member (None:
left unplaced), which the cycle then reserves member by member.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..api.objects import Obj
from .framework import ERROR, SCHEDULED, Decision
from .scheduler import Scheduler

#: Decisions a search may take (``--gang-search-steps``; 0: upstream's one pass only).
DEFAULT_STEPS = 256


@dataclass(slots=True)
class Found:
    """A node per member (None: left unplaced) and each member's decision there."""

    nodes: list[str | None]
    decisions: list[Decision]


def search(
    scheduler: Scheduler,
    members: Sequence[Obj],
    nodes: Sequence[str],
    min_count: int,
    already: int,
    steps: int = DEFAULT_STEPS,
) -> Found | None:
    """An assignment of ``members`` to ``nodes`` reaching ``min_count`` with the ``already``
    scheduled, found within ``steps`` decisions; None when none is."""
    n = len(members)
    excluded: list[set[str]] = [set() for _ in range(n)]
    held: list[tuple[Decision, str] | None] = []  # per member so far: its reservation, or skipped
    decisions: list[Decision] = []
    used = 0
    i = 0
    try:
        while i < n:
            if used >= steps:
                return None
            candidates = [x for x in nodes if x not in excluded[i]]
            d: Decision | None = None
            if candidates:
                with scheduler.within(candidates):
                    d = scheduler.schedule(members[i])
                used += 1
                if d.status == ERROR:
                    return None
            if d is not None and d.status == SCHEDULED:
                held.append((d, scheduler.reserve(d)))
                decisions.append(d)
                i += 1
                continue
            placed = already + sum(h is not None for h in held)
            if placed + (n - i - 1) >= min_count:  # reachable without it: leave it unplaced
                held.append(None)
                decisions.append(d if d is not None else Decision(members[i], "Unschedulable"))
                i += 1
                continue
            i = _back(scheduler, held, decisions, excluded, i)
            if i < 0:
                return None
        if already + sum(h is not None for h in held) < min_count or all(h is None for h in held):
            return None
        return Found([h[0].node if h is not None else None for h in held], list(decisions))
    finally:
        for h in reversed(held):
            if h is not None:
                scheduler.unreserve(*h)


def _back(
    scheduler: Scheduler,
    held: list[tuple[Decision, str] | None],
    decisions: list[Decision],
    excluded: list[set[str]],
    i: int,
) -> int:
    """Undo members back to the last one placed, which is tried next without its node; the
    members after it start afresh. -1 when none is left to move."""
    excluded[i].clear()
    while held:
        i -= 1
        last = held.pop()
        decisions.pop()
        if last is None:  # left unplaced: nothing to move here
            excluded[i].clear()
            continue
        d, token = last
        scheduler.unreserve(d, token)
        assert d.node is not None
        excluded[i].add(d.node)
        return i
    return -1


__all__ = ["DEFAULT_STEPS", "Found", "search"]
