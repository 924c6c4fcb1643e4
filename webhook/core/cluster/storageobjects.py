"""The storage objects as the engine keeps them: each trimmed to what the volume plugins, the assume
cache and PreBind read, in the API's own shape (so the same helpers read a full object or a kept one),
with the API server's defaults where a manifest may leave them out.

``KEPT`` names, per kind, the fields kept: what an informer's trim must keep for the engine too.
A copy is made of what is kept, so the engine's memory per object is bounded by these fields
whatever the object carries (managed fields, status conditions, the rest of a PV's source)."""

from __future__ import annotations

from typing import Any, Final

from ..api.objects import Obj, annotations_of, as_dict, as_list, meta, spec, status
from ..api.pvhelpers import (
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    BETA_STORAGE_CLASS,
    IMMEDIATE,
    IS_DEFAULT_CLASS,
)

#: Per kind, the fields the engine keeps (dotted paths; ``[]`` a list's items).
KEPT: Final[dict[str, tuple[str, ...]]] = {
    "PersistentVolumeClaim": (
        "metadata.name",
        "metadata.namespace",
        "metadata.uid",
        "metadata.resourceVersion",
        "metadata.deletionTimestamp",
        f"metadata.annotations[{ANN_SELECTED_NODE}, {ANN_BIND_COMPLETED}, {ANN_BOUND_BY_CONTROLLER}, "
        f"{BETA_STORAGE_CLASS}]",
        "metadata.ownerReferences[] (the controller's apiVersion, kind, name, uid, controller)",
        "spec.accessModes",
        "spec.resources.requests.storage",
        "spec.selector",
        "spec.storageClassName",
        "spec.volumeName",
        "spec.volumeMode",
        "spec.volumeAttributesClassName",
        "status.phase",
    ),
    "PersistentVolume": (
        "metadata.name",
        "metadata.resourceVersion",
        "metadata.deletionTimestamp",
        "metadata.labels",
        f"metadata.annotations[{BETA_STORAGE_CLASS}, {ANN_BOUND_BY_CONTROLLER}]",
        "spec.capacity.storage",
        "spec.accessModes",
        "spec.claimRef (apiVersion, kind, namespace, name, uid, resourceVersion)",
        "spec.storageClassName",
        "spec.volumeMode",
        "spec.volumeAttributesClassName",
        "spec.nodeAffinity",
        "spec.csi (driver, volumeHandle)",
        "spec.gcePersistentDisk.pdName, spec.awsElasticBlockStore.volumeID, spec.azureDisk (diskURI, kind), "
        "spec.cinder.volumeID, spec.portworxVolume.volumeID, spec.azureFile, spec.vsphereVolume (presence)",
        "status.phase",
    ),
    "StorageClass": (
        "metadata.name",
        "metadata.creationTimestamp",
        "metadata.annotations[storageclass.kubernetes.io/is-default-class, "
        "storageclass.beta.kubernetes.io/is-default-class]",
        "provisioner",
        "volumeBindingMode (default Immediate)",
        "allowedTopologies",
    ),
    "CSINode": ("metadata.name", "spec.drivers[] (name, allocatable.count)"),
    "CSIDriver": ("metadata.name", "spec.storageCapacity", "spec.preventPodSchedulingIfMissing"),
    "CSIStorageCapacity": (
        "metadata.name",
        "metadata.namespace",
        "storageClassName",
        "nodeTopology",
        "capacity",
        "maximumVolumeSize",
    ),
    "VolumeAttachment": (
        "metadata.name",
        "spec.attacher",
        "spec.nodeName",
        "spec.source.persistentVolumeName",
    ),
}

_PVC_ANNOTATIONS: Final = (ANN_SELECTED_NODE, ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, BETA_STORAGE_CLASS)
_PV_ANNOTATIONS: Final = (BETA_STORAGE_CLASS, ANN_BOUND_BY_CONTROLLER)
#: What of each in-tree source is read: its id (NodeVolumeLimits' translation), else presence.
_IN_TREE_FIELDS: Final = {
    "gcePersistentDisk": ("pdName",),
    "awsElasticBlockStore": ("volumeID",),
    "azureDisk": ("diskURI", "kind"),
    "cinder": ("volumeID",),
    "portworxVolume": ("volumeID",),
    "azureFile": (),
    "vsphereVolume": (),
}


def _pick(source: Obj, keys: tuple[str, ...]) -> Obj:
    return {k: source[k] for k in keys if k in source}


def _metadata(obj: Obj, keys: tuple[str, ...], annotations: tuple[str, ...]) -> Obj:
    m = _pick(meta(obj), keys)
    ann = annotations_of(obj)
    kept = {k: ann[k] for k in annotations if k in ann}
    if kept:
        m["annotations"] = kept
    return m


def _without_empty(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if v not in (None, {}, [])}


def kept_pvc(pvc: Obj) -> Obj:
    m = _metadata(pvc, ("name", "namespace", "uid", "resourceVersion", "deletionTimestamp"), _PVC_ANNOTATIONS)
    owners = [
        _pick(as_dict(r), ("apiVersion", "kind", "name", "uid", "controller"))
        for r in as_list(meta(pvc).get("ownerReferences"))
        if as_dict(r).get("controller") is True
    ]
    if owners:
        m["ownerReferences"] = owners
    s = spec(pvc)
    kept_spec = _pick(
        s,
        (
            "accessModes",
            "selector",
            "storageClassName",
            "volumeName",
            "volumeMode",
            "volumeAttributesClassName",
        ),
    )
    storage = as_dict(as_dict(s.get("resources")).get("requests")).get("storage")
    if storage is not None:
        kept_spec["resources"] = {"requests": {"storage": storage}}
    return _without_empty({"metadata": m, "spec": kept_spec, "status": _pick(status(pvc), ("phase",))})


def kept_pv(pv: Obj) -> Obj:
    m = _metadata(pv, ("name", "resourceVersion", "deletionTimestamp", "labels"), _PV_ANNOTATIONS)
    s = spec(pv)
    kept_spec = _pick(
        s,
        ("accessModes", "storageClassName", "volumeMode", "volumeAttributesClassName", "nodeAffinity"),
    )
    storage = as_dict(s.get("capacity")).get("storage")
    if storage is not None:
        kept_spec["capacity"] = {"storage": storage}
    ref = s.get("claimRef")
    if isinstance(ref, dict):
        kept_spec["claimRef"] = _pick(
            ref, ("apiVersion", "kind", "namespace", "name", "uid", "resourceVersion")
        )
    csi = s.get("csi")
    if isinstance(csi, dict):
        kept_spec["csi"] = _pick(csi, ("driver", "volumeHandle"))
    for field, keys in _IN_TREE_FIELDS.items():
        source = s.get(field)
        if isinstance(source, dict):
            kept_spec[field] = _pick(source, keys)
    return _without_empty({"metadata": m, "spec": kept_spec, "status": _pick(status(pv), ("phase",))})


def kept_storage_class(sc: Obj) -> Obj:
    m = _metadata(sc, ("name", "creationTimestamp"), IS_DEFAULT_CLASS)
    out: Obj = {"metadata": m, "volumeBindingMode": sc.get("volumeBindingMode") or IMMEDIATE}
    out.update(_pick(sc, ("provisioner", "allowedTopologies")))
    return out


def kept_csi_node(csi_node: Obj) -> Obj:
    drivers: list[Obj] = []
    for raw in as_list(spec(csi_node).get("drivers")):
        d = as_dict(raw)
        kept: Obj = {"name": d.get("name")}
        count = as_dict(d.get("allocatable")).get("count")
        if count is not None:
            kept["allocatable"] = {"count": count}
        drivers.append(kept)
    return {"metadata": _pick(meta(csi_node), ("name",)), "spec": {"drivers": drivers}}


def kept_csi_driver(driver: Obj) -> Obj:
    return {
        "metadata": _pick(meta(driver), ("name",)),
        "spec": _pick(spec(driver), ("storageCapacity", "preventPodSchedulingIfMissing")),
    }


def kept_capacity(capacity: Obj) -> Obj:
    out: Obj = {"metadata": _pick(meta(capacity), ("name", "namespace"))}
    out.update(_pick(capacity, ("storageClassName", "nodeTopology", "capacity", "maximumVolumeSize")))
    return out


def kept_attachment(attachment: Obj) -> Obj:
    s = spec(attachment)
    kept_spec: Obj = _pick(s, ("attacher", "nodeName"))
    pv_name = as_dict(s.get("source")).get("persistentVolumeName")
    if pv_name is not None:
        kept_spec["source"] = {"persistentVolumeName": pv_name}
    return {"metadata": _pick(meta(attachment), ("name",)), "spec": kept_spec}


def storage_class_mode(sc: Any) -> str:
    """``volumeBindingMode`` (the API server's default, Immediate, when left out)."""
    mode = as_dict(sc).get("volumeBindingMode")
    return mode if isinstance(mode, str) and mode else IMMEDIATE
