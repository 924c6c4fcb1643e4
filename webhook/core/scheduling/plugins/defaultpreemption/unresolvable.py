"""Which Filter reasons removing pods cannot resolve (upstream's ``UnschedulableAndUnresolvable``):
preemption skips those nodes (``nodesWherePreemptionMightHelp``).

Upstream's plugins return that code for NodeUnschedulable, TaintToleration, NodeAffinity, every
reason of VolumeBinding's Filter and VolumeZone's conflict (1.37.2), and DynamicResources'
claim-not-on-node, stale-claim and kubelet checks. A reason not listed here is
taken as resolvable: the dry run then decides on the node, which is only slower."""

from __future__ import annotations

from typing import Final

from .. import nodeaffinity, nodeunschedulable, tainttoleration, volumezone
from ..dynamicresources.filter import KUBELET_GATE_OFF, NOT_AVAILABLE, STALE_CLAIM
from ..volumebinding.binder import BIND_CONFLICT, NODE_CONFLICT, NOT_ENOUGH_SPACE, PV_NOT_EXIST

UNRESOLVABLE: Final = frozenset(
    {
        nodeunschedulable.REASON,
        nodeaffinity.REASON,
        tainttoleration.REASON,
        NODE_CONFLICT,
        BIND_CONFLICT,
        NOT_ENOUGH_SPACE,
        PV_NOT_EXIST,
        volumezone.CONFLICT,
        NOT_AVAILABLE,
        STALE_CLAIM,
        KUBELET_GATE_OFF,
    }
)


def unresolvable(reasons: list[str]) -> bool:
    return any(r in UNRESOLVABLE for r in reasons)
