"""The selectors of Services and workload controllers, for PodTopologySpread's system default
constraints: upstream's ``helper.DefaultSelector`` (pkg/scheduler/util/... ``helper/spread.go``).

A pod without ``topologySpreadConstraints`` gets kube-scheduler's two ScheduleAnyway defaults
(hostname 3, zone 5) with this selector: the selectors of the Services in its namespace whose
selector matches it (a Service without a selector matches nothing), merged, and the selector of the
ReplicationController, ReplicaSet or StatefulSet that controls it. Empty: no default constraint.
Only ``metadata`` and ``spec.selector`` are kept of each object (``kube.trim``).
"""

from __future__ import annotations

from typing import Any, Final

from ..api.labelselector import (
    EVERYTHING,
    IN,
    LabelSelector,
    LabelSelectorError,
    Requirement,
    label_selector,
)
from ..api.objects import Obj, as_dict, as_list, labels, name, namespace, spec

#: The kinds ``ClusterState.apply`` keeps here.
WORKLOAD_KINDS: Final = frozenset({"Service", "ReplicationController", "ReplicaSet", "StatefulSet"})
#: A controller's ``apiVersion`` and ``kind`` as its pods' owner reference names them.
_OWNERS: Final = {
    ("v1", "ReplicationController"),
    ("apps/v1", "ReplicaSet"),
    ("apps/v1", "StatefulSet"),
}


class Workloads:
    def __init__(self) -> None:
        #: namespace -> Service name -> its ``spec.selector`` (None: the Service selects nothing).
        self._services: dict[str, dict[str, dict[str, str] | None]] = {}
        #: (kind, namespace, name) -> the controller's ``spec.selector`` as written.
        self._controllers: dict[tuple[str, str, str], Any] = {}

    def upsert(self, kind: str, obj: Obj) -> None:
        selector = spec(obj).get("selector")
        if kind == "Service":
            kept = {str(k): str(v) for k, v in selector.items()} if isinstance(selector, dict) else None
            self._services.setdefault(namespace(obj), {})[name(obj)] = kept
        else:
            self._controllers[(kind, namespace(obj), name(obj))] = selector

    def remove(self, kind: str, obj: Obj) -> None:
        if kind == "Service":
            services = self._services.get(namespace(obj), {})
            services.pop(name(obj), None)
            if not services:
                self._services.pop(namespace(obj), None)
        else:
            self._controllers.pop((kind, namespace(obj), name(obj)), None)

    def default_selector(self, pod: Obj) -> LabelSelector:
        """``DefaultSelector``: the merged label set of the Services selecting the pod, then its
        controller's selector (an RC's label set merged in; a ReplicaSet's or StatefulSet's
        requirements added). A selector that cannot be read adds nothing, as upstream ignores it."""
        ns, pod_labels = namespace(pod), labels(pod)
        label_set: dict[str, str] = {}
        for selector in self._services.get(ns, {}).values():
            if selector is not None and all(pod_labels.get(k) == v for k, v in selector.items()):
                label_set.update(selector)
        owner = _controller(pod)
        key = (owner[0], ns, owner[1]) if owner is not None else None
        if key is None or key not in self._controllers:
            return LabelSelector(_equal(label_set)) if label_set else EVERYTHING
        selector = self._controllers[key]
        if key[0] == "ReplicationController":  # a label set, merged in
            if isinstance(selector, dict):
                label_set.update({str(k): str(v) for k, v in selector.items()})
            return LabelSelector(_equal(label_set)) if label_set else EVERYTHING
        try:  # a ReplicaSet's or StatefulSet's LabelSelector: its requirements added
            other = label_selector(selector)
        except LabelSelectorError:
            other = EVERYTHING
        requirements = _equal(label_set) + (() if other.nothing else other.requirements)
        return LabelSelector(requirements) if requirements else EVERYTHING


def _equal(label_set: dict[str, str]) -> tuple[Requirement, ...]:
    return tuple(Requirement(k, IN, frozenset([v])) for k, v in sorted(label_set.items()))


def _controller(pod: Obj) -> tuple[str, str] | None:
    """``GetControllerOfNoCopy``: the owner reference with ``controller: true``, if it is one of
    the kinds DefaultSelector reads: its kind and name."""
    for ref in as_list(as_dict(pod.get("metadata")).get("ownerReferences")):
        r = as_dict(ref)
        if r.get("controller") is True:
            key = (str(r.get("apiVersion") or ""), str(r.get("kind") or ""))
            return (key[1], str(r.get("name") or "")) if key in _OWNERS else None
    return None
