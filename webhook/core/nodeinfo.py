"""Upstream's NodeInfo: a node's allocatable resources and hard taints, and what bound and assumed
pods request from it (resources and host ports). ``Nodes`` keeps them by name, with an index of
the nodes that advertise an extended resource (the device-plugin path)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from .gates import kubelet_gate
from .objects import Obj, as_dict, as_list, labels, name, spec, status
from .podresources import Units
from .quantity import try_parse

HostPort = tuple[str, str, int]  # (protocol, host IP, port)


@dataclass(slots=True)
class NodeInfo:
    """A node's allocatable resources and what bound/assumed pods request from it."""

    node: Obj
    allocatable: Units
    allocatable_names: frozenset[str]
    unschedulable: bool = False
    hard_taints: list[Obj] = field(default_factory=list)  # NoSchedule/NoExecute, readiness included
    kubelet_gate: bool = True  # DRAExtendedResource on in the node's kubelet (core/gates.py)
    requested: Units = field(default_factory=dict)
    pods: dict[str, Units] = field(default_factory=dict)  # pod uid -> requests
    # kube-scheduler's NonZeroRequested (cpu and memory; 100m and 200Mi for a missing request).
    nonzero_requested: Units = field(default_factory=dict)
    nonzero_pods: dict[str, Units] = field(default_factory=dict)
    host_ports: dict[str, list[HostPort]] = field(default_factory=dict)

    @classmethod
    def of(cls, node: Obj) -> NodeInfo:
        info = cls(node, {}, frozenset())
        info.refresh(node)
        return info

    def refresh(self, node: Obj) -> None:
        """A new version of the node object; what pods request stays."""
        self.node = node
        self.allocatable, self.allocatable_names = node_allocatable(node)
        self.unschedulable = spec(node).get("unschedulable") is True
        self.hard_taints = hard_taints(node)
        self.kubelet_gate = kubelet_gate(node)

    def add_pod(self, pod_uid: str, reqs: Units, ports: list[HostPort], nonzero: Units | None = None) -> None:
        if pod_uid in self.pods:
            self.remove_pod(pod_uid)
        self.pods[pod_uid] = reqs
        if ports:
            self.host_ports[pod_uid] = ports
        for k, v in reqs.items():
            self.requested[k] = self.requested.get(k, 0) + v
        if nonzero:
            self.nonzero_pods[pod_uid] = nonzero
            for k, v in nonzero.items():
                self.nonzero_requested[k] = self.nonzero_requested.get(k, 0) + v

    def remove_pod(self, pod_uid: str) -> None:
        reqs = self.pods.pop(pod_uid, None)
        self.host_ports.pop(pod_uid, None)
        for k, v in self.nonzero_pods.pop(pod_uid, {}).items():
            self.nonzero_requested[k] = self.nonzero_requested.get(k, 0) - v
        if reqs is None:
            return
        for k, v in reqs.items():
            self.requested[k] = self.requested.get(k, 0) - v


def hard_taints(node: Obj) -> list[Obj]:
    """The node's NoSchedule/NoExecute taints, plus the one the node lifecycle controller would add
    for a node whose Ready condition is not True."""
    taints = [
        t
        for t in as_list(spec(node).get("taints"))
        if isinstance(t, dict) and t.get("effect") in ("NoSchedule", "NoExecute")
    ]
    for cond in as_list(status(node).get("conditions")):
        c = as_dict(cond)
        if c.get("type") != "Ready" or c.get("status") == "True":
            continue
        key = (
            "node.kubernetes.io/not-ready" if c.get("status") == "False" else "node.kubernetes.io/unreachable"
        )
        if not any(t.get("key") == key for t in taints):
            taints.append({"key": key, "effect": "NoSchedule"})
    return taints


def node_allocatable(node: Obj) -> tuple[Units, frozenset[str]]:
    """``status.allocatable`` in the units the engine counts (cpu in millicores, the rest rounded up)."""
    raw = as_dict(status(node).get("allocatable"))
    out: Units = {}
    for k, v in raw.items():
        q = try_parse(v)
        if q is not None:
            out[k] = max(q.milli() if k == "cpu" else q.ceil(), 0)
    return out, frozenset(out)


def host_ports(pod: Obj) -> list[HostPort]:
    ports: list[HostPort] = []
    for section in ("initContainers", "containers"):
        for c in as_list(spec(pod).get(section)):
            for p in as_list(as_dict(c).get("ports")):
                pd = as_dict(p)
                hp = pd.get("hostPort")
                if isinstance(hp, int) and hp > 0:
                    ports.append((str(pd.get("protocol") or "TCP"), str(pd.get("hostIP") or "0.0.0.0"), hp))
    return ports


@dataclass(frozen=True, slots=True)
class NodeChange:
    """What an upsert changed, so derived views know what to recompute."""

    added: bool
    relabelled: bool


class Nodes(Mapping[str, NodeInfo]):
    """Every node's ``NodeInfo`` by name, and per extended resource the nodes whose allocatable
    has it above zero."""

    def __init__(self) -> None:
        self._infos: dict[str, NodeInfo] = {}
        self._serving: dict[str, set[str]] = {}

    def __getitem__(self, node_name: str) -> NodeInfo:
        return self._infos[node_name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._infos)

    def __len__(self) -> int:
        return len(self._infos)

    def upsert(self, node: Obj) -> NodeChange:
        n = name(node)
        info = self._infos.get(n)
        if info is None:
            info = self._infos[n] = NodeInfo.of(node)
            change = NodeChange(added=True, relabelled=False)
        else:
            change = NodeChange(added=False, relabelled=labels(info.node) != labels(node))
            info.refresh(node)
        self._index(n, info.allocatable_names, info.allocatable)
        return change

    def remove(self, node_name: str) -> NodeInfo | None:
        self._index(node_name, (), {})
        return self._infos.pop(node_name, None)

    def serving(self, resource: str) -> set[str]:
        """Nodes whose allocatable has ``resource`` > 0 (the device-plugin path)."""
        return self._serving.get(resource, set())

    def _index(self, node_name: str, names: Iterable[str], alloc: Units) -> None:
        for nodes in self._serving.values():
            nodes.discard(node_name)
        for r in names:
            if "/" in r and alloc.get(r, 0) > 0:
                self._serving.setdefault(r, set()).add(node_name)
