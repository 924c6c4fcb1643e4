"""The storage side of the cluster as the volume plugins read it: PersistentVolumeClaims,
PersistentVolumes (by class), StorageClasses, CSINodes, CSIDrivers, CSIStorageCapacities (by class)
and VolumeAttachments (by node), each kept trimmed (``storageobjects``); and upstream's assume cache
over the claims and volumes.

The assume cache (``assumecache``, over claims and volumes): Reserve assumes, in memory only, the
volumes a decision binds statically (with their ``claimRef``) and the claims it provisions (with
``volume.kubernetes.io/selected-node``), so that the next decision sees them taken (or selected)
before the API shows either; Unreserve restores them; a newer version from the informer (the API's
answer to PreBind, say) replaces them.

``watched``: whether the state is fed the storage kinds at all (set by the first one applied, or by
the caller that knows it watches them). Until it is, the volume plugins skip every pod, as the engine
did before it knew volumes: a consumer that does not watch claims (an admission cache, a worker not
wired yet) does not find every claim missing.

The decision's volume data (``PodVolumes``: upstream's ``PodVolumes``, the static bindings and the
dynamic provisions Filter found on the chosen node) is defined here, as Reserve assumes from it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from ..api.objects import Obj, as_str, name, namespace, spec
from ..api.pvhelpers import bind_volume_to_claim, volume_class, with_selected_node
from .assumecache import AssumeCache
from .storageobjects import (
    kept_attachment,
    kept_capacity,
    kept_csi_driver,
    kept_csi_node,
    kept_pv,
    kept_pvc,
    kept_storage_class,
)

ClaimKey = tuple[str, str]  # (namespace, name)
K = TypeVar("K")


@dataclass(frozen=True, slots=True)
class StaticBinding:
    """Upstream's ``BindingInfo``: an unbound claim and the available volume chosen for it."""

    pvc: Obj
    pv: Obj


@dataclass(frozen=True, slots=True)
class DynamicProvision:
    """Upstream's ``DynamicProvision``: an unbound claim to provision on the chosen node, and the
    CSIStorageCapacity that has room for it there (when the driver tracks capacity)."""

    pvc: Obj
    capacity: Obj | None = None


@dataclass(slots=True)
class PodVolumes:
    """Upstream's ``PodVolumes`` for one node: what binding the pod's unbound claims there takes."""

    static: list[StaticBinding] = field(default_factory=list)
    dynamic: list[DynamicProvision] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.static or self.dynamic)

    def assumed(self, node: str) -> tuple[list[Obj], list[Obj]]:
        """``AssumePodVolumes``' objects: the volumes bound to their claims (those the binding
        changes), and the claims with the selected node."""
        pvs = []
        for b in self.static:
            pv, dirty = bind_volume_to_claim(b.pv, b.pvc)
            if dirty:
                pvs.append(pv)
        return pvs, [with_selected_node(p.pvc, node) for p in self.dynamic]


class VolumeState:
    def __init__(self) -> None:
        self.watched = False
        self._claims: AssumeCache[ClaimKey] = AssumeCache()
        self._volumes: AssumeCache[str] = AssumeCache()
        self._volumes_by_class: dict[str, dict[str, None]] = {}
        self.storage_classes: dict[str, Obj] = {}
        self.csi_nodes: dict[str, Obj] = {}
        self.csi_drivers: dict[str, Obj] = {}
        self._capacities: dict[ClaimKey, Obj] = {}
        self._capacities_by_class: dict[str, dict[ClaimKey, None]] = {}
        self._attachments: dict[str, Obj] = {}
        self._attachments_by_node: dict[str, dict[str, None]] = {}
        #: Reserve's token -> the claims and volumes it assumed.
        self._by_token: dict[str, tuple[list[ClaimKey], list[str]]] = {}

    # -- objects from the informers ------------------------------------------------------------------

    def upsert(self, kind: str, obj: Obj) -> None:
        self.watched = True
        if kind == "PersistentVolumeClaim":
            self._claims.put((namespace(obj), name(obj)), kept_pvc(obj))
        elif kind == "PersistentVolume":
            kept = kept_pv(obj)
            old = self._volumes.put(name(obj), kept)
            if old is not None:
                _discard(self._volumes_by_class, volume_class(old), name(obj))
            self._volumes_by_class.setdefault(volume_class(kept), {})[name(obj)] = None
        elif kind == "StorageClass":
            self.storage_classes[name(obj)] = kept_storage_class(obj)
        elif kind == "CSINode":
            self.csi_nodes[name(obj)] = kept_csi_node(obj)
        elif kind == "CSIDriver":
            self.csi_drivers[name(obj)] = kept_csi_driver(obj)
        elif kind == "CSIStorageCapacity":
            k = (namespace(obj), name(obj))
            self._drop_capacity(k)
            kept = self._capacities[k] = kept_capacity(obj)
            self._capacities_by_class.setdefault(as_str(kept.get("storageClassName")), {})[k] = None
        elif kind == "VolumeAttachment":
            self._drop_attachment(name(obj))
            kept = self._attachments[name(obj)] = kept_attachment(obj)
            self._attachments_by_node.setdefault(as_str(spec(kept).get("nodeName")), {})[name(obj)] = None
        else:
            raise ValueError(kind)

    def remove(self, kind: str, obj: Obj) -> None:
        if kind == "PersistentVolumeClaim":
            self._claims.delete((namespace(obj), name(obj)))
        elif kind == "PersistentVolume":
            old = self._volumes.delete(name(obj))
            if old is not None:
                _discard(self._volumes_by_class, volume_class(old), name(obj))
        elif kind == "StorageClass":
            self.storage_classes.pop(name(obj), None)
        elif kind == "CSINode":
            self.csi_nodes.pop(name(obj), None)
        elif kind == "CSIDriver":
            self.csi_drivers.pop(name(obj), None)
        elif kind == "CSIStorageCapacity":
            self._drop_capacity((namespace(obj), name(obj)))
        elif kind == "VolumeAttachment":
            self._drop_attachment(name(obj))
        else:
            raise ValueError(kind)

    def _drop_capacity(self, k: ClaimKey) -> None:
        old = self._capacities.pop(k, None)
        if old is not None:
            _discard(self._capacities_by_class, as_str(old.get("storageClassName")), k)

    def _drop_attachment(self, va_name: str) -> None:
        old = self._attachments.pop(va_name, None)
        if old is not None:
            _discard(self._attachments_by_node, as_str(spec(old).get("nodeName")), va_name)

    # -- reads (the assume cache's view) -------------------------------------------------------------

    def claim(self, claim_namespace: str, claim_name: str) -> Obj | None:
        """The claim, or the one Reserve assumed while it is current."""
        return self._claims.get((claim_namespace, claim_name))

    def volume(self, pv_name: str) -> Obj | None:
        """The volume, or the one Reserve assumed while it is current."""
        return self._volumes.get(pv_name)

    def api_claim(self, claim_namespace: str, claim_name: str) -> Obj | None:
        """The claim as the informer has it (``GetAPIPVC``: never the assumed one)."""
        return self._claims.stored.get((claim_namespace, claim_name))

    def api_volume(self, pv_name: str) -> Obj | None:
        """The volume as the informer has it (``GetAPIPV``)."""
        return self._volumes.stored.get(pv_name)

    def volumes_of_class(self, class_name: str) -> list[Obj]:
        """``ListPVs``: the volumes of a class, assumed ones as assumed, by name."""
        out = []
        for n in sorted(self._volumes_by_class.get(class_name, ())):
            pv = self.volume(n)
            if pv is not None:
                out.append(pv)
        return out

    def capacities_of_class(self, class_name: str) -> Iterator[Obj]:
        """The CSIStorageCapacities of a class, by namespace and name."""
        for k in sorted(self._capacities_by_class.get(class_name, ())):
            yield self._capacities[k]

    def attachments_on(self, node_name: str) -> Iterator[Obj]:
        """The VolumeAttachments to a node."""
        for n in self._attachments_by_node.get(node_name, ()):
            yield self._attachments[n]

    # -- the assume cache ----------------------------------------------------------------------------

    def assume(self, token: str, volumes: list[Obj], claims: list[Obj]) -> None:
        """Reserve: the objects count as given until ``restore(token)`` or a newer version (an
        object changed since the decision read it is not assumed: upstream's Assume refuses it)."""
        self.restore(token)
        kept_claims = [k for c in claims if self._claims.assume(k := (namespace(c), name(c)), c, token)]
        kept_volumes = [name(v) for v in volumes if self._volumes.assume(name(v), v, token)]
        self._by_token[token] = (kept_claims, kept_volumes)

    def restore(self, token: str) -> None:
        """Unreserve: what ``token`` assumed (and still holds) is forgotten."""
        claim_keys, volume_names = self._by_token.pop(token, ([], []))
        for k in claim_keys:
            self._claims.restore(k, token)
        for n in volume_names:
            self._volumes.restore(n, token)


def _discard(index: dict[str, dict[K, None]], k: str, member: K) -> None:
    members = index.get(k)
    if members is not None:
        members.pop(member, None)
        if not members:
            del index[k]
