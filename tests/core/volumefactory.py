"""Builders for the storage objects of the volume plugins' tests, after upstream's
``volumebinding/test_utils.go`` (``makePVC``, ``makePV``, ``makeNode``...) and the scheduler's
``st.Make*`` wrappers: PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes, CSIDrivers,
CSIStorageCapacities, VolumeAttachments, and pod volumes."""

from __future__ import annotations

from typing import Any

from webhook.core.api.objects import Obj

HOSTNAME = "kubernetes.io/hostname"
WAIT = "WaitForFirstConsumer"
IMMEDIATE = "Immediate"


def pvc(
    name: str,
    storage_class: str | None = None,
    *,
    namespace: str = "default",
    request: str | None = None,
    volume_name: str = "",
    bound: bool = False,
    access_modes: list[str] | None = None,
    phase: str | None = None,
    annotations: dict[str, str] | None = None,
    owner_uid: str | None = None,
    **spec: Any,
) -> Obj:
    """``makePVC(name, class)``; ``bound``: ``withBoundPV(volume_name)`` (the bind-completed
    annotation too)."""
    s: Obj = {}
    if storage_class is not None:
        s["storageClassName"] = storage_class
    if request is not None:
        s["resources"] = {"requests": {"storage": request}}
    if access_modes is not None:
        s["accessModes"] = list(access_modes)
    if volume_name:
        s["volumeName"] = volume_name
    s.update(spec)
    meta: Obj = {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"}
    ann = dict(annotations or {})
    if bound:
        ann["pv.kubernetes.io/bind-completed"] = "true"
    if ann:
        meta["annotations"] = ann
    if owner_uid is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "owner", "uid": owner_uid, "controller": True}
        ]
    out: Obj = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": s}
    if phase is not None:
        out["status"] = {"phase": phase}
    return out


def pv(
    name: str,
    storage_class: str = "",
    *,
    capacity: str | None = None,
    phase: str | None = "Available",
    node_affinity: dict[str, list[str]] | None = None,
    access_modes: list[str] | None = None,
    claim: Obj | None = None,
    labels: dict[str, str] | None = None,
    csi: tuple[str, str] | None = None,
    **spec: Any,
) -> Obj:
    """``makePV(name, class)`` with ``withPhase``, ``withCapacity``, ``withNodeAffinity`` (one
    term, ``In`` per key); ``claim``: the PVC its ``claimRef`` names; ``csi``: (driver, handle)."""
    s: Obj = {"storageClassName": storage_class} if storage_class else {}
    if capacity is not None:
        s["capacity"] = {"storage": capacity}
    if node_affinity is not None:
        exprs = [{"key": k, "operator": "In", "values": list(v)} for k, v in node_affinity.items()]
        s["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": exprs}]}}
    if access_modes is not None:
        s["accessModes"] = list(access_modes)
    if claim is not None:
        s["claimRef"] = {
            "kind": "PersistentVolumeClaim",
            "apiVersion": "v1",
            "namespace": claim["metadata"]["namespace"],
            "name": claim["metadata"]["name"],
            "uid": claim["metadata"].get("uid", ""),
        }
    if csi is not None:
        s["csi"] = {"driver": csi[0], "volumeHandle": csi[1]}
    s.update(spec)
    meta: Obj = {"name": name}
    if labels:
        meta["labels"] = dict(labels)
    out: Obj = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": s}
    if phase is not None:
        out["status"] = {"phase": phase}
    return out


def storage_class(
    name: str,
    mode: str | None = IMMEDIATE,
    provisioner: str = "",
    *,
    allowed_topologies: dict[str, list[str]] | None = None,
    default: bool = False,
) -> Obj:
    out: Obj = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name}}
    if provisioner:
        out["provisioner"] = provisioner
    if mode is not None:
        out["volumeBindingMode"] = mode
    if allowed_topologies is not None:
        exprs = [{"key": k, "values": list(v)} for k, v in allowed_topologies.items()]
        out["allowedTopologies"] = [{"matchLabelExpressions": exprs}]
    if default:
        out["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    return out


def csi_node(name: str, drivers: dict[str, int | None], annotations: dict[str, str] | None = None) -> Obj:
    """A CSINode with one driver per entry: its ``allocatable.count`` (None: no limit)."""
    ds: list[Obj] = []
    for driver, count in drivers.items():
        d: Obj = {"name": driver, "nodeID": name}
        if count is not None:
            d["allocatable"] = {"count": count}
        ds.append(d)
    meta: Obj = {"name": name}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": meta, "spec": {"drivers": ds}}


def csi_driver(name: str, **spec: Any) -> Obj:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": name}, "spec": spec}


def capacity(
    name: str, storage_class_name: str, node_labels: dict[str, str], capacity_: str, maximum: str = ""
) -> Obj:
    """``makeCapacity``: a CSIStorageCapacity for the nodes with these labels."""
    out: Obj = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIStorageCapacity",
        "metadata": {"name": name, "namespace": "kube-system"},
        "storageClassName": storage_class_name,
        "nodeTopology": {"matchLabels": dict(node_labels)},
    }
    if capacity_:
        out["capacity"] = capacity_
    if maximum:
        out["maximumVolumeSize"] = maximum
    return out


def volume_attachment(name: str, node: str, attacher: str, pv_name: str | None) -> Obj:
    source: Obj = {"persistentVolumeName": pv_name} if pv_name is not None else {}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": name},
        "spec": {"attacher": attacher, "nodeName": node, "source": source},
    }


def claim_volume(claim: str, name: str = "") -> Obj:
    """``withPVCVolume(claim, name)``."""
    return {"name": name or claim, "persistentVolumeClaim": {"claimName": claim}}


def ephemeral_volume(name: str) -> Obj:
    """``withGenericEphemeralVolume(name)``."""
    return {"name": name, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}


def with_volumes(pod: Obj, *volumes: Obj) -> Obj:
    pod["spec"].setdefault("volumes", []).extend(volumes)
    return pod
