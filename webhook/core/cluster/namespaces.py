"""Namespaces' labels: what a pod affinity term's ``namespaceSelector`` matches (upstream's
namespace lister in InterPodAffinity). Only the labels are kept; a namespace the cluster has not
shown has none (``GetNamespaceLabelsSnapshot``)."""

from __future__ import annotations

from collections.abc import Mapping

from ..api.labelselector import LabelSelector
from ..api.objects import Obj, labels, name

_NONE: Mapping[str, str] = {}


class Namespaces:
    def __init__(self) -> None:
        self._labels: dict[str, dict[str, str]] = {}

    def __len__(self) -> int:
        return len(self._labels)

    def upsert(self, namespace: Obj) -> None:
        self._labels[name(namespace)] = labels(namespace)

    def remove(self, namespace_name: str) -> None:
        self._labels.pop(namespace_name, None)

    def labels_of(self, namespace_name: str) -> Mapping[str, str]:
        return self._labels.get(namespace_name, _NONE)

    def matching(self, selector: LabelSelector) -> set[str]:
        """The names of the namespaces the selector matches (``nsLister.List(selector)``)."""
        return {n for n, ls in self._labels.items() if selector.matches(ls)}
