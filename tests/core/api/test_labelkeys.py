"""kube-apiserver's merge of ``matchLabelKeys``/``mismatchLabelKeys`` into label selectors at pod
creation (pkg/registry/core/pod/strategy_test.go: Test_mutatePodAffinity,
Test_mutateTopologySpreadConstraints), which ``draxr plan`` applies to pods read from files."""

from __future__ import annotations

import copy
from typing import Any

from webhook.core.api.labelkeys import with_label_keys
from webhook.core.api.objects import Obj


def term(**extra: Any) -> Obj:
    return {"labelSelector": {"matchLabels": {"region": "Asia"}}, **extra}


def affine_pod(make: Any) -> Obj:
    """Every kind of term (required and preferred, affinity and anti-affinity), made by ``make``."""
    return {
        "metadata": {"labels": {"country": "Japan", "city": "Kyoto"}},
        "spec": {
            "affinity": {
                kind: {
                    "requiredDuringSchedulingIgnoredDuringExecution": [make()],
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 1, "podAffinityTerm": make()}
                    ],
                }
                for kind in ("podAffinity", "podAntiAffinity")
            }
        },
    }


def all_terms(pod: Obj) -> list[Obj]:
    out = []
    for section in pod["spec"]["affinity"].values():
        out.extend(section["requiredDuringSchedulingIgnoredDuringExecution"])
        out.extend(w["podAffinityTerm"] for w in section["preferredDuringSchedulingIgnoredDuringExecution"])
    return out


def test_match_label_keys_are_merged_with_in_and_mismatch_label_keys_with_not_in() -> None:
    """Test_mutatePodAffinity, "matchLabelKeys are merged into labelSelector with In and
    mismatchLabelKeys are merged with NotIn"."""
    pod = affine_pod(lambda: term(matchLabelKeys=["country"], mismatchLabelKeys=["city"]))
    before = copy.deepcopy(pod)
    out = with_label_keys(pod)
    assert pod == before  # the pod given is not changed
    for t in all_terms(out):
        assert t["labelSelector"] == {
            "matchLabels": {"region": "Asia"},
            "matchExpressions": [
                {"key": "country", "operator": "In", "values": ["Japan"]},
                {"key": "city", "operator": "NotIn", "values": ["Kyoto"]},
            ],
        }
        assert t["matchLabelKeys"] == ["country"]
        assert t["mismatchLabelKeys"] == ["city"]


def test_match_label_keys_are_ignored_when_the_label_selector_is_nil() -> None:
    """Test_mutatePodAffinity, "matchLabelKeys is ignored if the labelSelector is nil"."""
    pod = affine_pod(lambda: {"matchLabelKeys": ["country"], "mismatchLabelKeys": ["city"]})
    assert all("labelSelector" not in t for t in all_terms(with_label_keys(pod)))


def test_keys_the_pod_does_not_carry_add_nothing_and_a_pod_without_keys_is_itself() -> None:
    pod = affine_pod(lambda: term(matchLabelKeys=["planet"]))
    assert all(
        t["labelSelector"] == {"matchLabels": {"region": "Asia"}} for t in all_terms(with_label_keys(pod))
    )
    plain = affine_pod(term)
    assert with_label_keys(plain) is plain


def test_spread_match_label_keys_are_merged_with_in() -> None:
    """Test_mutateTopologySpreadConstraints, "matchLabelKeys are merged into labelSelector with In"
    and "matchLabelKeys is ignored if the labelSelector is nil"."""
    pod: Obj = {
        "metadata": {"labels": {"foo": "a", "bar": "b"}},
        "spec": {
            "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": "zone", "labelSelector": {}, "matchLabelKeys": ["foo", "baz"]},
                {"maxSkew": 1, "topologyKey": "zone", "matchLabelKeys": ["foo"]},
            ]
        },
    }
    out = with_label_keys(pod)
    first, second = out["spec"]["topologySpreadConstraints"]
    assert first["labelSelector"] == {"matchExpressions": [{"key": "foo", "operator": "In", "values": ["a"]}]}
    assert "labelSelector" not in second
