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
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterable

from ..api.alignment import align_by
from .devices import DeviceIndex
from .nodeinfo import Nodes
from .slices import Device, DeviceKey
from .topology import Group, Groups, group_devices

Slot = tuple[str, str]  # (class, node)


class FreeDevices:
    def __init__(self, nodes: Nodes, devices: DeviceIndex, is_allocated: Callable[[DeviceKey], bool]) -> None:
        self._nodes = nodes
        self._devices = devices
        self._is_allocated = is_allocated
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
            total[node_name] = len(cands)
            free[node_name] = count = sum(1 for d in cands if not self._is_allocated(d.key))
            if count > 0:
                insort(self._ring.setdefault(class_name, []), node_name)
            slot = (class_name, node_name)
            self._slot_devices[slot] = [d.key for d in cands]
            for d in cands:
                self._device_slots.setdefault(d.key, set()).add(slot)
            attrs = align_by(self._devices.classes.get(class_name))
            if attrs:
                self._count_groups(slot, cands, attrs)
        self._complete.add(class_name)
        return free

    def available(self, class_name: str) -> list[str]:
        """Nodes with at least one free candidate device of the class, sorted by name (a shared
        list, kept up in place: do not change it)."""
        self.free(class_name)
        return self._ring.get(class_name, [])

    def _count_groups(self, slot: Slot, cands: list[Device], attrs: tuple[str, ...]) -> None:
        by_attr: dict[str, Groups] = {}
        for attr in attrs:
            groups, values = group_devices(cands, attr, self._is_allocated)
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
        for cls, node in self._device_slots.get(key, ()):
            bucket = self._free.get(cls)
            if bucket is not None and node in bucket:
                before = bucket[node]
                bucket[node] = after = before + (-1 if taken else 1)
                if before > 0 and after <= 0:
                    ring = self._ring[cls]
                    del ring[bisect_left(ring, node)]
                elif before <= 0 and after > 0:
                    insort(self._ring.setdefault(cls, []), node)
        grouped = self._device_groups.get(key)
        if grouped:
            for groups in grouped.values():
                for g in groups:
                    g.free += -1 if taken else 1

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
            if grouped is not None:
                by_slot = self._device_groups.get(key)
                if by_slot is not None:
                    by_slot.pop(slot, None)
                    if not by_slot:
                        del self._device_groups[key]
