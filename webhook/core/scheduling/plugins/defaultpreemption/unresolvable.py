"""Which Filter reasons removing pods cannot resolve (upstream's ``UnschedulableAndUnresolvable``):
preemption skips those nodes (``nodesWherePreemptionMightHelp``).

Upstream's plugins return that code for NodeUnschedulable, TaintToleration, NodeAffinity and
DynamicResources' claim-not-on-node, stale-claim and kubelet checks. A reason not listed here is
taken as resolvable: the dry run then decides on the node, which is only slower."""

from __future__ import annotations

from typing import Final

from .. import nodeaffinity, nodeunschedulable, tainttoleration
from ..dynamicresources.filter import KUBELET_GATE_OFF, NOT_AVAILABLE, STALE_CLAIM

UNRESOLVABLE: Final = frozenset(
    {
        nodeunschedulable.REASON,
        nodeaffinity.REASON,
        tainttoleration.REASON,
        NOT_AVAILABLE,
        STALE_CLAIM,
        KUBELET_GATE_OFF,
    }
)


def unresolvable(reasons: list[str]) -> bool:
    return any(r in UNRESOLVABLE for r in reasons)
