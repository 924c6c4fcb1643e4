"""Node selectors, tolerations and pod node affinity (``component-helpers/scheduling/corev1``):
used both for which slices a node reaches and by the pod's NodeAffinity and TaintToleration."""

from __future__ import annotations

from typing import Any

import pytest

from tests.core.podfactory import node, pod
from webhook.core.api.nodematch import (
    SelectorError,
    node_selector_matches,
    pod_node_affinity_matches,
    requirement_matches,
    term_matches,
    tolerates,
    untolerated,
)
from webhook.core.api.objects import Obj

N = node("worker-1", labels={"zone": "a", "gpus": "4", "flag": ""})


def expr(key: str, op: str, *values: str) -> Obj:
    r: Obj = {"key": key, "operator": op}
    if values:
        r["values"] = list(values)
    return r


def selector(*terms: Obj) -> Obj:
    return {"nodeSelectorTerms": list(terms)}


# -- requirements -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("req", "matches"),
    [
        (expr("zone", "In", "a", "b"), True),
        (expr("zone", "In", "b"), False),
        (expr("missing", "In", "a"), False),
        (expr("zone", "NotIn", "b"), True),
        (expr("zone", "NotIn", "a"), False),
        (expr("missing", "NotIn", "a"), True),  # an absent label is not in any set
        (expr("zone", "Exists"), True),
        (expr("flag", "Exists"), True),  # present with an empty value
        (expr("missing", "Exists"), False),
        (expr("missing", "DoesNotExist"), True),
        (expr("zone", "DoesNotExist"), False),
        (expr("gpus", "Gt", "3"), True),
        (expr("gpus", "Gt", "4"), False),
        (expr("gpus", "Lt", "5"), True),
        (expr("gpus", "Lt", "4"), False),
        (expr("gpus", "Gt", "-1"), True),
        (expr("zone", "Gt", "1"), False),  # a label that is not an integer never compares
        (expr("missing", "Lt", "1"), False),
    ],
)
def test_match_expression_operators(req: Obj, matches: bool) -> None:
    assert requirement_matches(req, {"zone": "a", "gpus": "4", "flag": ""}) is matches


@pytest.mark.parametrize(
    "req",
    [
        expr("zone", "In"),
        expr("zone", "NotIn"),
        expr("gpus", "Gt"),
        expr("gpus", "Gt", "1", "2"),
        expr("gpus", "Lt", "one"),
        expr("gpus", "Gt", str(2**63)),  # beyond int64
        expr("zone", "Equals", "a"),
        {"operator": "Exists"},
    ],
)
def test_unreadable_requirements_raise(req: Obj) -> None:
    with pytest.raises(SelectorError):
        requirement_matches(req, {"zone": "a", "gpus": "4"})


# -- terms and selectors ------------------------------------------------------------------------------


def test_a_term_needs_all_its_requirements() -> None:
    assert term_matches(N, {"matchExpressions": [expr("zone", "In", "a"), expr("gpus", "Gt", "2")]})
    assert not term_matches(N, {"matchExpressions": [expr("zone", "In", "a"), expr("gpus", "Gt", "8")]})


def test_an_empty_term_matches_nothing() -> None:
    assert not term_matches(N, {})
    assert not term_matches(N, {"matchExpressions": [], "matchFields": []})


@pytest.mark.parametrize(
    ("req", "matches"),
    [
        (expr("metadata.name", "In", "worker-1"), True),
        (expr("metadata.name", "In", "worker-2"), False),
        (expr("metadata.name", "NotIn", "worker-2"), True),
    ],
)
def test_match_fields_read_the_node_name(req: Obj, matches: bool) -> None:
    assert term_matches(N, {"matchFields": [req]}) is matches


def test_match_fields_support_only_metadata_name() -> None:
    with pytest.raises(SelectorError, match=r"metadata\.uid"):
        term_matches(N, {"matchFields": [expr("metadata.uid", "In", "x")]})


def test_fields_and_expressions_of_one_term_both_apply() -> None:
    term = {
        "matchExpressions": [expr("zone", "In", "a")],
        "matchFields": [expr("metadata.name", "In", "other")],
    }
    assert not term_matches(N, term)


def test_a_selector_matches_when_any_term_does() -> None:
    miss = {"matchExpressions": [expr("zone", "In", "z")]}
    hit = {"matchFields": [expr("metadata.name", "In", "worker-1")]}
    assert node_selector_matches(N, selector(miss, hit))
    assert not node_selector_matches(N, selector(miss))
    assert not node_selector_matches(N, selector())
    assert not node_selector_matches(N, None)
    assert not node_selector_matches(N, {})


# -- tolerations -----------------------------------------------------------------------------------------


TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("toleration", "ok"),
    [
        ({"key": "dedicated", "operator": "Equal", "value": "gpu"}, True),
        ({"key": "dedicated", "value": "gpu"}, True),  # Equal is the default operator
        ({"key": "dedicated", "operator": "Equal", "value": "cpu"}, False),
        ({"key": "dedicated", "operator": "Equal"}, False),  # the empty value is a value too
        ({"key": "dedicated", "operator": "Exists"}, True),
        ({"key": "other", "operator": "Exists"}, False),
        ({"operator": "Exists"}, True),  # an empty key with Exists tolerates everything
        ({"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}, True),
        ({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "dedicated", "operator": "Exists", "effect": ""}, True),  # empty effect: every effect
        ({"key": "dedicated", "operator": "Lt", "value": "gpu"}, False),
    ],
)
def test_tolerates(toleration: Obj, ok: bool) -> None:
    assert tolerates(toleration, TAINT) is ok


def test_equal_treats_a_missing_value_as_empty() -> None:
    assert tolerates({"key": "k", "operator": "Equal"}, {"key": "k", "effect": "NoSchedule"})


def test_untolerated_returns_the_first_hard_taint_nobody_tolerates() -> None:
    soft = {"key": "soft", "effect": "PreferNoSchedule"}
    hard1 = {"key": "a", "effect": "NoSchedule"}
    hard2 = {"key": "b", "effect": "NoExecute"}
    assert untolerated([soft, hard1, hard2], []) is hard1
    assert untolerated([soft, hard1, hard2], [{"key": "a", "operator": "Exists"}, "junk"]) is hard2
    assert untolerated([soft, hard1, hard2], [{"operator": "Exists"}]) is None
    assert untolerated([soft, "junk"], []) is None
    assert untolerated([soft], [], effects=("PreferNoSchedule",)) is soft


# -- pod node affinity ------------------------------------------------------------------------------------


def required(*terms: Obj) -> dict[str, Any]:
    return {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": selector(*terms)}}
    }


def test_a_pod_without_constraints_matches_any_node() -> None:
    assert pod_node_affinity_matches(pod("p"), N)


def test_node_selector_needs_every_label() -> None:
    assert pod_node_affinity_matches(pod("p", nodeSelector={"zone": "a", "gpus": "4"}), N)
    assert not pod_node_affinity_matches(pod("p", nodeSelector={"zone": "a", "gpus": "8"}), N)
    assert not pod_node_affinity_matches(pod("p", nodeSelector={"disk": "ssd"}), N)


def test_required_affinity_terms_are_ored_and_combined_with_the_node_selector() -> None:
    hit = {"matchExpressions": [expr("zone", "In", "a")]}
    miss = {"matchExpressions": [expr("zone", "In", "b")]}
    assert pod_node_affinity_matches(pod("p", **required(miss, hit)), N)
    assert not pod_node_affinity_matches(pod("p", **required(miss)), N)
    assert not pod_node_affinity_matches(pod("p", nodeSelector={"zone": "b"}, **required(hit)), N)


def test_an_unreadable_required_affinity_matches_no_node() -> None:
    assert not pod_node_affinity_matches(
        pod("p", **required({"matchExpressions": [expr("zone", "Near", "a")]})), N
    )


def test_an_empty_required_affinity_does_not_constrain() -> None:
    p = pod("p", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}})
    assert pod_node_affinity_matches(p, N)


def test_an_unreadable_term_does_not_hide_a_later_matching_term() -> None:
    bad = {"matchExpressions": [expr("zone", "In")]}  # In without values
    good = {"matchExpressions": [expr("zone", "In", "a")]}
    assert pod_node_affinity_matches(pod("p", **required(good, bad)), N)  # holds already
    assert pod_node_affinity_matches(pod("p", **required(bad, good)), N)
