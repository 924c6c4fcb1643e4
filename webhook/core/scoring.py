"""Node scoring: ``binpack`` (default) fills nodes whose extended resources are already in use;
``spread`` prefers the emptiest. Ties go to the smaller node name, so results are deterministic."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .nodeinfo import NodeInfo
from .podresources import CPU, MEMORY, Units

POLICIES = ("binpack", "spread")


@dataclass(frozen=True, slots=True)
class Usage:
    """After placing the pod: how much of each resource the pod touches is used on the node."""

    used: int
    total: int

    @property
    def ratio(self) -> float:
        return min(self.used / self.total, 1.0) if self.total > 0 else 1.0


def utilisation(reqs: Units, info: NodeInfo, extended: Mapping[str, Usage]) -> float:
    """Mean usage ratio over the pod's extended resources, else over cpu and memory."""
    usages = list(extended.values())
    if not usages:
        for res in (CPU, MEMORY):
            total = info.allocatable.get(res, 0)
            if total > 0:
                usages.append(Usage(info.requested.get(res, 0) + reqs.get(res, 0), total))
    if not usages:
        return 0.0
    return sum(u.ratio for u in usages) / len(usages)


def order_nodes(scores: Mapping[str, float], policy: str) -> list[str]:
    """Best node first: highest utilisation for binpack, lowest for spread, then by name."""
    if policy == "spread":
        return sorted(scores, key=lambda n: (scores[n], n))
    return sorted(scores, key=lambda n: (-scores[n], n))
