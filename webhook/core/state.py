"""Cluster state for scheduling decisions, with the indexes that make them fast.

``ClusterState`` holds plain dicts (Nodes, DeviceClasses, ResourceSlices, ResourceClaims, bound
Pods) and derives, incrementally:

* per node, the pools it can reach and, per DeviceClass, its candidate devices in allocation order
  (class selectors evaluated through the CEL engine's caches);
* the set of allocated devices: every non-admin result in any claim's ``status.allocation`` plus
  in-flight reservations (so two decisions never pick the same device before the API catches up);
* per (class, node) the number of free candidates, updated on every allocation change, so Filter
  can skip nodes without enough devices without touching them;
* per node the resources requested by bound and assumed pods.

It performs no I/O and reads no clock; callers serialise access (one lock around it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .cel import CelError, SelectorEngine
from .constants import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from .deviceclasses import ClassResolver
from .objects import (
    Obj,
    annotations_of,
    as_dict,
    as_list,
    controller_ref,
    meta,
    name,
    namespace,
    spec,
    status,
    uid,
)
from .podresources import Units, pod_requests
from .quantity import Quantity, try_parse
from .slices import Device, DeviceKey, Pool, PoolKey, Slice, device_selects_node, gather_pools, parse_slice
from .taintrules import TaintRule, parse_taint_rule

ClaimKey = tuple[str, str]  # (namespace, name)
Candidate = tuple[Device, CelError | None]


def class_selectors(device_class: Obj) -> list[str]:
    out: list[str] = []
    for sel in as_list(spec(device_class).get("selectors")):
        expr = as_dict(as_dict(sel).get("cel")).get("expression")
        out.append(expr if isinstance(expr, str) else "")
    return out


@dataclass(slots=True)
class NodeInfo:
    """A node's allocatable resources and what bound/assumed pods request from it."""

    node: Obj
    allocatable: Units
    allocatable_names: frozenset[str]
    unschedulable: bool = False
    hard_taints: list[Obj] = field(default_factory=list)  # NoSchedule/NoExecute, readiness included
    requested: Units = field(default_factory=dict)
    pods: dict[str, Units] = field(default_factory=dict)  # pod uid -> requests
    host_ports: dict[str, list[tuple[str, str, int]]] = field(default_factory=dict)

    def add_pod(self, pod_uid: str, reqs: Units, ports: list[tuple[str, str, int]]) -> None:
        if pod_uid in self.pods:
            self.remove_pod(pod_uid)
        self.pods[pod_uid] = reqs
        if ports:
            self.host_ports[pod_uid] = ports
        for k, v in reqs.items():
            self.requested[k] = self.requested.get(k, 0) + v

    def remove_pod(self, pod_uid: str) -> None:
        reqs = self.pods.pop(pod_uid, None)
        self.host_ports.pop(pod_uid, None)
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


def _allocatable(node: Obj) -> tuple[Units, frozenset[str]]:
    raw = as_dict(status(node).get("allocatable"))
    out: Units = {}
    for k, v in raw.items():
        q = try_parse(v)
        if q is not None:
            out[k] = max(q.milli() if k == "cpu" else q.ceil(), 0)
    return out, frozenset(out)


def host_ports(pod: Obj) -> list[tuple[str, str, int]]:
    ports: list[tuple[str, str, int]] = []
    for section in ("initContainers", "containers"):
        for c in as_list(spec(pod).get(section)):
            for p in as_list(as_dict(c).get("ports")):
                pd = as_dict(p)
                hp = pd.get("hostPort")
                if isinstance(hp, int) and hp > 0:
                    ports.append((str(pd.get("protocol") or "TCP"), str(pd.get("hostIP") or "0.0.0.0"), hp))
    return ports


class NodeDevices:
    """The devices one node can reach, per class, in allocation order (implements NodeCandidates)."""

    def __init__(self, state: ClusterState, node: Obj, pools: list[Pool]) -> None:
        self._state = state
        self.node = node
        self.pools = pools
        self._by_class: dict[str, list[Candidate]] = {}
        self._has_errors: dict[str, bool] = {}

    def has_errors(self, class_name: str) -> bool:
        """Some candidate of the class failed its selectors with a CEL error."""
        flag = self._has_errors.get(class_name)
        if flag is None:
            flag = self._has_errors[class_name] = any(
                e is not None for _, e in self.class_candidates(class_name)
            )
        return flag

    def class_candidates(self, class_name: str) -> list[Candidate]:
        cands = self._by_class.get(class_name)
        if cands is None:
            cands = self._compute(class_name)
            self._by_class[class_name] = cands
        return cands

    def _compute(self, class_name: str) -> list[Candidate]:
        dc = self._state.classes.get(class_name)
        if dc is None:
            return []
        exprs = class_selectors(dc)
        engine = self._state.cel
        out: list[Candidate] = []
        for pool in self.pools:
            if pool.incomplete or pool.invalid:
                continue
            for sl in pool.slices:
                for device in sl.devices:
                    err: CelError | None = None
                    ok = True
                    for i, expr in enumerate(exprs):
                        try:
                            if not engine.matches(expr, device):
                                ok = False
                                break
                        except CelError as e:
                            e.selector_index = i  # type: ignore[attr-defined]
                            err = e
                            break
                    if ok:
                        out.append((device, err))
        return out

    def special_candidates(self, class_name: str) -> list[Device]:
        """Candidates a selector-less, toleration-less request could take (for counting)."""
        out: list[Device] = []
        for device, err in self.class_candidates(class_name):
            if device.binding_conditions:
                continue
            if err is None and any(t.get("effect") in ("NoSchedule", "NoExecute") for t in device.taints):
                continue
            if (device.node_name or device.all_nodes or device.node_selector is not None) and not (
                device_selects_node(device, self.node)
            ):
                continue
            out.append(device)
        return out


class ClusterState:
    def __init__(self, cel: SelectorEngine | None = None) -> None:
        self.cel = cel if cel is not None else SelectorEngine()
        self.classes = ClassResolver()
        self.nodes: dict[str, NodeInfo] = {}
        self.slices: dict[str, Slice] = {}
        self.taint_rules: dict[str, TaintRule] = {}
        self.claims: dict[ClaimKey, Obj] = {}
        self.pods: dict[str, Obj] = {}  # bound, non-terminal pods by uid
        self._assumed: dict[str, str] = {}  # pod uid -> node, reserved but not yet seen bound
        self._local_slices: dict[str, dict[str, Slice]] = {}  # node name -> slices
        self._global_slices: dict[str, Slice] = {}
        self._by_pool: dict[PoolKey, list[Slice]] = {}
        self._node_devices: dict[str, NodeDevices] = {}
        self._claim_devices: dict[ClaimKey, list[DeviceKey]] = {}
        self._inflight: dict[str, list[DeviceKey]] = {}
        self._refs: dict[DeviceKey, int] = {}
        self._special_by_owner: dict[str, ClaimKey] = {}
        # (class, node) -> free candidate count; device -> [(class, node)] it counts for
        self._free: dict[str, dict[str, int]] = {}
        self._total: dict[str, dict[str, int]] = {}
        self._counted: dict[str, set[str]] = {}  # class -> nodes whose counts are loaded
        self._complete: set[str] = set()  # classes whose counts cover every node
        self._serving: dict[str, set[str]] = {}  # extended resource -> nodes with allocatable > 0
        self._device_slots: dict[DeviceKey, set[tuple[str, str]]] = {}
        self._slot_devices: dict[tuple[str, str], list[DeviceKey]] = {}
        self.version = 0  # bumps on every change; lets callers cache derived answers

    def apply(self, kind: str, obj: Obj, deleted: bool = False) -> bool:
        """Add, update or remove an object of a kind the engine reads; False for other kinds."""
        if kind == "Node":
            self.remove_node(name(obj)) if deleted else self.upsert_node(obj)
        elif kind == "DeviceClass":
            self.remove_class(name(obj)) if deleted else self.upsert_class(obj)
        elif kind == "ResourceSlice":
            self.remove_slice(name(obj)) if deleted else self.upsert_slice(obj)
        elif kind == "ResourceClaim":
            self.remove_claim(namespace(obj), name(obj)) if deleted else self.upsert_claim(obj)
        elif kind == "DeviceTaintRule":
            self.remove_taint_rule(name(obj)) if deleted else self.upsert_taint_rule(obj)
        elif kind == "Pod":
            self.remove_pod(uid(obj)) if deleted else self.upsert_pod(obj)
        else:
            return False
        return True

    # -- nodes -------------------------------------------------------------------------------

    def upsert_node(self, node: Obj) -> None:
        n = name(node)
        alloc, names = _allocatable(node)
        info = self.nodes.get(n)
        self._index_resources(n, names, alloc)
        if info is None:
            info = self.nodes[n] = NodeInfo(node, alloc, names)
            self._complete.clear()
        else:
            relabel = info.node.get("metadata", {}).get("labels") != node.get("metadata", {}).get("labels")
            info.node, info.allocatable, info.allocatable_names = node, alloc, names
            if relabel:
                self._invalidate_node(n)
            elif n in self._node_devices:
                self._node_devices[n].node = node
        info.unschedulable = spec(node).get("unschedulable") is True
        info.hard_taints = hard_taints(node)
        self.version += 1

    def _index_resources(self, node_name: str, names: Iterable[str], alloc: Units) -> None:
        for nodes in self._serving.values():
            nodes.discard(node_name)
        for r in names:
            if "/" in r and alloc.get(r, 0) > 0:
                self._serving.setdefault(r, set()).add(node_name)

    def nodes_serving(self, resource: str) -> set[str]:
        """Nodes whose allocatable has ``resource`` > 0 (the device-plugin path)."""
        return self._serving.get(resource, set())

    def remove_node(self, node_name: str) -> None:
        self.nodes.pop(node_name, None)
        self._index_resources(node_name, (), {})
        self._invalidate_node(node_name)
        self.version += 1

    # -- device classes ----------------------------------------------------------------------

    def upsert_class(self, device_class: Obj) -> None:
        old = self.classes.get(name(device_class))
        self.classes.upsert(device_class)
        if old is None or class_selectors(old) != class_selectors(device_class):
            self._invalidate_class(name(device_class))
        self.version += 1

    def remove_class(self, class_name: str) -> None:
        self.classes.remove(class_name)
        self._invalidate_class(class_name)
        self.version += 1

    # -- resource slices ---------------------------------------------------------------------

    def upsert_slice(self, obj: Obj) -> None:
        self._drop_slice(name(obj))
        sl = parse_slice(obj, list(self.taint_rules.values()))
        self.slices[sl.name] = sl
        local = sl.local_node
        if local:
            self._local_slices.setdefault(local, {})[sl.name] = sl
        else:
            self._global_slices[sl.name] = sl
        self._by_pool.setdefault(sl.pool_key, []).append(sl)
        self._invalidate_for_slice(sl)
        self.version += 1

    def remove_slice(self, slice_name: str) -> None:
        self._drop_slice(slice_name)
        self.version += 1

    def _drop_slice(self, slice_name: str) -> None:
        sl = self.slices.pop(slice_name, None)
        if sl is None:
            return
        local = sl.local_node
        if local:
            self._local_slices.get(local, {}).pop(slice_name, None)
        else:
            self._global_slices.pop(slice_name, None)
        pool = self._by_pool.get(sl.pool_key, [])
        self._by_pool[sl.pool_key] = [s for s in pool if s is not sl]
        self._invalidate_for_slice(sl)

    def _invalidate_for_slice(self, sl: Slice) -> None:
        # Pool completeness depends on every slice of the pool, so all nodes that see the pool
        # must recompute; node-local pools are seen by their node only.
        local = sl.local_node
        pool_nodes = {s.local_node for s in self._by_pool.get(sl.pool_key, [])}
        if local and None not in pool_nodes and not self._pool_has_global(sl.pool_key):
            for n in pool_nodes | {local}:
                if n:
                    self._invalidate_node(n)
        else:
            for n in list(self._node_devices):
                self._invalidate_node(n)

    def _pool_has_global(self, key: PoolKey) -> bool:
        return any(s.local_node is None for s in self._by_pool.get(key, []))

    # -- device taint rules ------------------------------------------------------------------

    def upsert_taint_rule(self, obj: Obj) -> None:
        rule = parse_taint_rule(obj)
        old = self.taint_rules.get(rule.name)
        self.taint_rules[rule.name] = rule
        self._retaint([r for r in (old, rule) if r is not None])

    def remove_taint_rule(self, rule_name: str) -> None:
        old = self.taint_rules.pop(rule_name, None)
        if old is not None:
            self._retaint([old])

    def _retaint(self, changed: list[TaintRule]) -> None:
        """Read again the slices whose devices a changed rule could taint (or did)."""
        for sl in list(self.slices.values()):
            if any(r.may_touch(sl.driver, sl.pool) for r in changed):
                self.upsert_slice(sl.source)
        self.version += 1

    # -- claims ------------------------------------------------------------------------------

    def upsert_claim(self, claim: Obj) -> None:
        key = (namespace(claim), name(claim))
        self._drop_claim(key)
        self.claims[key] = claim
        devices = allocated_devices(claim)
        self._claim_devices[key] = devices
        for d in devices:
            self._ref(d, +1)
        if annotations_of(claim).get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true":
            owner = controller_ref(claim)
            if owner is not None and isinstance(owner.get("uid"), str):
                self._special_by_owner[owner["uid"]] = key
        self.version += 1

    def remove_claim(self, ns: str, claim_name: str) -> None:
        self._drop_claim((ns, claim_name))
        self.version += 1

    def _drop_claim(self, key: ClaimKey) -> None:
        old = self.claims.pop(key, None)
        if old is None:
            return
        for d in self._claim_devices.pop(key, []):
            self._ref(d, -1)
        owner = controller_ref(old)
        if owner is not None and self._special_by_owner.get(str(owner.get("uid"))) == key:
            del self._special_by_owner[str(owner.get("uid"))]

    def special_claim_for(self, pod: Obj) -> Obj | None:
        """``findExtendedResourceClaim``: annotated "true", controller owner = this pod (name + uid)."""
        key = self._special_by_owner.get(uid(pod))
        if key is None:
            return None
        claim = self.claims.get(key)
        owner = controller_ref(claim) if claim is not None else None
        if claim is None or owner is None or owner.get("name") != name(pod):
            return None
        return claim

    # -- pods --------------------------------------------------------------------------------

    def upsert_pod(self, pod: Obj) -> None:
        """Bound, non-terminal pods consume node resources; others are forgotten here."""
        pod_uid = uid(pod)
        node_name = spec(pod).get("nodeName")
        self._release_pod(pod_uid)
        if node_name and status(pod).get("phase") not in ("Succeeded", "Failed"):
            self.pods[pod_uid] = pod
            info = self.nodes.get(str(node_name))
            if info is not None:
                info.add_pod(pod_uid, pod_requests(pod), host_ports(pod))
        self.version += 1

    def remove_pod(self, pod_uid: str) -> None:
        self._release_pod(pod_uid)
        self.version += 1

    def _release_pod(self, pod_uid: str) -> None:
        old = self.pods.pop(pod_uid, None)
        node_name = spec(old).get("nodeName") if old is not None else self._assumed.get(pod_uid)
        self._assumed.pop(pod_uid, None)
        info = self.nodes.get(str(node_name)) if node_name else None
        if info is not None:
            info.remove_pod(pod_uid)

    def assume_pod(self, pod: Obj, node_name: str) -> None:
        """Reserve: the pod's requests count on the node before the API shows it bound."""
        pod_uid = uid(pod)
        if pod_uid in self.pods:
            return
        info = self.nodes.get(node_name)
        if info is not None:
            info.add_pod(pod_uid, pod_requests(pod), host_ports(pod))
            self._assumed[pod_uid] = node_name
        self.version += 1

    def forget_pod(self, pod: Obj) -> None:
        """Unreserve: drop an assumed pod (a pod already seen bound stays)."""
        pod_uid = uid(pod)
        if pod_uid in self._assumed:
            self._release_pod(pod_uid)
        self.version += 1

    # -- in-flight allocations ---------------------------------------------------------------

    def reserve_devices(self, token: str, devices: Iterable[DeviceKey]) -> None:
        self.release_devices(token)
        keys = list(devices)
        self._inflight[token] = keys
        for d in keys:
            self._ref(d, +1)
        self.version += 1

    def release_devices(self, token: str) -> None:
        for d in self._inflight.pop(token, []):
            self._ref(d, -1)
        self.version += 1

    def is_allocated(self, key: DeviceKey) -> bool:
        return self._refs.get(key, 0) > 0

    @property
    def allocated(self) -> _AllocatedView:
        return _AllocatedView(self._refs)

    def _ref(self, key: DeviceKey, delta: int) -> None:
        before = self._refs.get(key, 0)
        after = before + delta
        if after <= 0:
            self._refs.pop(key, None)
            after = 0
        else:
            self._refs[key] = after
        if (before > 0) != (after > 0):
            for cls, node in self._device_slots.get(key, ()):
                bucket = self._free.get(cls)
                if bucket is not None and node in bucket:
                    bucket[node] += -1 if after > 0 else 1

    # -- derived per-node views ----------------------------------------------------------------

    def node_devices(self, node_name: str) -> NodeDevices | None:
        nd = self._node_devices.get(node_name)
        if nd is not None:
            return nd
        info = self.nodes.get(node_name)
        if info is None:
            return None
        candidates = list(self._local_slices.get(node_name, {}).values()) + list(self._global_slices.values())
        nd = NodeDevices(self, info.node, gather_pools(info.node, candidates, self._by_pool))
        self._node_devices[node_name] = nd
        return nd

    def free_counts(self, class_name: str) -> dict[str, int]:
        """Node -> free candidate devices of the class (no selectors/tolerations on the request)."""
        free = self._free.setdefault(class_name, {})
        if class_name in self._complete:
            return free
        loaded = self._counted.setdefault(class_name, set())
        total = self._total.setdefault(class_name, {})
        for node_name in self.nodes:
            if node_name in loaded:
                continue
            nd = self.node_devices(node_name)
            loaded.add(node_name)
            if nd is None:
                continue
            cands = nd.special_candidates(class_name)
            if not cands:
                continue
            total[node_name] = len(cands)
            free[node_name] = sum(1 for d in cands if not self.is_allocated(d.key))
            slot = (class_name, node_name)
            self._slot_devices[slot] = [d.key for d in cands]
            for d in cands:
                self._device_slots.setdefault(d.key, set()).add(slot)
        self._complete.add(class_name)
        return free

    def total_counts(self, class_name: str) -> dict[str, int]:
        self.free_counts(class_name)
        return self._total.get(class_name, {})

    def _invalidate_node(self, node_name: str) -> None:
        self._node_devices.pop(node_name, None)
        self._complete.clear()
        for cls, loaded in self._counted.items():
            if node_name in loaded:
                loaded.discard(node_name)
                self._forget_slot(cls, node_name)

    def _invalidate_class(self, class_name: str) -> None:
        self._complete.discard(class_name)
        for nd in self._node_devices.values():
            nd._by_class.pop(class_name, None)
            nd._has_errors.pop(class_name, None)
        for node_name in self._counted.pop(class_name, set()):
            self._forget_slot(class_name, node_name)
        self._free.pop(class_name, None)
        self._total.pop(class_name, None)

    def _forget_slot(self, class_name: str, node_name: str) -> None:
        self._free.get(class_name, {}).pop(node_name, None)
        self._total.get(class_name, {}).pop(node_name, None)
        slot = (class_name, node_name)
        for key in self._slot_devices.pop(slot, []):
            slots = self._device_slots.get(key)
            if slots is not None:
                slots.discard(slot)
                if not slots:
                    del self._device_slots[key]

    def allocated_counters(self, pool: Pool) -> dict[str, dict[str, Quantity]]:
        """Counters already consumed in a pool by allocated devices (partitionable devices)."""
        out: dict[str, dict[str, Quantity]] = {}
        for sl in pool.all_slices:
            for d in sl.devices:
                if not d.consumes_counters or not self.is_allocated(d.key):
                    continue
                for set_name, counters in d.consumes_counters:
                    bucket = out.setdefault(set_name, {})
                    for cname, q in counters.items():
                        prev = bucket.get(cname)
                        bucket[cname] = Quantity(q.value + (prev.value if prev else 0))
        return out


class _AllocatedView:
    """``in`` on the allocated-device reference counts, without copying them."""

    __slots__ = ("_refs",)

    def __init__(self, refs: dict[DeviceKey, int]) -> None:
        self._refs = refs

    def __contains__(self, key: object) -> bool:
        return key in self._refs

    def __len__(self) -> int:
        return len(self._refs)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._refs)


def allocated_devices(claim: Obj) -> list[DeviceKey]:
    """Devices a claim holds; admin-access results do not make a device unavailable."""
    alloc = as_dict(status(claim).get("allocation"))
    out: list[DeviceKey] = []
    for r in as_list(as_dict(alloc.get("devices")).get("results")):
        rd = as_dict(r)
        if rd.get("adminAccess") is True:
            continue
        d, p, n = rd.get("driver"), rd.get("pool"), rd.get("device")
        if isinstance(d, str) and isinstance(p, str) and isinstance(n, str):
            out.append((d, p, n))
    return out


def claim_key(claim: Obj) -> ClaimKey:
    return (namespace(claim), name(claim))


__all__ = ["ClaimKey", "ClusterState", "NodeDevices", "NodeInfo", "allocated_devices", "claim_key", "meta"]
