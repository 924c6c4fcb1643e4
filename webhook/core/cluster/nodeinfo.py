"""Upstream's NodeInfo: a node's allocatable resources and hard taints, and what bound and assumed
pods request from it (resources and host ports). ``Nodes`` keeps them by name, with the names in
order (the ring a decision walks) and two indexes for the device-plugin path: per extended
resource, the nodes that advertise it and, in name order, those with some of it left."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from ..api.objects import Obj, as_dict, as_list, labels, name, spec, status
from ..api.podresources import Units
from ..api.quantity import try_parse
from .gates import kubelet_gate

HostPort = tuple[str, str, int]  # (protocol, host IP, port)


@dataclass(slots=True)
class NodeInfo:
    """A node's allocatable resources and what bound/assumed pods request from it."""

    node: Obj
    allocatable: Units
    allocatable_names: frozenset[str]
    unschedulable: bool = False
    hard_taints: list[Obj] = field(default_factory=list)  # NoSchedule/NoExecute, readiness included
    kubelet_gate: bool = True  # DRAExtendedResource on in the node's kubelet (core/cluster/gates.py)
    requested: Units = field(default_factory=dict)
    pods: dict[str, Units] = field(default_factory=dict)  # pod uid -> requests
    # kube-scheduler's NonZeroRequested (cpu and memory; 100m and 200Mi for a missing request).
    nonzero_requested: Units = field(default_factory=dict)
    nonzero_pods: dict[str, Units] = field(default_factory=dict)
    host_ports: dict[str, list[HostPort]] = field(default_factory=dict)
    #: Told which requested resources changed (``Nodes`` keeps its index of room with it).
    watch: Callable[[str, Iterable[str]], None] | None = None

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
        if self.watch is not None:
            self.watch(name(self.node), reqs)

    def remove_pod(self, pod_uid: str) -> None:
        reqs = self.pods.pop(pod_uid, None)
        self.host_ports.pop(pod_uid, None)
        for k, v in self.nonzero_pods.pop(pod_uid, {}).items():
            self.nonzero_requested[k] = self.nonzero_requested.get(k, 0) - v
        if reqs is None:
            return
        for k, v in reqs.items():
            self.requested[k] = self.requested.get(k, 0) - v
        if self.watch is not None:
            self.watch(name(self.node), reqs)


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
    """Every node's ``NodeInfo`` by name; the names in order; per extended resource the nodes whose
    allocatable has it above zero (``serving``) and, in name order, those where allocatable minus
    what pods request is above zero (``with_room``), kept up as pods come and go."""

    def __init__(self) -> None:
        #: Node name -> NodeInfo (read it, never change it: ``upsert``/``remove`` keep the indexes).
        self.by_name: dict[str, NodeInfo] = {}
        self._names: list[str] = []
        self._serving: dict[str, set[str]] = {}
        self._room: dict[str, list[str]] = {}
        self._has_room: dict[str, set[str]] = {}
        #: Nodes whose kubelet lacks ``DRAExtendedResource`` (a cluster mid-upgrade has a few, an
        #: old one all): what the native path must keep away from.
        self.ungated: set[str] = set()

    def __getitem__(self, node_name: str) -> NodeInfo:
        return self.by_name[node_name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.by_name)

    def __len__(self) -> int:
        return len(self.by_name)

    def __contains__(self, node_name: object) -> bool:
        return node_name in self.by_name

    def get(self, node_name: str, default: NodeInfo | None = None) -> NodeInfo | None:  # type: ignore[override]
        return self.by_name.get(node_name, default)

    def names(self) -> list[str]:
        """Every node name, sorted (a shared list: do not change it)."""
        return self._names

    def upsert(self, node: Obj) -> NodeChange:
        n = name(node)
        info = self.by_name.get(n)
        if info is None:
            info = self.by_name[n] = NodeInfo.of(node)
            info.watch = self._requested_changed
            insort(self._names, n)
            change = NodeChange(added=True, relabelled=False)
        else:
            change = NodeChange(added=False, relabelled=labels(info.node) != labels(node))
            info.refresh(node)
        self._index(n, info.allocatable_names, info.allocatable)
        if info.kubelet_gate:
            self.ungated.discard(n)
        else:
            self.ungated.add(n)
        return change

    def remove(self, node_name: str) -> NodeInfo | None:
        self._index(node_name, (), {})
        self.ungated.discard(node_name)
        info = self.by_name.pop(node_name, None)
        if info is not None:
            info.watch = None
            del self._names[bisect_left(self._names, node_name)]
            self._requested_changed(node_name, list(self._has_room))
        return info

    def serving(self, resource: str) -> set[str]:
        """Nodes whose allocatable has ``resource`` > 0 (the device-plugin path)."""
        return self._serving.get(resource, set())

    def with_room(self, resource: str) -> list[str]:
        """Nodes, sorted, whose allocatable ``resource`` exceeds what their pods request (a shared
        list: do not change it)."""
        return self._room.get(resource, [])

    def _index(self, node_name: str, names: Iterable[str], alloc: Units) -> None:
        was = [r for r, nodes in self._serving.items() if node_name in nodes]
        for r in was:
            self._serving[r].discard(node_name)
        now = [r for r in names if "/" in r and alloc.get(r, 0) > 0]
        for r in now:
            self._serving.setdefault(r, set()).add(node_name)
        self._requested_changed(node_name, [*was, *now])

    def _requested_changed(self, node_name: str, resources: Iterable[str]) -> None:
        info = self.by_name.get(node_name)
        for r in resources:
            if "/" not in r:
                continue
            room = (
                info is not None
                and node_name in self._serving.get(r, ())
                and info.allocatable.get(r, 0) - info.requested.get(r, 0) > 0
            )
            members = self._has_room.get(r)
            if room == (members is not None and node_name in members):
                continue
            ring = self._room.setdefault(r, [])
            if room:
                self._has_room.setdefault(r, set()).add(node_name)
                insort(ring, node_name)
            else:
                assert members is not None
                members.discard(node_name)
                del ring[bisect_left(ring, node_name)]
