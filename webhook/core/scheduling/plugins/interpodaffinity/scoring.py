"""InterPodAffinity's PreScore, Score and NormalizeScore (``scoring.go``), weight 2 in the profile.

PreScore sums weights per (topology key, value): the incoming pod's preferred affinity (+weight)
and anti-affinity (-weight) terms for each existing pod they match; for each existing pod, its
required affinity terms the incoming pod matches (``HardPodAffinityWeight``, 1), and its preferred
affinity (+weight) and anti-affinity (-weight) terms the incoming pod matches. Upstream visits every
pod when the incoming pod has preferred terms, else the pods with affinity; draxr reads the same pods
from ``PlacedPods``' indexes, which is the same sum. Nothing counted anywhere: the plugin is skipped.
A node scores the sum at its own values; NormalizeScore maps the feasible nodes' scores
min..max to 0..100.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ....api.objects import Obj
from ....cluster.nodeinfo import NodeInfo
from ....cluster.placedpods import PREFERRED_AFFINITY, PREFERRED_ANTI_AFFINITY, REQUIRED_AFFINITY
from ....cluster.podinfo import pod_info
from ....cluster.state import ClusterState
from ...framework import MAX_NODE_SCORE
from .filtering import has_pod_affinity
from .state import merge_weighted, pods_matching

#: ``InterPodAffinityArgs.HardPodAffinityWeight``'s default.
HARD_POD_AFFINITY_WEIGHT: Final = 1

#: topology key -> value -> summed weight (``scoreMap``).
ScoreMap = dict[str, dict[str, int]]


def _add(scores: ScoreMap, node_labels: Mapping[str, str], topology_key: str, weight: int) -> None:
    tv = node_labels.get(topology_key)
    if tv is not None:
        by_value = scores.setdefault(topology_key, {})
        by_value[tv] = by_value.get(tv, 0) + weight


def pre_score(state: ClusterState, pod: Obj) -> ScoreMap | None:
    placed = state.allocated.placed
    if not placed.with_affinity and not has_pod_affinity(pod):
        return None  # Skip: no preference of its own, and no pod's terms to meet
    info = pod_info(pod)
    nodes = state.nodes.by_name
    ns_labels = state.namespaces.labels_of(info.namespace)
    scores: ScoreMap = {}
    for sign, weighted in (
        (1, merge_weighted(info.preferred_affinity, state.namespaces)),
        (-1, merge_weighted(info.preferred_anti_affinity, state.namespaces)),
    ):
        for w in weighted:
            for other in pods_matching(placed, w.term):
                node = nodes.get(other.node)
                if node is not None:
                    _add(scores, node.labels, w.term.topology_key, sign * w.weight)
    for other in placed.with_terms(REQUIRED_AFFINITY, info.labels):
        node = nodes.get(other.node)
        if node is None:
            continue
        for t in other.required_affinity:
            if t.matches(info.namespace, info.labels, ns_labels):
                _add(scores, node.labels, t.topology_key, HARD_POD_AFFINITY_WEIGHT)
    for kind, sign in ((PREFERRED_AFFINITY, 1), (PREFERRED_ANTI_AFFINITY, -1)):
        for other in placed.with_terms(kind, info.labels):
            node = nodes.get(other.node)
            if node is None:
                continue
            terms = other.preferred_affinity if sign > 0 else other.preferred_anti_affinity
            for w in terms:
                if w.term.matches(info.namespace, info.labels, ns_labels):
                    _add(scores, node.labels, w.term.topology_key, sign * w.weight)
    return scores or None  # nothing counted: Skip


def score(scores: ScoreMap, _node: str, info: NodeInfo) -> int:
    node_labels = info.labels
    total = 0
    for topology_key, by_value in scores.items():
        tv = node_labels.get(topology_key)
        if tv is not None:
            total += by_value.get(tv, 0)
    return total


def normalize(scores: dict[str, int]) -> None:
    """Min..max of the scores to 0..``MAX_NODE_SCORE`` (all equal: 0), as upstream's float maths."""
    if not scores:
        return
    lo, hi = min(scores.values()), max(scores.values())
    diff = hi - lo
    for n, s in scores.items():
        scores[n] = int(float(MAX_NODE_SCORE) * ((s - lo) / diff)) if diff > 0 else 0
