"""The cluster as the scheduling engine sees it: objects in, consistent derived views out.

``ClusterState`` composes four parts and keeps them consistent on every change:

* ``nodes``: upstream's NodeInfo per node (``nodeinfo``);
* ``classes``: DeviceClass resolution by extended resource name (``deviceclasses``);
* ``devices``: slices, pools and per-node candidates (``devices``, the device index);
* ``allocated``: taken devices, shares of multi-allocatable ones, in-flight reservations and what
  pods take from nodes (``allocated``);
* ``capacity``: free-device counts per (class, node), following the other parts (``capacity``);
* ``volumes``: claims, volumes, storage classes, CSI nodes, drivers, capacities and attachments,
  with the assume cache of in-flight volume bindings (``volumes``).
* ``namespaces``: Namespaces' labels, for pod affinity's ``namespaceSelector`` (``namespaces``).

It performs no I/O and reads no clock; callers serialise access (one lock around it). ``version``
bumps on every change so callers can cache derived answers.
"""

from __future__ import annotations

from ..api.alignment import align_by
from ..api.capacityrequests import class_capacity_requests
from ..api.objects import Obj, name, namespace, uid
from ..cel import SelectorEngine
from .allocated import AllocatedState, ClaimKey, Share, allocated_devices, claim_key
from .capacity import FreeDevices
from .deviceclasses import ClassResolver
from .devices import DeviceIndex, NodeDevices, class_selectors
from .namespaces import Namespaces
from .nodeinfo import NodeInfo, Nodes
from .slices import DeviceKey
from .volumes import PodVolumes, VolumeState
from .workloads import WORKLOAD_KINDS, Workloads

#: The storage kinds ``apply`` keeps in ``volumes``.
STORAGE_KINDS = frozenset(
    {
        "PersistentVolumeClaim",
        "PersistentVolume",
        "StorageClass",
        "CSINode",
        "CSIDriver",
        "CSIStorageCapacity",
        "VolumeAttachment",
    }
)


class ClusterState:
    def __init__(self, cel: SelectorEngine | None = None) -> None:
        self.nodes = Nodes()
        self.classes = ClassResolver()
        self.devices = DeviceIndex(self.classes, cel)
        self.allocated = AllocatedState(self.nodes, on_flip=self._on_flip, on_shares=self._on_shares)
        self.capacity = FreeDevices(
            self.nodes, self.devices, self.allocated.is_allocated, self.allocated.consumed
        )
        self.volumes = VolumeState()
        self.namespaces = Namespaces()
        self.workloads = Workloads()
        self.version = 0

    @property
    def cel(self) -> SelectorEngine:
        return self.devices.cel

    def _on_flip(self, key: DeviceKey, taken: bool) -> None:
        self.capacity.on_flip(key, taken)

    def _on_shares(self, key: DeviceKey) -> None:
        self.capacity.on_shares(key)

    def apply(self, kind: str, obj: Obj, deleted: bool = False) -> bool:
        """Add, update or remove an object of a kind the engine reads; False for other kinds."""
        if kind == "Node":
            self.remove_node(name(obj)) if deleted else self.upsert_node(obj)
        elif kind == "DeviceClass":
            self.remove_class(name(obj)) if deleted else self.upsert_class(obj)
        elif kind == "ResourceSlice":
            self._devices_changed(
                self.devices.remove_slice(name(obj)) if deleted else self.devices.upsert_slice(obj)
            )
        elif kind == "DeviceTaintRule":
            self._devices_changed(
                self.devices.remove_taint_rule(name(obj)) if deleted else self.devices.upsert_taint_rule(obj)
            )
        elif kind == "ResourceClaim":
            if deleted:
                self.allocated.remove_claim(namespace(obj), name(obj))
            else:
                self.allocated.upsert_claim(obj)
        elif kind == "Pod":
            if deleted:
                self.allocated.remove_pod(uid(obj))
            else:
                self.allocated.upsert_pod(obj)
        elif kind in STORAGE_KINDS:
            self.volumes.remove(kind, obj) if deleted else self.volumes.upsert(kind, obj)
        elif kind == "Namespace":
            self.namespaces.remove(name(obj)) if deleted else self.namespaces.upsert(obj)
        elif kind in WORKLOAD_KINDS:
            self.workloads.remove(kind, obj) if deleted else self.workloads.upsert(kind, obj)
        else:
            return False
        self.version += 1
        return True

    # -- changes that reach more than one part ----------------------------------------------------

    def upsert_node(self, node: Obj) -> None:
        change = self.nodes.upsert(node)
        if change.added:
            self.allocated.node_added(name(node))
            self.capacity.node_added()
        if change.relabelled or change.added:
            self.devices.invalidate_node(name(node))
            self.capacity.forget_nodes([name(node)])
        else:
            self.devices.refresh_node(node)

    def remove_node(self, node_name: str) -> None:
        self.nodes.remove(node_name)
        self.devices.invalidate_node(node_name)
        self.capacity.forget_nodes([node_name])

    def upsert_class(self, device_class: Obj) -> None:
        old = self.classes.get(name(device_class))
        tolerated = self.classes.tolerations(name(device_class))
        self.classes.upsert(device_class)
        if (
            old is None
            or class_selectors(old) != class_selectors(device_class)
            or align_by(old) != align_by(device_class)
            or class_capacity_requests(old) != class_capacity_requests(device_class)
            or tolerated != self.classes.tolerations(name(device_class))
        ):
            self._class_changed(name(device_class))

    def remove_class(self, class_name: str) -> None:
        self.classes.remove(class_name)
        self._class_changed(class_name)

    def _class_changed(self, class_name: str) -> None:
        self.devices.invalidate_class(class_name)
        self.capacity.forget_class(class_name)

    def set_binding_conditions(self, enabled: bool) -> None:
        """``DRADeviceBindingConditions`` of the served release (``gates.binding_conditions_gate``):
        on, devices with binding conditions are allocated (last among equals) and counted."""
        if self.devices.set_binding_conditions(enabled):
            self.capacity.forget_nodes(self.nodes.names())
            self.version += 1

    def set_cel_release(self, release: tuple[int, int] | None) -> None:
        """Selectors compile as the served release's kube-scheduler compiles them (None: unknown,
        the newest); a change drops every class's selection on every node."""
        if self.cel.set_release(release):
            for class_name in [str(dc["metadata"]["name"]) for dc in self.classes.classes()]:
                self._class_changed(class_name)
            self.version += 1

    def _devices_changed(self, dropped: list[str]) -> None:
        self.capacity.forget_nodes(dropped)

    # -- Reserve and its undo ------------------------------------------------------------------------

    def reserve(
        self,
        token: str,
        devices: list[DeviceKey],
        pod: Obj,
        node_name: str,
        volumes: PodVolumes | None = None,
        shares: list[Share] | None = None,
    ) -> None:
        """The devices are taken, the shares held, the pod counts on the node and its volume
        bindings are assumed, before the API shows any of them."""
        self.allocated.reserve_devices(token, devices, shares or ())
        self.allocated.assume_pod(pod, node_name)
        if volumes:
            self.volumes.assume(token, *volumes.assumed(node_name))
        self.version += 1

    def unreserve(self, token: str, pod: Obj | None = None) -> None:
        """Undo a reservation; with ``pod``, the pod no longer counts on its node either (a pod
        already seen bound stays)."""
        self.allocated.unreserve_devices(token)
        self.volumes.restore(token)
        if pod is not None:
            self.allocated.forget_pod(pod)
        self.version += 1

    # -- views -------------------------------------------------------------------------------------

    def node_devices(self, node_name: str) -> NodeDevices | None:
        info = self.nodes.get(node_name)
        return self.devices.node_devices(info.node) if info is not None else None


__all__ = ["ClaimKey", "ClusterState", "NodeDevices", "NodeInfo", "Share", "allocated_devices", "claim_key"]
