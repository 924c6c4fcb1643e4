"""``PodInfo`` and ``AffinityTerm`` as upstream's ``NewPodInfo`` and ``AffinityTerm.Matches`` read a
pod: a term's namespaces (its own by default), its namespace selector, its label selector."""

from __future__ import annotations

import pytest

from tests.core.podfactory import pod
from webhook.core.api.labelselector import LabelSelectorError
from webhook.core.api.objects import Obj
from webhook.core.cluster.podinfo import affinity_term, pod_info

SELECTOR = {"matchLabels": {"app": "x"}}


# kube-scheduler framework/types_test.go, TestGetAffinityTerms and AffinityTerm.Matches.
@pytest.mark.parametrize(
    ("term", "ns", "ns_labels", "want"),
    [
        ({"labelSelector": SELECTOR}, "own", {}, True),  # no namespaces, no selector: the pod's own
        ({"labelSelector": SELECTOR}, "other", {}, False),
        ({"labelSelector": SELECTOR, "namespaces": ["a", "b"]}, "b", {}, True),
        ({"labelSelector": SELECTOR, "namespaces": ["a", "b"]}, "own", {}, False),
        ({"labelSelector": SELECTOR, "namespaceSelector": {}}, "anywhere", {}, True),  # {}: every namespace
        (
            {"labelSelector": SELECTOR, "namespaceSelector": {"matchLabels": {"team": "t"}}},
            "x",
            {"team": "t"},
            True,
        ),
        (
            {"labelSelector": SELECTOR, "namespaceSelector": {"matchLabels": {"team": "t"}}},
            "x",
            {"team": "u"},
            False,
        ),
        ({"labelSelector": SELECTOR, "namespaceSelector": {"matchLabels": {"team": "t"}}}, "own", {}, False),
        (
            {
                "labelSelector": SELECTOR,
                "namespaces": ["b"],
                "namespaceSelector": {"matchLabels": {"t": "1"}},
            },
            "b",
            {},
            True,
        ),
        ({"namespaces": ["own"]}, "own", {}, False),  # a null label selector matches no pod
    ],
)
def test_an_affinity_term_matches_namespaces_then_labels(
    term: Obj, ns: str, ns_labels: dict[str, str], want: bool
) -> None:
    t = affinity_term("own", term)
    assert t.matches(ns, {"app": "x"}, ns_labels) is want


def affine(required: list[Obj], preferred: list[Obj]) -> Obj:
    p = pod("p", namespace="own", nodeName="n1")
    p["metadata"]["labels"] = {"app": "x"}
    section = {
        "requiredDuringSchedulingIgnoredDuringExecution": required,
        "preferredDuringSchedulingIgnoredDuringExecution": preferred,
    }
    p["spec"]["affinity"] = {"podAffinity": section, "podAntiAffinity": section}
    return p


def test_a_pod_info_reads_every_kind_of_term_with_weights() -> None:
    info = pod_info(
        affine(
            [{"labelSelector": SELECTOR, "topologyKey": "zone"}],
            [{"weight": 5, "podAffinityTerm": {"labelSelector": SELECTOR, "topologyKey": "rack"}}],
        ),
        "n1",
    )
    assert (info.uid, info.namespace, info.node, info.labels) == ("uid-p", "own", "n1", {"app": "x"})
    assert info.has_affinity
    assert [t.topology_key for t in info.required_affinity + info.required_anti_affinity] == ["zone", "zone"]
    assert [(w.weight, w.term.topology_key) for w in info.preferred_anti_affinity] == [(5, "rack")]


def test_a_pod_without_affinity_shares_empty_terms_and_its_labels() -> None:
    p = pod("plain")
    p["metadata"]["labels"] = {"a": "b"}
    info = pod_info(p)
    assert not info.has_affinity
    assert info.labels is p["metadata"]["labels"]
    assert info.required_affinity == ()
    assert info.preferred_affinity == ()


def test_an_unreadable_term_fails_the_pod_being_scheduled_and_is_left_out_of_others() -> None:
    bad = {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Bad"}]}, "topologyKey": "z"}
    good = {"labelSelector": SELECTOR, "topologyKey": "zone"}
    p = affine([bad, good], [])
    with pytest.raises(LabelSelectorError):
        pod_info(p, strict=True)
    assert [t.topology_key for t in pod_info(p).required_affinity] == ["zone"]
