"""Upstream's ``PodInfo``: a pod with its pod affinity terms read once (``framework.NewPodInfo``),
what InterPodAffinity and PodTopologySpread read of the pods they meet.

An ``AffinityTerm`` (``fwk.AffinityTerm``) is a ``PodAffinityTerm`` read: its namespaces (the
pod's own when the term names none and has no namespace selector), its label selector and namespace
selector (``labelselector``: null matches nothing, ``{}`` everything), its topology key. The
``matchLabelKeys`` and ``mismatchLabelKeys`` of a term are not read: kube-apiserver merged them into
the label selector when it created the pod (``api/labelkeys``), and kube-scheduler 1.37 reads only
the selector.

A ``PodInfo`` holds references to the pod's own labels, never copies, and shares one empty tuple
for every list of terms a pod does not have, so a pod without affinity costs one small object.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..api.labelselector import NOTHING, LabelSelector, LabelSelectorError, label_selector
from ..api.objects import Obj, as_dict, as_list, is_terminating, labels, namespace, spec, uid

REQUIRED: Final = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED: Final = "preferredDuringSchedulingIgnoredDuringExecution"


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    namespaces: frozenset[str]
    selector: LabelSelector
    topology_key: str
    namespace_selector: LabelSelector = NOTHING

    def matches(
        self, pod_namespace: str, pod_labels: Mapping[str, str], ns_labels: Mapping[str, str] | None
    ) -> bool:
        """``AffinityTerm.Matches``: the pod's namespace is one of the term's, or its namespace's
        labels match the namespace selector; then its labels match the selector."""
        if pod_namespace in self.namespaces or self.namespace_selector.matches(ns_labels):
            return self.selector.matches(pod_labels)
        return False


@dataclass(frozen=True, slots=True)
class WeightedAffinityTerm:
    term: AffinityTerm
    weight: int


@dataclass(slots=True)
class PodInfo:
    """A pod as the pod-placement plugins read it. ``node``: where it runs, is assumed or is
    nominated ("" for the pod being scheduled)."""

    uid: str
    namespace: str
    labels: Mapping[str, str]
    node: str = ""
    terminating: bool = False
    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedAffinityTerm, ...] = ()

    @property
    def has_affinity(self) -> bool:
        """Upstream's ``PodsWithAffinity``: any pod (anti-)affinity term at all."""
        return bool(
            self.required_affinity
            or self.required_anti_affinity
            or self.preferred_affinity
            or self.preferred_anti_affinity
        )


def affinity_term(pod_namespace: str, term: Any) -> AffinityTerm:
    """``newAffinityTerm``; raises ``LabelSelectorError``."""
    t = as_dict(term)
    listed = frozenset(str(n) for n in as_list(t.get("namespaces")))
    ns_selector = t.get("namespaceSelector")
    if not listed and ns_selector is None:
        listed = frozenset([pod_namespace])
    return AffinityTerm(
        listed,
        label_selector(t.get("labelSelector")),
        str(t.get("topologyKey") or ""),
        label_selector(ns_selector),
    )


def _required(pod_namespace: str, section: Obj, strict: bool) -> tuple[AffinityTerm, ...]:
    out: list[AffinityTerm] = []
    for term in as_list(section.get(REQUIRED)):
        try:
            out.append(affinity_term(pod_namespace, term))
        except LabelSelectorError:
            if strict:
                raise
    return tuple(out) if out else ()


def _preferred(pod_namespace: str, section: Obj, strict: bool) -> tuple[WeightedAffinityTerm, ...]:
    out: list[WeightedAffinityTerm] = []
    for weighted in as_list(section.get(PREFERRED)):
        w = as_dict(weighted)
        try:
            term = affinity_term(pod_namespace, w.get("podAffinityTerm"))
        except LabelSelectorError:
            if strict:
                raise
            continue
        weight = w.get("weight")
        out.append(WeightedAffinityTerm(term, weight if isinstance(weight, int) else 0))
    return tuple(out) if out else ()


def pod_info(pod: Obj, node: str = "", *, strict: bool = False) -> PodInfo:
    """``NewPodInfo``. ``strict``: a term that cannot be read raises ``LabelSelectorError`` (the
    pod being scheduled: upstream's PreFilter fails with it); otherwise it is left out (a pod the
    apiserver admitted has none)."""
    ns = namespace(pod)
    info = PodInfo(uid(pod), ns, labels(pod), node, is_terminating(pod))
    affinity = as_dict(spec(pod).get("affinity"))
    if not affinity:
        return info
    pa = as_dict(affinity.get("podAffinity"))
    if pa:
        info.required_affinity = _required(ns, pa, strict)
        info.preferred_affinity = _preferred(ns, pa, strict)
    anti = as_dict(affinity.get("podAntiAffinity"))
    if anti:
        info.required_anti_affinity = _required(ns, anti, strict)
        info.preferred_anti_affinity = _preferred(ns, anti, strict)
    return info
