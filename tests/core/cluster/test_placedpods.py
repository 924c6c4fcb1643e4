"""``PlacedPods``: what its indexes answer is what a scan of every pod answers (upstream visits every
pod of every node), after any sequence of adds and removes."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.core.api.labelselector import LabelSelector, label_selector
from webhook.core.cluster.placedpods import (
    KINDS,
    PREFERRED_ANTI_AFFINITY,
    REQUIRED_ANTI_AFFINITY,
    PlacedPods,
)
from webhook.core.cluster.podinfo import AffinityTerm, PodInfo, WeightedAffinityTerm

KEYS = ["app", "tier", "team"]
VALUES = ["a", "b", "c"]
NAMESPACES = ["ns1", "ns2"]

labels_st = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3)
expression_st = st.one_of(
    st.builds(
        lambda k, op, vs: {"key": k, "operator": op, "values": vs},
        st.sampled_from(KEYS),
        st.sampled_from(["In", "NotIn"]),
        st.lists(st.sampled_from(VALUES), min_size=1, max_size=2, unique=True),
    ),
    st.builds(
        lambda k, op: {"key": k, "operator": op},
        st.sampled_from(KEYS),
        st.sampled_from(["Exists", "DoesNotExist"]),
    ),
)
selector_obj_st = st.one_of(
    st.none(),
    st.builds(
        lambda ml, me: {"matchLabels": ml, "matchExpressions": me},
        st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2),
        st.lists(expression_st, max_size=2),
    ),
)
selector_st = selector_obj_st.map(label_selector)
term_st = st.builds(
    lambda sel, nss: AffinityTerm(frozenset(nss), sel, "zone"),
    selector_st,
    st.lists(st.sampled_from(NAMESPACES), min_size=1, max_size=2, unique=True),
)


@st.composite
def pod_infos(draw: Any) -> list[PodInfo]:
    out = []
    for i in range(draw(st.integers(0, 12))):
        terms = draw(st.lists(term_st, max_size=2))
        out.append(
            PodInfo(
                f"uid-{i}",
                draw(st.sampled_from(NAMESPACES)),
                draw(labels_st),
                f"n{i % 3}",
                required_anti_affinity=tuple(terms),
                preferred_anti_affinity=tuple(WeightedAffinityTerm(t, 1) for t in terms[:1]),
            )
        )
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pods=pod_infos(),
    removed=st.sets(st.integers(0, 12)),
    selector=selector_st,
    namespaces=st.one_of(st.none(), st.sets(st.sampled_from(NAMESPACES))),
    incoming=labels_st,
)
def test_the_indexes_answer_what_a_scan_of_every_pod_answers(
    pods: list[PodInfo],
    removed: set[int],
    selector: LabelSelector,
    namespaces: set[str] | None,
    incoming: dict[str, str],
) -> None:
    placed = PlacedPods()
    for p in pods:
        placed.add(p)
    for i in removed:
        placed.remove(f"uid-{i}")
    live = [p for i, p in enumerate(pods) if i not in removed]
    assert len(placed) == len(live)

    found = sorted(p.uid for p in placed.matching(selector, namespaces))
    scan = sorted(
        p.uid
        for p in live
        if (namespaces is None or p.namespace in namespaces) and selector.matches(p.labels)
    )
    assert found == scan

    for kind, terms_of in (
        (REQUIRED_ANTI_AFFINITY, lambda p: p.required_anti_affinity),
        (PREFERRED_ANTI_AFFINITY, lambda p: [w.term for w in p.preferred_anti_affinity]),
    ):
        candidates = {p.uid for p in placed.with_terms(kind, incoming)}
        must = {p.uid for p in live if any(t.matches("ns1", incoming, None) for t in terms_of(p))}
        assert must <= candidates
        assert candidates <= {p.uid for p in live if terms_of(p)}
        assert placed.any_with(kind) == any(terms_of(p) for p in live)
    assert placed.with_affinity == sum(1 for p in live if p.has_affinity)


def test_a_pod_added_again_replaces_itself_and_removing_it_empties_every_index() -> None:
    placed = PlacedPods()
    term = AffinityTerm(frozenset(["ns1"]), label_selector({"matchLabels": {"app": "a"}}), "zone")
    first = PodInfo("u", "ns1", {"app": "a"}, "n1", required_anti_affinity=(term,))
    second = PodInfo("u", "ns2", {"app": "b"}, "n2")
    placed.add(first)
    placed.add(second)
    assert [p.node for p in placed.matching(label_selector({}), None)] == ["n2"]
    assert list(placed.matching(label_selector({"matchLabels": {"app": "a"}}), None)) == []
    assert not placed.any_with(REQUIRED_ANTI_AFFINITY)
    placed.remove("u")
    assert len(placed) == 0
    assert placed._by_label == {}
    assert placed._by_namespace == {}
    assert all(not placed.any_with(k) for k in KINDS)
