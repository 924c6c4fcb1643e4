"""NodeResourcesFit and NodeResourcesBalancedAllocation (upstream ``noderesources``).

Filter: the pod's requests (``resourcehelper.PodRequests``, overhead included) against what the
node has left, one reason per insufficient resource, and the node's pod count. An extended
resource delegated to DRA on the node (``ShouldDelegateResourceToDRA``: allocatable 0 or absent
and a class backs the name) is not counted here: DynamicResources allocates it.

Score (``--policy upstream`` only): ``LeastAllocated`` over cpu and memory on the pod's
``NonZeroRequested``, and ``BalancedAllocation`` over the same, 0-100 each.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Final

from ...api.podresources import CPU, EPHEMERAL_STORAGE, MEMORY, Units
from ...cluster.nodeinfo import NodeInfo

NAME: Final = "NodeResourcesFit"
TOO_MANY_PODS: Final = "Too many pods"
MAX_NODE_SCORE: Final = 100
#: ``defaultResourceSpec`` of LeastAllocated and BalancedAllocation.
SCORED: Final = (CPU, MEMORY)


def insufficient(resource: str) -> str:
    return f"Insufficient {resource}"


def is_scalar(resource: str) -> bool:
    return "/" in resource or resource.startswith("hugepages-")


def checks(reqs: Units, delegated: Collection[str]) -> list[tuple[str, int]]:
    """What ``fits`` compares, once per decision: cpu, memory and ephemeral storage when asked
    for, and every other scalar resource the pod asks for that DRA does not serve."""
    out = [(r, reqs[r]) for r in (CPU, MEMORY, EPHEMERAL_STORAGE) if reqs.get(r, 0) > 0]
    out += [(r, v) for r, v in reqs.items() if v != 0 and is_scalar(r) and r not in delegated]
    return out


def fits(wanted: list[tuple[str, int]], info: NodeInfo) -> bool:
    """Filter's verdict without its reasons (``filter_node`` gives them): the pod count, then each
    of ``checks``'s resources against what the node has left."""
    if len(info.pods) >= info.max_pods:
        return False
    room = info.free
    for r, want in wanted:  # noqa: SIM110 (a loop, not all(...): this runs for every node visited)
        if want > room.get(r, 0):
            return False
    return True


def filter_node(reqs: Units, info: NodeInfo, delegated: Collection[str]) -> list[str]:
    """Every insufficient resource, skipping names delegated to DRA here."""
    reasons: list[str] = []
    room = info.free
    if len(info.pods) + 1 > info.max_pods:
        reasons.append(TOO_MANY_PODS)
    for res in (CPU, MEMORY, EPHEMERAL_STORAGE):
        want = reqs.get(res, 0)
        if want > 0 and want > room.get(res, 0):
            reasons.append(insufficient(res))
    for res, want in reqs.items():
        if want == 0 or not is_scalar(res) or res in delegated:
            continue
        if want > room.get(res, 0):
            reasons.append(insufficient(res))
    return reasons


def least_allocated(nonzero: Units, info: NodeInfo) -> int:
    """NodeResourcesFit's ``LeastAllocated`` score over cpu and memory, weight 1 each."""
    score = weights = 0
    for res in SCORED:
        capacity = info.allocatable.get(res, 0)
        if capacity == 0:
            continue
        requested = info.nonzero_requested.get(res, 0) + nonzero.get(res, 0)
        score += 0 if requested > capacity else (capacity - requested) * MAX_NODE_SCORE // capacity
        weights += 1
    return score // weights if weights else 0


def balanced_allocation(reqs: Units, info: NodeInfo) -> int:
    """NodeResourcesBalancedAllocation over cpu and memory: (1 - std of the usage fractions) x 100."""
    if all(reqs.get(res, 0) == 0 for res in SCORED):
        return 0  # best-effort pods are not scored (kubernetes/kubernetes#129138)
    fractions: list[float] = []
    for res in SCORED:
        capacity = info.allocatable.get(res, 0)
        if capacity == 0:
            continue
        fractions.append(min((info.requested.get(res, 0) + reqs.get(res, 0)) / capacity, 1.0))
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


class NodeResourcesFit:
    """NodeResourcesFit as one plugin object (``profile.NODE_RESOURCES_FIT``): its PreFilter is
    ``checks`` (the names DRA serves on the usual node left out), its Filter ``fits`` for the verdict
    and ``filter_node`` for the reasons."""

    name: Final = NAME

    @staticmethod
    def pre_filter(reqs: Units, delegated: Collection[str]) -> list[tuple[str, int]]:
        return checks(reqs, delegated)

    @staticmethod
    def fits(wanted: list[tuple[str, int]], info: NodeInfo) -> bool:
        return fits(wanted, info)

    @staticmethod
    def filter(reqs: Units, info: NodeInfo, delegated: Collection[str]) -> list[str]:
        return filter_node(reqs, info, delegated)


def most_allocated_placement(group: list[Units], nodes: list[NodeInfo]) -> int:
    """NodeResourcesFit's ``ScorePlacement`` (``MostAllocated`` over cpu and memory, weight 1 each):
    the placement's nodes as one, with what is on them and the group's pods' ``NonZeroRequested``
    (``group``) together against their allocatable. A tightly packed placement scores higher."""
    score = weights = 0
    for res in SCORED:
        capacity = sum(info.allocatable.get(res, 0) for info in nodes)
        if capacity == 0:
            continue
        on_nodes = sum(info.nonzero_requested.get(res, 0) for info in nodes if info.allocatable.get(res, 0))
        requested = sum(u.get(res, 0) for u in group) + on_nodes
        score += min(requested, capacity) * MAX_NODE_SCORE // capacity
        weights += 1
    return score // weights if weights else 0
