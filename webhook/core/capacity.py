"""Free-device counts per (DeviceClass, node): Filter's precheck and Score's counts.

For each class, how many devices of each node a selector-less, toleration-less request could take
(``total``) and how many of those are not taken (``free``). A class's counts are built on first
use; afterwards a device that becomes taken or free moves one count (``on_flip``), and a node whose
device view was dropped is counted again on the next use. Nothing here scans the cluster per
decision.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .devices import DeviceIndex
from .nodeinfo import Nodes
from .slices import DeviceKey

Slot = tuple[str, str]  # (class, node)


class FreeDevices:
    def __init__(self, nodes: Nodes, devices: DeviceIndex, is_allocated: Callable[[DeviceKey], bool]) -> None:
        self._nodes = nodes
        self._devices = devices
        self._is_allocated = is_allocated
        self._free: dict[str, dict[str, int]] = {}
        self._total: dict[str, dict[str, int]] = {}
        self._counted: dict[str, set[str]] = {}  # class -> nodes whose counts are loaded
        self._complete: set[str] = set()  # classes whose counts cover every node
        self._device_slots: dict[DeviceKey, set[Slot]] = {}
        self._slot_devices: dict[Slot, list[DeviceKey]] = {}

    def free(self, class_name: str) -> dict[str, int]:
        """Node -> free candidate devices of the class."""
        free = self._free.setdefault(class_name, {})
        if class_name in self._complete:
            return free
        loaded = self._counted.setdefault(class_name, set())
        total = self._total.setdefault(class_name, {})
        for node_name, info in self._nodes.items():
            if node_name in loaded:
                continue
            loaded.add(node_name)
            cands = self._devices.node_devices(info.node).special_candidates(class_name)
            if not cands:
                continue
            total[node_name] = len(cands)
            free[node_name] = sum(1 for d in cands if not self._is_allocated(d.key))
            slot = (class_name, node_name)
            self._slot_devices[slot] = [d.key for d in cands]
            for d in cands:
                self._device_slots.setdefault(d.key, set()).add(slot)
        self._complete.add(class_name)
        return free

    def total(self, class_name: str) -> dict[str, int]:
        """Node -> candidate devices of the class, taken or not."""
        self.free(class_name)
        return self._total.get(class_name, {})

    # -- keeping up ------------------------------------------------------------------------------

    def on_flip(self, key: DeviceKey, taken: bool) -> None:
        for cls, node in self._device_slots.get(key, ()):
            bucket = self._free.get(cls)
            if bucket is not None and node in bucket:
                bucket[node] += -1 if taken else 1

    def node_added(self) -> None:
        """A new node: every class must count it on its next use."""
        self._complete.clear()

    def forget_nodes(self, node_names: Iterable[str]) -> None:
        """These nodes' device views changed: count them again on the next use."""
        for node_name in node_names:
            self._complete.clear()
            for cls, loaded in self._counted.items():
                if node_name in loaded:
                    loaded.discard(node_name)
                    self._forget_slot(cls, node_name)

    def forget_class(self, class_name: str) -> None:
        """The class's selectors changed (or it went away)."""
        self._complete.discard(class_name)
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
