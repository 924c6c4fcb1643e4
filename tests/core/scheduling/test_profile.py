"""The profile's plugins in a decision: PreFilter's Skip, Filter between NodeResourcesFit and
DynamicResources, PreFilter failures, and Score plugins weighted and normalized over the feasible
nodes (upstream's ``RunScorePlugins``), renormalized when a node's allocation fails."""

from __future__ import annotations

from typing import Any

import pytest

from tests.core.harness import claim, exactly, state_of
from tests.core.podfactory import container, device_class, gpus, node, pod, resource_slice
from webhook.core.api.objects import Obj, labels
from webhook.core.cluster.nodeinfo import NodeInfo
from webhook.core.cluster.state import ClusterState
from webhook.core.scheduling import profile
from webhook.core.scheduling.framework import (
    MAX_NODE_SCORE,
    SCHEDULED,
    UNSCHEDULABLE,
    FilterPlugin,
    PreFilterFailed,
    ScorePlugin,
    default_normalize,
)
from webhook.core.scheduling.scheduler import Scheduler

GPU = "example.com/gpu"
CLASS = device_class("gpu.example.com", ext=GPU, selectors=['device.driver == "gpu.example.com"'])
ZONE = "topology.kubernetes.io/zone"


def gpu_pod(name: str = "p", **annotations: str) -> Obj:
    p = pod(name, [container("c", {GPU: 1})])
    p["metadata"]["annotations"] = dict(annotations)
    return p


def cluster(*zones: str, devices: int = 2) -> ClusterState:
    objs: list[Obj] = [CLASS]
    for i, zone in enumerate(zones):
        n = node(f"n{i}", {GPU: 0})
        n["metadata"].setdefault("labels", {})[ZONE] = zone
        objs += [n, resource_slice(f"s{i}", gpus(devices, prefix=f"n{i}-gpu"), node_name=f"n{i}")]
    return state_of(*objs)


# A Filter plugin keyed by a pod annotation: the pod may only go to the zone it names.
seen: list[str] = []


def _zone_pre_filter(_state: ClusterState, p: Obj) -> Any:
    wanted = p["metadata"].get("annotations", {}).get("test/zone")
    if wanted == "none-at-all":
        raise PreFilterFailed("no zone at all")
    return wanted  # None: Skip


def _zone_filter(wanted: str, node: str, info: NodeInfo) -> str | None:
    seen.append(node)
    return None if labels(info.node).get(ZONE) == wanted else "node(s) are in another zone"


ZONE_FILTER = FilterPlugin("TestZone", _zone_pre_filter, _zone_filter)


def test_a_skipping_plugin_is_never_asked_and_the_pod_stays_usual() -> None:
    seen.clear()
    s = Scheduler(cluster("a", "b"), filters=[ZONE_FILTER])
    d = s.schedule(gpu_pod())
    assert d.status == SCHEDULED
    assert seen == []
    assert s._usual(s.pre_filter(gpu_pod()), True) is not None


def test_a_filter_plugin_refuses_nodes_with_its_reason() -> None:
    seen.clear()
    s = Scheduler(cluster("a", "b", "b"), filters=[ZONE_FILTER])
    d = s.schedule(gpu_pod(**{"test/zone": "a"}))
    assert (d.status, d.node) == (SCHEDULED, "n0")
    assert s._usual(s.pre_filter(gpu_pod(**{"test/zone": "a"})), True) is None
    d = s.schedule(gpu_pod(**{"test/zone": "c"}))
    assert d.status == UNSCHEDULABLE
    assert d.message == "0/3 nodes are available: 3 node(s) are in another zone."


def test_the_filter_plugin_runs_after_noderesources_and_before_dynamicresources() -> None:
    st = cluster("a", devices=1)
    st.apply("Node", node("n1", {GPU: 0, "cpu": "0"}, {ZONE: "a"}))
    s = Scheduler(st, filters=[ZONE_FILTER])
    s.reserve(s.schedule(gpu_pod("busy")))  # n0's only device
    q = pod("q", [container("c", {GPU: 1, "cpu": "1"})])
    q["metadata"]["annotations"] = {"test/zone": "b"}
    d = s.schedule(q)
    # n1 fails NodeResourcesFit first; n0 has no free device but fails the zone first.
    assert d.reasons == {"n0": ["node(s) are in another zone"], "n1": ["Insufficient cpu"]}


def test_a_failing_pre_filter_makes_the_pod_unschedulable_everywhere() -> None:
    d = Scheduler(cluster("a"), filters=[ZONE_FILTER]).schedule(gpu_pod(**{"test/zone": "none-at-all"}))
    assert d.status == UNSCHEDULABLE
    assert d.message == "0/1 nodes are available: no zone at all."


# A Score plugin: the number of the node (n2 scores 2), normalized by the highest.
def _number(_pre: Any, node: str, _info: NodeInfo) -> int:
    return int(node[1:])


def score_plugin(weight: int, normalize: bool = True, skip: bool = False) -> ScorePlugin[Any, Any]:
    return ScorePlugin(
        "TestNumber",
        weight,
        lambda _s, _p: None if skip else True,
        _number,
        default_normalize if normalize else None,
    )


@pytest.mark.parametrize("policy", ["binpack", "spread", "upstream"])
def test_a_heavy_score_plugin_overrides_the_policy(policy: str) -> None:
    st = cluster("a", "a", "a")
    s = Scheduler(st, policy)
    first = s.schedule(gpu_pod("first"))
    assert first.node is not None
    # One weight-1 policy score against a weight-3 plugin preferring the highest number.
    d = Scheduler(st, policy, scores=[score_plugin(3)]).schedule(gpu_pod("second"))
    assert d.node == "n2"


def test_a_skipping_score_plugin_changes_nothing() -> None:
    st = cluster("a", "a", "a")
    plain = Scheduler(st).schedule(gpu_pod("x"))
    assert Scheduler(st, scores=[score_plugin(3, skip=True)]).schedule(gpu_pod("x")).node == plain.node


def test_scores_are_normalized_over_the_nodes_that_allocate() -> None:
    """The pod also asks for its own claim of 8 devices, which the device counts of Filter do not
    see: n2 (8 free devices, the plugin's favourite) fails to allocate, and the plugin's scores are
    normalized again over n0 and n1, as upstream normalizes over the nodes that passed Filter. Had
    n2's score stayed in the normalization, spread's preference for the emptier n0 would win."""
    objs: list[Obj] = [CLASS]
    for i, total in enumerate([10, 40, 8]):
        objs += [
            node(f"n{i}", {GPU: 0}),
            resource_slice(f"s{i}", gpus(total, prefix=f"n{i}-gpu"), node_name=f"n{i}"),
        ]
    st = state_of(*objs, claim("own", [exactly("r", "gpu.example.com", 8)]))
    nd = st.node_devices("n1")
    assert nd is not None
    taken = [d.key for d, _ in nd.class_candidates("gpu.example.com")][:31]
    st.reserve("elsewhere", taken, pod("filler", [container("c")], uid="filler"), "n1")
    p = gpu_pod("z")
    p["spec"]["resourceClaims"] = [{"name": "own", "resourceClaimName": "own"}]
    d = Scheduler(st, "spread", scores=[score_plugin(1)], percentage_of_nodes_to_score=100).schedule(p)
    assert (d.status, d.node) == (SCHEDULED, "n1")
    assert list(d.reasons) == []
    # Without the plugin, spread takes the emptiest node that allocates.
    assert Scheduler(st, "spread").schedule(p).node == "n0"


# upstream pkg/scheduler/framework/plugins/helper/normalize_score_test.go, TestDefaultNormalizeScore
@pytest.mark.parametrize(
    ("reverse", "scores", "expected"),
    [
        (False, [1, 2, 3, 4], [25, 50, 75, 100]),
        (True, [1, 2, 3, 4], [75, 50, 25, 0]),
        (False, [1000, 10, 20, 30], [100, 1, 2, 3]),
        (True, [1000, 10, 20, 30], [0, 99, 98, 97]),
        (False, [1, 1, 1, 1], [100, 100, 100, 100]),
        (False, [1000, 1, 1, 1], [100, 0, 0, 0]),
        (True, [0, 1, 1, 1], [100, 0, 0, 0]),
        (False, [0, 0, 0, 0], [0, 0, 0, 0]),
        (True, [0, 0, 0, 0], [100, 100, 100, 100]),
    ],
)
def test_default_normalize_score(reverse: bool, scores: list[int], expected: list[int]) -> None:
    raw = {f"n{i}": s for i, s in enumerate(scores)}
    default_normalize(raw, reverse)
    assert list(raw.values()) == expected
    assert all(0 <= v <= MAX_NODE_SCORE for v in raw.values())


# -- issue 21: pod placement between pods --------------------------------------------------------


def anti_affine_pod(name: str) -> Obj:
    """An inference replica: label app=infer, required anti-affinity to app=infer per node."""
    p = gpu_pod(name)
    p["metadata"]["labels"] = {"app": "infer"}
    p["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "infer"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    return p


def test_pods_with_mutual_required_anti_affinity_never_share_a_node() -> None:
    """Issue 21: two replicas with required anti-affinity to each other, scheduled one after the
    other (the first reserved), land on two nodes, and a third has nowhere to go."""
    s = Scheduler(cluster("a", "a"))
    first = s.schedule(anti_affine_pod("r0"))
    assert first.status == SCHEDULED
    s.reserve(first)
    second = s.schedule(anti_affine_pod("r1"))
    assert second.status == SCHEDULED
    assert second.node != first.node
    s.reserve(second)
    third = s.schedule(anti_affine_pod("r2"))
    assert third.status == UNSCHEDULABLE


def test_the_profile_declares_every_filter_in_upstreams_order() -> None:
    """The built-in filters and DynamicResources are declared objects of the profile, like the others."""
    order = [
        *profile.BASIC_FILTERS.names,
        profile.NODE_RESOURCES_FIT.name,
        *(p.name for p in profile.FILTERS),
        profile.DYNAMIC_RESOURCES.name,
    ]
    assert order == [
        "NodeUnschedulable",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "DynamicResources",
    ]
