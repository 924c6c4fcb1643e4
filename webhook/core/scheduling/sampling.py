"""Which nodes a decision visits, and when it stops: kube-scheduler's ``percentageOfNodesToScore``,
made deterministic.

kube-scheduler (``pkg/scheduler/schedule_one.go``) filters nodes until it has found
``numFeasibleNodesToFind`` feasible ones, then scores only those: every node below 100 nodes,
otherwise the configured percentage of the cluster (0: adaptive, ``50 - nodes/125``, at least 5 %),
and never fewer than 100 nodes. It starts where the previous cycle stopped (``nextStartNodeIndex``),
so that every node gets examined in turn.

draxr keeps the formula and the minimums (:func:`num_feasible_nodes_to_find`) but not the moving
start: a decision must depend only on the cluster state and the pod, so that ``draxr plan``, a
retried attempt and a property test all see the same answer. The start is a point on the ring of node
names (sorted) chosen by the pod's own identity (:func:`start_of`: a CRC-32 of ``namespace/name``,
stable across processes): different pods start at different nodes, as the rotation makes them, and
the same pod on the same state always starts at the same node. The walk goes round the ring once
from there (:func:`rotation`), over an index of the nodes that can fit the pod at all rather than
the whole cluster; nodes the index leaves out would fail Filter anyway, so the nodes a decision
finds are the ones kube-scheduler's walk from the same start would find.
"""

from __future__ import annotations

import heapq
import zlib
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from itertools import chain

from ..api.objects import Obj, name, namespace

#: ``minFeasibleNodesToFind``: below this many nodes every node is considered.
MIN_FEASIBLE_NODES_TO_FIND = 100
#: ``minFeasibleNodesPercentageToFind``: the adaptive percentage never drops below this.
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
#: The adaptive percentage starts here and loses one point per 125 nodes.
BASE_PERCENTAGE_OF_NODES_TO_SCORE = 50
#: ``--percentage-of-nodes-to-score``'s default: adaptive.
ADAPTIVE = 0


def check_percentage(percentage: int) -> int:
    """``percentage`` if it is a valid ``percentageOfNodesToScore`` (0 to 100), else ValueError."""
    if not 0 <= percentage <= 100:
        raise ValueError(f"percentage of nodes to score must be 0 to 100, not {percentage}")
    return percentage


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """How many feasible nodes a decision looks for before it scores them (``numFeasibleNodesToFind``).

    ``percentage``: 0 is adaptive; 100 (or more) is every node."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage <= 0:
        percentage = max(
            BASE_PERCENTAGE_OF_NODES_TO_SCORE - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND
        )
    return max(num_all_nodes * min(percentage, 100) // 100, MIN_FEASIBLE_NODES_TO_FIND)


def start_of(pod: Obj, names: Sequence[str]) -> str | None:
    """The node name a pod's walk starts at (None for an empty cluster)."""
    if not names:
        return None
    key = f"{namespace(pod)}/{name(pod)}".encode()
    return names[zlib.crc32(key) % len(names)]


def rotation(ring: Sequence[str], start: str | None) -> Iterator[str]:
    """The sorted ``ring`` once round, from the first name at or after ``start`` (over copies,
    so the ring may change meanwhile; a C-level iterator, as every decision walks it)."""
    if start is None:
        return iter(list(ring))
    i = bisect_left(ring, start)
    return chain(ring[i:], ring[:i])


def merged_rotation(rings: Sequence[Sequence[str]], start: str | None) -> Iterator[str]:
    """Several sorted rings as one, without repeats, once round from ``start``."""
    if len(rings) == 1:
        return rotation(rings[0], start)
    return _merged(rings, start)


def _merged(rings: Sequence[Sequence[str]], start: str | None) -> Iterator[str]:
    cut = [0 if start is None else bisect_left(r, start) for r in rings]
    last = None
    for part in (
        heapq.merge(*(r[i:] for r, i in zip(rings, cut, strict=True))),
        heapq.merge(*(r[:i] for r, i in zip(rings, cut, strict=True))),
    ):
        for n in part:
            if n != last:
                last = n
                yield n
