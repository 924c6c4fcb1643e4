"""Upstream's test builders (``pkg/scheduler/testing/wrappers.go``: ``st.MakePod()``,
``st.MakeNode()``, ``st.MakeLabelSelector()``) in Python, so that upstream's table tests read the
same here, and a snapshot of nodes and pods to run a plugin on (``cache.NewSnapshot``).

Upstream's pods often have no name and no uid; here each pod gets a uid of its own (the index keeps
pods by uid), which changes nothing a plugin reads.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable
from typing import Any, Final

from webhook.core.api.objects import Obj
from webhook.core.cluster.state import ClusterState

REQUIRED: Final = "required"  # st.PodAffinityWithRequiredReq
PREFERRED: Final = "preferred"  # st.PodAffinityWithPreferredReq
REQUIRED_PREFERRED: Final = "required+preferred"  # st.PodAffinityWithRequiredPreferredReq
DO_NOT_SCHEDULE: Final = "DoNotSchedule"
SCHEDULE_ANYWAY: Final = "ScheduleAnyway"
HOSTNAME: Final = "kubernetes.io/hostname"
ZONE: Final = "topology.kubernetes.io/zone"

_uids = itertools.count()


class LabelSelector:
    """``st.MakeLabelSelector()``."""

    def __init__(self) -> None:
        self.s: Obj = {}

    def label(self, k: str, v: str) -> LabelSelector:
        self.s.setdefault("matchLabels", {})[k] = v
        return self

    def _expr(self, k: str, op: str, vals: list[str] | None = None) -> LabelSelector:
        e: Obj = {"key": k, "operator": op}
        if vals is not None:
            e["values"] = list(vals)
        self.s.setdefault("matchExpressions", []).append(e)
        return self

    def in_(self, k: str, vals: list[str]) -> LabelSelector:
        return self._expr(k, "In", vals)

    def not_in(self, k: str, vals: list[str]) -> LabelSelector:
        return self._expr(k, "NotIn", vals)

    def exists(self, k: str) -> LabelSelector:
        return self._expr(k, "Exists")

    def not_exist(self, k: str) -> LabelSelector:
        return self._expr(k, "DoesNotExist")

    def obj(self) -> Obj:
        return copy.deepcopy(self.s)


def make_label_selector() -> LabelSelector:
    return LabelSelector()


class Pod:
    """``st.MakePod()``: a pod in namespace "" (upstream's ``defaultNamespace``) without a name."""

    def __init__(self) -> None:
        self.p: Obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "", "namespace": ""},
            "spec": {"containers": [{"name": "c"}]},
        }

    def name(self, n: str) -> Pod:
        self.p["metadata"]["name"] = n
        return self

    def uid(self, u: str) -> Pod:
        self.p["metadata"]["uid"] = u
        return self

    def namespace(self, ns: str) -> Pod:
        self.p["metadata"]["namespace"] = ns
        return self

    def node(self, n: str) -> Pod:
        self.p["spec"]["nodeName"] = n
        return self

    def label(self, k: str, v: str) -> Pod:
        self.p["metadata"].setdefault("labels", {})[k] = v
        return self

    def labels(self, labels: dict[str, str]) -> Pod:
        for k, v in labels.items():
            self.label(k, v)
        return self

    def priority(self, p: int) -> Pod:
        self.p["spec"]["priority"] = p
        return self

    def nominated_node_name(self, n: str) -> Pod:
        self.p.setdefault("status", {})["nominatedNodeName"] = n
        return self

    def terminating(self) -> Pod:
        self.p["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
        return self

    def req(self, requests: dict[str, Any]) -> Pod:
        self.p["spec"]["containers"][0]["resources"] = {"requests": dict(requests)}
        return self

    def host_port(self, port: int) -> Pod:
        self.p["spec"]["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port}]
        return self

    def node_selector(self, m: dict[str, str]) -> Pod:
        self.p["spec"]["nodeSelector"] = dict(m)
        return self

    def node_affinity_in(self, key: str, vals: list[str]) -> Pod:
        term = {"matchExpressions": [{"key": key, "operator": "In", "values": list(vals)}]}
        self._affinity().setdefault("nodeAffinity", {})["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [term]
        }
        return self

    def node_affinity_not_in(self, key: str, vals: list[str]) -> Pod:
        term = {"matchExpressions": [{"key": key, "operator": "NotIn", "values": list(vals)}]}
        self._affinity().setdefault("nodeAffinity", {})["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [term]
        }
        return self

    def toleration(self, key: str) -> Pod:
        self.p["spec"].setdefault("tolerations", []).append(
            {"key": key, "operator": "Exists", "effect": "NoSchedule"}
        )
        return self

    def _affinity(self) -> Obj:
        affinity: Obj = self.p["spec"].setdefault("affinity", {})
        return affinity

    def _term(self, section: str, topology_key: str, selector: Obj | None, kind: str, weight: int = 1) -> Pod:
        s = self._affinity().setdefault(section, {})
        term: Obj = {"topologyKey": topology_key}
        if selector is not None:
            term["labelSelector"] = selector
        if kind in (REQUIRED, REQUIRED_PREFERRED):
            s.setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).append(copy.deepcopy(term))
        if kind in (PREFERRED, REQUIRED_PREFERRED):
            s.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).append(
                {"weight": weight, "podAffinityTerm": copy.deepcopy(term)}
            )
        return self

    def pod_affinity(self, topology_key: str, selector: Obj | None, kind: str) -> Pod:
        return self._term("podAffinity", topology_key, selector, kind)

    def pod_anti_affinity(self, topology_key: str, selector: Obj | None, kind: str) -> Pod:
        return self._term("podAntiAffinity", topology_key, selector, kind)

    def pod_affinity_exists(self, label_key: str, topology_key: str, kind: str) -> Pod:
        return self.pod_affinity(topology_key, make_label_selector().exists(label_key).obj(), kind)

    def pod_anti_affinity_exists(self, label_key: str, topology_key: str, kind: str) -> Pod:
        return self.pod_anti_affinity(topology_key, make_label_selector().exists(label_key).obj(), kind)

    def pod_affinity_not_exists(self, label_key: str, topology_key: str, kind: str) -> Pod:
        return self.pod_affinity(topology_key, make_label_selector().not_exist(label_key).obj(), kind)

    def pod_affinity_in(self, label_key: str, topology_key: str, vals: list[str], kind: str) -> Pod:
        return self.pod_affinity(topology_key, make_label_selector().in_(label_key, vals).obj(), kind)

    def pod_anti_affinity_in(self, label_key: str, topology_key: str, vals: list[str], kind: str) -> Pod:
        return self.pod_anti_affinity(topology_key, make_label_selector().in_(label_key, vals).obj(), kind)

    def pod_affinity_not_in(self, label_key: str, topology_key: str, vals: list[str], kind: str) -> Pod:
        return self.pod_affinity(topology_key, make_label_selector().not_in(label_key, vals).obj(), kind)

    def pod_anti_affinity_not_in(self, label_key: str, topology_key: str, vals: list[str], kind: str) -> Pod:
        return self.pod_anti_affinity(topology_key, make_label_selector().not_in(label_key, vals).obj(), kind)

    def spread_constraint(
        self,
        max_skew: int,
        topology_key: str,
        mode: str,
        selector: Obj | None,
        min_domains: int | None = None,
        node_affinity_policy: str | None = None,
        node_taints_policy: str | None = None,
        match_label_keys: list[str] | None = None,
    ) -> Pod:
        c: Obj = {"maxSkew": max_skew, "topologyKey": topology_key, "whenUnsatisfiable": mode}
        if selector is not None:
            c["labelSelector"] = selector
        if min_domains is not None:
            c["minDomains"] = min_domains
        if node_affinity_policy is not None:
            c["nodeAffinityPolicy"] = node_affinity_policy
        if node_taints_policy is not None:
            c["nodeTaintsPolicy"] = node_taints_policy
        if match_label_keys is not None:
            c["matchLabelKeys"] = list(match_label_keys)
        self.p["spec"].setdefault("topologySpreadConstraints", []).append(c)
        return self

    def obj(self) -> Obj:
        out = copy.deepcopy(self.p)
        out["metadata"].setdefault("uid", f"test-uid-{next(_uids)}")
        return out


def make_pod() -> Pod:
    return Pod()


class Node:
    """``st.MakeNode()``."""

    def __init__(self) -> None:
        self.n: Obj = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "", "labels": {}}, "spec": {}}

    def name(self, n: str) -> Node:
        self.n["metadata"]["name"] = n
        return self

    def label(self, k: str, v: str) -> Node:
        self.n["metadata"]["labels"][k] = v
        return self

    def labels(self, labels: dict[str, str]) -> Node:
        self.n["metadata"]["labels"].update(labels)
        return self

    def taints(self, taints: list[Obj]) -> Node:
        self.n["spec"]["taints"] = list(taints)
        return self

    def capacity(self, resources: dict[str, Any]) -> Node:
        self.n.setdefault("status", {})["allocatable"] = dict(resources)
        return self

    def obj(self) -> Obj:
        return copy.deepcopy(self.n)


def make_node() -> Node:
    return Node()


def node(name: str, labels: dict[str, str] | None = None) -> Obj:
    """``&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}``."""
    return make_node().name(name).labels(labels or {}).obj()


def namespace(name: str, labels: dict[str, str] | None = None) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}


def snapshot(pods: Iterable[Obj], nodes: Iterable[Obj], namespaces: Iterable[Obj] = ()) -> ClusterState:
    """``cache.NewSnapshot(pods, nodes)`` with the namespaces' informer: every pod counts on its node."""
    st = ClusterState()
    for n in nodes:
        st.apply("Node", n)
    for ns in namespaces:
        st.apply("Namespace", ns)
    for p in pods:
        st.apply("Pod", p)
    return st
