"""PodTopologySpread's PreFilter, Filter and PreFilterExtensions (``filtering.go``) for the
DoNotSchedule constraints.

PreFilter counts, per constraint, the pods its selector matches in the pod's namespace (terminating
pods left out; an empty selector counts none) on each eligible node's domain (``TpValueToMatchNum``),
and how many eligible domains there are. Upstream visits every node and every pod; draxr reads the
eligible nodes from the nodes' topology index (``Nodes.topology``) unless a policy has to be checked
node by node, and the matching pods from ``PlacedPods.matching``. Filter: a node without a
constraint's key is refused; else ``matches in its domain + the pod itself if it matches - the
global minimum`` must not exceed ``maxSkew``, the global minimum counting as 0 while fewer than
``minDomains`` domains are eligible.

Upstream keeps the two smallest counts (``criticalPaths``) and notes that after several
``AddPod`` calls the smaller of them may no longer be the minimum; draxr takes the true minimum of the
counts (0 while some eligible domain has no match), which is what the two paths stand for.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import Final

from ....api.objects import Obj, labels, namespace, spec
from ....cluster.nodeinfo import NodeInfo
from ....cluster.podinfo import PodInfo
from ....cluster.state import ClusterState
from .common import (
    DO_NOT_SCHEDULE,
    Constraint,
    DefaultSelector,
    Inclusion,
    constraints_of,
    domains,
    eligible_nodes,
    has_all_keys,
)

ERR_REASON_CONSTRAINTS_NOT_MATCH: Final = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH: Final = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"


@dataclass(slots=True)
class PreFilterState:
    constraints: list[Constraint]
    #: Per constraint: eligible domain -> matching pods (``TpValueToMatchNum``; a domain without a
    #: match may be missing).
    counts: list[dict[str, int]]
    #: Per constraint: how many eligible domains there are.
    domains: list[int]
    namespace: str
    #: Per constraint: the pod matches its own selector (``selfMatchNum``).
    self_match: list[bool]
    inclusion: Inclusion
    _mins: list[int | None] = field(default_factory=list)

    def min_match_num(self, i: int) -> int:
        """The global minimum of constraint ``i``: 0 while fewer than ``minDomains`` domains are
        eligible, or while an eligible domain has no match."""
        if not self._mins:
            self._mins = [None] * len(self.constraints)
        found = self._mins[i]
        if found is None:
            counts, n = self.counts[i], self.domains[i]
            found = 0
            if n >= self.constraints[i].min_domains and counts and len(counts) >= n:
                found = min(counts.values())
            self._mins[i] = found
        return found


def count_matching(state: ClusterState, c: Constraint, ns: str, eligible: Collection[str]) -> dict[str, int]:
    """``countPodsMatchSelector`` summed per domain over the eligible nodes."""
    counts: dict[str, int] = {}
    if c.selector.empty:
        return counts
    by_name = state.nodes.by_name
    key = c.topology_key
    for p in state.allocated.placed.matching(c.selector, (ns,)):
        if p.terminating or p.node not in eligible:
            continue
        tv = by_name[p.node].labels[key]
        counts[tv] = counts.get(tv, 0) + 1
    return counts


def pre_filter(
    state: ClusterState, pod: Obj, default_selector: DefaultSelector | None
) -> PreFilterState | None:
    if default_selector is None and not spec(pod).get("topologySpreadConstraints"):
        return None  # Skip: no constraint, and no system default without a selector
    constraints = constraints_of(state, pod, DO_NOT_SCHEDULE, default_selector)
    if not constraints:
        return None  # Skip
    ns = namespace(pod)
    inclusion = Inclusion.of(pod)
    eligible = eligible_nodes(state, constraints, inclusion)
    pod_labels = labels(pod)
    return PreFilterState(
        constraints,
        [count_matching(state, c, ns, e) for c, e in zip(constraints, eligible, strict=True)],
        [domains(state, c, e) for c, e in zip(constraints, eligible, strict=True)],
        ns,
        [c.selector.matches(pod_labels) for c in constraints],
        inclusion,
    )


def filter_node(s: PreFilterState, _node: str, info: NodeInfo) -> str | None:
    node_labels = info.labels
    for i, c in enumerate(s.constraints):
        tv = node_labels.get(c.topology_key)
        if tv is None:
            return ERR_REASON_NODE_LABEL_NOT_MATCH
        skew = s.counts[i].get(tv, 0) + (1 if s.self_match[i] else 0) - s.min_match_num(i)
        if skew > c.max_skew:
            return ERR_REASON_CONSTRAINTS_NOT_MATCH
    return None


def with_pod(s: PreFilterState, pod: PodInfo, info: NodeInfo, delta: int) -> PreFilterState:
    """``updateWithPod`` on a copy (upstream's ``Clone`` then ``AddPod``/``RemovePod``)."""
    node_labels = info.labels
    if pod.namespace != s.namespace or not has_all_keys(node_labels, s.constraints):
        return s
    counts = [dict(c) for c in s.counts]
    for i, c in enumerate(s.constraints):
        if not c.selector.matches(pod.labels) or not s.inclusion.admits(c, info.node):
            continue
        tv = node_labels[c.topology_key]
        counts[i][tv] = counts[i].get(tv, 0) + delta
    return replace(s, counts=counts, _mins=[])


def add_pod(s: PreFilterState, pod: PodInfo, info: NodeInfo) -> PreFilterState:
    return with_pod(s, pod, info, 1)


def remove_pod(s: PreFilterState, pod: PodInfo, info: NodeInfo) -> PreFilterState:
    return with_pod(s, pod, info, -1)
