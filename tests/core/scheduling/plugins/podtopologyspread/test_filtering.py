"""PodTopologySpread's PreFilter and Filter, table tests transcribed from upstream's
``podtopologyspread/filtering_test.go`` (1.37): TestSingleConstraint, TestMultipleConstraints and
TestPreFilterStateAddPod/RemovePod's counts, each case named. NodeInclusionPolicyInPodTopologySpread
is GA in 1.37, so every case runs with it; upstream's cases without it set no policy, where both read
the same. Upstream's status codes are draxr's reasons: Success None, Unschedulable
``ERR_REASON_CONSTRAINTS_NOT_MATCH`` (U), UnschedulableAndUnresolvable the missing-label reason (R)."""

from __future__ import annotations

from typing import Any, Final

import pytest

from tests.core.scheduling.plugins.wrappers import (
    DO_NOT_SCHEDULE,
    make_label_selector,
    make_node,
    make_pod,
    snapshot,
)
from webhook.core.api.objects import Obj
from webhook.core.cluster.podinfo import pod_info
from webhook.core.scheduling.plugins.podtopologyspread import FILTER
from webhook.core.scheduling.plugins.podtopologyspread.filtering import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    PreFilterState,
)

S: Final = None
U: Final = ERR_REASON_CONSTRAINTS_NOT_MATCH
R: Final = ERR_REASON_NODE_LABEL_NOT_MATCH
FOO = make_label_selector().exists("foo").obj()
BAR = make_label_selector().exists("bar").obj()
TAINTS = [{"key": "node.kubernetes.io/unschedulable", "value": "", "effect": "NoSchedule"}]
IGNORE, HONOR = "Ignore", "Honor"


def zoned(name: str, zone: str | None, node_label: bool = True, **labels: str) -> Obj:
    n = make_node().name(name)
    if zone is not None:
        n.label("zone", zone)
    if node_label:
        n.label("node", name)
    return n.labels(labels).obj()


def four() -> list[Obj]:
    """node-a and node-b in zone1, node-x and node-y in zone2, each with its ``node`` label."""
    return [
        zoned("node-a", "zone1"),
        zoned("node-b", "zone1"),
        zoned("node-x", "zone2"),
        zoned("node-y", "zone2"),
    ]


def foo_pods(**per_node: int) -> list[Obj]:
    """``per_node`` pods labelled foo on each node (``node_a=2``: p-a1, p-a2 on node-a)."""
    out = []
    for key, n in per_node.items():
        node = key.replace("_", "-")
        for i in range(1, n + 1):
            out.append(make_pod().name(f"p-{node[-1]}{i}").node(node).label("foo", "").obj())
    return out


def spread(max_skew: int, key: str, selector: Obj | None, **kw: Any) -> Obj:
    return (
        make_pod()
        .name("p")
        .label("foo", "")
        .spread_constraint(max_skew, key, DO_NOT_SCHEDULE, selector, **kw)
        .obj()
    )


def run(pod: Obj, nodes: list[Obj], pods: list[Obj]) -> dict[str, str | list[str] | None]:
    st = snapshot(pods, nodes)
    pre = FILTER.pre_filter(st, pod)
    assert pre is not None
    return {
        n["metadata"]["name"]: FILTER.filter(
            pre, n["metadata"]["name"], st.nodes.by_name[n["metadata"]["name"]]
        )
        for n in nodes
    }


def abxy(a: str | None, b: str | None, x: str | None, y: str | None) -> dict[str, str | None]:
    return {"node-a": a, "node-b": b, "node-x": x, "node-y": y}


FOO_NODES = [
    make_node().name("node-a").label("node", "node-a").label("foo", "").obj(),
    make_node().name("node-b").label("node", "node-b").label("foo", "").obj(),
    make_node().name("node-x").label("node", "node-x").label("foo", "").obj(),
]
TAINTED_Y = make_node().name("node-y").label("node", "node-y").taints(TAINTS).obj()
PLAIN_Y = make_node().name("node-y").label("node", "node-y").obj()
A1_B1_Y1 = [
    make_pod().name("p-b1").node("node-a").label("foo", "").obj(),
    make_pod().name("p-b2").node("node-b").label("foo", "").obj(),
    make_pod().name("p-y1").node("node-y").label("foo", "").obj(),
]
A2_B1_Y3 = foo_pods(node_a=2, node_b=1, node_y=3)

SINGLE = [
    ("no existing pods", spread(1, "zone", FOO), four(), [], abxy(S, S, S, S)),
    (
        "no existing pods, incoming pod doesn't match itself",
        spread(1, "zone", BAR),
        four(),
        [],
        abxy(S, S, S, S),
    ),
    (
        "existing pods in a different namespace do not count",
        spread(1, "zone", FOO),
        four(),
        [
            make_pod().name("p-a1").namespace("ns1").node("node-a").label("foo", "").obj(),
            make_pod().name("p-b1").namespace("ns2").node("node-a").label("foo", "").obj(),
            make_pod().name("p-x1").node("node-x").label("foo", "").obj(),
            make_pod().name("p-y1").node("node-y").label("foo", "").obj(),
        ],
        abxy(S, S, U, U),
    ),
    (
        "existing pods do not match null selector",
        spread(1, "zone", None),
        four(),
        foo_pods(node_x=1, node_y=1),
        abxy(S, S, S, S),
    ),
    (
        "pods spread across zones as 3/3, all nodes fit",
        spread(1, "zone", FOO),
        four(),
        A2_B1_Y3,
        abxy(S, S, S, S),
    ),
    (
        "pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
        spread(1, "zone", FOO),
        [
            zoned("node-a", "zone1"),
            make_node().name("node-b").label("zon", "zone1").label("node", "node-b").obj(),
            zoned("node-x", "zone2"),
            zoned("node-y", "zone2"),
        ],
        foo_pods(node_a=1, node_b=1, node_x=1, node_y=1),
        abxy(S, R, U, U),
    ),
    (
        "pod cannot be scheduled as all nodes don't have label 'rack'",
        spread(1, "rack", FOO),
        [zoned("node-a", "zone1"), zoned("node-x", "zone2")],
        [],
        {"node-a": R, "node-x": R},
    ),
    (
        "pods spread across nodes as 2/1/0/3, only node-x fits",
        spread(1, "node", FOO),
        four(),
        A2_B1_Y3,
        abxy(U, U, S, U),
    ),
    (
        "pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
        spread(2, "node", FOO),
        four(),
        A2_B1_Y3,
        abxy(U, S, S, U),
    ),
    (
        "pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
        make_pod().name("p").label("bar", "").spread_constraint(1, "node", DO_NOT_SCHEDULE, FOO).obj(),
        four(),
        A2_B1_Y3,
        abxy(U, S, S, U),
    ),
    (
        "incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
        make_pod()
        .name("p")
        .label("foo", "")
        .node_affinity_in("node", ["node-a", "node-y"])
        .spread_constraint(1, "node", DO_NOT_SCHEDULE, FOO)
        .obj(),
        four(),
        A2_B1_Y3,
        abxy(S, S, S, U),
    ),
    (
        "terminating Pods should be excluded",
        spread(1, "node", FOO),
        [
            make_node().name("node-a").label("node", "node-a").obj(),
            make_node().name("node-b").label("node", "node-b").obj(),
        ],
        [
            make_pod().name("p-a").node("node-a").label("foo", "").terminating().obj(),
            make_pod().name("p-b").node("node-b").label("foo", "").obj(),
        ],
        {"node-a": S, "node-b": U},
    ),
    (
        "incoming pod has nodeAffinity, pods spread as 0/~2~/0/1, hence node-a fits",
        make_pod()
        .name("p")
        .label("foo", "")
        .node_affinity_not_in("node", ["node-b"])
        .spread_constraint(1, "zone", DO_NOT_SCHEDULE, FOO)
        .obj(),
        four(),
        foo_pods(node_b=2, node_y=1),
        abxy(S, S, U, U),
    ),
    (
        "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains < minDomains, then the "
        "third "
        "node fits",
        spread(2, "node", FOO, min_domains=4),
        [make_node().name(f"node-{c}").label("node", f"node-{c}").obj() for c in "abc"],
        foo_pods(node_a=2, node_b=2, node_c=1),
        {"node-a": U, "node-b": U, "node-c": S},
    ),
    (
        "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains > minDomains, then the "
        "all "
        "nodes fit",
        spread(2, "node", FOO, min_domains=2),
        [make_node().name(f"node-{c}").label("node", f"node-{c}").obj() for c in "abc"],
        foo_pods(node_a=2, node_b=2, node_c=1),
        {"node-a": S, "node-b": S, "node-c": S},
    ),
    (
        "pods spread across zone as 2/1, maxSkew is 2 and the number of domains < minDomains, then the "
        "third and "
        "fourth nodes fit",
        spread(2, "zone", FOO, min_domains=3),
        four(),
        foo_pods(node_a=1, node_b=1, node_y=1),
        abxy(U, U, S, S),
    ),
    (
        "pods spread across zone as 2/1, maxSkew is 2 and the number of domains > minDomains, then the all "
        "nodes fit",
        spread(2, "zone", FOO, min_domains=1),
        four(),
        foo_pods(node_a=1, node_b=1, node_y=1),
        abxy(S, S, S, S),
    ),
    (
        "NodeAffinityPolicy honored with labelSelectors",
        make_pod()
        .name("p")
        .label("foo", "")
        .node_selector({"foo": ""})
        .spread_constraint(1, "node", DO_NOT_SCHEDULE, FOO)
        .obj(),
        [*FOO_NODES, PLAIN_Y],
        A1_B1_Y1,
        abxy(U, U, S, S),
    ),
    (
        "NodeAffinityPolicy ignored with labelSelectors",
        make_pod()
        .name("p")
        .label("foo", "")
        .node_selector({"foo": ""})
        .spread_constraint(1, "node", DO_NOT_SCHEDULE, FOO, node_affinity_policy=IGNORE)
        .obj(),
        [*FOO_NODES, PLAIN_Y],
        A1_B1_Y1,
        abxy(U, U, S, U),
    ),
    (
        "NodeAffinityPolicy honored with nodeAffinity",
        make_pod()
        .name("p")
        .label("foo", "")
        .node_affinity_in("foo", [""])
        .spread_constraint(1, "node", DO_NOT_SCHEDULE, FOO)
        .obj(),
        [*FOO_NODES, PLAIN_Y],
        A1_B1_Y1,
        abxy(U, U, S, S),
    ),
    (
        "NodeAffinityPolicy ignored with labelSelectors (nodeAffinity)",
        make_pod()
        .name("p")
        .label("foo", "")
        .node_affinity_in("foo", [""])
        .spread_constraint(1, "node", DO_NOT_SCHEDULE, FOO, node_affinity_policy=IGNORE)
        .obj(),
        [*FOO_NODES, PLAIN_Y],
        A1_B1_Y1,
        abxy(U, U, S, U),
    ),
    (
        "NodeTaintsPolicy honored",
        spread(1, "node", FOO, node_taints_policy=HONOR),
        [*FOO_NODES, TAINTED_Y],
        A1_B1_Y1,
        abxy(U, U, S, S),
    ),
    ("NodeTaintsPolicy ignored", spread(1, "node", FOO), [*FOO_NODES, TAINTED_Y], A1_B1_Y1, abxy(U, U, S, U)),
]


@pytest.mark.parametrize(("name", "pod", "nodes", "pods", "want"), SINGLE, ids=[c[0][:90] for c in SINGLE])
def test_single_constraint(
    name: str, pod: Obj, nodes: list[Obj], pods: list[Obj], want: dict[str, str | None]
) -> None:
    """TestSingleConstraint."""
    assert run(pod, nodes, pods) == want


def two(
    first: tuple[str, Obj, dict[str, Any]], second: tuple[str, Obj, dict[str, Any]], **labels: str
) -> Obj:
    p = make_pod().name("p").labels(labels or {"foo": ""})
    for key, selector, kw in (first, second):
        p.spread_constraint(1, key, DO_NOT_SCHEDULE, selector, **kw)
    return p.obj()


def labelled(node: str, **labels: str) -> Obj:
    return make_pod().name(f"p-{node[-1]}").node(node).labels(labels).obj()


ZONE_FOO: tuple[str, Obj, dict[str, Any]] = ("zone", FOO, {})
NODE_FOO: tuple[str, Obj, dict[str, Any]] = ("node", FOO, {})
NODE_BAR: tuple[str, Obj, dict[str, Any]] = ("node", BAR, {})
ZONE_BAR: tuple[str, Obj, dict[str, Any]] = ("zone", BAR, {})


def foo_nodes_and(b: Obj, y: Obj) -> list[Obj]:
    return [zoned("node-a", "zone1", foo=""), b, zoned("node-x", "zone2", foo=""), y]


MULTIPLE = [
    (
        "two Constraints on zone and node, spreads = [3/3, 2/1/0/3]",
        two(ZONE_FOO, NODE_FOO),
        four(),
        A2_B1_Y3,
        abxy(U, U, S, U),
    ),
    (
        "two Constraints on zone and node, spreads = [3/4, 2/1/0/4]",
        two(ZONE_FOO, NODE_FOO),
        four(),
        foo_pods(node_a=2, node_b=1, node_y=4),
        abxy(U, U, U, U),
    ),
    (
        "Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]",
        two(ZONE_FOO, NODE_BAR, foo="", bar=""),
        four(),
        [labelled("node-a", foo=""), labelled("node-y", bar="")],
        abxy(U, U, S, U),
    ),
    (
        "Constraints hold different labelSelectors, spreads = [1/0, 0/0/1/1]",
        two(ZONE_FOO, NODE_BAR, foo="", bar=""),
        four(),
        [labelled("node-a", foo=""), labelled("node-x", bar=""), labelled("node-y", bar="")],
        abxy(U, U, U, U),
    ),
    (
        "Constraints hold different labelSelectors, spreads = [2/3, 1/0/0/1]",
        two(ZONE_FOO, NODE_BAR, foo="", bar=""),
        four(),
        [
            labelled("node-a", foo=""),
            labelled("node-a", foo="", bar=""),
            labelled("node-y", foo=""),
            labelled("node-y", foo="", bar=""),
            labelled("node-y", foo=""),
        ],
        abxy(U, S, U, U),
    ),
    (
        "Constraints hold different labelSelectors but pod doesn't match itself on 'zone' constraint",
        two(ZONE_FOO, NODE_BAR, bar=""),
        four(),
        [labelled("node-a", foo=""), labelled("node-x", bar=""), labelled("node-y", bar="")],
        abxy(S, S, U, U),
    ),
    (
        "two Constraints on zone and node, absence of label 'node' on node-x, spreads = [1/1, 1/0/0/1]",
        two(ZONE_FOO, NODE_FOO),
        [
            zoned("node-a", "zone1"),
            zoned("node-b", "zone1"),
            zoned("node-x", "zone2", False),
            zoned("node-y", "zone2"),
        ],
        foo_pods(node_a=1, node_y=1),
        abxy(U, S, R, U),
    ),
    (
        "two node inclusion Constraints, zone: honor/ignore, node: ignore/ignore",
        make_pod()
        .name("p")
        .label("foo", "")
        .node_selector({"foo": ""})
        .spread_constraint(1, "zone", DO_NOT_SCHEDULE, FOO)
        .spread_constraint(1, "node", DO_NOT_SCHEDULE, FOO, node_affinity_policy=IGNORE)
        .obj(),
        foo_nodes_and(zoned("node-b", "zone1", foo=""), zoned("node-y", "zone2")),
        foo_pods(node_a=1, node_b=1, node_y=1),
        abxy(U, U, S, U),
    ),
    (
        "two node inclusion Constraints, zone: honor/honor, node: honor/ignore",
        make_pod()
        .name("p")
        .label("foo", "")
        .spread_constraint(1, "zone", DO_NOT_SCHEDULE, FOO, node_taints_policy=HONOR)
        .spread_constraint(1, "node", DO_NOT_SCHEDULE, FOO)
        .obj(),
        foo_nodes_and(
            zoned("node-b", "zone1", foo=""),
            make_node().name("node-y").label("zone", "zone2").label("node", "node-y").taints(TAINTS).obj(),
        ),
        foo_pods(node_a=1, node_b=1, node_y=1),
        abxy(U, U, S, U),
    ),
    (
        "two node inclusion Constraints, zone: honor/ignore, node: honor/ignore",
        make_pod()
        .name("p")
        .label("foo", "")
        .node_selector({"foo": ""})
        .spread_constraint(1, "zone", DO_NOT_SCHEDULE, FOO)
        .spread_constraint(1, "node", DO_NOT_SCHEDULE, FOO)
        .obj(),
        foo_nodes_and(
            zoned("node-b", "zone1"),
            make_node()
            .name("node-y")
            .label("zone", "zone2")
            .label("node", "node-y")
            .label("foo", "")
            .taints(TAINTS)
            .obj(),
        ),
        foo_pods(node_a=1, node_b=1, node_y=1),
        abxy(U, S, S, U),
    ),
    (
        "two node inclusion Constraints, zone: honor/honor, node: ignore/ignore",
        make_pod()
        .name("p")
        .label("foo", "")
        .node_selector({"foo": ""})
        .spread_constraint(1, "zone", DO_NOT_SCHEDULE, FOO, node_taints_policy=HONOR)
        .spread_constraint(1, "node", DO_NOT_SCHEDULE, FOO, node_affinity_policy=IGNORE)
        .obj(),
        foo_nodes_and(
            zoned("node-b", "zone1"),
            make_node()
            .name("node-y")
            .label("zone", "zone2")
            .label("node", "node-y")
            .label("foo", "")
            .taints(TAINTS)
            .obj(),
        ),
        foo_pods(node_a=1, node_b=1, node_y=1),
        abxy(U, U, S, U),
    ),
    (
        "two Constraints on zone, spreads = [3/3, 2/1]",
        two(ZONE_BAR, ZONE_FOO, foo="", bar=""),
        four(),
        [
            labelled("node-a", foo="", bar=""),
            labelled("node-a", foo=""),
            labelled("node-b", foo="", bar=""),
            labelled("node-y", foo=""),
            labelled("node-y", foo="", bar=""),
            labelled("node-y", foo=""),
        ],
        abxy(U, U, S, S),
    ),
    (
        "two Constraints on zone, spreads = [3/4, 2/1]",
        two(ZONE_BAR, ZONE_FOO, foo="", bar=""),
        four(),
        [
            labelled("node-a", foo="", bar=""),
            labelled("node-a", foo=""),
            labelled("node-b", foo="", bar=""),
            labelled("node-y", foo=""),
            labelled("node-y", foo="", bar=""),
            labelled("node-y", foo=""),
            labelled("node-y", foo=""),
        ],
        abxy(U, U, U, U),
    ),
]


@pytest.mark.parametrize(
    ("name", "pod", "nodes", "pods", "want"), MULTIPLE, ids=[c[0][:90] for c in MULTIPLE]
)
def test_multiple_constraints(
    name: str, pod: Obj, nodes: list[Obj], pods: list[Obj], want: dict[str, str | None]
) -> None:
    """TestMultipleConstraints."""
    assert run(pod, nodes, pods) == want


def test_a_pod_without_constraints_is_skipped() -> None:
    """TestPreFilterDisabled's counterpart: no constraint (and no system default: draxr has none),
    PreFilter skips the pod."""
    assert FILTER.pre_filter(snapshot([], four()), make_pod().label("foo", "").obj()) is None


def counts(s: PreFilterState) -> list[dict[str, int]]:
    return [{k: v for k, v in c.items() if v} for c in s.counts]


def pods_on(*specs: tuple[str, str, dict[str, str]]) -> list[Obj]:
    """(name, node, labels) -> pods."""
    return [make_pod().name(n).node(node).labels(labels).obj() for n, node, labels in specs]


AB = [zoned("node-a", "zone1"), zoned("node-b", "zone1")]
AX = [zoned("node-a", "zone1"), zoned("node-x", "zone2")]
ABX = [zoned("node-a", "zone1"), zoned("node-b", "zone1"), zoned("node-x", "zone2")]
F = {"foo": ""}
FB = {"foo": "", "bar": ""}
POLICY_NODES = [zoned("node-a", "zone1", foo="bar"), zoned("node-b", "zone2", foo="")]
TAINTED_NODES = [
    make_node().name("node-a").label("zone", "zone1").label("node", "node-a").taints(TAINTS).obj(),
    zoned("node-b", "zone2"),
]
NOT_BAR = (
    make_pod()
    .name("p")
    .label("foo", "")
    .node_affinity_not_in("foo", ["bar"])
    .spread_constraint(1, "zone", DO_NOT_SCHEDULE, FOO)
    .obj()
)
ZONE_SPREAD = spread(1, "zone", FOO)

ADD_POD = [
    (
        "node a and b both impact current min match",
        spread(1, "node", FOO),
        AB,
        [],
        pods_on(("p-a1", "node-a", F))[0],
        [{"node-a": 1}],
        [0],
    ),
    (
        "only node a impacts current min match",
        spread(1, "node", FOO),
        AB,
        pods_on(("p-b1", "node-b", F)),
        pods_on(("p-a1", "node-a", F))[0],
        [{"node-a": 1, "node-b": 1}],
        [1],
    ),
    (
        "add a pod in a different namespace doesn't change topologyKeyToMinPodsMap",
        spread(1, "node", FOO),
        AB,
        pods_on(("p-b1", "node-b", F)),
        make_pod().name("p-a1").namespace("ns1").node("node-a").label("foo", "").obj(),
        [{"node-b": 1}],
        [0],
    ),
    (
        "add pod on non-critical node won't trigger re-calculation",
        spread(1, "node", FOO),
        AB,
        pods_on(("p-b1", "node-b", F)),
        pods_on(("p-b2", "node-b", F))[0],
        [{"node-b": 2}],
        [0],
    ),
    (
        "node a and x both impact topologyKeyToMinPodsMap on zone and node",
        two(ZONE_FOO, NODE_FOO),
        AX,
        [],
        pods_on(("p-a1", "node-a", F))[0],
        [{"zone1": 1}, {"node-a": 1}],
        [0, 0],
    ),
    (
        "only node a impacts topologyKeyToMinPodsMap on zone and node",
        two(ZONE_FOO, NODE_FOO),
        AX,
        pods_on(("p-x1", "node-x", F)),
        pods_on(("p-a1", "node-a", F))[0],
        [{"zone1": 1, "zone2": 1}, {"node-a": 1, "node-x": 1}],
        [1, 1],
    ),
    (
        "node a impacts topologyKeyToMinPodsMap on node, node x impacts topologyKeyToMinPodsMap on zone",
        two(ZONE_FOO, NODE_FOO),
        ABX,
        pods_on(("p-b1", "node-b", F), ("p-b2", "node-b", F), ("p-x1", "node-x", F)),
        pods_on(("p-a1", "node-a", F))[0],
        [{"zone1": 3, "zone2": 1}, {"node-a": 1, "node-b": 2, "node-x": 1}],
        [1, 1],
    ),
    (
        "Constraints hold different labelSelectors, node a impacts topologyKeyToMinPodsMap on zone",
        two(ZONE_FOO, NODE_BAR, foo="", bar=""),
        ABX,
        pods_on(("p-b1", "node-b", FB), ("p-x1", "node-x", FB), ("p-x2", "node-x", {"bar": ""})),
        pods_on(("p-a1", "node-a", F))[0],
        [{"zone1": 2, "zone2": 1}, {"node-b": 1, "node-x": 2}],
        [1, 0],
    ),
    (
        "Constraints hold different labelSelectors, node a impacts topologyKeyToMinPodsMap on both zone and "
        "node",
        two(ZONE_FOO, NODE_BAR, foo="", bar=""),
        ABX,
        pods_on(("p-b1", "node-b", {"bar": ""}), ("p-x1", "node-x", FB), ("p-x2", "node-x", {"bar": ""})),
        pods_on(("p-a1", "node-a", FB))[0],
        [{"zone1": 1, "zone2": 1}, {"node-a": 1, "node-b": 1, "node-x": 2}],
        [1, 1],
    ),
    (
        "add a pod when scheduling node affinity unmatched pod with NodeInclusionPolicy enabled",
        NOT_BAR,
        POLICY_NODES,
        pods_on(
            ("p-a2", "node-a", {"foo": "", "zone": "zone1"}), ("p-b1", "node-b", {"foo": "", "zone": "zone2"})
        ),
        pods_on(("p-a1", "node-a", {"foo": "", "zone": "zone1"}))[0],
        [{"zone2": 1}],
        [1],
    ),
    (
        "add a pod when scheduling node affinity matched pod with NodeInclusionPolicy enabled",
        ZONE_SPREAD,
        POLICY_NODES,
        pods_on(
            ("p-a1", "node-a", {"foo": "", "zone": "zone1"}), ("p-b2", "node-b", {"foo": "", "zone": "zone2"})
        ),
        pods_on(("p-b1", "node-b", {"foo": "", "zone": "zone2"}))[0],
        [{"zone1": 1, "zone2": 2}],
        [1],
    ),
    (
        "add a label selector not matched pod when with NodeInclusionPolicy enabled",
        ZONE_SPREAD,
        POLICY_NODES,
        pods_on(
            ("p-a1", "node-a", {"foo": "", "zone": "zone1"}), ("p-b2", "node-b", {"foo": "", "zone": "zone2"})
        ),
        pods_on(("p-b1", "node-b", {"zone": "zone2"}))[0],
        [{"zone1": 1, "zone2": 1}],
        [1],
    ),
    (
        "add a pod when scheduling taint tolerated pod with NodeInclusionPolicy enabled",
        make_pod()
        .name("p")
        .label("foo", "")
        .toleration("node.kubernetes.io/unschedulable")
        .spread_constraint(1, "zone", DO_NOT_SCHEDULE, FOO)
        .obj(),
        TAINTED_NODES,
        pods_on(
            ("p-a1", "node-a", {"foo": "", "zone": "zone1"}), ("p-b2", "node-b", {"foo": "", "zone": "zone2"})
        ),
        pods_on(("p-b1", "node-b", {"foo": "", "zone": "zone2"}))[0],
        [{"zone1": 1, "zone2": 2}],
        [1],
    ),
]


@pytest.mark.parametrize(
    ("name", "pod", "nodes", "existing", "added", "want", "mins"), ADD_POD, ids=[c[0][:90] for c in ADD_POD]
)
def test_pre_filter_state_add_pod(
    name: str,
    pod: Obj,
    nodes: list[Obj],
    existing: list[Obj],
    added: Obj,
    want: list[dict[str, int]],
    mins: list[int],
) -> None:
    """TestPreFilterStateAddPod (its TpValueToMatchNum without zeros, and the minimum its critical
    paths give), then TestPreFilterStateRemovePod's round trip: removing the pod again, or from the
    state of all, gives the counts without it; the state given is left alone."""
    st = snapshot(existing, nodes)
    pre = FILTER.pre_filter(st, pod)
    assert isinstance(pre, PreFilterState)
    assert FILTER.add_pod is not None
    assert FILTER.remove_pod is not None
    before = counts(pre)
    on = added["spec"]["nodeName"]
    info = st.nodes.by_name[on]
    with_added = FILTER.add_pod(pre, pod_info(added, on), info)
    assert counts(with_added) == want
    assert [with_added.min_match_num(i) for i in range(len(mins))] == mins
    assert counts(pre) == before
    assert counts(FILTER.remove_pod(with_added, pod_info(added, on), info)) == before
    everything = snapshot([*existing, added], nodes)
    all_pre = FILTER.pre_filter(everything, pod)
    assert isinstance(all_pre, PreFilterState)
    assert counts(all_pre) == want
    assert counts(FILTER.remove_pod(all_pre, pod_info(added, on), everything.nodes.by_name[on])) == before


def test_the_global_minimum_follows_added_pods_past_the_two_critical_paths() -> None:
    """Upstream keeps the two smallest counts and, after several AddPod calls, may take a count that is
    no longer the smallest for the minimum (its CAVEAT); draxr's is the true minimum: with three empty
    zones and pods added to two of them, the third still holds the minimum, 0."""
    nodes = [zoned(f"node-{z}", z) for z in ("z1", "z2", "z3")]
    st = snapshot([], nodes)
    pre = FILTER.pre_filter(st, spread(1, "zone", FOO))
    assert isinstance(pre, PreFilterState)
    assert FILTER.add_pod is not None
    for z in ("z1", "z2"):
        pre = FILTER.add_pod(
            pre, pod_info(labelled(f"node-{z}", foo=""), f"node-{z}"), st.nodes.by_name[f"node-{z}"]
        )
    assert pre.min_match_num(0) == 0
    assert FILTER.filter(pre, "node-z1", st.nodes.by_name["node-z1"]) == U
    assert FILTER.filter(pre, "node-z3", st.nodes.by_name["node-z3"]) is None
