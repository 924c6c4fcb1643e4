"""InterPodAffinity's PreScore, Score and NormalizeScore, table tests transcribed from upstream's
``interpodaffinity/scoring_test.go`` (1.37): TestPreferredAffinity and
TestPreferredAffinityWithHardPodAffinitySymmetricWeight, with draxr's arguments (the defaults:
HardPodAffinityWeight 1, IgnorePreferredTermsOfExistingPods false), so the cases for other arguments
and the "invalid (anti)affinity fails PreScore" cases (label values the apiserver refuses) are left
out."""

from __future__ import annotations

from typing import Any, Final

import pytest

from tests.core.scheduling.plugins.interpodaffinity.test_filtering import NAMESPACES
from tests.core.scheduling.plugins.wrappers import node, snapshot
from webhook.core.api.objects import Obj
from webhook.core.scheduling.framework import MAX_NODE_SCORE
from webhook.core.scheduling.plugins.interpodaffinity import SCORE

SKIP: Final = "Skip"
MAX = MAX_NODE_SCORE

RG_CHINA = {"region": "China"}
RG_INDIA = {"region": "India"}
AZ1 = {"az": "az1"}
AZ2 = {"az": "az2"}
RG_CHINA_AZ1 = {"region": "China", "az": "az1"}
S1 = {"security": "S1"}
S2 = {"security": "S2"}


def sel(*exprs: tuple[str, str, list[str] | None]) -> Obj:
    out = []
    for key, op, values in exprs:
        e: Obj = {"key": key, "operator": op}
        if values is not None:
            e["values"] = values
        out.append(e)
    return {"matchExpressions": out}


def term(selector: Obj, topology_key: str, **extra: Any) -> Obj:
    return {"labelSelector": selector, "topologyKey": topology_key, **extra}


def weighted(weight: int, t: Obj) -> Obj:
    return {"weight": weight, "podAffinityTerm": t}


def affinity(
    preferred: list[Obj] | None = None,
    anti_preferred: list[Obj] | None = None,
    required: list[Obj] | None = None,
) -> Obj:
    out: Obj = {}
    if preferred or required:
        out["podAffinity"] = {}
        if preferred:
            out["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
        if required:
            out["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = required
    if anti_preferred:
        out["podAntiAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": anti_preferred}
    return out


TEAM1 = sel(("team", "In", ["team1"]))
NOT_TEAM1 = sel(("team", "NotIn", ["team1"]))
STAY_WITH_S1_IN_REGION = affinity([weighted(5, term(sel(("security", "In", ["S1"])), "region"))])
STAY_WITH_S2_IN_REGION = affinity([weighted(6, term(sel(("security", "In", ["S2"])), "region"))])
AFFINITY3 = affinity(
    [
        weighted(8, term(sel(("security", "NotIn", ["S1"]), ("security", "In", ["S2"])), "region")),
        weighted(2, term(sel(("security", "Exists", None), ("wrongkey", "DoesNotExist", None)), "region")),
    ]
)
HARD_AFFINITY = affinity(
    required=[
        term(sel(("security", "In", ["S1", "value2"])), "region"),
        term(sel(("security", "Exists", None), ("wrongkey", "DoesNotExist", None)), "region"),
    ]
)
AWAY_FROM_S1_IN_AZ = affinity(anti_preferred=[weighted(5, term(sel(("security", "In", ["S1"])), "az"))])
AWAY_FROM_S2_IN_AZ = affinity(anti_preferred=[weighted(5, term(sel(("security", "In", ["S2"])), "az"))])
STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ = affinity(
    [weighted(8, term(sel(("security", "In", ["S1"])), "region"))],
    [weighted(5, term(sel(("security", "In", ["S2"])), "az"))],
)
NS_TERM = term(
    sel(("security", "In", ["S1"])), "region", namespaces=["subteam2.team2"], namespaceSelector=TEAM1
)
AFFINITY_NAMESPACE_SELECTOR = affinity([weighted(5, NS_TERM)])
ANTI_AFFINITY_NAMESPACE_SELECTOR = affinity(anti_preferred=[weighted(5, NS_TERM)])
NEG_TERM = term(sel(("security", "In", ["S1"])), "region", namespaceSelector=NOT_TEAM1)
AFFINITY_NEGATIVE_NAMESPACE_SELECTOR = affinity([weighted(5, NEG_TERM)])
ANTI_AFFINITY_NEGATIVE_NAMESPACE_SELECTOR = affinity(anti_preferred=[weighted(5, NEG_TERM)])

_n = iter(range(10**6))


def pod(
    labels: dict[str, str] | None = None, node_name: str = "", aff: Obj | None = None, ns: str = ""
) -> Obj:
    """``&v1.Pod{Spec: {NodeName, Affinity}, ObjectMeta: {Namespace, Labels}}``."""
    p: Obj = {"metadata": {"name": "", "namespace": ns, "uid": f"score-{next(_n)}"}, "spec": {}}
    if labels:
        p["metadata"]["labels"] = dict(labels)
    if node_name:
        p["spec"]["nodeName"] = node_name
    if aff:
        p["spec"]["affinity"] = aff
    return p


def nodes(*labels: dict[str, str]) -> list[Obj]:
    return [node(f"node{i}", ls) for i, ls in enumerate(labels, start=1)]


def run(incoming: Obj, pods: list[Obj], ns: list[Obj]) -> list[int] | str:
    st = snapshot(pods, ns, NAMESPACES)
    pre = SCORE.pre_score(st, incoming)
    if pre is None:
        return SKIP
    scores = {
        n["metadata"]["name"]: SCORE.score(
            pre, n["metadata"]["name"], st.nodes.by_name[n["metadata"]["name"]]
        )
        for n in ns
    }
    assert SCORE.normalize is not None
    SCORE.normalize(scores)
    return list(scores.values())


CASES = [
    (
        "all nodes are same priority as Affinity is nil",
        pod(S1),
        [],
        nodes(RG_CHINA, RG_INDIA, AZ1),
        SKIP,
    ),
    (
        "Affinity: pod that matches topology key & pods in nodes will get high score comparing to "
        "otherswhich "
        "doesn't match either pods in nodes or in topology key",
        pod(S1, aff=STAY_WITH_S1_IN_REGION),
        [pod(S1, "node1"), pod(S2, "node2"), pod(S1, "node3")],
        nodes(RG_CHINA, RG_INDIA, AZ1),
        [MAX, 0, 0],
    ),
    (
        "All the nodes that have the same topology key & label value with one of them has an existing pod "
        "that match "
        "the affinity rules, have the same score",
        pod(aff=STAY_WITH_S1_IN_REGION),
        [pod(S1, "node1")],
        nodes(RG_CHINA, RG_CHINA_AZ1, RG_INDIA),
        [MAX, MAX, 0],
    ),
    (
        "Affinity: nodes in one region has more matching pods comparing to other region, so the region "
        "which has more "
        "matches will get high score",
        pod(S1, aff=STAY_WITH_S2_IN_REGION),
        [
            pod(S2, "node1"),
            pod(S2, "node1"),
            pod(S2, "node2"),
            pod(S2, "node3"),
            pod(S2, "node4"),
            pod(S2, "node5"),
        ],
        nodes(RG_CHINA, RG_INDIA, RG_CHINA, RG_CHINA, RG_INDIA),
        [MAX, 0, MAX, MAX, 0],
    ),
    (
        "Affinity: different Label operators and values for pod affinity scheduling preference, including "
        "some match "
        "failures ",
        pod(S1, aff=AFFINITY3),
        [pod(S1, "node1"), pod(S2, "node2"), pod(S1, "node3")],
        nodes(RG_CHINA, RG_INDIA, AZ1),
        [20, MAX, 0],
    ),
    (
        "Affinity symmetry: considered only the preferredDuringSchedulingIgnoredDuringExecution in pod "
        "affinity "
        "symmetry",
        pod(S2),
        [pod(S1, "node1", STAY_WITH_S1_IN_REGION), pod(S2, "node2", STAY_WITH_S2_IN_REGION)],
        nodes(RG_CHINA, RG_INDIA, AZ1),
        [0, MAX, 0],
    ),
    (
        "Affinity symmetry with namespace selector",
        pod(S1, ns="subteam1.team1"),
        [pod(S1, "node1", AFFINITY_NAMESPACE_SELECTOR), pod(S2, "node2", STAY_WITH_S2_IN_REGION)],
        nodes(RG_CHINA, RG_INDIA, AZ1),
        [MAX, 0, 0],
    ),
    (
        "AntiAffinity symmetry with namespace selector",
        pod(S1, ns="subteam1.team1"),
        [pod(S1, "node1", ANTI_AFFINITY_NAMESPACE_SELECTOR), pod(S2, "node2", STAY_WITH_S2_IN_REGION)],
        nodes(RG_CHINA, RG_INDIA, AZ1),
        [0, MAX, MAX],
    ),
    (
        "Affinity symmetry: considered RequiredDuringSchedulingIgnoredDuringExecution in pod affinity "
        "symmetry",
        pod(S1),
        [pod(S1, "node1", HARD_AFFINITY), pod(S2, "node2", HARD_AFFINITY)],
        nodes(RG_CHINA, RG_INDIA, AZ1),
        [MAX, MAX, 0],
    ),
    (
        "Anti Affinity: pod that does not match existing pods in node will get high score ",
        pod(S1, aff=AWAY_FROM_S1_IN_AZ),
        [pod(S1, "node1"), pod(S2, "node2")],
        nodes(AZ1, RG_CHINA),
        [0, MAX],
    ),
    (
        "Anti Affinity: pod that does not match topology key & match the pods in nodes will get higher score "
        "comparing to others ",
        pod(S1, aff=AWAY_FROM_S1_IN_AZ),
        [pod(S1, "node1"), pod(S1, "node2")],
        nodes(AZ1, RG_CHINA),
        [0, MAX],
    ),
    (
        "Anti Affinity: one node has more matching pods comparing to other node, so the node which has more "
        "unmatches "
        "will get high score",
        pod(S1, aff=AWAY_FROM_S1_IN_AZ),
        [pod(S1, "node1"), pod(S1, "node1"), pod(S2, "node2")],
        nodes(AZ1, RG_INDIA),
        [0, MAX],
    ),
    (
        "Anti Affinity symmetry: the existing pods in node which has anti affinity match will get high score",
        pod(S2),
        [pod(S1, "node1", AWAY_FROM_S2_IN_AZ), pod(S2, "node2", AWAY_FROM_S1_IN_AZ)],
        nodes(AZ1, AZ2),
        [0, MAX],
    ),
    (
        "Affinity and Anti Affinity: considered only preferredDuringSchedulingIgnoredDuringExecution in "
        "both pod "
        "affinity & anti affinity",
        pod(S1, aff=STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ),
        [pod(S1, "node1"), pod(S1, "node2")],
        nodes(RG_CHINA, AZ1),
        [MAX, 0],
    ),
    (
        "Affinity and Anti Affinity: considering both affinity and anti-affinity, the pod to schedule and "
        "existing pods "
        "have the same labels",
        pod(S1, aff=STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ),
        [
            pod(S1, "node1"),
            pod(S1, "node1"),
            pod(S1, "node2"),
            pod(S1, "node3"),
            pod(S1, "node3"),
            pod(S1, "node4"),
            pod(S1, "node5"),
        ],
        nodes(RG_CHINA_AZ1, RG_INDIA, RG_CHINA, RG_CHINA, RG_INDIA),
        [MAX, 0, MAX, MAX, 0],
    ),
    (
        "Affinity and Anti Affinity and symmetry: considered only "
        "preferredDuringSchedulingIgnoredDuringExecution in "
        "both pod affinity & anti affinity & symmetry",
        pod(S1, aff=STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ),
        [
            pod(S1, "node1"),
            pod(S2, "node2"),
            pod(None, "node3", STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ),
            pod(None, "node4", AWAY_FROM_S1_IN_AZ),
        ],
        nodes(RG_CHINA, AZ1, RG_INDIA, AZ2),
        [MAX, 0, MAX, 0],
    ),
    (
        "Avoid panic when partial nodes in a topology don't have pods with affinity",
        pod(S1),
        [pod(S1, "node1"), pod(None, "node2", STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ)],
        nodes(RG_CHINA, RG_CHINA),
        [0, 0],
    ),
    (
        "Affinity with pods matching NamespaceSelector",
        pod(S1, aff=AFFINITY_NAMESPACE_SELECTOR, ns="subteam1.team1"),
        [
            pod(S1, "node1", ns="subteam1.team1"),
            pod(S1, "node1", ns="subteam1.team1"),
            pod(S1, "node1", ns="subteam1.team2"),
            pod(S1, "node2", ns="subteam2.team1"),
        ],
        nodes(RG_CHINA, RG_INDIA),
        [MAX, 0],
    ),
    (
        "Affinity with pods matching both NamespaceSelector and Namespaces fields",
        pod(S1, aff=AFFINITY_NAMESPACE_SELECTOR, ns="subteam1.team1"),
        [
            pod(S1, "node1", ns="subteam1.team1"),
            pod(S1, "node1", ns="subteam1.team1"),
            pod(S1, "node1", ns="subteam2.team2"),
            pod(S1, "node2", ns="subteam2.team1"),
        ],
        nodes(RG_CHINA, RG_INDIA),
        [MAX, 0],
    ),
    (
        "Affinity with pods matching NamespaceSelector (anti-affinity)",
        pod(S1, aff=ANTI_AFFINITY_NAMESPACE_SELECTOR, ns="subteam1.team1"),
        [
            pod(S1, "node1", ns="subteam1.team1"),
            pod(S1, "node1", ns="subteam1.team1"),
            pod(S1, "node1", ns="subteam1.team2"),
            pod(S1, "node2", ns="subteam2.team1"),
        ],
        nodes(RG_CHINA, RG_INDIA),
        [0, MAX],
    ),
    (
        "Affinity with pods matching both NamespaceSelector and Namespaces fields (anti-affinity)",
        pod(S1, aff=ANTI_AFFINITY_NAMESPACE_SELECTOR, ns="subteam1.team1"),
        [
            pod(S1, "node1", ns="subteam1.team1"),
            pod(S1, "node1", ns="subteam1.team1"),
            pod(S1, "node1", ns="subteam2.team2"),
            pod(S1, "node2", ns="subteam2.team1"),
        ],
        nodes(RG_CHINA, RG_INDIA),
        [0, MAX],
    ),
    (
        "Affinity with pods correctly enforcing negative NamespaceSelector",
        pod(S1, aff=AFFINITY_NEGATIVE_NAMESPACE_SELECTOR, ns="subteam1.team1"),
        [
            pod(S1, "node1", ns="subteam1.team1"),
            pod(S1, "node1", ns="subteam1.team1"),
            pod(S1, "node2", ns="subteam1.team2"),
        ],
        nodes(RG_CHINA, RG_INDIA),
        [0, MAX],
    ),
    (
        "AntiAffinity with pods correctly enforcing negative NamespaceSelector",
        pod(S1, aff=ANTI_AFFINITY_NEGATIVE_NAMESPACE_SELECTOR, ns="subteam1.team1"),
        [
            pod(S1, "node1", ns="subteam1.team1"),
            pod(S1, "node1", ns="subteam1.team1"),
            pod(S1, "node2", ns="subteam1.team2"),
        ],
        nodes(RG_CHINA, RG_INDIA),
        [MAX, 0],
    ),
    (
        "Do not ignore preferred terms of existing pods",
        pod(S2),
        [
            pod(S1, "node1", STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ),
            pod(S2, "node2", STAY_WITH_S2_IN_REGION),
        ],
        nodes(RG_CHINA, RG_INDIA),
        [0, MAX],
    ),
    ("No nodes to score", pod(S2), [], [], SKIP),
]


@pytest.mark.parametrize(("name", "incoming", "pods", "ns", "want"), CASES, ids=[c[0][:90] for c in CASES])
def test_preferred_affinity(
    name: str, incoming: Obj, pods: list[Obj], ns: list[Obj], want: list[int] | str
) -> None:
    """TestPreferredAffinity."""
    assert run(incoming, pods, ns) == want


HARD_POD_AFFINITY = affinity(
    required=[
        term(
            sel(("service", "In", ["S1"])),
            "region",
            namespaces=["", "subteam2.team2"],
            namespaceSelector=TEAM1,
        )
    ]
)
SERVICE_S1 = {"service": "S1"}


@pytest.mark.parametrize(
    ("name", "ns", "want"),
    [
        ("with default weight", "", [MAX, MAX, 0]),
        ("with no matching namespace", "subteam1.team2", SKIP),
        ("with matching NamespaceSelector", "subteam1.team1", [MAX, MAX, 0]),
        ("with matching Namespaces", "subteam2.team2", [MAX, MAX, 0]),
    ],
)
def test_preferred_affinity_with_hard_pod_affinity_symmetric_weight(
    name: str, ns: str, want: list[int] | str
) -> None:
    """TestPreferredAffinityWithHardPodAffinitySymmetricWeight (draxr's weight is the default, 1)."""
    pods = [pod(None, "node1", HARD_POD_AFFINITY), pod(None, "node2", HARD_POD_AFFINITY)]
    assert run(pod(SERVICE_S1, ns=ns), pods, nodes(RG_CHINA, RG_INDIA, AZ1)) == want
