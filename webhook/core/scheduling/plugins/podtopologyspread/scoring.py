"""PodTopologySpread's PreScore, Score and NormalizeScore (``scoring.go``) for the ScheduleAnyway
constraints, weight 2 in the profile.

PreScore reads the nodes being scored (``feasible``): those without every topology key are ignored
(unless the constraints are the system defaults); each constraint's domains are the values of the
others, weighted ``log(domains + 2)`` (for the hostname key, the nodes themselves). It counts the
pods each selector matches in the pod's namespace on every node of the cluster with the keys and
passing the constraint's policies, per domain; for the hostname key, per node, as Score does
upstream. A node scores ``sum(count x weight + maxSkew - 1)``, rounded; NormalizeScore gives the
fewest matches 100, ignored nodes 0.

Score answers ``INVALID_SCORE`` (-1) for an ignored node, which no other node can score; NormalizeScore
turns it into 0 as upstream's does for the nodes it finds ignored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from ....api.objects import Obj, as_list, namespace, spec
from ....cluster.nodeinfo import NodeInfo
from ....cluster.state import ClusterState
from ...framework import MAX_NODE_SCORE, PreFilterFailed
from .common import (
    LABEL_HOSTNAME,
    SCHEDULE_ANYWAY,
    Constraint,
    DefaultSelector,
    Inclusion,
    constraints_of,
    has_all_keys,
)

INVALID_SCORE: Final = -1


@dataclass(frozen=True, slots=True)
class PreScoreState:
    constraints: list[Constraint]
    #: Nodes must carry every key (always, but for the system defaults: ``requireAllTopologies``).
    require_all: bool
    namespace: str
    inclusion: Inclusion


@dataclass(frozen=True, slots=True)
class Scores:
    """What Score reads once the feasible nodes are known."""

    pre: PreScoreState
    ignored: set[str]
    #: Per constraint: domain -> matching pods (hostname: node -> matching pods).
    counts: list[dict[str, int]]
    weights: list[float]


def pre_score(
    state: ClusterState, pod: Obj, default_selector: DefaultSelector | None
) -> PreScoreState | None:
    own = bool(as_list(spec(pod).get("topologySpreadConstraints")))
    if not own and default_selector is None:
        return None  # Skip: no constraint, and no system default without a selector
    try:
        constraints = constraints_of(state, pod, SCHEDULE_ANYWAY, default_selector)
    except PreFilterFailed:
        return None  # a selector the apiserver would have refused: nothing to spread by
    if not constraints:
        return None  # Skip
    return PreScoreState(constraints, own, namespace(pod), Inclusion.of(pod))


def topology_normalizing_weight(size: int) -> float:
    """``topologyNormalizingWeight``: log(size + 2)."""
    return math.log(size + 2)


def feasible(state: ClusterState, pre: PreScoreState, nodes: list[str]) -> Scores:
    """``initPreScoreState`` over the nodes being scored, then the counts over the cluster."""
    by_name = state.nodes.by_name
    constraints = pre.constraints
    ignored: set[str] = set()
    values: list[set[str]] = [set() for _ in constraints]
    for n in nodes:
        node_labels = by_name[n].labels
        if pre.require_all and not has_all_keys(node_labels, constraints):
            ignored.add(n)
            continue
        for i, c in enumerate(constraints):
            if c.topology_key != LABEL_HOSTNAME:
                values[i].add(node_labels.get(c.topology_key, ""))
    weights: list[float] = []
    counts: list[dict[str, int]] = []
    placed = state.allocated.placed
    for i, c in enumerate(constraints):
        hostname = c.topology_key == LABEL_HOSTNAME
        weights.append(topology_normalizing_weight(len(nodes) - len(ignored) if hostname else len(values[i])))
        found: dict[str, int] = {} if hostname else dict.fromkeys(values[i], 0)
        counts.append(found)
        if c.selector.empty:
            continue  # countPodsMatchSelector: an empty selector counts none
        for p in placed.matching(c.selector, (pre.namespace,)):
            info = by_name.get(p.node)
            if p.terminating or info is None:
                continue
            if hostname:  # Score counts the node's own pods, whatever the policies
                found[p.node] = found.get(p.node, 0) + 1
                continue
            node_labels = info.labels
            if pre.require_all and not has_all_keys(node_labels, constraints):
                continue
            if not pre.inclusion.admits(c, info.node):
                continue
            tv = node_labels.get(c.topology_key, "")
            if tv in found:
                found[tv] += 1
    return Scores(pre, ignored, counts, weights)


def score(s: Scores, node: str, info: NodeInfo) -> int:
    if node in s.ignored:
        return INVALID_SCORE
    node_labels = info.labels
    total = 0.0
    for i, c in enumerate(s.pre.constraints):
        tv = node_labels.get(c.topology_key)
        if tv is None:
            continue
        count = s.counts[i].get(node if c.topology_key == LABEL_HOSTNAME else tv, 0)
        total += count * s.weights[i] + float(c.max_skew - 1)
    return math.floor(total + 0.5)  # math.Round: half away from zero (never negative here)


def normalize(scores: dict[str, int]) -> None:
    """Fewest matches 100, most ``100 * min / max``; ignored nodes 0; all 0: 100 each."""
    valid = [v for v in scores.values() if v != INVALID_SCORE]
    lo = min(valid, default=0)
    hi = max(valid, default=0)
    for n, v in scores.items():
        if v == INVALID_SCORE:
            scores[n] = 0
        elif hi == 0:
            scores[n] = MAX_NODE_SCORE
        else:
            scores[n] = MAX_NODE_SCORE * (hi + lo - v) // hi
