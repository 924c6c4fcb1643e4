"""The framework runtime (upstream's ``framework/runtime``): runs the profile's Filter and Score
plugins through their phase interfaces, in the profile's order, so the search (``scheduler``) never
calls a plugin by hand: PreFilter (each plugin's state, or its Skip), Filter (the first plugin to
refuse a node), PreScore and Score (normalized, weighted, on top of the policy's key) and Reserve
(what a plugin records on the decision for PreBind). DynamicResources, whose allocation the search
defers to score order, is the profile's ``DYNAMIC_RESOURCES`` object."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..allocation.policy import UPSTREAM
from ..api.objects import Obj
from ..cluster.nodeinfo import NodeInfo
from ..cluster.state import ClusterState
from .cycle import Cycle
from .framework import MAX_NODE_SCORE, Decision, FilterPlugin, NodePlan, Prefiltered, Prescored, ScorePlugin

#: A feasible node as the search keeps it: its sort key, its name, its plan (None: the usual plan).
Keyed = tuple[float, str, NodePlan | None]


class Framework:
    """The profile's Filter and Score plugins over one cluster state."""

    def __init__(
        self,
        state: ClusterState,
        filters: Sequence[FilterPlugin[Any]],
        scores: Sequence[ScorePlugin[Any, Any]],
    ) -> None:
        self.state = state
        self.filters = tuple(filters)
        self.scores = tuple(scores)

    def run_pre_filter_plugins(self, pod: Obj) -> list[Prefiltered]:
        """The Filter plugins that do not skip ``pod``, each with its PreFilter state of the
        cluster as it is now, in upstream's order (DynamicResources comes after them)."""
        plugins: list[Prefiltered] = []
        for plugin in self.filters:
            pre = plugin.pre_filter(self.state, pod)
            if pre is not None:
                plugins.append((plugin, pre))
        return plugins

    @staticmethod
    def run_filter_plugins(plugins: list[Prefiltered], node_name: str, info: NodeInfo) -> list[str] | None:
        """The first plugin to refuse the node, its reasons (a volume plugin may give several);
        None when all pass."""
        for plugin, pre in plugins:
            why = plugin.filter(pre, node_name, info)
            if why is not None:
                return [why] if isinstance(why, str) else list(why)
        return None

    def run_pre_score_plugins(self, cycle: Cycle) -> list[Prescored]:
        """The Score plugins that do not skip the pod, with their PreScore state (once a cycle)."""
        if cycle.scorers is None:
            cycle.scorers = []
            filtered = {p.name: pre for p, pre in cycle.plugins}
            for plugin in self.scores:
                if plugin.pre_score_from_filter is not None:
                    own = filtered.get(plugin.name)
                    pre = plugin.pre_score_from_filter(own) if own is not None else None
                else:
                    pre = plugin.pre_score(self.state, cycle.pod)
                if pre is not None:
                    cycle.scorers.append((plugin, pre))
        return cycle.scorers

    def run_score_plugins(self, scorers: list[Prescored], entries: list[Keyed], policy: str) -> list[Keyed]:
        """The feasible nodes' sort keys with the Score plugins on top: each plugin's scores
        normalized over these nodes (upstream's NormalizeScore) and weighted. The policy's key is
        on the same 0..100 scale: ``upstream``'s already is (NodeResourcesFit and BalancedAllocation,
        weight 1 each); binpack's and spread's usage ratio counts as one weight-1 plugin."""
        by_name = self.state.nodes.by_name
        extra = dict.fromkeys((n for _, n, _ in entries), 0)
        for plugin, pre in scorers:
            state = pre if plugin.feasible is None else plugin.feasible(self.state, pre, list(extra))
            raw = {n: plugin.score(state, n, by_name[n]) for n in extra}
            if plugin.normalize is not None:
                plugin.normalize(raw)
            for n, s in raw.items():
                extra[n] += plugin.weight * s
        scale = 1 if policy == UPSTREAM else MAX_NODE_SCORE
        return [(scale * key - extra[n], n, plan) for key, n, plan in entries]

    @staticmethod
    def run_reserve_plugins(cycle: Cycle, decision: Decision) -> Decision:
        """The decision with what the plugins record for PreBind on its node."""
        assert decision.node is not None
        for plugin, pre in cycle.plugins:
            if plugin.reserve is not None:
                plugin.reserve(pre, decision.node, decision)
        return decision
