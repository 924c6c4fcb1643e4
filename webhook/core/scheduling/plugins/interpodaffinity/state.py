"""InterPodAffinity's state: the incoming pod's terms, read once, and the counts per topology pair
(``topologyToMatchedTermCount``) PreFilter makes and Filter reads.

The incoming pod's ``namespaceSelector`` is merged into its namespaces (upstream's
``mergeAffinityTermNamespacesIfNotEmpty``): a selector that is not empty becomes the names of the
namespaces it matches now, and then matches nothing itself; an empty one (``{}``) stays, and matches
every namespace. So matching an incoming term against another pod needs no namespace labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ....api.labelselector import NOTHING
from ....cluster.namespaces import Namespaces
from ....cluster.placedpods import PlacedPods
from ....cluster.podinfo import AffinityTerm, PodInfo, WeightedAffinityTerm

#: (topology key, value) -> how many terms matched there.
Counts = dict[tuple[str, str], int]


def merge_namespaces(term: AffinityTerm, namespaces: Namespaces) -> AffinityTerm:
    """``mergeAffinityTermNamespacesIfNotEmpty``, for a term of the incoming pod."""
    if term.namespace_selector.empty:
        return term
    listed = term.namespaces | namespaces.matching(term.namespace_selector)
    return replace(term, namespaces=frozenset(listed), namespace_selector=NOTHING)


def merge_weighted(
    terms: tuple[WeightedAffinityTerm, ...], namespaces: Namespaces
) -> list[WeightedAffinityTerm]:
    return [WeightedAffinityTerm(merge_namespaces(w.term, namespaces), w.weight) for w in terms]


def pods_matching(placed: PlacedPods, term: AffinityTerm) -> list[PodInfo]:
    """The placed pods an incoming term (namespaces merged) matches."""
    everywhere = term.namespace_selector.empty
    return list(placed.matching(term.selector, None if everywhere else term.namespaces))


def matches_all(terms: list[AffinityTerm], pod: PodInfo) -> bool:
    """``podMatchesAllAffinityTerms``: at least one term, and the pod matches every one."""
    if not terms:
        return False
    return all(t.matches(pod.namespace, pod.labels, None) for t in terms)


def update(counts: Counts, node_labels: Mapping[str, str], topology_key: str, value: int) -> None:
    """``topologyToMatchedTermCount.update``: an entry down to zero is deleted."""
    tv = node_labels.get(topology_key)
    if tv is None:
        return
    pair = (topology_key, tv)
    n = counts.get(pair, 0) + value
    if n == 0:
        counts.pop(pair, None)
    else:
        counts[pair] = n


@dataclass(slots=True)
class PreFilterState:
    """``preFilterState`` (InterPodAffinityHostnameFastPath off, its 1.37 default)."""

    pod: PodInfo
    namespace_labels: Mapping[str, str]
    affinity_terms: list[AffinityTerm]
    anti_affinity_terms: list[AffinityTerm]
    #: Existing pods' required anti-affinity terms the incoming pod matches.
    existing_anti_affinity: Counts
    #: Existing pods matching every required affinity term of the incoming pod, per term.
    affinity: Counts
    #: Existing pods matching each required anti-affinity term of the incoming pod.
    anti_affinity: Counts
    #: The incoming pod matches all its own affinity terms (the first of a group may go anywhere).
    self_affinity: bool

    def with_pod(self, other: PodInfo, node_labels: Mapping[str, str], multiplier: int) -> PreFilterState:
        """``updateWithPod`` on a copy (upstream's ``Clone`` then ``AddPod``/``RemovePod``)."""
        out = replace(
            self,
            existing_anti_affinity=dict(self.existing_anti_affinity),
            affinity=dict(self.affinity),
            anti_affinity=dict(self.anti_affinity),
        )
        pod = self.pod
        for t in other.required_anti_affinity:
            if t.matches(pod.namespace, pod.labels, self.namespace_labels):
                update(out.existing_anti_affinity, node_labels, t.topology_key, multiplier)
        if matches_all(self.affinity_terms, other):
            for t in self.affinity_terms:
                update(out.affinity, node_labels, t.topology_key, multiplier)
        for t in self.anti_affinity_terms:
            if t.matches(other.namespace, other.labels, None):
                update(out.anti_affinity, node_labels, t.topology_key, multiplier)
        return out
