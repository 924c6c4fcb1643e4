"""The framework runtime runs the profile's plugins through their phases: a plugin that skips the pod
is never asked again, Filter stops at the first plugin to refuse a node and gives its reasons, and
Score plugins are normalized and weighted on top of the policy's key."""

from __future__ import annotations

from tests.core.harness import state_of
from tests.core.podfactory import container, node, pod
from webhook.core.api.objects import Obj
from webhook.core.cluster.nodeinfo import NodeInfo
from webhook.core.cluster.state import ClusterState
from webhook.core.scheduling.framework import FilterPlugin, ScorePlugin, default_normalize
from webhook.core.scheduling.runtime import Framework

asked: list[str] = []


def _pre(name: str, skip: bool) -> FilterPlugin[str]:
    def pre_filter(_state: ClusterState, _pod: Obj) -> str | None:
        return None if skip else name

    def filter_node(pre: str, node_name: str, _info: NodeInfo) -> str | list[str] | None:
        asked.append(pre)
        return ["a", "b"] if node_name == "n1" and pre == "refuses" else None

    return FilterPlugin(name, pre_filter, filter_node)


def test_filter_skips_and_stops_at_the_first_refusal() -> None:
    state = state_of(node("n0"), node("n1"))
    fw = Framework(state, [_pre("skips", True), _pre("refuses", False), _pre("after", False)], [])
    plugins = fw.run_pre_filter_plugins(pod("p", [container("c", {"cpu": "1"})]))
    assert [p.name for p, _ in plugins] == ["refuses", "after"]
    asked.clear()
    assert fw.run_filter_plugins(plugins, "n0", state.nodes.by_name["n0"]) is None
    assert asked == ["refuses", "after"]
    asked.clear()
    assert fw.run_filter_plugins(plugins, "n1", state.nodes.by_name["n1"]) == ["a", "b"]
    assert asked == ["refuses"]  # the plugins after the first refusal are not asked


def test_score_plugins_are_normalized_weighted_and_added_to_the_policy_key() -> None:
    state = state_of(node("n0"), node("n1"))
    by_index: ScorePlugin[str, str] = ScorePlugin(
        "ByIndex", 2, lambda _s, _p: "pre", lambda _pre, n, _i: int(n[1:]) + 1, default_normalize
    )
    fw = Framework(state, [], [by_index])
    scorers = [(by_index, "pre")]
    keyed = fw.run_score_plugins(scorers, [(-0.5, "n0", None), (-0.5, "n1", None)], "binpack")
    # n0: 1 of 2 -> 50, n1: 100; weight 2; the policy's -0.5 on the 0..100 scale.
    assert keyed == [(-50.0 - 100, "n0", None), (-50.0 - 200, "n1", None)]
