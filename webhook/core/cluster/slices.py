"""ResourceSlices as the structured allocator sees them: devices, pools, and what a node can reach.

* A slice is relevant for a node through ``nodeName``, ``allNodes``, ``nodeSelector`` or, with
  ``perDeviceNodeSelection``, when at least one of its devices selects the node.
* Slices group into pools by (driver, pool name); only the highest ``pool.generation`` counts.
* A pool is complete when the node's slices of that generation number ``resourceSliceCount``;
  only when they do not, a higher generation elsewhere makes the node's view obsolete (ignored)
  and otherwise every slice of the generation counts. Incomplete pools offer nothing.
* Duplicate device names within the node's view make a pool invalid.
* Order is deterministic: pools by (driver, pool), binding-condition pools last, slices by name,
  devices in slice order.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..api.nodematch import SelectorError, node_selector_matches
from ..api.objects import Obj, as_dict, as_list, name, spec, uid
from ..api.quantity import Quantity, QuantityError
from ..cel import Fingerprint, parse_attribute
from .consumable import DeviceCapacity, parse_capacities
from .taintrules import TaintRule

DeviceKey = tuple[str, str, str]  # (driver, pool, device)
PoolKey = tuple[str, str]  # (driver, pool)


def device_id(key: DeviceKey) -> str:
    return "/".join(key)


def qualify(driver: str, attr_name: str) -> str:
    """Attribute and capacity names without a domain belong to the driver's domain."""
    return attr_name if "/" in attr_name else f"{driver}/{attr_name}"


@dataclass(slots=True, eq=False)
class Device:
    driver: str
    pool: str
    name: str
    slice_name: str
    key: DeviceKey
    attributes: dict[str, tuple[str, Any]]
    capacity: dict[str, Quantity]
    allow_multiple_allocations: bool
    taints: tuple[Obj, ...]
    #: KEP-5007: the conditions the device's claim status must show True before the pod binds
    #: (empty: none), those that mean the binding failed, and whether its allocation is pinned to
    #: the node it was allocated for.
    binding_conditions: tuple[str, ...]
    consumes_counters: tuple[tuple[str, dict[str, Quantity]], ...]
    node_name: str | None = None
    all_nodes: bool = False
    node_selector: Obj | None = None
    binding_failure_conditions: tuple[str, ...] = ()
    binds_to_node: bool = False
    fingerprint: Hashable = None
    #: Values checked usable for CEL (parse_attribute and Quantity.parse made them).
    checked: bool = False
    #: ``capacity`` by the names the slice writes, with request policies: what consumable capacity
    #: (``consumable``) reads; empty for a device without capacity.
    capacities: dict[str, DeviceCapacity] = field(default_factory=dict)
    #: Whether the capacities can refuse a request that names none on a device nothing consumes (a
    #: request policy, a negative value); otherwise such a request always fits it.
    capacity_rules: bool = False

    def attribute(self, qualified: str) -> tuple[str, Any] | None:
        """Upstream ``lookupAttribute``: the qualified name, or the bare ID in the driver's domain."""
        return self.attributes.get(qualified)


@dataclass(slots=True, eq=False)
class Slice:
    name: str
    uid: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    node_name: str | None
    all_nodes: bool
    node_selector: Obj | None
    per_device: bool
    devices: list[Device]
    shared_counters: dict[str, dict[str, Quantity]] = field(default_factory=dict)
    problem: str | None = None
    source: Obj = field(default_factory=dict, repr=False)  # the object, to re-read it with new rules

    @property
    def pool_key(self) -> PoolKey:
        return (self.driver, self.pool)

    @property
    def local_node(self) -> str | None:
        return self.node_name if self.node_name and not self.per_device else None


@dataclass(slots=True, eq=False)
class Pool:
    driver: str
    name: str
    generation: int
    slices: list[Slice]  # slices of the current generation that target the node, by name
    incomplete: bool = False
    invalid: str | None = None
    counter_sets: dict[str, dict[str, Quantity]] = field(default_factory=dict)
    all_slices: list[Slice] = field(default_factory=list)  # every slice of the generation

    @property
    def key(self) -> PoolKey:
        return (self.driver, self.name)

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.name}"

    @property
    def has_binding_conditions(self) -> bool:
        return any(d.binding_conditions for s in self.slices for d in s.devices)


def _quantity_map(raw: Any, what: str) -> dict[str, Quantity]:
    out: dict[str, Quantity] = {}
    for k, v in as_dict(raw).items():
        out[str(k)] = Quantity.parse(as_dict(v).get("value"))
    return out


def _parse_device(raw: Any, driver: str, pool: str, slice_name: str, per_device: bool) -> Device:
    d = as_dict(raw)
    dname = d.get("name")
    if not isinstance(dname, str) or not dname:
        raise ValueError("device without a name")
    attrs: dict[str, tuple[str, Any]] = {}
    for k, v in as_dict(d.get("attributes")).items():
        try:
            attrs[qualify(driver, str(k))] = parse_attribute(as_dict(v))
        except ValueError as e:
            raise ValueError(f"device {dname}: attribute {k}: {e}") from None
    try:
        capacities = parse_capacities(d.get("capacity"))
        capacity = {qualify(driver, k): c.value for k, c in capacities.items()}
        counters = tuple(
            (str(as_dict(c).get("counterSet", "")), _quantity_map(as_dict(c).get("counters"), "counters"))
            for c in as_list(d.get("consumesCounters"))
        )
    except QuantityError as e:
        raise ValueError(f"device {dname}: {e}") from None
    allow_multi = d.get("allowMultipleAllocations") is True
    fingerprint = Fingerprint(
        (
            driver,
            tuple(sorted(attrs.items(), key=lambda kv: kv[0])),
            tuple(sorted(capacity.items(), key=lambda kv: kv[0])),
            allow_multi,
        )
    )
    return Device(
        driver=driver,
        pool=pool,
        name=dname,
        slice_name=slice_name,
        key=(driver, pool, dname),
        attributes=attrs,
        capacity=capacity,
        allow_multiple_allocations=allow_multi,
        taints=tuple(t for t in as_list(d.get("taints")) if isinstance(t, dict)),
        binding_conditions=tuple(str(c) for c in as_list(d.get("bindingConditions"))),
        binding_failure_conditions=tuple(str(c) for c in as_list(d.get("bindingFailureConditions"))),
        binds_to_node=d.get("bindsToNode") is True,
        consumes_counters=counters,
        node_name=d.get("nodeName") if per_device and isinstance(d.get("nodeName"), str) else None,
        all_nodes=per_device and d.get("allNodes") is True,
        node_selector=as_dict(d.get("nodeSelector")) or None if per_device else None,
        fingerprint=fingerprint,
        checked=True,
        capacities=capacities,
        capacity_rules=any(c.policy is not None or c.value.value < 0 for c in capacities.values()),
    )


def parse_slice(obj: Obj, rules: Sequence[TaintRule] = ()) -> Slice:
    """Parse a ResourceSlice; content errors mark the slice (and so its pool) as unusable.
    ``rules`` (DeviceTaintRules) add their taints to the devices they match."""
    s = spec(obj)
    driver = s.get("driver") if isinstance(s.get("driver"), str) else ""
    pool_spec = as_dict(s.get("pool"))
    pool = pool_spec.get("name") if isinstance(pool_spec.get("name"), str) else ""
    gen = pool_spec.get("generation", 0)
    count = pool_spec.get("resourceSliceCount", 1)
    node_name = s.get("nodeName") if isinstance(s.get("nodeName"), str) and s.get("nodeName") else None
    per_device = s.get("perDeviceNodeSelection") is True
    sl = Slice(
        name=name(obj),
        uid=uid(obj),
        driver=str(driver),
        pool=str(pool),
        generation=gen if isinstance(gen, int) and not isinstance(gen, bool) else 0,
        slice_count=count if isinstance(count, int) and not isinstance(count, bool) else 1,
        node_name=node_name,
        all_nodes=s.get("allNodes") is True,
        node_selector=as_dict(s.get("nodeSelector")) or None,
        per_device=per_device,
        devices=[],
        source=obj,
    )
    if not driver or not pool:
        sl.problem = "spec.driver and spec.pool.name are required"
        return sl
    try:
        for sc in as_list(s.get("sharedCounters")):
            scd = as_dict(sc)
            sl.shared_counters[str(scd.get("name", ""))] = _quantity_map(scd.get("counters"), "counters")
        for raw in as_list(s.get("devices")):
            sl.devices.append(_parse_device(raw, sl.driver, sl.pool, sl.name, per_device))
    except (ValueError, QuantityError) as e:
        sl.devices = []
        sl.problem = str(e)
    if rules:
        sl.devices = [_with_rule_taints(d, rules) for d in sl.devices]
    return sl


def _with_rule_taints(device: Device, rules: Sequence[TaintRule]) -> Device:
    extra = tuple(
        r.taint for r in rules if r.taint is not None and r.matches(device.driver, device.pool, device.name)
    )
    return replace(device, taints=device.taints + extra) if extra else device


def device_selects_node(device: Device, node: Obj) -> bool:
    """Per-device node selection (``perDeviceNodeSelection``)."""
    try:
        return _node_matches(node, device.node_name, device.all_nodes, device.node_selector)
    except SelectorError:
        return False


def _node_matches(node: Obj, node_name: str | None, all_nodes: bool, selector: Obj | None) -> bool:
    if node_name:
        return name(node) == node_name
    if all_nodes:
        return True
    if selector is not None:
        return node_selector_matches(node, selector)
    return False


def slice_targets_node(sl: Slice, node: Obj) -> bool:
    try:
        if sl.node_name or sl.all_nodes or sl.node_selector is not None:
            return _node_matches(node, sl.node_name, sl.all_nodes, sl.node_selector)
    except SelectorError:
        return False
    if sl.per_device:
        return any(device_selects_node(d, node) for d in sl.devices)
    return False


def gather_pools(node: Obj, candidates: Iterable[Slice], by_pool: dict[PoolKey, list[Slice]]) -> list[Pool]:
    """The pools a node can use, in allocation order (upstream ``GatherPools``, newest semantics).

    ``candidates`` are the slices that may target the node (its node-local slices plus every
    slice that is not node-local); ``by_pool`` indexes all slices for the completeness re-scan.
    The node's own view decides: its slices of a pool at their highest generation. Only when they
    do not add up to ``resourceSliceCount`` are all slices of the pool consulted: a newer
    generation elsewhere makes the view obsolete (the pool is ignored), otherwise the count of
    every slice of that generation decides whether the pool is complete (``checkSlicesInPool``).
    Duplicate device names are checked within the node's view (``poolIsInvalid``).
    """
    kept: dict[PoolKey, list[Slice]] = {}
    for sl in candidates:
        if not slice_targets_node(sl, node):
            continue
        current = kept.get(sl.pool_key)
        if current is None or sl.generation > current[0].generation:
            kept[sl.pool_key] = [sl]
        elif sl.generation == current[0].generation:
            current.append(sl)
    pools: list[Pool] = []
    for key, found in kept.items():
        # Upstream reads the count from whichever slice came first (issue 141117, when slices
        # disagree); by name, the answer does not depend on the order slices arrived in.
        slices = sorted(found, key=lambda s: s.name)
        gen = slices[0].generation
        everything = by_pool.get(key, slices)
        same_gen = [s for s in everything if s.generation == gen]
        complete = len(slices) == slices[0].slice_count
        if not complete:
            if any(s.generation > gen for s in everything):
                continue  # obsolete: the driver is replacing this generation
            complete = len(same_gen) == slices[0].slice_count
        pool = Pool(driver=key[0], name=key[1], generation=gen, slices=slices)
        pool.all_slices = sorted(same_gen, key=lambda s: s.name)
        pool.incomplete = not complete
        pool.invalid = _pool_problem(pool.slices)
        for s in pool.all_slices:
            pool.counter_sets.update(s.shared_counters)
        pools.append(pool)
    pools.sort(key=lambda p: (p.has_binding_conditions, p.driver, p.name))
    return pools


def _pool_problem(slices: list[Slice]) -> str | None:
    """``poolIsInvalid``: a slice that could not be read, or a device name twice in the view."""
    seen: set[str] = set()
    for s in slices:
        if s.problem:
            return f"slice {s.name}: {s.problem}"
        for d in s.devices:
            if d.name in seen:
                return f"duplicate device name {d.name}"
            seen.add(d.name)
    return None
