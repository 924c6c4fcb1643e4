"""TaintToleration: a node's ``NoSchedule`` and ``NoExecute`` taints must each be tolerated
(upstream ``tainttoleration``; ``PreferNoSchedule`` taints only weigh in scoring)."""

from __future__ import annotations

from typing import Final

from ...api.nodematch import untolerated
from ...api.objects import Obj, as_list, spec
from ...cluster.nodeinfo import NodeInfo

NAME: Final = "TaintToleration"


def reason(taint: Obj) -> str:
    return f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"


def pre_filter(pod: Obj) -> list[Obj]:
    """The pod's tolerations (once per decision)."""
    return [t for t in as_list(spec(pod).get("tolerations")) if isinstance(t, dict)]


def filter_node(info: NodeInfo, tolerations: list[Obj]) -> str | None:
    """The first hard taint the pod does not tolerate, as upstream reports it."""
    if not info.hard_taints:
        return None
    bad = untolerated(info.hard_taints, tolerations)
    return reason(bad) if bad is not None else None
