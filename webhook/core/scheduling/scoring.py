"""Node scoring, one of three policies. Ties go to the smaller node name, so results are deterministic.

* ``binpack`` (default): fill nodes whose extended resources are already in use, minus, for classes
  that align by a topology attribute, the whole groups the pod would break there
  (``topology.groups_broken``): a 1-GPU pod goes where it breaks no free PCIe root, and whole roots
  and whole nodes stay free for the pods that need them.
* ``spread``: prefer the emptiest node.
* ``upstream``: kube-scheduler's default scores for such a pod, which never look at devices:
  NodeResourcesFit with its default ``LeastAllocated`` strategy over cpu and memory (weight 1 each,
  on ``NonZeroRequested``) plus NodeResourcesBalancedAllocation over cpu and memory (skipped for a pod
  that requests neither), each 0-100 with plugin weight 1. DynamicResources scores only
  ``firstAvailable`` subrequests, which a special claim never has; the other default score plugins
  (TaintToleration, NodeAffinity, PodTopologySpread, InterPodAffinity, ImageLocality) give every node
  the same score for a pod without preferences, so they are left out. kube-scheduler breaks ties at
  random; draxr by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..allocation.policy import SPREAD
from ..api.podresources import CPU, MEMORY, Units
from ..cluster.nodeinfo import NodeInfo
from .plugins.noderesources import balanced_allocation, least_allocated


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


def upstream_score(reqs: Units, nonzero: Units, info: NodeInfo) -> int:
    """kube-scheduler's default score of a node for a pod whose only preferences are resources."""
    return least_allocated(nonzero, info) + balanced_allocation(reqs, info)


def order_nodes(scores: Mapping[str, float], policy: str) -> list[str]:
    """Best node first: the lowest utilisation for spread, else the highest score; then by name."""
    if policy == SPREAD:
        return sorted(scores, key=lambda n: (scores[n], n))
    return sorted(scores, key=lambda n: (-scores[n], n))
