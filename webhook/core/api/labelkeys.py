"""``matchLabelKeys`` and ``mismatchLabelKeys`` merged into label selectors, as kube-apiserver does
when a pod is created (``pkg/registry/core/pod/strategy.go``, ``PrepareForCreate``).

With MatchLabelKeysInPodAffinity (GA, locked on since 1.33) the apiserver appends, to each pod
(anti-)affinity term with a label selector, ``key In (value)`` for every ``matchLabelKeys`` key
and ``key NotIn (value)`` for every ``mismatchLabelKeys`` key the pod's labels carry; kube-scheduler
1.37 then reads the merged selector and ignores both lists (``newAffinityTerm``). With
MatchLabelKeysInPodTopologySpread and its SelectorMerge (beta, on) it appends ``key In (value)`` to
each spread constraint's selector; kube-scheduler merges the same keys again when it reads the
constraint, which changes nothing a selector matches.

A cluster's pods have been through this; pods read from files (``draxr plan``) have not, so the plan
applies it to them first.
"""

from __future__ import annotations

import copy

from .objects import Obj, as_dict, as_list, labels, spec

_AFFINITY = ("podAffinity", "podAntiAffinity")
_LISTS = ("requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution")


def _terms(pod: Obj) -> list[Obj]:
    affinity = as_dict(spec(pod).get("affinity"))
    out: list[Obj] = []
    for kind in _AFFINITY:
        section = as_dict(affinity.get(kind))
        for term in as_list(section.get(_LISTS[0])):
            out.append(as_dict(term))
        for weighted in as_list(section.get(_LISTS[1])):
            out.append(as_dict(as_dict(weighted).get("podAffinityTerm")))
    return out


def _append(selector: Obj, keys: object, operator: str, pod_labels: dict[str, str]) -> None:
    for key in as_list(keys):
        if isinstance(key, str) and key in pod_labels:
            selector.setdefault("matchExpressions", []).append(
                {"key": key, "operator": operator, "values": [pod_labels[key]]}
            )


def with_label_keys(pod: Obj) -> Obj:
    """The pod as the apiserver stores it; ``pod`` itself when no selector changes."""
    wants = any(t.get("matchLabelKeys") or t.get("mismatchLabelKeys") for t in _terms(pod)) or any(
        as_dict(c).get("matchLabelKeys") for c in as_list(spec(pod).get("topologySpreadConstraints"))
    )
    if not wants:
        return pod
    out = copy.deepcopy(pod)
    pod_labels = labels(out)
    for term in _terms(out):
        selector = term.get("labelSelector")
        if isinstance(selector, dict):  # a null selector matches nothing: left alone
            _append(selector, term.get("matchLabelKeys"), "In", pod_labels)
            _append(selector, term.get("mismatchLabelKeys"), "NotIn", pod_labels)
    for constraint in as_list(spec(out).get("topologySpreadConstraints")):
        selector = as_dict(constraint).get("labelSelector")
        if isinstance(selector, dict):
            _append(selector, constraint.get("matchLabelKeys"), "In", pod_labels)
    return out
