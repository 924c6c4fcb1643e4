"""Free-device counts per (DeviceClass, node): Filter's precheck and Score's counts.

For each class, how many devices of each node a selector-less, toleration-less request could take
(``total``) and how many of those are not taken (``free``), and, in name order, the nodes where some
are free (``available``: the index a decision walks instead of the cluster). A class's counts are
built on first use; afterwards a device that becomes taken or free moves one count (``on_flip``),
and with it the node in or out of ``available``, and a node whose device view was dropped is counted
again on the next use. Nothing here scans the cluster per decision.

For a class with ``draxr.io/align-by``, the same counts per topology group (``groups``: per
attribute and value, how many candidates and how many free), which placement scores read, and the
largest group anywhere (``largest_group``), which decides whether a container's demand can be aligned
at all.

Every change of a node's counts renews the node's ``NodeInfo.stamp``, so that a verdict remembered
with the stamp (``scheduling.usual``) never outlives the counts it read.

A device with ``allowMultipleAllocations`` (consumable capacity) is never "taken" by its shares, so
it counts in *share slots*, not as one device: its ``total`` is how many shares of the class's
special-claim request (selector-less, toleration-less, with no capacity requests: each consumes every
capacity's default, or all of it) fit it when unused, its ``free`` how many still fit beside what its
shares consume now (none once a result without a ``shareID`` takes it), each at most
``ALLOCATION_RESULTS_MAX_SIZE`` (a claim holds no more results, so a pod's demand never exceeds it).
Why: one special claim's requests (one per container) may all share one device, so counting it as one
would let Filter refuse a node the allocator accepts; a count of the shares that fit can only
overstate what the allocator finds (a request of count n still needs n distinct devices), never
understate it. Topology groups stay in devices (a group's devices are what one request aligns
over): a shared device is free there while at least one share fits. Shares changing is reported by
``on_shares``, and moves the device's counts by the difference.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterable

from ..api.alignment import align_by
from ..api.capacityrequests import class_capacity_requests
from ..api.constants import ALLOCATION_RESULTS_MAX_SIZE
from ..api.quantity import Quantity
from .consumable import Amounts, share_slots
from .devices import DeviceIndex
from .nodeinfo import Nodes
from .slices import Device, DeviceKey
from .topology import Group, Groups, group_devices

Slot = tuple[str, str]  # (class, node)


def _no_shares(key: DeviceKey) -> Amounts | None:
    return None


class FreeDevices:
    def __init__(
        self,
        nodes: Nodes,
        devices: DeviceIndex,
        is_allocated: Callable[[DeviceKey], bool],
        consumed: Callable[[DeviceKey], Amounts | None] = _no_shares,
    ) -> None:
        """``is_allocated``: taken by a result without a ``shareID`` (or a reservation);
        ``consumed``: what a device's shares consume together (None: no share)."""
        self._nodes = nodes
        self._devices = devices
        self._is_allocated = is_allocated
        self._consumed = consumed
        self._free: dict[str, dict[str, int]] = {}
        self._ring: dict[str, list[str]] = {}  # class -> nodes with free > 0, sorted
        self._total: dict[str, dict[str, int]] = {}
        self._counted: dict[str, set[str]] = {}  # class -> nodes whose counts are loaded
        self._complete: set[str] = set()  # classes whose counts cover every node
        self._device_slots: dict[DeviceKey, set[Slot]] = {}
        self._slot_devices: dict[Slot, list[DeviceKey]] = {}
        self._groups: dict[Slot, dict[str, Groups]] = {}  # (class, node) -> attribute -> groups
        self._by_attr: dict[tuple[str, str], dict[str, Groups]] = {}  # (class, attribute) -> node -> groups
        self._device_groups: dict[DeviceKey, dict[Slot, list[Group]]] = {}
        self._largest: dict[tuple[str, str], int] = {}  # (class, attribute) -> size, while valid
        self._errors: dict[str, set[str]] = {}  # class -> nodes with a CEL error among its candidates
        # Multi-allocatable candidates: the device, and per (class, node) its free share slots as
        # counted (what a change moves the counts by).
        self._shared: dict[DeviceKey, tuple[Device, dict[Slot, int]]] = {}

    def free(self, class_name: str) -> dict[str, int]:
        """Node -> free candidate devices of the class."""
        free = self._free.setdefault(class_name, {})
        if class_name in self._complete:
            return free
        loaded = self._counted.setdefault(class_name, set())
        total = self._total.setdefault(class_name, {})
        self._devices.prime(class_name, (info.node for n, info in self._nodes.items() if n not in loaded))
        for node_name, info in self._nodes.items():
            if node_name in loaded:
                continue
            loaded.add(node_name)
            nd = self._devices.node_devices(info.node)
            if nd.has_errors(class_name):
                self._errors.setdefault(class_name, set()).add(node_name)
            cands = nd.special_candidates(class_name)
            if not cands:
                continue
            slot = (class_name, node_name)
            if any(d.allow_multiple_allocations for d in cands):
                count, size = self._count_shared(slot, cands)
            else:
                size = len(cands)
                count = sum(1 for d in cands if not self._is_allocated(d.key))
            total[node_name] = size
            free[node_name] = count
            if count > 0:
                insort(self._ring.setdefault(class_name, []), node_name)
            self._slot_devices[slot] = [d.key for d in cands]
            for d in cands:
                self._device_slots.setdefault(d.key, set()).add(slot)
            attrs = align_by(self._devices.classes.get(class_name))
            if attrs:
                self._count_groups(slot, cands, attrs)
            self._touch(node_name)
        self._complete.add(class_name)
        return free

    def _count_shared(self, slot: Slot, cands: list[Device]) -> tuple[int, int]:
        """(free, total) of a node's candidates when some are multi-allocatable: share slots."""
        free = total = 0
        for d in cands:
            if not d.allow_multiple_allocations:
                total += 1
                free += not self._is_allocated(d.key)
                continue
            total += self._slots(slot[0], d, None)
            free += self._record_shared(slot, d)
        return free, total

    def _slots(self, class_name: str, device: Device, consumed: Amounts | None) -> int:
        """The class's special-claim shares that fit the device beside ``consumed``, each with the
        class's capacity requests (``draxr.io/capacity-requests``; none: the default or the whole)."""
        requests = class_capacity_requests(self._devices.classes.get(class_name))
        wanted = {k: Quantity.parse(v) for k, v in requests.items()} if requests else None
        return share_slots(wanted, device.capacities, consumed, ALLOCATION_RESULTS_MAX_SIZE)

    def _free_slots(self, class_name: str, device: Device) -> int:
        if self._is_allocated(device.key):
            return 0
        return self._slots(class_name, device, self._consumed(device.key))

    def _record_shared(self, slot: Slot, device: Device) -> int:
        slots = self._free_slots(slot[0], device)
        found = self._shared.get(device.key)
        by_slot = found[1] if found is not None else {}
        by_slot[slot] = slots
        self._shared[device.key] = (device, by_slot)  # the newest reading of the device
        return slots

    def _unavailable(self, key: DeviceKey, slot: Slot) -> bool:
        """For the group counts: taken, or a shared device no share fits any more."""
        found = self._shared.get(key)
        if found is not None and slot in found[1]:
            return found[1][slot] == 0
        return self._is_allocated(key)

    def available(self, class_name: str) -> list[str]:
        """Nodes with at least one free candidate device of the class, sorted by name (a shared
        list, kept up in place: do not change it)."""
        self.free(class_name)
        return self._ring.get(class_name, [])

    def _count_groups(self, slot: Slot, cands: list[Device], attrs: tuple[str, ...]) -> None:
        by_attr: dict[str, Groups] = {}
        taken = self._is_allocated
        if any(d.allow_multiple_allocations for d in cands):
            taken = lambda key: self._unavailable(key, slot)  # noqa: E731
        for attr in attrs:
            groups, values = group_devices(cands, attr, taken)
            by_attr[attr] = groups
            for key, vals in values.items():
                self._device_groups.setdefault(key, {}).setdefault(slot, []).extend(groups[v] for v in vals)
            self._largest.pop((slot[0], attr), None)
            self._by_attr.setdefault((slot[0], attr), {})[slot[1]] = groups
        self._groups[slot] = by_attr

    def error_nodes(self, class_name: str) -> set[str]:
        """Nodes where some candidate of the class failed its selectors with a CEL error."""
        self.free(class_name)
        return self._errors.get(class_name, set())

    def groups(self, class_name: str, node_name: str, attribute: str) -> Groups:
        """The node's groups of the class by ``attribute`` (empty unless the class aligns by it)."""
        return self.groups_by_node(class_name, attribute).get(node_name, {})

    def groups_by_node(self, class_name: str, attribute: str) -> dict[str, Groups]:
        """Node -> its groups of the class by ``attribute``: one lookup for a whole decision (the
        groups change in place as devices flip; nodes come and go only between decisions)."""
        self.free(class_name)
        return self._by_attr.get((class_name, attribute), {})

    def largest_group(self, class_name: str, attribute: str) -> int:
        """The most candidates of the class any one group has, on any node."""
        self.free(class_name)
        key = (class_name, attribute)
        size = self._largest.get(key)
        if size is None:
            size = 0
            for groups in self._by_attr.get(key, {}).values():
                for g in groups.values():
                    size = max(size, g.size)
            self._largest[key] = size
        return size

    def total(self, class_name: str) -> dict[str, int]:
        """Node -> candidate devices of the class, taken or not."""
        self.free(class_name)
        return self._total.get(class_name, {})

    # -- keeping up ------------------------------------------------------------------------------

    def on_flip(self, key: DeviceKey, taken: bool) -> None:
        if key in self._shared:
            self.on_shares(key)
            return
        delta = -1 if taken else 1
        for cls, node in self._device_slots.get(key, ()):
            self._move(cls, node, delta)
        grouped = self._device_groups.get(key)
        if grouped:
            for groups in grouped.values():
                for g in groups:
                    g.free += delta

    def on_shares(self, key: DeviceKey) -> None:
        """A multi-allocatable device's shares (or its being taken) changed: recount its slots."""
        found = self._shared.get(key)
        if found is None:
            return
        device, slots = found
        grouped = self._device_groups.get(key, {})
        for slot, before in slots.items():
            after = slots[slot] = self._free_slots(slot[0], device)
            if after != before:
                self._move(slot[0], slot[1], after - before)
            if (before > 0) != (after > 0):
                for g in grouped.get(slot, ()):
                    g.free += 1 if after > 0 else -1

    def _move(self, cls: str, node: str, delta: int) -> None:
        bucket = self._free.get(cls)
        if bucket is not None and node in bucket:
            before = bucket[node]
            bucket[node] = after = before + delta
            if before > 0 and after <= 0:
                ring = self._ring[cls]
                del ring[bisect_left(ring, node)]
            elif before <= 0 and after > 0:
                insort(self._ring.setdefault(cls, []), node)
            self._touch(node)

    def _touch(self, node_name: str) -> None:
        """The node's counts changed: its NodeInfo's stamp with them (after the change)."""
        info = self._nodes.get(node_name)
        if info is not None:
            info.changed()

    def node_added(self) -> None:
        """A new node: every class must count it on its next use."""
        self._complete.clear()
        self._largest.clear()

    def forget_nodes(self, node_names: Iterable[str]) -> None:
        """These nodes' device views changed: count them again on the next use."""
        for node_name in node_names:
            self._complete.clear()
            for cls, loaded in self._counted.items():
                if node_name in loaded:
                    loaded.discard(node_name)
                    self._forget_slot(cls, node_name)
                    self._errors.get(cls, set()).discard(node_name)

    def forget_class(self, class_name: str) -> None:
        """The class's selectors changed (or it went away)."""
        self._complete.discard(class_name)
        for node_name in self._counted.pop(class_name, set()):
            self._forget_slot(class_name, node_name)
        self._free.pop(class_name, None)
        self._ring.pop(class_name, None)
        self._total.pop(class_name, None)
        self._errors.pop(class_name, None)
        self._largest = {k: v for k, v in self._largest.items() if k[0] != class_name}

    def _forget_slot(self, class_name: str, node_name: str) -> None:
        if self._free.get(class_name, {}).pop(node_name, 0) > 0:
            ring = self._ring[class_name]
            del ring[bisect_left(ring, node_name)]
        self._total.get(class_name, {}).pop(node_name, None)
        slot = (class_name, node_name)
        grouped = self._groups.pop(slot, None)
        if grouped is not None:
            self._largest = {k: v for k, v in self._largest.items() if k[0] != class_name}
            for attr in grouped:
                self._by_attr.get((class_name, attr), {}).pop(node_name, None)
        for key in self._slot_devices.pop(slot, []):
            slots = self._device_slots.get(key)
            if slots is not None:
                slots.discard(slot)
                if not slots:
                    del self._device_slots[key]
            shared = self._shared.get(key)
            if shared is not None:
                shared[1].pop(slot, None)
                if not shared[1]:
                    del self._shared[key]
            if grouped is not None:
                by_slot = self._device_groups.get(key)
                if by_slot is not None:
                    by_slot.pop(slot, None)
                    if not by_slot:
                        del self._device_groups[key]
        self._touch(node_name)
