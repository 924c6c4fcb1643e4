"""The pods that count on nodes (bound and assumed), as InterPodAffinity and PodTopologySpread look
for them: upstream iterates every pod of every node (``NodeInfo.Pods``) or of the nodes that hold
pods with affinity (``havePodsWithAffinityNodeInfoList``); draxr answers the same questions from
indexes, so that a decision costs what the pods it is about cost, not the cluster's pods.

* ``matching(selector, namespaces)``: the pods a label selector matches in those namespaces, from
  the index of labels (key -> value -> pods) when the selector requires a label (``In``,
  ``Exists``), else from the index of namespaces;
* ``with_terms(kind, labels)``: the pods with terms of one kind (``REQUIRED_ANTI_AFFINITY``, ...)
  that a pod with these labels might match: each term is indexed by the first label its selector
  requires (``In``: each value; ``Exists``: the key), or kept aside when it requires none.

A pod's ``PodInfo`` is kept with the node it counts on; a node the cluster does not show (a pod bound
to a node not seen yet, or since removed) is left out by the callers, as upstream's snapshot
leaves out a NodeInfo without its Node. Every index holds uids; each pod costs one entry per label,
one for its namespace and one per term.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Final

from ..api.labelselector import EXISTS, IN, LabelSelector
from .podinfo import AffinityTerm, PodInfo

REQUIRED_AFFINITY: Final = "required_affinity"
REQUIRED_ANTI_AFFINITY: Final = "required_anti_affinity"
PREFERRED_AFFINITY: Final = "preferred_affinity"
PREFERRED_ANTI_AFFINITY: Final = "preferred_anti_affinity"
KINDS: Final = (REQUIRED_AFFINITY, REQUIRED_ANTI_AFFINITY, PREFERRED_AFFINITY, PREFERRED_ANTI_AFFINITY)

_Index = dict[str, dict[str, set[str]]]  # key -> value -> uids


def _put(index: _Index, key: str, value: str, pod_uid: str) -> None:
    index.setdefault(key, {}).setdefault(value, set()).add(pod_uid)


def _drop(index: _Index, key: str, value: str, pod_uid: str) -> None:
    by_value = index.get(key)
    if by_value is None:
        return
    uids = by_value.get(value)
    if uids is None:
        return
    uids.discard(pod_uid)
    if not uids:
        del by_value[value]
        if not by_value:
            del index[key]


def _terms(info: PodInfo, kind: str) -> Iterable[AffinityTerm]:
    if kind == REQUIRED_AFFINITY:
        return info.required_affinity
    if kind == REQUIRED_ANTI_AFFINITY:
        return info.required_anti_affinity
    if kind == PREFERRED_AFFINITY:
        return (w.term for w in info.preferred_affinity)
    return (w.term for w in info.preferred_anti_affinity)


#: Where a term is filed: (key, value) for ``In``, (key, None) for ``Exists``, None when its
#: selector requires no label.
_Slot = tuple[str, str | None] | None


def _slots(term: AffinityTerm) -> list[_Slot]:
    if term.selector.nothing:
        return []  # matches no pod: filed nowhere
    for r in term.selector.requirements:
        if r.operator == IN:
            return [(r.key, v) for v in r.values]
        if r.operator == EXISTS:
            return [(r.key, None)]
    return [None]


class TermIndex:
    """The pods with terms of one kind, by the first label each term requires."""

    def __init__(self) -> None:
        self._by_label: _Index = {}
        self._by_key: dict[str, set[str]] = {}
        self._any: set[str] = set()
        self.pods = 0  # pods with terms of this kind

    def file(self, info: PodInfo, terms: Iterable[AffinityTerm], add: bool) -> None:
        seen = False
        for term in terms:
            seen = True
            for slot in _slots(term):
                if slot is None:
                    (self._any.add if add else self._any.discard)(info.uid)
                elif slot[1] is None:
                    if add:
                        self._by_key.setdefault(slot[0], set()).add(info.uid)
                    else:
                        uids = self._by_key.get(slot[0])
                        if uids is not None:
                            uids.discard(info.uid)
                            if not uids:
                                del self._by_key[slot[0]]
                elif add:
                    _put(self._by_label, slot[0], slot[1], info.uid)
                else:
                    _drop(self._by_label, slot[0], slot[1], info.uid)
        if seen:
            self.pods += 1 if add else -1

    def candidates(self, pod_labels: Mapping[str, str]) -> set[str]:
        """The uids of pods with a term a pod with these labels might match."""
        found = set(self._any)
        by_label = self._by_label
        by_key = self._by_key
        for k, v in pod_labels.items():
            by_value = by_label.get(k)
            if by_value is not None:
                uids = by_value.get(v)
                if uids:
                    found |= uids
            uids = by_key.get(k)
            if uids:
                found |= uids
        return found


class PlacedPods:
    def __init__(self) -> None:
        #: Pod uid -> its PodInfo (read it, never change it: ``add``/``remove`` keep the indexes).
        self.by_uid: dict[str, PodInfo] = {}
        self._by_label: _Index = {}
        self._by_namespace: dict[str, set[str]] = {}
        self._terms: dict[str, TermIndex] = {kind: TermIndex() for kind in KINDS}
        #: How many pods have any (anti-)affinity term (upstream's ``PodsWithAffinity``, summed).
        self.with_affinity = 0

    def __len__(self) -> int:
        return len(self.by_uid)

    def add(self, info: PodInfo) -> None:
        self.remove(info.uid)
        self.by_uid[info.uid] = info
        self._by_namespace.setdefault(info.namespace, set()).add(info.uid)
        for k, v in info.labels.items():
            _put(self._by_label, k, v, info.uid)
        if info.has_affinity:
            self.with_affinity += 1
            for kind, index in self._terms.items():
                index.file(info, _terms(info, kind), add=True)

    def remove(self, pod_uid: str) -> PodInfo | None:
        info = self.by_uid.pop(pod_uid, None)
        if info is None:
            return None
        uids = self._by_namespace.get(info.namespace)
        if uids is not None:
            uids.discard(pod_uid)
            if not uids:
                del self._by_namespace[info.namespace]
        for k, v in info.labels.items():
            _drop(self._by_label, k, v, pod_uid)
        if info.has_affinity:
            self.with_affinity -= 1
            for kind, index in self._terms.items():
                index.file(info, _terms(info, kind), add=False)
        return info

    def any_with(self, kind: str) -> bool:
        """Whether some pod has terms of this kind (upstream's lists of nodes with such pods)."""
        return self._terms[kind].pods > 0

    def with_terms(self, kind: str, pod_labels: Mapping[str, str]) -> Iterator[PodInfo]:
        """The pods with terms of ``kind``, at least one of which a pod with ``pod_labels`` might
        match (the caller matches each term)."""
        index = self._terms[kind]
        if index.pods == 0:
            return
        by_uid = self.by_uid
        for pod_uid in index.candidates(pod_labels):
            yield by_uid[pod_uid]

    def matching(self, selector: LabelSelector, namespaces: Collection[str] | None) -> Iterator[PodInfo]:
        """The pods in ``namespaces`` (None: any) whose labels the selector matches."""
        if selector.nothing:
            return
        best: list[set[str]] | None = None
        size = 0
        for r in selector.requirements:
            if r.operator not in (IN, EXISTS):
                continue
            by_value = self._by_label.get(r.key)
            if not by_value:
                return  # no pod carries the key: none matches
            if r.operator == IN:
                sets = [by_value[v] for v in r.values if v in by_value]
            else:
                sets = list(by_value.values())
            n = sum(len(s) for s in sets)
            if best is None or n < size:
                best, size = sets, n
        if namespaces is not None:
            sets = [self._by_namespace[ns] for ns in namespaces if ns in self._by_namespace]
            n = sum(len(s) for s in sets)
            if best is None or n < size:
                best, size = sets, n
        by_uid = self.by_uid
        if best is None:  # no label required, every namespace: every pod
            best = [set(by_uid)]
        for uids in best:  # disjoint: one value per key, one namespace per pod
            for pod_uid in uids:
                info = by_uid[pod_uid]
                if (namespaces is None or info.namespace in namespaces) and selector.matches(info.labels):
                    yield info
