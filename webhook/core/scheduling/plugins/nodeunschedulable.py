"""NodeUnschedulable: a cordoned node (``spec.unschedulable``) takes only the pods that tolerate the
``node.kubernetes.io/unschedulable:NoSchedule`` taint (upstream ``nodeunschedulable``)."""

from __future__ import annotations

from typing import Final

from ...api.nodematch import tolerates
from ...api.objects import Obj
from ...cluster.nodeinfo import NodeInfo

NAME: Final = "NodeUnschedulable"
REASON: Final = "node(s) were unschedulable"
TAINT: Final[Obj] = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def pre_filter(tolerations: list[Obj]) -> bool:
    """Whether the pod tolerates the unschedulable taint (once per decision)."""
    return any(tolerates(t, TAINT) for t in tolerations)


def filter_node(info: NodeInfo, tolerated: bool) -> str | None:
    return REASON if info.unschedulable and not tolerated else None
