"""The device index: ResourceSlices (with DeviceTaintRules applied), the pools each node can reach,
and per node and DeviceClass the candidate devices in allocation order.

Class selectors run through the CEL engine's caches once per (node, class); a changed slice
recomputes only the nodes that see its pool, a changed class only its own candidates. Every
change answers with the node names whose views it dropped, so derived counts can follow.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..api.nodematch import untolerated
from ..api.objects import Obj, as_dict, as_list, name, spec
from ..cel import CelError, SelectorEngine, collector_paused
from .deviceclasses import ClassResolver
from .slices import Device, Pool, PoolKey, Slice, device_selects_node, gather_pools, parse_slice
from .taintrules import TaintRule, parse_taint_rule

Candidate = tuple[Device, CelError | None]


def class_selectors(device_class: Obj) -> list[str]:
    out: list[str] = []
    for sel in as_list(spec(device_class).get("selectors")):
        expr = as_dict(as_dict(sel).get("cel")).get("expression")
        out.append(expr if isinstance(expr, str) else "")
    return out


class NodeDevices:
    """The devices one node can reach, per class, in allocation order (the allocator's
    ``NodeCandidates``)."""

    def __init__(self, index: DeviceIndex, node: Obj, pools: list[Pool]) -> None:
        self._index = index
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

    def knows(self, class_name: str) -> bool:
        """Whether the class's candidates are computed."""
        return class_name in self._by_class

    def remember(self, class_name: str, candidates: list[Candidate]) -> None:
        """Candidates computed elsewhere (:meth:`DeviceIndex.prime`, for many nodes at once)."""
        self._by_class[class_name] = candidates

    def forget_class(self, class_name: str) -> None:
        self._by_class.pop(class_name, None)
        self._has_errors.pop(class_name, None)

    def _compute(self, class_name: str) -> list[Candidate]:
        dc = self._index.classes.get(class_name)
        if dc is None:
            return []
        devices = self.devices()
        verdicts = self._index.cel.select(class_selectors(dc), devices)
        return _candidates(devices, verdicts)

    def devices(self) -> list[Device]:
        """Every device of the node's usable pools, in allocation order."""
        return [
            device
            for pool in self.pools
            if not (pool.incomplete or pool.invalid)
            for sl in pool.slices
            for device in sl.devices
        ]

    def special_candidates(self, class_name: str) -> list[Device]:
        """Candidates a selector-less request of the class could take (for counting), with the
        tolerations draxr gives such requests (``draxr.io/extended-resource-tolerations``; none by
        default, as upstream)."""
        out: list[Device] = []
        tolerations = self._index.classes.tolerations(class_name)
        for device, err in self.class_candidates(class_name):
            if device.binding_conditions and not self._index.binding_conditions:
                continue
            if err is None and device.taints and untolerated(device.taints, tolerations) is not None:
                continue
            if (device.node_name or device.all_nodes or device.node_selector is not None) and not (
                device_selects_node(device, self.node)
            ):
                continue
            out.append(device)
        return out


class DeviceIndex:
    """Slices and taint rules in, per-node ``NodeDevices`` out (built on first use, then cached)."""

    def __init__(self, classes: ClassResolver, cel: SelectorEngine | None = None) -> None:
        self.classes = classes
        self.cel = cel if cel is not None else SelectorEngine()
        self.slices: dict[str, Slice] = {}
        self.taint_rules: dict[str, TaintRule] = {}
        self._local_slices: dict[str, dict[str, Slice]] = {}  # node name -> its node-local slices
        self._global_slices: dict[str, Slice] = {}
        self._by_pool: dict[PoolKey, list[Slice]] = {}
        self._views: dict[str, NodeDevices] = {}
        #: ``DRADeviceBindingConditions`` in the served release: devices with binding conditions
        #: are candidates (off: never picked, as upstream with the gate off).
        self.binding_conditions = False

    # -- queries -------------------------------------------------------------------------------

    def node_devices(self, node: Obj) -> NodeDevices:
        node_name = name(node)
        nd = self._views.get(node_name)
        if nd is not None:
            return nd
        candidates = list(self._local_slices.get(node_name, {}).values()) + list(self._global_slices.values())
        nd = NodeDevices(self, node, gather_pools(node, candidates, self._by_pool))
        self._views[node_name] = nd
        return nd

    def prime(self, class_name: str, nodes: Iterable[Obj]) -> None:
        """Compute the class's candidates on every one of ``nodes`` that lacks them, in one
        selector batch (:meth:`SelectorEngine.select`): a class's first count over the cluster
        (its cold start) costs one batch per selector instead of a call per device."""
        dc = self.classes.get(class_name)
        if dc is None:
            return
        with collector_paused():  # it allocates per node and per device: see .cel.gcpause
            views = [nd for nd in map(self.node_devices, nodes) if not nd.knows(class_name)]
            if not views:
                return
            spans: list[tuple[NodeDevices, int, int]] = []
            devices: list[Device] = []
            for nd in views:
                start = len(devices)
                devices.extend(nd.devices())
                spans.append((nd, start, len(devices)))
            verdicts = self.cel.select(class_selectors(dc), devices)
            for nd, start, end in spans:
                nd.remember(class_name, _candidates(devices[start:end], verdicts[start:end]))

    def cached_nodes(self) -> list[str]:
        return list(self._views)

    # -- slices ----------------------------------------------------------------------------------

    def upsert_slice(self, obj: Obj) -> list[str]:
        """Add or replace a slice; the nodes whose views were dropped."""
        dropped = self._drop_slice(name(obj))
        sl = parse_slice(obj, list(self.taint_rules.values()))
        self.slices[sl.name] = sl
        local = sl.local_node
        if local:
            self._local_slices.setdefault(local, {})[sl.name] = sl
        else:
            self._global_slices[sl.name] = sl
        self._by_pool.setdefault(sl.pool_key, []).append(sl)
        return _union(dropped, self._invalidate_for_slice(sl))

    def remove_slice(self, slice_name: str) -> list[str]:
        return self._drop_slice(slice_name)

    def _drop_slice(self, slice_name: str) -> list[str]:
        sl = self.slices.pop(slice_name, None)
        if sl is None:
            return []
        local = sl.local_node
        if local:
            self._local_slices.get(local, {}).pop(slice_name, None)
        else:
            self._global_slices.pop(slice_name, None)
        pool = self._by_pool.get(sl.pool_key, [])
        self._by_pool[sl.pool_key] = [s for s in pool if s is not sl]
        return self._invalidate_for_slice(sl)

    def _invalidate_for_slice(self, sl: Slice) -> list[str]:
        # Pool completeness depends on every slice of the pool, so all nodes that see the pool
        # must recompute; node-local pools are seen by their node only.
        local = sl.local_node
        pool_nodes = {s.local_node for s in self._by_pool.get(sl.pool_key, [])}
        if local and None not in pool_nodes and not self._pool_has_global(sl.pool_key):
            targets = [n for n in pool_nodes | {local} if n]
        else:
            targets = list(self._views)
        for n in targets:
            self._views.pop(n, None)
        return targets

    def _pool_has_global(self, key: PoolKey) -> bool:
        return any(s.local_node is None for s in self._by_pool.get(key, []))

    # -- device taint rules ------------------------------------------------------------------------

    def upsert_taint_rule(self, obj: Obj) -> list[str]:
        rule = parse_taint_rule(obj)
        old = self.taint_rules.get(rule.name)
        self.taint_rules[rule.name] = rule
        return self._retaint([r for r in (old, rule) if r is not None])

    def remove_taint_rule(self, rule_name: str) -> list[str]:
        old = self.taint_rules.pop(rule_name, None)
        return self._retaint([old]) if old is not None else []

    def _retaint(self, changed: list[TaintRule]) -> list[str]:
        """Read again the slices whose devices a changed rule could taint (or did)."""
        dropped: list[str] = []
        for sl in list(self.slices.values()):
            if any(r.may_touch(sl.driver, sl.pool) for r in changed):
                dropped = _union(dropped, self.upsert_slice(sl.source))
        return dropped

    # -- what the views depend on ------------------------------------------------------------------

    def set_binding_conditions(self, enabled: bool) -> bool:
        """Turn ``DRADeviceBindingConditions`` on or off; True when that changed (every node's view
        is dropped: the counts of special candidates depend on it)."""
        if enabled == self.binding_conditions:
            return False
        self.binding_conditions = enabled
        self._views.clear()
        return True

    def invalidate_node(self, node_name: str) -> None:
        """The node's labels changed or it went away: its pools must be gathered again."""
        self._views.pop(node_name, None)

    def refresh_node(self, node: Obj) -> None:
        """A node update that keeps its labels: the views stay, with the new object."""
        nd = self._views.get(name(node))
        if nd is not None:
            nd.node = node

    def invalidate_class(self, class_name: str) -> None:
        for nd in self._views.values():
            nd.forget_class(class_name)


def _candidates(devices: list[Device], verdicts: list[bool | CelError]) -> list[Candidate]:
    """The devices a class's selectors did not exclude: those all selectors matched, and those
    one failed with an error (kept with the error: using one aborts the allocation)."""
    return [
        (device, None if verdict is True else verdict)
        for device, verdict in zip(devices, verdicts, strict=True)
        if verdict is not False
    ]


def _union(a: list[str], b: list[str]) -> list[str]:
    return list(dict.fromkeys(a + b)) if b else a
