"""PodTopologySpread's PreScore, Score and NormalizeScore, table tests transcribed from upstream's
``podtopologyspread/scoring_test.go`` (1.37): TestPodTopologySpreadScore, every case but "matchLabelKeys
ignored when feature gate disabled" (the gate is on in 1.37). ``nodes`` are the candidates (PreScore's
filtered nodes), ``failed`` the other nodes of the cluster. The system-defaulting case runs with a
``DefaultSelector`` standing for its Service (the profile's reads the cluster's: ``common``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.core.scheduling.plugins.podtopologyspread.test_filtering import BAR, FOO, TAINTS, foo_pods
from tests.core.scheduling.plugins.wrappers import (
    HOSTNAME,
    SCHEDULE_ANYWAY,
    make_label_selector,
    make_node,
    make_pod,
    snapshot,
)
from webhook.core.api.labelselector import LabelSelector, label_selector
from webhook.core.api.objects import Obj
from webhook.core.cluster.state import ClusterState
from webhook.core.scheduling.framework import ScorePlugin
from webhook.core.scheduling.plugins.podtopologyspread import SCORE, plugins


def run(
    plugin: ScorePlugin[Any, Any], pod: Obj, pods: list[Obj], nodes: list[Obj], failed: list[Obj]
) -> dict[str, int]:
    st = snapshot(pods, [*nodes, *failed])
    pre = plugin.pre_score(st, pod)
    assert pre is not None
    assert plugin.feasible is not None
    assert plugin.normalize is not None
    names = [n["metadata"]["name"] for n in nodes]
    s = plugin.feasible(st, pre, names)
    scores = {n: plugin.score(s, n, st.nodes.by_name[n]) for n in names}
    plugin.normalize(scores)
    return scores


def host(name: str, **labels: str) -> Obj:
    return make_node().name(name).label(HOSTNAME, name).labels(labels).obj()


def zh(name: str, zone: str) -> Obj:
    return make_node().name(name).label("zone", zone).label(HOSTNAME, name).obj()


def nl(name: str, **labels: str) -> Obj:
    return make_node().name(name).label("node", name).labels(labels).obj()


def soft(max_skew: int, key: str, selector: Obj | None, **kw: Any) -> Obj:
    return (
        make_pod()
        .name("p")
        .label("foo", "")
        .spread_constraint(max_skew, key, SCHEDULE_ANYWAY, selector, **kw)
        .obj()
    )


def pods(*specs: tuple[str, str, dict[str, str]]) -> list[Obj]:
    return [make_pod().name(n).node(node).labels(labels).obj() for n, node, labels in specs]


def soft_two(
    first: tuple[str, Obj | None, list[str] | None],
    second: tuple[str, Obj | None, list[str] | None],
    **labels: str,
) -> Obj:
    p = make_pod().name("p").labels(labels)
    for key, selector, keys in (first, second):
        p.spread_constraint(1, key, SCHEDULE_ANYWAY, selector, match_label_keys=keys)
    return p.obj()


F: dict[str, str] = {"foo": ""}
B: dict[str, str] = {"bar": ""}
FB: dict[str, str] = {"foo": "", "bar": ""}
A2_B1_D3 = foo_pods(node_a=2, node_b=1, node_d=3)
A4_B3_C2_D1 = foo_pods(node_a=4, node_b=3, node_c=2, node_d=1)
A4_B2_X1_Y3 = foo_pods(node_a=4, node_b=2, node_x=1, node_y=3)
ABCD = [host(f"node-{c}") for c in "abcd"]
AFFINITY_PODS = foo_pods(node_a=2, node_b=1, node_c=1)
FOO_ABC = [nl("node-a", foo=""), nl("node-b", foo=""), nl("node-c")]
TAINTED_ABC = [
    nl("node-a"),
    nl("node-b"),
    make_node().name("node-c").label("node", "node-c").taints(TAINTS).obj(),
]
ZONED_ABCD = [zh("node-a", "zone1"), zh("node-b", "zone1"), zh("node-c", "zone2"), zh("node-d", "zone2")]

CASES: list[tuple[str, Obj, list[Obj], list[Obj], list[Obj], dict[str, int]]] = [
    (
        "one constraint on node, no existing pods",
        soft(1, HOSTNAME, FOO),
        [],
        [host("node-a"), host("node-b")],
        [],
        {"node-a": 100, "node-b": 100},
    ),
    (
        "one constraint on node, only one node is candidate",
        soft(1, HOSTNAME, FOO),
        foo_pods(node_a=2, node_b=1),
        [host("node-a")],
        [host("node-b")],
        {"node-a": 100},
    ),
    (
        "one constraint on node, all nodes have the same number of matching pods",
        soft(1, HOSTNAME, FOO),
        foo_pods(node_a=1, node_b=1),
        [host("node-a"), host("node-b")],
        [],
        {"node-a": 100, "node-b": 100},
    ),
    (
        "one constraint on node, all 4 nodes are candidates",
        soft(1, HOSTNAME, FOO),
        A2_B1_D3,
        ABCD,
        [],
        {"node-a": 20, "node-b": 60, "node-c": 100, "node-d": 0},
    ),
    (
        "one constraint on node, null selector",
        soft(1, HOSTNAME, None),
        A2_B1_D3,
        ABCD,
        [],
        {"node-a": 100, "node-b": 100, "node-c": 100, "node-d": 100},
    ),
    (
        "one constraint on node, all 4 nodes are candidates, maxSkew=2",
        soft(2, HOSTNAME, FOO),
        A2_B1_D3,
        ABCD,
        [],
        {"node-a": 33, "node-b": 66, "node-c": 100, "node-d": 16},
    ),
    (
        "one constraint on node, all 4 nodes are candidates, maxSkew=3",
        soft(3, HOSTNAME, FOO),
        A4_B3_C2_D1,
        ABCD,
        [],
        {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100},
    ),
    (
        "one constraint on node, 3 out of 4 nodes are candidates",
        soft(1, HOSTNAME, FOO),
        A4_B2_X1_Y3,
        [host("node-a"), host("node-b"), host("node-x")],
        [host("node-y")],
        {"node-a": 33, "node-b": 83, "node-x": 100},
    ),
    (
        "one constraint on node, 3 out of 4 nodes are candidates, one node doesn't match topology key",
        soft(1, HOSTNAME, FOO),
        A4_B2_X1_Y3,
        [host("node-a"), make_node().name("node-b").label("n", "node-b").obj(), host("node-x")],
        [host("node-y")],
        {"node-a": 16, "node-b": 0, "node-x": 100},
    ),
    (
        "one constraint on zone, 3 out of 4 nodes are candidates",
        soft(1, "zone", FOO),
        A4_B2_X1_Y3,
        [zh("node-a", "zone1"), zh("node-b", "zone1"), zh("node-x", "zone2")],
        [zh("node-y", "zone2")],
        {"node-a": 75, "node-b": 75, "node-x": 100},
    ),
    (
        "two Constraints on zone and node, 2 out of 4 nodes are candidates",
        soft_two(("zone", FOO, None), (HOSTNAME, FOO, None), foo=""),
        foo_pods(node_a=2, node_b=1, node_x=2, node_y=4),
        [zh("node-a", "zone1"), zh("node-x", "zone2")],
        [zh("node-b", "zone1"), zh("node-y", "zone2")],
        {"node-a": 100, "node-x": 63},
    ),
    (
        "two Constraints on zone, 2 out of 4 nodes are candidates",
        soft_two(("zone", FOO, None), ("zone", BAR, None), foo="", bar=""),
        pods(
            ("p-a1", "node-a", FB),
            ("p-a2", "node-a", F),
            ("p-b1", "node-b", FB),
            ("p-y1", "node-y", F),
            ("p-y2", "node-y", FB),
            ("p-y3", "node-y", F),
        ),
        [
            make_node().name("node-a").label("zone", "zone1").obj(),
            make_node().name("node-x").label("zone", "zone2").obj(),
        ],
        [
            make_node().name("node-b").label("zone", "zone1").obj(),
            make_node().name("node-y").label("zone", "zone2").obj(),
        ],
        {"node-a": 85, "node-x": 100},
    ),
    (
        "two Constraints on zone and node, with different labelSelectors",
        soft_two(("zone", FOO, None), (HOSTNAME, BAR, None), foo="", bar=""),
        pods(("p-a1", "node-a", F), ("p-b1", "node-b", FB), ("p-y1", "node-y", F), ("p-y2", "node-y", B)),
        [zh("node-a", "zone1"), zh("node-b", "zone1"), zh("node-x", "zone2"), zh("node-y", "zone2")],
        [],
        {"node-a": 60, "node-b": 20, "node-x": 100, "node-y": 60},
    ),
    (
        "two Constraints on zone and node, with different labelSelectors, some nodes have 0 pods",
        soft_two(("zone", FOO, None), (HOSTNAME, BAR, None), foo="", bar=""),
        pods(("p-b1", "node-b", B), ("p-x1", "node-x", F), ("p-y1", "node-y", FB)),
        [zh("node-a", "zone1"), zh("node-b", "zone1"), zh("node-x", "zone2"), zh("node-y", "zone2")],
        [],
        {"node-a": 100, "node-b": 60, "node-x": 40, "node-y": 0},
    ),
    (
        "two Constraints on zone and node, with different labelSelectors, 3 out of 4 nodes are candidates",
        soft_two(("zone", FOO, None), (HOSTNAME, BAR, None), foo="", bar=""),
        pods(("p-a1", "node-a", F), ("p-b1", "node-b", FB), ("p-y1", "node-y", F), ("p-y2", "node-y", B)),
        [zh("node-a", "zone1"), zh("node-b", "zone1"), zh("node-x", "zone2")],
        [zh("node-y", "zone2")],
        {"node-a": 50, "node-b": 25, "node-x": 100},
    ),
    (
        "existing pods in a different namespace do not count",
        soft(1, HOSTNAME, FOO),
        [
            make_pod().name("p-a1").namespace("ns1").node("node-a").label("foo", "").obj(),
            *pods(("p-a2", "node-a", F), ("p-b1", "node-b", F), ("p-b2", "node-b", F)),
        ],
        [host("node-a"), host("node-b")],
        [],
        {"node-a": 100, "node-b": 33},
    ),
    (
        "terminating Pods should be excluded",
        soft(1, HOSTNAME, FOO),
        [
            make_pod().name("p-a").node("node-a").label("foo", "").terminating().obj(),
            make_pod().name("p-b").node("node-b").label("foo", "").obj(),
        ],
        [host("node-a"), host("node-b")],
        [],
        {"node-a": 100, "node-b": 0},
    ),
    (
        "minDomains has no effect when ScheduleAnyway",
        soft(2, "node", FOO, min_domains=10),
        foo_pods(node_a=2, node_b=2, node_c=1),
        [nl("node-a"), nl("node-b"), nl("node-c")],
        [],
        {"node-a": 75, "node-b": 75, "node-c": 100},
    ),
    (
        "NodeAffinityPolicy honoed with labelSelectors",
        make_pod()
        .name("p")
        .label("foo", "")
        .node_selector({"foo": ""})
        .spread_constraint(1, "node", SCHEDULE_ANYWAY, FOO)
        .obj(),
        AFFINITY_PODS,
        FOO_ABC,
        [],
        {"node-a": 0, "node-b": 33, "node-c": 100},
    ),
    (
        "NodeAffinityPolicy ignored with labelSelectors",
        make_pod()
        .name("p")
        .label("foo", "")
        .node_selector({"foo": ""})
        .spread_constraint(1, "node", SCHEDULE_ANYWAY, FOO, node_affinity_policy="Ignore")
        .obj(),
        AFFINITY_PODS,
        FOO_ABC,
        [],
        {"node-a": 66, "node-b": 100, "node-c": 100},
    ),
    (
        "NodeAffinityPolicy honoed with nodeAffinity",
        make_pod()
        .name("p")
        .label("foo", "")
        .node_affinity_in("foo", [""])
        .spread_constraint(1, "node", SCHEDULE_ANYWAY, FOO)
        .obj(),
        AFFINITY_PODS,
        FOO_ABC,
        [],
        {"node-a": 0, "node-b": 33, "node-c": 100},
    ),
    (
        "NodeAffinityPolicy ignored with nodeAffinity",
        make_pod()
        .name("p")
        .label("foo", "")
        .node_affinity_in("foo", [""])
        .spread_constraint(1, "node", SCHEDULE_ANYWAY, FOO, node_affinity_policy="Ignore")
        .obj(),
        AFFINITY_PODS,
        FOO_ABC,
        [],
        {"node-a": 66, "node-b": 100, "node-c": 100},
    ),
    (
        "NodeTaintsPolicy honored",
        soft(1, "node", FOO, node_taints_policy="Honor"),
        AFFINITY_PODS,
        TAINTED_ABC,
        [],
        {"node-a": 0, "node-b": 33, "node-c": 100},
    ),
    (
        "NodeTaintsPolicy ignored",
        soft(1, "node", FOO),
        AFFINITY_PODS,
        TAINTED_ABC,
        [],
        {"node-a": 66, "node-b": 100, "node-c": 100},
    ),
    (
        "matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
        soft_two(
            ("zone", make_label_selector().obj(), ["foo"]),
            (HOSTNAME, make_label_selector().obj(), ["bar"]),
            foo="",
            bar="",
        ),
        pods(("p-a1", "node-a", F), ("p-b1", "node-b", FB), ("p-y1", "node-c", F), ("p-y2", "node-c", B)),
        ZONED_ABCD,
        [],
        {"node-a": 60, "node-b": 20, "node-c": 60, "node-d": 100},
    ),
    (
        "matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
        soft_two(("zone", FOO, None), (HOSTNAME, BAR, ["baz"]), foo="", bar="", baz=""),
        pods(
            ("p-a1", "node-a", F),
            ("p-b1", "node-b", {"foo": "", "bar": "", "baz": ""}),
            ("p-c1", "node-c", F),
            ("p-c2", "node-c", B),
            ("p-d3", "node-c", {"bar": "", "baz": ""}),
        ),
        ZONED_ABCD,
        [],
        {"node-a": 60, "node-b": 20, "node-c": 60, "node-d": 100},
    ),
]


@pytest.mark.parametrize(
    ("name", "pod", "existing", "nodes", "failed", "want"), CASES, ids=[c[0][:90] for c in CASES]
)
def test_pod_topology_spread_score(
    name: str, pod: Obj, existing: list[Obj], nodes: list[Obj], failed: list[Obj], want: dict[str, int]
) -> None:
    """TestPodTopologySpreadScore."""
    assert run(SCORE, pod, existing, nodes, failed) == want


def service_foo(_state: ClusterState, _pod: Obj) -> LabelSelector:
    """A Service selecting ``foo: ""`` matches every pod here (upstream's ``DefaultSelector``)."""
    return label_selector({"matchLabels": {"foo": ""}})


@pytest.mark.parametrize(
    ("default_selector", "skipped"),
    [(service_foo, False), (None, True), (lambda _s, _p: label_selector({}), True)],
)
def test_system_defaulting_nodes_dont_have_zone_pods_match_service(
    default_selector: Callable[[ClusterState, Obj], LabelSelector] | None, skipped: bool
) -> None:
    """TestPodTopologySpreadScore, "system defaulting, nodes don't have zone, pods match service": the
    defaults (hostname 3, zone 5) score as one hostname constraint would, nodes without a zone still
    scored. Without a selector or with an empty one, no default constraint: skipped."""
    _, score = plugins(default_selector)
    pod = make_pod().name("p").label("foo", "").obj()
    if skipped:
        assert score.pre_score(snapshot(A4_B3_C2_D1, ABCD), pod) is None
        return
    assert run(score, pod, A4_B3_C2_D1, ABCD, []) == {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}
