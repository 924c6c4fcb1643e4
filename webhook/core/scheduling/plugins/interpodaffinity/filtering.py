"""InterPodAffinity's PreFilter, Filter and PreFilterExtensions (``filtering.go``), with
InterPodAffinityHostnameFastPath off (alpha in 1.37, off by default): every term is counted per
topology pair, whatever its key.

PreFilter counts, per (topology key, value) of the nodes: the existing pods' required anti-affinity
terms the incoming pod matches (``PlacedPods.with_terms``: only pods with such terms, and of those
only the ones whose terms the pod's labels might meet), the existing pods that match every required
affinity term of the incoming pod, and those matching each of its required anti-affinity terms
(``PlacedPods.matching``: the pods its selectors can match). It skips the pod (None) when it has no
required term and no existing pod's anti-affinity concerns it. Filter reads the counts, in upstream's
order of checks and with its reasons.
"""

from __future__ import annotations

from typing import Final

from ....api.labelselector import LabelSelectorError
from ....api.objects import Obj, as_dict, spec
from ....cluster.nodeinfo import NodeInfo
from ....cluster.placedpods import REQUIRED_ANTI_AFFINITY
from ....cluster.podinfo import PodInfo, pod_info
from ....cluster.state import ClusterState
from ...framework import PreFilterFailed
from .state import Counts, PreFilterState, matches_all, merge_namespaces, pods_matching

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH: Final = (
    "node(s) didn't satisfy existing pods anti-affinity rules"
)
ERR_REASON_AFFINITY_RULES_NOT_MATCH: Final = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH: Final = "node(s) didn't match pod anti-affinity rules"


def has_pod_affinity(pod: Obj) -> bool:
    """Whether the pod has pod affinity or anti-affinity at all (its terms unread)."""
    affinity = as_dict(spec(pod).get("affinity"))
    return bool(affinity.get("podAffinity") or affinity.get("podAntiAffinity"))


def incoming(pod: Obj) -> PodInfo:
    """The pod being scheduled, its terms read strictly (``NewPodInfo``'s error fails PreFilter)."""
    try:
        return pod_info(pod, strict=True)
    except LabelSelectorError as e:
        raise PreFilterFailed(f"parsing pod: {e}") from e


def pre_filter(state: ClusterState, pod: Obj) -> PreFilterState | None:
    placed = state.allocated.placed
    if not has_pod_affinity(pod) and not placed.any_with(REQUIRED_ANTI_AFFINITY):
        return None  # Skip: no term of its own, and no pod's anti-affinity to meet
    info = incoming(pod)
    affinity_terms = [merge_namespaces(t, state.namespaces) for t in info.required_affinity]
    anti_terms = [merge_namespaces(t, state.namespaces) for t in info.required_anti_affinity]
    ns_labels = state.namespaces.labels_of(info.namespace)
    nodes = state.nodes.by_name

    existing: Counts = {}
    for other in placed.with_terms(REQUIRED_ANTI_AFFINITY, info.labels):
        node = nodes.get(other.node)
        if node is None:
            continue
        node_labels = node.labels
        for t in other.required_anti_affinity:
            if t.matches(info.namespace, info.labels, ns_labels):
                tv = node_labels.get(t.topology_key)
                if tv is not None:
                    pair = (t.topology_key, tv)
                    existing[pair] = existing.get(pair, 0) + 1
    if not existing and not affinity_terms and not anti_terms:
        return None  # Skip

    affinity: Counts = {}
    if affinity_terms:
        for other in pods_matching(placed, affinity_terms[0]):
            node = nodes.get(other.node)
            if node is None or not matches_all(affinity_terms, other):
                continue
            node_labels = node.labels
            for t in affinity_terms:
                tv = node_labels.get(t.topology_key)
                if tv is not None:
                    pair = (t.topology_key, tv)
                    affinity[pair] = affinity.get(pair, 0) + 1
    anti: Counts = {}
    for t in anti_terms:
        for other in pods_matching(placed, t):
            node = nodes.get(other.node)
            if node is None:
                continue
            tv = node.labels.get(t.topology_key)
            if tv is not None:
                pair = (t.topology_key, tv)
                anti[pair] = anti.get(pair, 0) + 1
    return PreFilterState(
        info,
        ns_labels,
        affinity_terms,
        anti_terms,
        existing,
        affinity,
        anti,
        matches_all(affinity_terms, info),
    )


def filter_node(s: PreFilterState, _node: str, info: NodeInfo) -> str | None:
    node_labels = info.labels
    if not node_topology_matches_affinity(s, node_labels):
        return ERR_REASON_AFFINITY_RULES_NOT_MATCH
    if not satisfy_pod_anti_affinity(s, node_labels):
        return ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH
    if not satisfy_existing_pods_anti_affinity(s, node_labels):
        return ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH
    return None


def node_topology_matches_affinity(s: PreFilterState, node_labels: dict[str, str]) -> bool:
    """Every affinity term's topology holds a pod matching all the terms; or no pod anywhere does,
    and the pod matches its own terms (the first of a group), on a node with every topology key."""
    if not s.affinity_terms:
        return True
    pods_exist = True
    for t in s.affinity_terms:
        tv = node_labels.get(t.topology_key)
        if tv is None:
            return False  # every topology label must be on the node, self-affinity too
        if s.affinity.get((t.topology_key, tv), 0) <= 0:
            pods_exist = False
    if not pods_exist:
        return not s.affinity and s.self_affinity
    return True


def satisfy_pod_anti_affinity(s: PreFilterState, node_labels: dict[str, str]) -> bool:
    """No anti-affinity term of the pod has a matching pod in the node's topology."""
    if s.anti_affinity:
        for t in s.anti_affinity_terms:
            tv = node_labels.get(t.topology_key)
            if tv is not None and s.anti_affinity.get((t.topology_key, tv), 0) > 0:
                return False
    return True


def satisfy_existing_pods_anti_affinity(s: PreFilterState, node_labels: dict[str, str]) -> bool:
    """No existing pod's anti-affinity term that the pod matches has the node in its topology."""
    if s.existing_anti_affinity:
        counts = s.existing_anti_affinity
        for pair in node_labels.items():
            if counts.get(pair, 0) > 0:
                return False
    return True


def add_pod(s: PreFilterState, pod: PodInfo, info: NodeInfo) -> PreFilterState:
    return s.with_pod(pod, info.labels, 1)


def remove_pod(s: PreFilterState, pod: PodInfo, info: NodeInfo) -> PreFilterState:
    return s.with_pod(pod, info.labels, -1)
