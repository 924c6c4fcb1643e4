"""TaintToleration: a node's ``NoSchedule`` and ``NoExecute`` taints must each be tolerated
(upstream ``tainttoleration``; ``PreferNoSchedule`` taints only weigh in scoring). The reason does
not name the taint: every release draxr serves (1.34 to 1.37) logs it and says ``REASON``."""

from __future__ import annotations

from typing import Final

from ...api.nodematch import untolerated
from ...api.objects import Obj, as_list, spec
from ...cluster.nodeinfo import NodeInfo

NAME: Final = "TaintToleration"


#: upstream's reason, byte for byte (``taint_toleration.go``, 1.34.4 to 1.37.2).
REASON: Final = "node(s) had untolerated taint(s)"


def pre_filter(pod: Obj) -> list[Obj]:
    """The pod's tolerations (once per decision)."""
    return [t for t in as_list(spec(pod).get("tolerations")) if isinstance(t, dict)]


def filter_node(info: NodeInfo, tolerations: list[Obj]) -> str | None:
    """``REASON`` when a hard taint of the node is not tolerated."""
    if not info.hard_taints:
        return None
    return REASON if untolerated(info.hard_taints, tolerations) is not None else None
