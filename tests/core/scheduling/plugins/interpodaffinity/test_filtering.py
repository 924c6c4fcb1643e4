"""InterPodAffinity's PreFilter and Filter, table tests transcribed from upstream's
``interpodaffinity/filtering_test.go`` (1.37; InterPodAffinityHostnameFastPath off, its default):
each case names its test and case. Upstream's two cases "fails PreFilter with an invalid (anti)affinity
label syntax" are left out: draxr does not validate label values, which the apiserver has done."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import pytest

from tests.core.scheduling.plugins.wrappers import (
    HOSTNAME,
    REQUIRED,
    make_node,
    make_pod,
    namespace,
    node,
    snapshot,
)
from webhook.core.api.objects import Obj
from webhook.core.cluster.podinfo import pod_info
from webhook.core.cluster.state import ClusterState
from webhook.core.scheduling.framework import PreFilterFailed
from webhook.core.scheduling.plugins.interpodaffinity import FILTER
from webhook.core.scheduling.plugins.interpodaffinity.filtering import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH as AFFINITY,
)
from webhook.core.scheduling.plugins.interpodaffinity.filtering import (
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH as ANTI,
)
from webhook.core.scheduling.plugins.interpodaffinity.filtering import (
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH as EXISTING,
)
from webhook.core.scheduling.plugins.interpodaffinity.filtering import pre_filter
from webhook.core.scheduling.plugins.interpodaffinity.state import PreFilterState

SKIP: Final = "Skip"
NS_LABEL_T1 = {"team": "team1"}
NS_LABEL_T2 = {"team": "team2"}
#: scoring_test.go's ``namespaces``, the informer's objects in the namespace selector cases.
NAMESPACES = [
    namespace("subteam1.team1", NS_LABEL_T1),
    namespace("subteam2.team1", NS_LABEL_T1),
    namespace("subteam1.team2", NS_LABEL_T2),
    namespace("subteam2.team2", NS_LABEL_T2),
]


@dataclass
class Case:
    name: str
    pod: Obj
    nodes: list[Obj]
    want: list[str | None] | str  # per node, or SKIP (PreFilter skipped the pod)
    pods: list[Obj] = field(default_factory=list)


def run(case: Case) -> list[str | list[str] | None] | str:
    st = snapshot(case.pods, case.nodes, NAMESPACES)
    pre = FILTER.pre_filter(st, case.pod)
    if pre is None:
        return SKIP
    return [
        FILTER.filter(pre, n["metadata"]["name"], st.nodes.by_name[n["metadata"]["name"]]) for n in case.nodes
    ]


def affinity_term(
    values: list[str], topology_key: str, namespaces: list[str] | None = None, **extra: Obj
) -> Obj:
    term: Obj = {
        "labelSelector": {"matchExpressions": [{"key": "service", "operator": "In", "values": values}]},
        "topologyKey": topology_key,
        **extra,
    }
    if namespaces is not None:
        term["namespaces"] = namespaces
    return term


def with_terms(ns: str, labels: dict[str, str], affinity: list[Obj], anti: list[Obj]) -> Obj:
    """``createPodWithAffinityTerms``."""
    p = make_pod().namespace(ns).labels(labels).obj()
    p["spec"]["affinity"] = {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": affinity},
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": anti},
    }
    return p


TEAM1 = {"matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]}

# -- TestRequiredAffinitySingleNode ----------------------------------------------------------------

POD_LABEL = {"service": "securityscan"}
POD_LABEL2 = {"security": "S1"}
NODE1 = node("node1", {"region": "r1", "zone": "z11"})


def existing() -> Obj:
    return make_pod().labels(POD_LABEL).node("node1").obj()


SINGLE_NODE = [
    Case(
        "A pod that has no required pod affinity scheduling rules can schedule onto a node with no existing "
        "pods",
        make_pod().obj(),
        [NODE1],
        SKIP,
    ),
    Case(
        "satisfies with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using In operator "
        "that matches "
        "the existing pod",
        make_pod()
        .labels(POD_LABEL2)
        .pod_affinity_in("service", "region", ["securityscan", "value2"], REQUIRED)
        .obj(),
        [NODE1],
        [None],
        [existing()],
    ),
    Case(
        "satisfies the pod with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using not in "
        "operator "
        "in labelSelector that matches the existing pod",
        make_pod()
        .labels(POD_LABEL2)
        .pod_affinity_not_in("service", "region", ["securityscan3", "value3"], REQUIRED)
        .obj(),
        [NODE1],
        [None],
        [existing()],
    ),
    Case(
        "Does not satisfy the PodAffinity with labelSelector because of diff Namespace",
        with_terms("", POD_LABEL2, [affinity_term(["securityscan", "value2"], "", ["DiffNameSpace"])], []),
        [NODE1],
        [AFFINITY],
        [make_pod().namespace("ns").label("service", "securityscan").node("node1").obj()],
    ),
    Case(
        "Doesn't satisfy the PodAffinity because of unmatching labelSelector with the existing pod",
        make_pod()
        .labels(POD_LABEL)
        .pod_affinity_in("service", "", ["antivirusscan", "value2"], REQUIRED)
        .obj(),
        [NODE1],
        [AFFINITY],
        [existing()],
    ),
    Case(
        "satisfies the PodAffinity with different label Operators in multiple "
        "RequiredDuringSchedulingIgnoredDuring"
        "Execution ",
        with_terms(
            "",
            POD_LABEL2,
            [
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": "service", "operator": "Exists"},
                            {"key": "wrongkey", "operator": "DoesNotExist"},
                        ]
                    },
                    "topologyKey": "region",
                },
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": "service", "operator": "In", "values": ["securityscan"]},
                            {"key": "service", "operator": "NotIn", "values": ["WrongValue"]},
                        ]
                    },
                    "topologyKey": "region",
                },
            ],
            [],
        ),
        [NODE1],
        [None],
        [existing()],
    ),
    Case(
        "The labelSelector requirements(items of matchExpressions) are ANDed, the pod cannot schedule onto "
        "the node "
        "because one of the matchExpression item don't match.",
        with_terms(
            "",
            POD_LABEL2,
            [
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": "service", "operator": "Exists"},
                            {"key": "wrongkey", "operator": "DoesNotExist"},
                        ]
                    },
                    "topologyKey": "region",
                },
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": "service", "operator": "In", "values": ["securityscan2"]},
                            {"key": "service", "operator": "NotIn", "values": ["WrongValue"]},
                        ]
                    },
                    "topologyKey": "region",
                },
            ],
            [],
        ),
        [NODE1],
        [AFFINITY],
        [existing()],
    ),
    Case(
        "satisfies the PodAffinity and PodAntiAffinity with the existing pod",
        make_pod()
        .labels(POD_LABEL2)
        .pod_affinity_in("service", "region", ["securityscan", "value2"], REQUIRED)
        .pod_anti_affinity_in("service", "node", ["antivirusscan", "value2"], REQUIRED)
        .obj(),
        [NODE1],
        [None],
        [existing()],
    ),
    Case(
        "satisfies the PodAffinity and PodAntiAffinity and PodAntiAffinity symmetry with the existing pod",
        make_pod()
        .labels(POD_LABEL2)
        .pod_affinity_in("service", "region", ["securityscan", "value2"], REQUIRED)
        .pod_anti_affinity_in("service", "node", ["antivirusscan", "value2"], REQUIRED)
        .obj(),
        [NODE1],
        [None],
        [
            make_pod()
            .node("node1")
            .labels(POD_LABEL)
            .pod_anti_affinity_in("service", "node", ["antivirusscan", "value2"], REQUIRED)
            .obj()
        ],
    ),
    Case(
        "satisfies the PodAffinity but doesn't satisfy the PodAntiAffinity with the existing pod",
        make_pod()
        .labels(POD_LABEL2)
        .pod_affinity_in("service", "region", ["securityscan", "value2"], REQUIRED)
        .pod_anti_affinity_in("service", "zone", ["securityscan", "value2"], REQUIRED)
        .obj(),
        [NODE1],
        [ANTI],
        [existing()],
    ),
    Case(
        "satisfies the PodAffinity and PodAntiAffinity but doesn't satisfy PodAntiAffinity symmetry with the "
        "existing pod",
        make_pod()
        .labels(POD_LABEL)
        .pod_affinity_in("service", "region", ["securityscan", "value2"], REQUIRED)
        .pod_anti_affinity_in("service", "node", ["antivirusscan", "value2"], REQUIRED)
        .obj(),
        [NODE1],
        [EXISTING],
        [
            make_pod()
            .labels(POD_LABEL)
            .node("node1")
            .pod_anti_affinity_in("service", "zone", ["securityscan", "value2"], REQUIRED)
            .obj()
        ],
    ),
    Case(
        "pod matches its own Label in PodAffinity and that matches the existing pod Labels",
        make_pod()
        .labels(POD_LABEL)
        .pod_affinity_not_in("service", "region", ["securityscan", "value2"], REQUIRED)
        .obj(),
        [NODE1],
        [AFFINITY],
        [make_pod().label("service", "securityscan").node("node2").obj()],
    ),
    Case(
        "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity "
        "constraints. "
        "doesn't satisfy PodAntiAffinity symmetry with the existing pod",
        make_pod().labels(POD_LABEL).obj(),
        [NODE1],
        [EXISTING],
        [
            make_pod()
            .node("node1")
            .labels(POD_LABEL)
            .pod_anti_affinity_in("service", "zone", ["securityscan", "value2"], REQUIRED)
            .obj()
        ],
    ),
    Case(
        "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity "
        "constraints. "
        "satisfy PodAntiAffinity symmetry with the existing pod",
        make_pod().labels(POD_LABEL).obj(),
        [NODE1],
        SKIP,
        [
            make_pod()
            .node("node1")
            .labels(POD_LABEL)
            .pod_anti_affinity_not_in("service", "zone", ["securityscan", "value2"], REQUIRED)
            .obj()
        ],
    ),
    Case(
        "satisfies the PodAntiAffinity with existing pod but doesn't satisfy PodAntiAffinity symmetry with "
        "incoming pod",
        make_pod()
        .labels(POD_LABEL)
        .pod_anti_affinity_exists("service", "region", REQUIRED)
        .pod_anti_affinity_exists("security", "region", REQUIRED)
        .obj(),
        [NODE1],
        [ANTI],
        [
            make_pod()
            .node("node1")
            .labels(POD_LABEL2)
            .pod_anti_affinity_exists("security", "zone", REQUIRED)
            .obj()
        ],
    ),
    Case(
        "PodAntiAffinity symmetry check a1: incoming pod and existing pod partially match each other on "
        "AffinityTerms",
        make_pod()
        .labels(POD_LABEL)
        .pod_anti_affinity_exists("service", "zone", REQUIRED)
        .pod_anti_affinity_exists("security", "zone", REQUIRED)
        .obj(),
        [NODE1],
        [ANTI],
        [
            make_pod()
            .node("node1")
            .labels(POD_LABEL2)
            .pod_anti_affinity_exists("security", "zone", REQUIRED)
            .obj()
        ],
    ),
    Case(
        "PodAntiAffinity symmetry check a2: incoming pod and existing pod partially match each other on "
        "AffinityTerms",
        make_pod().labels(POD_LABEL2).pod_anti_affinity_exists("security", "zone", REQUIRED).obj(),
        [NODE1],
        [EXISTING],
        [
            make_pod()
            .node("node1")
            .labels(POD_LABEL)
            .pod_anti_affinity_exists("service", "zone", REQUIRED)
            .pod_anti_affinity_exists("security", "zone", REQUIRED)
            .obj()
        ],
    ),
    Case(
        "PodAntiAffinity symmetry check b1: incoming pod and existing pod partially match each other on "
        "AffinityTerms",
        make_pod()
        .labels({"abc": "", "xyz": ""})
        .pod_anti_affinity_exists("abc", "zone", REQUIRED)
        .pod_anti_affinity_exists("def", "zone", REQUIRED)
        .obj(),
        [NODE1],
        [ANTI],
        [
            make_pod()
            .node("node1")
            .labels({"def": "", "xyz": ""})
            .pod_anti_affinity_exists("abc", "zone", REQUIRED)
            .pod_anti_affinity_exists("def", "zone", REQUIRED)
            .obj()
        ],
    ),
    Case(
        "PodAntiAffinity symmetry check b2: incoming pod and existing pod partially match each other on "
        "AffinityTerms",
        make_pod()
        .labels({"def": "", "xyz": ""})
        .pod_anti_affinity_exists("abc", "zone", REQUIRED)
        .pod_anti_affinity_exists("def", "zone", REQUIRED)
        .obj(),
        [NODE1],
        [ANTI],
        [
            make_pod()
            .node("node1")
            .labels({"abc": "", "xyz": ""})
            .pod_anti_affinity_exists("abc", "zone", REQUIRED)
            .pod_anti_affinity_exists("def", "zone", REQUIRED)
            .obj()
        ],
    ),
    Case(
        "affinity with NamespaceSelector",
        with_terms(
            "", POD_LABEL2, [affinity_term(["securityscan", "value2"], "region", namespaceSelector=TEAM1)], []
        ),
        [NODE1],
        [None],
        [make_pod().namespace("subteam1.team1").labels(POD_LABEL).node("node1").obj()],
    ),
    Case(
        "affinity with non-matching NamespaceSelector",
        with_terms(
            "", POD_LABEL2, [affinity_term(["securityscan", "value2"], "region", namespaceSelector=TEAM1)], []
        ),
        [NODE1],
        [AFFINITY],
        [make_pod().namespace("subteam1.team2").labels(POD_LABEL).node("node1").obj()],
    ),
    Case(
        "anti-affinity with matching NamespaceSelector",
        with_terms(
            "subteam1.team1",
            POD_LABEL2,
            [],
            [affinity_term(["securityscan", "value2"], "zone", namespaceSelector=TEAM1)],
        ),
        [NODE1],
        [ANTI],
        [make_pod().namespace("subteam2.team1").labels(POD_LABEL).node("node1").obj()],
    ),
    Case(
        "anti-affinity with matching all NamespaceSelector",
        with_terms(
            "subteam1.team1",
            POD_LABEL2,
            [],
            [affinity_term(["securityscan", "value2"], "zone", namespaceSelector={})],
        ),
        [NODE1],
        [ANTI],
        [make_pod().namespace("subteam2.team1").labels(POD_LABEL).node("node1").obj()],
    ),
    Case(
        "anti-affinity with non-matching NamespaceSelector",
        with_terms(
            "subteam1.team1",
            POD_LABEL2,
            [],
            [affinity_term(["securityscan", "value2"], "zone", namespaceSelector=TEAM1)],
        ),
        [NODE1],
        [None],
        [make_pod().namespace("subteam1.team2").labels(POD_LABEL).node("node1").obj()],
    ),
]


@pytest.mark.parametrize("case", SINGLE_NODE, ids=lambda c: c.name[:90])
def test_required_affinity_single_node(case: Case) -> None:
    """TestRequiredAffinitySingleNode."""
    assert run(case) == case.want


# -- TestRequiredAffinityMultipleNodes -------------------------------------------------------------

RG_CHINA = {"region": "China"}
RG_CHINA_AZ1 = {"region": "China", "az": "az1"}
RG_INDIA = {"region": "India"}


def abc(name: str, zone: str | None = None, region: str = "r1") -> Obj:
    labels = {"region": region, "hostname": name}
    if zone is not None:
        labels["zone"] = zone
    return node(name, labels)


MULTIPLE_NODES = [
    Case(
        "A pod can be scheduled onto all the nodes that have the same topology key & label value with one "
        "of them "
        "has an existing pod that matches the affinity rules",
        make_pod().pod_affinity_in("foo", "region", ["bar"], REQUIRED).obj(),
        [node("node1", RG_CHINA), node("node2", RG_CHINA_AZ1), node("node3", RG_INDIA)],
        [None, None, AFFINITY],
        [make_pod().name("p1").node("node1").labels({"foo": "bar"}).obj()],
    ),
    Case(
        "The affinity rule is to schedule all of the pods of this collection to the same zone. The first "
        "pod of the "
        "collection should not be blocked from being scheduled onto any node, even there's no existing pod "
        "that "
        "matches the rule anywhere.",
        make_pod()
        .labels({"foo": "bar", "service": "securityscan"})
        .pod_affinity_in("foo", "zone", ["bar"], REQUIRED)
        .pod_affinity_in("service", "zone", ["securityscan"], REQUIRED)
        .obj(),
        [node("nodeA", {"zone": "az1", "hostname": "h1"}), node("nodeB", {"zone": "az2", "hostname": "h2"})],
        [None, None],
        [make_pod().name("p1").node("nodeA").labels({"foo": "bar"}).obj()],
    ),
    Case(
        "The first pod of the collection can only be scheduled on nodes labelled with the requested "
        "topology keys",
        make_pod()
        .labels({"foo": "bar", "service": "securityscan"})
        .pod_affinity_in("foo", "zone", ["bar"], REQUIRED)
        .pod_affinity_in("service", "zone", ["securityscan"], REQUIRED)
        .obj(),
        [
            node("nodeA", {"zoneLabel": "az1", "hostname": "h1"}),
            node("nodeB", {"zoneLabel": "az2", "hostname": "h2"}),
        ],
        [AFFINITY, AFFINITY],
        [make_pod().name("p1").node("nodeA").labels({"foo": "bar"}).obj()],
    ),
    Case(
        "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the "
        "inter pod "
        "affinity rule. The pod can not be scheduled onto nodeA and nodeB.",
        make_pod().pod_anti_affinity_in("foo", "region", ["abc"], REQUIRED).obj(),
        [
            node("nodeA", {"region": "r1", "hostname": "nodeA"}),
            node("nodeB", {"region": "r1", "hostname": "nodeB"}),
        ],
        [ANTI, ANTI],
        [make_pod().node("nodeA").labels({"foo": "abc"}).obj()],
    ),
    Case(
        "This test ensures that anti-affinity matches a pod when any term of the anti-affinity rule matches "
        "a pod.",
        make_pod()
        .pod_anti_affinity_in("foo", "region", ["abc"], REQUIRED)
        .pod_anti_affinity_in("service", "zone", ["securityscan"], REQUIRED)
        .obj(),
        [abc("nodeA", "z1"), abc("nodeB", "z2")],
        [ANTI, ANTI],
        [make_pod().node("nodeA").labels({"foo": "abc", "service": "securityscan"}).obj()],
    ),
    Case(
        "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the "
        "inter pod "
        "affinity rule. The pod can not be scheduled onto nodeA and nodeB but can be scheduled onto nodeC",
        make_pod().pod_anti_affinity_in("foo", "region", ["abc"], REQUIRED).obj(),
        [node("nodeA", RG_CHINA), node("nodeB", RG_CHINA_AZ1), node("nodeC", RG_INDIA)],
        [ANTI, ANTI, None],
        [make_pod().node("nodeA").labels({"foo": "abc"}).obj()],
    ),
    Case(
        "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the "
        "inter pod "
        "affinity rule. The pod can not be scheduled onto nodeA, nodeB, but can be scheduled onto nodeC "
        "(NodeC has "
        "an existing pod that match the inter pod affinity rule but in different namespace)",
        make_pod()
        .namespace("NS1")
        .labels({"foo": "123"})
        .pod_anti_affinity_in("foo", "region", ["bar"], REQUIRED)
        .obj(),
        [node("nodeA", RG_CHINA), node("nodeB", RG_CHINA_AZ1), node("nodeC", RG_INDIA)],
        [ANTI, ANTI, None],
        [
            make_pod().node("nodeA").namespace("NS1").labels({"foo": "bar"}).obj(),
            make_pod()
            .node("nodeC")
            .namespace("NS2")
            .pod_anti_affinity_in("foo", "region", ["123"], REQUIRED)
            .obj(),
        ],
    ),
    Case(
        "Test existing pod's anti-affinity: if an existing pod has a term with invalid topologyKey, "
        "labelSelector of "
        "the term is firstly checked, and then topologyKey of the term is also checked",
        make_pod().label("foo", "").obj(),
        [abc("nodeA", "z1"), abc("nodeB", "z1")],
        SKIP,
        [make_pod().node("nodeA").pod_anti_affinity_exists("foo", "invalid-node-label", REQUIRED).obj()],
    ),
    Case(
        "Test incoming pod's anti-affinity: even if labelSelector matches, we still check if topologyKey "
        "matches",
        make_pod().node("nodeA").pod_anti_affinity_exists("foo", "invalid-node-label", REQUIRED).obj(),
        [abc("nodeA", "z1"), abc("nodeB", "z1")],
        [None, None],
        [make_pod().node("nodeA").labels({"foo": ""}).obj()],
    ),
    Case(
        "Test existing pod's anti-affinity: incoming pod wouldn't considered as a fit as it violates each "
        "existingPod's terms on all nodes",
        make_pod().label("foo", "").label("bar", "").obj(),
        [abc("nodeA", "z1"), abc("nodeB", "z2")],
        [EXISTING, EXISTING],
        [
            make_pod().node("nodeA").pod_anti_affinity_exists("foo", "zone", REQUIRED).obj(),
            make_pod().node("nodeA").pod_anti_affinity_exists("bar", "region", REQUIRED).obj(),
        ],
    ),
    Case(
        "Test incoming pod's anti-affinity: incoming pod wouldn't considered as a fit as it at least "
        "violates one "
        "anti-affinity rule of existingPod",
        make_pod()
        .pod_anti_affinity_exists("foo", "zone", REQUIRED)
        .pod_anti_affinity_exists("bar", "region", REQUIRED)
        .obj(),
        [abc("nodeA", "z1"), abc("nodeB", "z2")],
        [ANTI, ANTI],
        [
            make_pod().node("nodeA").labels({"foo": ""}).obj(),
            make_pod().node("nodeB").labels({"bar": ""}).obj(),
        ],
    ),
    Case(
        "Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's "
        "counted as a "
        "single term match - case when one term has invalid topologyKey",
        make_pod().label("foo", "").label("bar", "").obj(),
        [abc("nodeA", "z1"), abc("nodeB", "z2")],
        [EXISTING, None],
        [
            make_pod()
            .node("nodeA")
            .pod_anti_affinity_exists("foo", "invalid-node-label", REQUIRED)
            .pod_anti_affinity_exists("bar", "zone", REQUIRED)
            .obj()
        ],
    ),
    Case(
        "Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's "
        "counted as a "
        "single term match - case when one term has invalid topologyKey",
        make_pod()
        .pod_anti_affinity_exists("foo", "invalid-node-label", REQUIRED)
        .pod_anti_affinity_exists("bar", "zone", REQUIRED)
        .obj(),
        [abc("nodeA", "z1"), abc("nodeB", "z2")],
        [ANTI, None],
        [make_pod().name("podA").node("nodeA").labels({"foo": "", "bar": ""}).obj()],
    ),
    Case(
        "Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's "
        "counted as a "
        "single term match - case when all terms have valid topologyKey",
        make_pod().label("foo", "").label("bar", "").obj(),
        [abc("nodeA", "z1"), abc("nodeB", "z2")],
        [EXISTING, EXISTING],
        [
            make_pod()
            .node("nodeA")
            .pod_anti_affinity_exists("foo", "region", REQUIRED)
            .pod_anti_affinity_exists("bar", "zone", REQUIRED)
            .obj()
        ],
    ),
    Case(
        "Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's "
        "counted as a "
        "single term match - case when all terms have valid topologyKey",
        make_pod()
        .pod_anti_affinity_exists("foo", "region", REQUIRED)
        .pod_anti_affinity_exists("bar", "zone", REQUIRED)
        .obj(),
        [abc("nodeA", "z1"), abc("nodeB", "z2")],
        [ANTI, ANTI],
        [make_pod().node("nodeA").labels({"foo": "", "bar": ""}).obj()],
    ),
    Case(
        "Test existing pod's anti-affinity: existingPod on nodeA and nodeB has at least one anti-affinity "
        "term "
        "matches incoming pod, so incoming pod can only be scheduled to nodeC",
        make_pod().label("foo", "").label("bar", "").obj(),
        [abc("nodeA", "z1"), abc("nodeB", "z2"), abc("nodeC", "z3")],
        [EXISTING, EXISTING, None],
        [
            make_pod()
            .node("nodeA")
            .pod_anti_affinity_exists("foo", "zone", REQUIRED)
            .pod_anti_affinity_exists("labelA", "zone", REQUIRED)
            .obj(),
            make_pod()
            .node("nodeB")
            .pod_anti_affinity_exists("bar", "zone", REQUIRED)
            .pod_anti_affinity_exists("labelB", "zone", REQUIRED)
            .obj(),
        ],
    ),
    Case(
        "Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all "
        "topologyKeys "
        "match",
        make_pod()
        .pod_affinity_exists("foo", "region", REQUIRED)
        .pod_affinity_exists("bar", "zone", REQUIRED)
        .obj(),
        [abc("nodeA", "z1"), abc("nodeB", "z1")],
        [None, None],
        [make_pod().name("pod1").labels({"foo": "", "bar": ""}).node("nodeA").obj()],
    ),
    Case(
        "Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all "
        "topologyKeys "
        "match, and the match logic should be satisfied on the same pod",
        make_pod()
        .pod_affinity_exists("foo", "region", REQUIRED)
        .pod_affinity_exists("bar", "zone", REQUIRED)
        .obj(),
        [abc("nodeA", "z1"), abc("nodeB", "z2")],
        [AFFINITY, AFFINITY],
        [
            make_pod().node("nodeA").name("pod1").labels({"foo": ""}).obj(),
            make_pod().node("nodeB").name("pod2").labels({"bar": ""}).obj(),
        ],
    ),
    Case(
        "Test incoming pod's host-scoped affinity (fast path)",
        make_pod().pod_affinity_exists("foo", HOSTNAME, REQUIRED).obj(),
        [node("nodeA", {HOSTNAME: "nodeA"}), node("nodeB", {HOSTNAME: "nodeB"})],
        [None, AFFINITY],
        [make_pod().name("pod1").labels({"foo": ""}).node("nodeA").obj()],
    ),
    Case(
        "Test incoming pod's host-scoped anti-affinity (fast path)",
        make_pod().pod_anti_affinity_exists("foo", HOSTNAME, REQUIRED).obj(),
        [node("nodeA", {HOSTNAME: "nodeA"}), node("nodeB", {HOSTNAME: "nodeB"})],
        [ANTI, None],
        [make_pod().name("pod1").labels({"foo": ""}).node("nodeA").obj()],
    ),
]


@pytest.mark.parametrize("case", MULTIPLE_NODES, ids=lambda c: c.name[:90])
def test_required_affinity_multiple_nodes(case: Case) -> None:
    """TestRequiredAffinityMultipleNodes."""
    assert run(case) == case.want


def test_multiple_affinity_terms_require_single_matching_pod() -> None:
    """TestMultipleAffinityTermsRequireSingleMatchingPod: one existing pod must match every term; the
    pod matching its own terms goes anywhere while no pod matches them."""
    pod = (
        make_pod()
        .name("pod-1")
        .namespace("default")
        .pod_affinity_in("foo", HOSTNAME, ["bar"], REQUIRED)
        .pod_affinity_in("baz", HOSTNAME, ["qux"], REQUIRED)
        .obj()
    )
    pod_a = make_pod().name("podA").namespace("default").label("foo", "bar").node("node-1").obj()
    pod_b = make_pod().name("podB").namespace("default").label("baz", "qux").node("node-1").obj()
    pod_c = (
        make_pod()
        .name("podC")
        .namespace("default")
        .label("foo", "bar")
        .label("baz", "qux")
        .node("node-3")
        .obj()
    )
    nodes = [make_node().name(n).label(HOSTNAME, n).obj() for n in ("node-1", "node-2", "node-3")]
    assert run(Case("", pod, nodes, [], [pod_a, pod_b, pod_c])) == [AFFINITY, AFFINITY, None]
    pod["metadata"]["labels"] = {"foo": "bar", "baz": "qux"}
    assert run(Case("", pod, nodes, [], [pod_a, pod_b]))[0] is None


# -- TestGetTPMapMatchingIncomingAffinityAntiAffinity -----------------------------------------------


def normal(*label_keys: str) -> Obj:
    p = make_pod().name("normal").node("nodeA")
    for k in label_keys:
        p.label(k, "")
    return p.obj()


@pytest.mark.parametrize(
    ("name", "existing_pods", "pod", "want_affinity", "want_anti"),
    [
        ("nil test", [], make_pod().name("aaa-normal").obj(), {}, {}),
        (
            "no pod has label that violates incoming pod's affinity and anti-affinity",
            [normal("bbb")],
            make_pod()
            .pod_affinity_exists("aaa", HOSTNAME, REQUIRED)
            .pod_anti_affinity_exists("aaa", HOSTNAME, REQUIRED)
            .obj(),
            {},
            {},
        ),
        (
            "existing pod matches incoming pod's affinity and anti-affinity - single term case",
            [normal("aaa")],
            make_pod()
            .pod_affinity_exists("aaa", HOSTNAME, REQUIRED)
            .pod_anti_affinity_exists("aaa", HOSTNAME, REQUIRED)
            .obj(),
            {(HOSTNAME, "nodeA"): 1},
            {(HOSTNAME, "nodeA"): 1},
        ),
        (
            "existing pod matches incoming pod's affinity and anti-affinity - multiple terms case",
            [normal("aaa", "bbb")],
            make_pod()
            .pod_affinity_exists("aaa", HOSTNAME, REQUIRED)
            .pod_affinity_exists("bbb", HOSTNAME, REQUIRED)
            .pod_anti_affinity_exists("aaa", HOSTNAME, REQUIRED)
            .obj(),
            {(HOSTNAME, "nodeA"): 2},
            {(HOSTNAME, "nodeA"): 1},
        ),
        (
            "existing pod not match incoming pod's affinity but matches anti-affinity",
            [normal("aaa")],
            make_pod()
            .pod_affinity_exists("aaa", HOSTNAME, REQUIRED)
            .pod_affinity_exists("bbb", HOSTNAME, REQUIRED)
            .pod_anti_affinity_exists("aaa", HOSTNAME, REQUIRED)
            .pod_anti_affinity_exists("bbb", HOSTNAME, REQUIRED)
            .obj(),
            {},
            {(HOSTNAME, "nodeA"): 1},
        ),
        (
            "incoming pod's anti-affinity has more than one term - existing pod violates partial term - "
            "case 1",
            [normal("aaa", "bbb")],
            make_pod()
            .pod_affinity_exists("aaa", HOSTNAME, REQUIRED)
            .pod_affinity_exists("ccc", HOSTNAME, REQUIRED)
            .pod_anti_affinity_exists("aaa", HOSTNAME, REQUIRED)
            .pod_anti_affinity_exists("ccc", HOSTNAME, REQUIRED)
            .obj(),
            {},
            {(HOSTNAME, "nodeA"): 1},
        ),
    ],
)
def test_get_tp_map_matching_incoming_affinity_anti_affinity(
    name: str,
    existing_pods: list[Obj],
    pod: Obj,
    want_affinity: dict[tuple[str, str], int],
    want_anti: dict[tuple[str, str], int],
) -> None:
    """TestGetTPMapMatchingIncomingAffinityAntiAffinity (the counts PreFilter makes)."""
    st = snapshot(existing_pods, [node("nodeA", {HOSTNAME: "nodeA"})])
    pre = pre_filter(st, pod)
    if pre is None:
        assert want_affinity == want_anti == {}
        return
    assert (pre.affinity, pre.anti_affinity) == (want_affinity, want_anti)


# -- TestPreFilterStateAddRemovePod ----------------------------------------------------------------

LABEL1 = {"region": "r1", "zone": "z11"}
LABEL2 = {"region": "r1", "zone": "z12"}
LABEL3 = {"region": "r2", "zone": "z21"}
FOO_BAR = [
    {
        "labelSelector": {"matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}]},
        "topologyKey": "region",
    }
]
COMPLEX = [
    {
        "labelSelector": {"matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar", "buzz"]}]},
        "topologyKey": "region",
    },
    {
        "labelSelector": {
            "matchExpressions": [
                {"key": "service", "operator": "NotIn", "values": ["bar", "security", "test"]}
            ]
        },
        "topologyKey": "zone",
    },
]


def affine(
    name: str,
    node_name: str | None,
    labels: dict[str, str] | None,
    anti: list[Obj],
    affinity: tuple[Obj, ...] | list[Obj] = (),
) -> Obj:
    p = make_pod().name(name).labels(labels or {})
    if node_name:
        p.node(node_name)
    out = p.obj()
    aff: Obj = {}
    if anti:
        aff["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": anti}
    if affinity:
        aff["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": list(affinity)}
    if aff:
        out["spec"]["affinity"] = aff
    return out


SEL1 = {"foo": "bar"}
ABC_NODES = [node("nodeA", LABEL1), node("nodeB", LABEL2), node("nodeC", LABEL3)]


@pytest.mark.parametrize(
    ("name", "pending", "existing_pods", "added", "nodes", "want_anti", "want_affinity"),
    [
        (
            "preFilterState anti-affinity terms are updated correctly after adding and removing a pod",
            affine("pending", None, SEL1, FOO_BAR),
            [affine("p1", "nodeA", SEL1, []), affine("p2", "nodeC", None, FOO_BAR)],
            affine("addedPod", "nodeB", SEL1, FOO_BAR),
            ABC_NODES,
            {("region", "r1"): 2},
            {},
        ),
        (
            "preFilterState anti-affinity terms are updated correctly after adding and removing a pod "
            "(complex)",
            affine("pending", None, SEL1, COMPLEX),
            [affine("p1", "nodeA", SEL1, []), affine("p2", "nodeC", None, FOO_BAR)],
            affine("addedPod", "nodeA", SEL1, COMPLEX),
            ABC_NODES,
            {("region", "r1"): 2, ("zone", "z11"): 2, ("zone", "z21"): 1},
            {},
        ),
        (
            "preFilterState matching pod affinity and anti-affinity are updated correctly after adding and "
            "removing a pod",
            affine("pending", None, SEL1, [], COMPLEX),
            [affine("p1", "nodeA", SEL1, []), affine("p2", "nodeC", None, FOO_BAR, COMPLEX)],
            affine("addedPod", "nodeA", SEL1, COMPLEX),
            ABC_NODES,
            {},
            {("region", "r1"): 2, ("zone", "z11"): 2},
        ),
        (
            "preFilterState anti-affinity terms with both hostname and non-hostname are updated correctly "
            "after adding "
            "and removing a pod",
            affine("pending", None, SEL1, FOO_BAR),
            [affine("p1", "nodeA", SEL1, [])],
            affine("addedPod", "nodeA", SEL1, [*FOO_BAR, {**FOO_BAR[0], "topologyKey": HOSTNAME}]),
            [node("nodeA", {**LABEL1, HOSTNAME: "nodeA"}), node("nodeB", {**LABEL2, HOSTNAME: "nodeB"})],
            {("region", "r1"): 2},
            {},
        ),
    ],
)
def test_pre_filter_state_add_remove_pod(
    name: str,
    pending: Obj,
    existing_pods: list[Obj],
    added: Obj,
    nodes: list[Obj],
    want_anti: dict[tuple[str, str], int],
    want_affinity: dict[tuple[str, str], int],
) -> None:
    """TestPreFilterStateAddRemovePod: adding a pod to the state of the others is the state of all;
    removing it again (or from the state of all) is the state of the others."""

    def state_of(pods: list[Obj]) -> tuple[PreFilterState, ClusterState]:
        st = snapshot(pods, nodes)
        pre = pre_filter(st, pending)
        assert pre is not None
        return pre, st

    def counts(s: PreFilterState) -> tuple[dict[tuple[str, str], int], ...]:
        return (s.existing_anti_affinity, s.affinity, s.anti_affinity)

    all_pods, _ = state_of([*existing_pods, added])
    original, st = state_of(existing_pods)
    info = st.nodes.by_name[added["spec"]["nodeName"]]
    assert FILTER.add_pod is not None
    assert FILTER.remove_pod is not None
    with_added = FILTER.add_pod(original, pod_info(added, info.node["metadata"]["name"]), info)
    assert (with_added.anti_affinity, with_added.affinity) == (want_anti, want_affinity)
    assert counts(with_added) == counts(all_pods)
    assert counts(FILTER.remove_pod(with_added, pod_info(added), info)) == counts(original)
    assert counts(FILTER.remove_pod(all_pods, pod_info(added), info)) == counts(original)
    assert counts(original) != counts(all_pods)  # add_pod left the original alone


def test_an_unreadable_selector_fails_pre_filter() -> None:
    """TestRequiredAffinitySingleNode's "fails PreFilter" cases, with an operator (rather than a label
    value) the apiserver would refuse: PreFilter fails with ``parsing pod: ...``."""
    pod = (
        make_pod()
        .pod_affinity("zone", {"matchExpressions": [{"key": "a", "operator": "Gt"}]}, REQUIRED)
        .obj()
    )
    with pytest.raises(PreFilterFailed, match=r"^parsing pod: "):
        FILTER.pre_filter(snapshot([], [NODE1]), pod)
