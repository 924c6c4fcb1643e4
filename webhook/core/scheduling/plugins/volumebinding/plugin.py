"""VolumeBinding in the profile: PreFilter (``claims``), Filter (``binder``, remembering each node's
``PodVolumes`` as upstream's ``podVolumesByNode``), Reserve (the chosen node's ``PodVolumes`` on the
decision: ``Scheduler.reserve`` assumes them, the worker's PreBind writes them) and Score."""

from __future__ import annotations

from typing import Final

from ....cluster.nodeinfo import NodeInfo
from ....cluster.volumes import PodVolumes
from ...framework import Decision, FilterPlugin, ScorePlugin
from . import score as scorer
from .binder import NAME, find_pod_volumes
from .claims import BindingState, pre_filter


def filter_node(pre: BindingState, node: str, info: NodeInfo) -> list[str] | None:
    volumes, reasons = find_pod_volumes(pre, node, info)
    if reasons:
        return reasons
    pre.by_node[node] = volumes
    return None


def node_volumes(pre: BindingState, node: str) -> PodVolumes | None:
    """What Filter found on the node (worked out again if Filter has not been there)."""
    found = pre.by_node.get(node)
    if found is None:
        info = pre.state.nodes.get(node)
        if info is None:
            return None
        volumes, reasons = find_pod_volumes(pre, node, info)
        if reasons:
            return None
        found = pre.by_node[node] = volumes
    return found


def reserve(pre: BindingState, node: str, decision: Decision) -> None:
    """The node's static bindings and provisions go on the decision (nothing when every claim is
    bound: upstream's ``allBound``, PreBind skips)."""
    volumes = node_volumes(pre, node)
    decision.volumes = volumes if volumes else None


def pre_score(pre: BindingState) -> BindingState | None:
    """``PreScore``: with ``StorageCapacityScoring`` on, every pod with claims is scored; a pod
    whose claims are all bound scores 0 everywhere, which orders nothing, so it is skipped."""
    return pre if pre.delayed else None


def score_node(pre: BindingState, node: str, _info: NodeInfo) -> int:
    return scorer.score(pre.by_node.get(node))


def _no_pre_score(*_: object) -> None:
    return None  # never called: PreScore comes from the Filter plugin's state (pre_score_from_filter)


FILTER: Final = FilterPlugin(NAME, pre_filter, filter_node, reserve=reserve)
SCORE: Final = ScorePlugin(
    NAME, scorer.WEIGHT, _no_pre_score, score_node, None, pre_score_from_filter=pre_score
)
