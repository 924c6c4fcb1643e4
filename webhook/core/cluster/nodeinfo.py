"""Upstream's NodeInfo: a node's allocatable resources and hard taints, and what bound and assumed
pods request from it (resources and host ports). ``Nodes`` keeps them by name, with the names in
order (the ring a decision walks), two indexes for the device-plugin path (per extended resource,
the nodes that advertise it and, in name order, those with some of it left) and, per topology key
pod placement asked about, the nodes by the key's value."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import count
from typing import Final

from ..api.objects import Obj, as_dict, as_list, labels, name, spec, status
from ..api.podresources import PODS, Units
from ..api.quantity import try_parse
from .gates import kubelet_gate
from .podvolumes import MountedVolumes

HostPort = tuple[str, str, int]  # (protocol, host IP, port)

#: The kubelet's ``maxPods`` default: a node whose allocatable says nothing of ``pods`` holds this many.
DEFAULT_MAX_PODS: Final = 110

_STAMPS: Final = count(1)


def _new_stamp() -> int:
    """A stamp no NodeInfo has had (process-wide, so a new or copied NodeInfo never repeats one)."""
    return next(_STAMPS)


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
    #: Pod uid -> its volumes, for the pods with any a volume plugin counts (``podvolumes``).
    volumes: dict[str, MountedVolumes] = field(default_factory=dict)
    #: Told which requested resources changed (``Nodes`` keeps its index of room with it).
    watch: Callable[[str, Iterable[str]], None] | None = None
    #: Told of a pod's volumes as it comes (+1) and goes (-1) (``Nodes`` counts the claims in use).
    watch_volumes: Callable[[MountedVolumes, int], None] | None = None
    #: The node's labels (the node object's own dict), read per node by pod placement's filters.
    labels: dict[str, str] = field(default_factory=dict)
    #: Schedulable, no hard taint, kubelet gate on: what the usual-node check asks first, read in
    #: one attribute for every node a decision visits (kept by ``refresh`` and ``set_kubelet_gate``).
    plain: bool = True
    #: Allocatable ``pods`` (kube-scheduler's default when the node does not say).
    max_pods: int = DEFAULT_MAX_PODS
    #: Allocatable minus requested, per resource the node has or a pod requests: the room every
    #: filter reads, once per resource for every node a decision visits (kept with ``requested``).
    free: Units = field(default_factory=dict)
    #: Renewed at the end of every change above and of every change of the node's device counts
    #: (``FreeDevices``): a verdict on the node remembered with its stamp holds while the stamp does
    #: (``scheduling.usual``). Never the same on two NodeInfos, snapshots included.
    stamp: int = field(default_factory=_new_stamp)
    #: The cell of the node's run of names (``NodeBlocks``), given the node's every new stamp.
    cell: list[int] | None = None

    def changed(self) -> None:
        """Something a decision reads changed (called at the end of the change): a new stamp,
        which the node's run of names (``NodeBlocks``) is told too."""
        stamp = self.stamp = _new_stamp()
        cell = self.cell
        if cell is not None:
            cell[0] = stamp

    @classmethod
    def of(cls, node: Obj) -> NodeInfo:
        info = cls(node, {}, frozenset())
        info.refresh(node)
        return info

    def refresh(self, node: Obj) -> None:
        """A new version of the node object; what pods request stays."""
        self.node = node
        self.labels = labels(node)
        self.allocatable, self.allocatable_names = node_allocatable(node)
        self.unschedulable = spec(node).get("unschedulable") is True
        self.hard_taints = hard_taints(node)
        self.max_pods = self.allocatable.get(PODS, DEFAULT_MAX_PODS)
        self.set_kubelet_gate(kubelet_gate(node))
        self._recount_free()
        self.changed()

    def _recount_free(self) -> None:
        free = dict(self.allocatable)
        for k, v in self.requested.items():
            free[k] = free.get(k, 0) - v
        self.free = free

    def set_kubelet_gate(self, on: bool) -> None:
        """The kubelet's gate, and ``plain`` with it (``Nodes.set_kubelet_gate`` also keeps its index)."""
        self.kubelet_gate = on
        self.plain = on and not (self.unschedulable or self.hard_taints)
        self.changed()

    def snapshot(self) -> NodeInfo:
        """Upstream's ``NodeInfo.Snapshot``: a copy whose pods can change without touching this one
        (a decision's what-if, the nominated pods added), watched by nobody."""
        return NodeInfo(
            self.node,
            self.allocatable,
            self.allocatable_names,
            self.unschedulable,
            self.hard_taints,
            self.kubelet_gate,
            dict(self.requested),
            dict(self.pods),
            dict(self.nonzero_requested),
            dict(self.nonzero_pods),
            dict(self.host_ports),
            dict(self.volumes),
            labels=self.labels,
            plain=self.plain,
            max_pods=self.max_pods,
            free=dict(self.free),
        )

    def add_pod(
        self,
        pod_uid: str,
        reqs: Units,
        ports: list[HostPort],
        nonzero: Units | None = None,
        volumes: MountedVolumes | None = None,
    ) -> None:
        if pod_uid in self.pods:
            self.remove_pod(pod_uid)
        self.pods[pod_uid] = reqs
        if ports:
            self.host_ports[pod_uid] = ports
        if volumes is not None:
            self.volumes[pod_uid] = volumes
            if self.watch_volumes is not None:
                self.watch_volumes(volumes, 1)
        free = self.free
        for k, v in reqs.items():
            self.requested[k] = self.requested.get(k, 0) + v
            free[k] = free.get(k, 0) - v
        if nonzero:
            self.nonzero_pods[pod_uid] = nonzero
            for k, v in nonzero.items():
                self.nonzero_requested[k] = self.nonzero_requested.get(k, 0) + v
        self.changed()
        if self.watch is not None:
            self.watch(name(self.node), reqs)

    def remove_pod(self, pod_uid: str) -> None:
        reqs = self.pods.pop(pod_uid, None)
        self.host_ports.pop(pod_uid, None)
        volumes = self.volumes.pop(pod_uid, None)
        if volumes is not None and self.watch_volumes is not None:
            self.watch_volumes(volumes, -1)
        for k, v in self.nonzero_pods.pop(pod_uid, {}).items():
            self.nonzero_requested[k] = self.nonzero_requested.get(k, 0) - v
        if reqs is None:
            self.changed()
            return
        free = self.free
        for k, v in reqs.items():
            self.requested[k] = self.requested.get(k, 0) - v
            free[k] = free.get(k, 0) + v
        self.changed()
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


#: Nodes per run of ``NodeBlocks``.
BLOCK: Final = 32


@dataclass(frozen=True, slots=True)
class NodeBlocks:
    """The sorted node names cut into runs of ``BLOCK`` (``firsts``: each run's first name), each
    run with a cell holding the newest stamp of its nodes (``NodeInfo.changed`` writes it). What a
    decision works out from a run's nodes holds while the run's cell is the same list with the same
    stamp in it: a search reads one cell instead of each of the run's nodes (``scheduling.usual``).
    Made anew, with new cells, once a node comes or goes."""

    firsts: list[str]
    cells: list[list[int]]
    size: int

    @classmethod
    def of(cls, names: list[str], by_name: Mapping[str, NodeInfo], size: int = BLOCK) -> NodeBlocks:
        firsts, cells = [], []
        for i in range(0, len(names), size):
            cell = [_new_stamp()]
            for n in names[i : i + size]:
                by_name[n].cell = cell
            firsts.append(names[i])
            cells.append(cell)
        return cls(firsts, cells, size)

    def span(self, ring: list[str], b: int) -> tuple[int, int]:
        """Where run ``b``'s names are in ``ring`` (sorted): ``ring[lo:hi]``."""
        firsts = self.firsts
        lo = bisect_left(ring, firsts[b])
        return lo, bisect_left(ring, firsts[b + 1], lo) if b + 1 < len(firsts) else len(ring)


class Nodes(Mapping[str, NodeInfo]):
    """Every node's ``NodeInfo`` by name; the names in order; per extended resource the nodes whose
    allocatable has it above zero (``serving``) and, in name order, those where allocatable minus
    what pods request is above zero (``with_room``), kept up as pods come and go; and how many pods
    on them use each PersistentVolumeClaim (``claim_in_use``: upstream's ``usedPVCRefCounts``)."""

    def __init__(self) -> None:
        #: Node name -> NodeInfo (read it, never change it: ``upsert``/``remove`` keep the indexes).
        self.by_name: dict[str, NodeInfo] = {}
        self._names: list[str] = []
        self._serving: dict[str, set[str]] = {}
        self._room: dict[str, list[str]] = {}
        self._has_room: dict[str, set[str]] = {}
        self._claim_refs: dict[tuple[str, str], int] = {}
        self._topology: dict[str, dict[str, set[str]]] = {}  # key -> value -> nodes, keys asked for
        self._with_key: dict[str, set[str]] = {}  # key -> nodes with it, keys asked for
        #: Nodes whose kubelet lacks ``DRAExtendedResource`` (a cluster mid-upgrade has a few, an
        #: old one all): what the native path must keep away from.
        self.ungated: set[str] = set()
        self._blocks: NodeBlocks | None = None
        #: Nodes per run of ``blocks`` (a setting: runs of another size are made on next use).
        self.block_size = BLOCK

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

    def blocks(self) -> NodeBlocks:
        """The names in runs with their cells (``NodeBlocks``), made on first use after a node came
        or went."""
        blocks = self._blocks
        if blocks is None or blocks.size != self.block_size:
            blocks = self._blocks = NodeBlocks.of(self._names, self.by_name, self.block_size)
        return blocks

    def upsert(self, node: Obj) -> NodeChange:
        n = name(node)
        info = self.by_name.get(n)
        if info is None:
            info = self.by_name[n] = NodeInfo.of(node)
            info.watch = self._requested_changed
            info.watch_volumes = self._volumes_changed
            insort(self._names, n)
            self._blocks = None
            change = NodeChange(added=True, relabelled=False)
            self._label(n, {}, labels(node))
        else:
            change = NodeChange(added=False, relabelled=labels(info.node) != labels(node))
            if change.relabelled:
                self._label(n, labels(info.node), labels(node))
            info.refresh(node)
        self._index(n, info.allocatable_names, info.allocatable)
        self._gate_indexed(n, info.kubelet_gate)
        return change

    def set_kubelet_gate(self, node_name: str, on: bool) -> None:
        """The node's kubelet gate as the caller knows it better than the node's status tells
        (``draxr plan`` in rewrite mode: no kubelet has it), its index kept."""
        self.by_name[node_name].set_kubelet_gate(on)
        self._gate_indexed(node_name, on)

    def _gate_indexed(self, node_name: str, on: bool) -> None:
        if on:
            self.ungated.discard(node_name)
        else:
            self.ungated.add(node_name)

    def remove(self, node_name: str) -> NodeInfo | None:
        self._index(node_name, (), {})
        self.ungated.discard(node_name)
        info = self.by_name.pop(node_name, None)
        if info is not None:
            self._label(node_name, labels(info.node), {})
            info.watch = None
            for volumes in info.volumes.values():
                self._volumes_changed(volumes, -1)
            info.watch_volumes = None
            del self._names[bisect_left(self._names, node_name)]
            self._blocks = None  # new runs, new cells: nothing remembered of the old ones holds
            self._requested_changed(node_name, list(self._has_room))
        return info

    def serving(self, resource: str) -> set[str]:
        """Nodes whose allocatable has ``resource`` > 0 (the device-plugin path)."""
        return self._serving.get(resource, set())

    def with_room(self, resource: str) -> list[str]:
        """Nodes, sorted, whose allocatable ``resource`` exceeds what their pods request (a shared
        list: do not change it)."""
        return self._room.get(resource, [])

    def claim_in_use(self, claim_namespace: str, claim_name: str) -> bool:
        """Whether a pod counted on some node has a ``persistentVolumeClaim`` volume of this claim
        (``StorageInfos().IsPVCUsedByPods``)."""
        return (claim_namespace, claim_name) in self._claim_refs

    def _volumes_changed(self, volumes: MountedVolumes, delta: int) -> None:
        refs = self._claim_refs
        for claim in volumes.claims:
            k = (volumes.namespace, claim)
            n = refs.get(k, 0) + delta
            if n > 0:
                refs[k] = n
            else:
                refs.pop(k, None)

    def topology(self, key: str) -> dict[str, set[str]]:
        """The key's values -> the nodes labelled so (indexed from the first ask on, then kept up;
        shared: do not change it)."""
        found = self._topology.get(key)
        if found is None:
            found = self._topology[key] = {}
            holders = self._with_key[key] = set()
            for n, info in self.by_name.items():
                value = labels(info.node).get(key)
                if value is not None:
                    found.setdefault(value, set()).add(n)
                    holders.add(n)
        return found

    def with_label(self, key: str) -> set[str]:
        """The nodes that carry the label ``key`` (shared: do not change it)."""
        self.topology(key)
        return self._with_key[key]

    def _label(self, node_name: str, old: Mapping[str, str], new: Mapping[str, str]) -> None:
        for key, by_value in self._topology.items():
            was, now = old.get(key), new.get(key)
            if was == now:
                continue
            holders = self._with_key[key]
            if was is not None:
                nodes = by_value[was]
                nodes.discard(node_name)
                if not nodes:
                    del by_value[was]
                holders.discard(node_name)
            if now is not None:
                by_value.setdefault(now, set()).add(node_name)
                holders.add(node_name)

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
            room = info is not None and node_name in self._serving.get(r, ()) and info.free.get(r, 0) > 0
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
