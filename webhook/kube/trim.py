"""What draxr's caches keep of each object: the fields the webhook and the worker read, nothing more
(client-go's ``TransformFunc``, applied to every listed and watched object before it is stored).

A pod as kube-apiserver serves it is mostly what draxr never reads: ``metadata.managedFields``
(often half of it), images, commands, environment, probes, volumes and mounts, container statuses.
Kept, by kind:

* every kind: ``metadata`` without ``managedFields`` and without the
  ``kubectl.kubernetes.io/last-applied-configuration`` annotation;
* Pod: ``metadata`` name, namespace, uid, resourceVersion, generateName, creationTimestamp,
  deletionTimestamp, labels (pod affinity, topology spread and PodDisruptionBudgets select pods by
  them) and the annotations of draxr's and the resource API's domains; ``spec`` fields the
  scheduling filters and the accounting read (node name, scheduler name, priority, preemption
  policy, node selector, affinity, tolerations, topology spread constraints, scheduling gates,
  resource claims, overhead, pod-level resources) and, for every container and init container, in
  order, its name, resources, restart policy and host ports; ``status`` phase, start time and
  nominated node (preemption; the room a nominated pod keeps), the PodScheduled and
  DisruptionTarget conditions, the request mapping and the claim statuses;
* Node: ``spec``; ``status`` allocatable, the conditions' type and status, the kubelet's version;
* Pod ``spec.volumes``: only those the volume plugins read (claims, in-tree disks and migratable
  sources: ``core.cluster.podvolumes.ANY``); storage kinds: what ``core.cluster.storageobjects``
  keeps, with the resourceVersion;
* everything else (DeviceClass, ResourceSlice, ResourceClaim, ...): the whole object less the
  metadata above. ResourceClaims are written back with PUT from the cache's copy, which must
  therefore keep every field (the API server keeps ``managedFields`` when an update omits them).

The keys of a trimmed object are the module's own constant strings, shared by every object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from ..core.api.objects import Obj
from ..core.cluster import storageobjects
from ..core.cluster.podvolumes import ANY, volumes_with
from ..core.cluster.workloads import WORKLOAD_KINDS

Transform = Callable[[Obj], Obj]

LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"
#: Pod annotations draxr reads live in these domains (draxr.io/align, draxr.io/rewritten, ...).
POD_ANNOTATION_DOMAINS: Final = ("draxr.io/", "resource.kubernetes.io/")

POD_METADATA: Final = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generateName",
    "creationTimestamp",
    "deletionTimestamp",
    "labels",
)
POD_SPEC: Final = (
    "nodeName",
    "schedulerName",
    "priority",
    "preemptionPolicy",
    "nodeSelector",
    "affinity",
    "tolerations",
    "topologySpreadConstraints",
    "schedulingGates",
    "resourceClaims",
    "overhead",
    "resources",
)
CONTAINER: Final = ("name", "resources", "restartPolicy")
HOST_PORT: Final = ("hostPort", "hostIP", "protocol")
POD_STATUS: Final = (
    "phase",
    "startTime",
    "nominatedNodeName",
    "extendedResourceClaimStatus",
    "resourceClaimStatuses",
)
#: The conditions kept: PodScheduled (the worker's own), DisruptionTarget (a victim of preemption).
POD_CONDITIONS: Final = ("PodScheduled", "DisruptionTarget")
POD_CONDITION: Final = ("type", "status", "reason", "message")
NODE_STATUS: Final = ("allocatable",)


def _pick(source: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(source, dict):
        return {}
    return {k: source[k] for k in keys if k in source}


def _annotations(annotations: Any, keep: Callable[[str], bool]) -> dict[str, Any] | None:
    if not isinstance(annotations, dict):
        return None
    kept = {k: v for k, v in annotations.items() if keep(k)}
    return kept or None


def metadata(meta: Any) -> Obj:
    """Any object's metadata without ``managedFields`` and the last-applied annotation."""
    if not isinstance(meta, dict):
        return {}
    out = {k: v for k, v in meta.items() if k != "managedFields" and k != "annotations"}
    kept = _annotations(meta.get("annotations"), lambda k: k != LAST_APPLIED)
    if kept is not None:
        out["annotations"] = kept
    return out


def generic(obj: Obj) -> Obj:
    """The whole object, less ``managedFields`` and the last-applied annotation."""
    out = dict(obj)
    if "metadata" in obj:
        out["metadata"] = metadata(obj["metadata"])
    return out


def _container(container: Any) -> Obj:
    c = _pick(container, CONTAINER)
    ports = container.get("ports") if isinstance(container, dict) else None
    if isinstance(ports, list):
        host = [_pick(p, HOST_PORT) for p in ports if isinstance(p, dict) and p.get("hostPort")]
        if host:
            c["ports"] = host
    return c


def pod(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    m = _pick(meta, POD_METADATA)
    kept = _annotations(
        meta.get("annotations") if isinstance(meta, dict) else None,
        lambda k: k.startswith(POD_ANNOTATION_DOMAINS),
    )
    if kept is not None:
        m["annotations"] = kept
    source_spec = obj.get("spec")
    s = _pick(source_spec, POD_SPEC)
    volumes = volumes_with(obj, ANY)
    if volumes:
        s["volumes"] = volumes
    if isinstance(source_spec, dict):
        for section in ("initContainers", "containers"):
            items = source_spec.get(section)
            if isinstance(items, list):
                s[section] = [_container(c) for c in items]
    source_status = obj.get("status")
    st = _pick(source_status, POD_STATUS)
    conditions = source_status.get("conditions") if isinstance(source_status, dict) else None
    if isinstance(conditions, list):
        scheduled = [
            _pick(c, POD_CONDITION)
            for c in conditions
            if isinstance(c, dict) and c.get("type") in POD_CONDITIONS
        ]
        if scheduled:
            st["conditions"] = scheduled
    out: Obj = {"apiVersion": obj.get("apiVersion", "v1"), "kind": obj.get("kind", "Pod"), "metadata": m}
    out["spec"] = s
    out["status"] = st
    return out


def node(obj: Obj) -> Obj:
    out: Obj = {
        "apiVersion": obj.get("apiVersion", "v1"),
        "kind": obj.get("kind", "Node"),
        "metadata": metadata(obj.get("metadata")),
    }
    if isinstance(obj.get("spec"), dict):
        out["spec"] = obj["spec"]
    source_status = obj.get("status")
    st = _pick(source_status, NODE_STATUS)
    if isinstance(source_status, dict):
        conditions = source_status.get("conditions")
        if isinstance(conditions, list):
            st["conditions"] = [_pick(c, ("type", "status")) for c in conditions if isinstance(c, dict)]
        info = _pick(source_status.get("nodeInfo"), ("kubeletVersion",))
        if info:
            st["nodeInfo"] = info
    out["status"] = st
    return out


_KEPT_STORAGE: Final[dict[str, Transform]] = {
    "PersistentVolumeClaim": storageobjects.kept_pvc,
    "PersistentVolume": storageobjects.kept_pv,
    "StorageClass": storageobjects.kept_storage_class,
    "CSINode": storageobjects.kept_csi_node,
    "CSIDriver": storageobjects.kept_csi_driver,
    "CSIStorageCapacity": storageobjects.kept_capacity,
    "VolumeAttachment": storageobjects.kept_attachment,
}


def _storage(kind: str) -> Transform:
    """What the engine keeps of a storage object (``storageobjects.KEPT``), with its kind and its
    resourceVersion (a relist compares it)."""
    keep = _KEPT_STORAGE[kind]

    def transform(obj: Obj) -> Obj:
        out = keep(obj)
        out["apiVersion"] = obj.get("apiVersion")
        out["kind"] = kind
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if rv is not None:
            out.setdefault("metadata", {})["resourceVersion"] = rv
        return out

    return transform


#: The transform of each kind the caches hold; kinds not named here keep everything but metadata noise.
def selector_only(obj: Obj) -> Obj:
    """A Service's or workload controller's name, namespace, kind and ``spec.selector``: all
    PodTopologySpread's system defaults read (a ReplicaSet's pod template is most of its size)."""
    out: Obj = {
        "metadata": _pick(obj.get("metadata"), ("name", "namespace", "uid", "resourceVersion")),
        "spec": _pick(obj.get("spec"), ("selector",)),
    }
    if "kind" in obj:
        out["kind"] = obj["kind"]
    return out


BY_KIND: Final[dict[str, Transform]] = {
    "Pod": pod,
    "Node": node,
    **{kind: _storage(kind) for kind in _KEPT_STORAGE},
    **dict.fromkeys(WORKLOAD_KINDS, selector_only),
}


def for_kind(kind: str) -> Transform:
    return BY_KIND.get(kind, generic)


__all__ = [
    "BY_KIND",
    "LAST_APPLIED",
    "Transform",
    "for_kind",
    "generic",
    "metadata",
    "node",
    "pod",
    "selector_only",
]
