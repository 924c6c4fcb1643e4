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
  resource claims, overhead, pod-level resources, the pod group) and, for every container and
  init container, in order, its name, resources, restart policy and host ports; ``status`` phase,
  start time and nominated node (preemption; the room a nominated pod keeps), the PodScheduled
  and DisruptionTarget conditions, the request mapping and the claim statuses;
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
from typing import Any, Final, NotRequired, TypedDict, cast

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
    "schedulingGroup",
    "workloadRef",
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


class TrimmedPodMetadata(TypedDict, total=False):
    """``POD_METADATA`` and the annotations of ``POD_ANNOTATION_DOMAINS``."""

    name: str
    namespace: str
    uid: str
    resourceVersion: str
    generateName: str
    creationTimestamp: str
    deletionTimestamp: str
    labels: dict[str, str]
    annotations: dict[str, str]


class HostPort(TypedDict, total=False):
    hostPort: int
    hostIP: str
    protocol: str


class TrimmedContainer(TypedDict, total=False):
    """``CONTAINER``, and the ports that take a host port (NodePorts reads them)."""

    name: str
    resources: dict[str, Any]
    restartPolicy: str
    ports: list[HostPort]


class TrimmedPodSpec(TypedDict, total=False):
    """``POD_SPEC``, the volumes the volume plugins read, every container in order."""

    nodeName: str
    schedulerName: str
    priority: int
    preemptionPolicy: str
    nodeSelector: dict[str, str]
    affinity: dict[str, Any]
    tolerations: list[dict[str, Any]]
    topologySpreadConstraints: list[dict[str, Any]]
    schedulingGates: list[dict[str, Any]]
    resourceClaims: list[dict[str, Any]]
    overhead: dict[str, Any]
    resources: dict[str, Any]
    schedulingGroup: dict[str, str]
    workloadRef: dict[str, str]
    volumes: list[dict[str, Any]]
    initContainers: list[TrimmedContainer]
    containers: list[TrimmedContainer]


class TrimmedCondition(TypedDict, total=False):
    type: str
    status: str
    reason: str
    message: str


class TrimmedPodStatus(TypedDict, total=False):
    """``POD_STATUS`` and the conditions of ``POD_CONDITIONS``."""

    phase: str
    startTime: str
    nominatedNodeName: str
    extendedResourceClaimStatus: dict[str, Any]
    resourceClaimStatuses: list[dict[str, Any]]
    conditions: list[TrimmedCondition]


class TrimmedPod(TypedDict):
    apiVersion: str
    kind: str
    metadata: TrimmedPodMetadata
    spec: TrimmedPodSpec
    status: TrimmedPodStatus


class NodeCondition(TypedDict, total=False):
    type: str
    status: str


class TrimmedNodeStatus(TypedDict, total=False):
    allocatable: dict[str, str]
    conditions: list[NodeCondition]
    nodeInfo: dict[str, str]


class TrimmedNode(TypedDict):
    apiVersion: str
    kind: str
    metadata: dict[str, Any]
    spec: NotRequired[dict[str, Any]]
    status: TrimmedNodeStatus


class SelectorOnly(TypedDict):
    """A Service or workload controller as PodTopologySpread's system defaults read it."""

    kind: NotRequired[str]
    metadata: dict[str, Any]
    spec: dict[str, Any]


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


def _container(container: Any) -> TrimmedContainer:
    c = cast(TrimmedContainer, _pick(container, CONTAINER))
    ports = container.get("ports") if isinstance(container, dict) else None
    if isinstance(ports, list):
        host = [
            cast(HostPort, _pick(p, HOST_PORT)) for p in ports if isinstance(p, dict) and p.get("hostPort")
        ]
        if host:
            c["ports"] = host
    return c


def pod(obj: Obj) -> TrimmedPod:
    meta = obj.get("metadata")
    m = cast(TrimmedPodMetadata, _pick(meta, POD_METADATA))
    kept = _annotations(
        meta.get("annotations") if isinstance(meta, dict) else None,
        lambda k: k.startswith(POD_ANNOTATION_DOMAINS),
    )
    if kept is not None:
        m["annotations"] = kept
    source_spec = obj.get("spec")
    s = cast(TrimmedPodSpec, _pick(source_spec, POD_SPEC))
    volumes = volumes_with(obj, ANY)
    if volumes:
        s["volumes"] = volumes
    if isinstance(source_spec, dict):
        for section in ("initContainers", "containers"):
            items = source_spec.get(section)
            if isinstance(items, list):
                s[section] = [_container(c) for c in items]
    source_status = obj.get("status")
    st = cast(TrimmedPodStatus, _pick(source_status, POD_STATUS))
    conditions = source_status.get("conditions") if isinstance(source_status, dict) else None
    if isinstance(conditions, list):
        scheduled = [
            cast(TrimmedCondition, _pick(c, POD_CONDITION))
            for c in conditions
            if isinstance(c, dict) and c.get("type") in POD_CONDITIONS
        ]
        if scheduled:
            st["conditions"] = scheduled
    return {
        "apiVersion": obj.get("apiVersion", "v1"),
        "kind": obj.get("kind", "Pod"),
        "metadata": m,
        "spec": s,
        "status": st,
    }


def node(obj: Obj) -> TrimmedNode:
    out: TrimmedNode = {
        "apiVersion": obj.get("apiVersion", "v1"),
        "kind": obj.get("kind", "Node"),
        "metadata": metadata(obj.get("metadata")),
        "status": cast(TrimmedNodeStatus, _pick(obj.get("status"), NODE_STATUS)),
    }
    if isinstance(obj.get("spec"), dict):
        out["spec"] = obj["spec"]
    source_status = obj.get("status")
    st = out["status"]
    if isinstance(source_status, dict):
        conditions = source_status.get("conditions")
        if isinstance(conditions, list):
            st["conditions"] = [
                cast(NodeCondition, _pick(c, ("type", "status"))) for c in conditions if isinstance(c, dict)
            ]
        info = _pick(source_status.get("nodeInfo"), ("kubeletVersion",))
        if info:
            st["nodeInfo"] = info
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
def selector_only(obj: Obj) -> SelectorOnly:
    """A Service's or workload controller's name, namespace, kind and ``spec.selector``: all
    PodTopologySpread's system defaults read (a ReplicaSet's pod template is most of its size)."""
    out: SelectorOnly = {
        "metadata": _pick(obj.get("metadata"), ("name", "namespace", "uid", "resourceVersion")),
        "spec": _pick(obj.get("spec"), ("selector",)),
    }
    if "kind" in obj:
        out["kind"] = obj["kind"]
    return out


#: The caches hold plain dicts (hot paths read them as such); the shapes above say what they hold.
BY_KIND: Final[dict[str, Transform]] = {
    "Pod": cast(Transform, pod),
    "Node": cast(Transform, node),
    **{kind: _storage(kind) for kind in _KEPT_STORAGE},
    **dict.fromkeys(WORKLOAD_KINDS, cast(Transform, selector_only)),
}


def for_kind(kind: str) -> Transform:
    return BY_KIND.get(kind, generic)


__all__ = [
    "BY_KIND",
    "LAST_APPLIED",
    "SelectorOnly",
    "Transform",
    "TrimmedContainer",
    "TrimmedNode",
    "TrimmedPod",
    "TrimmedPodSpec",
    "TrimmedPodStatus",
    "for_kind",
    "generic",
    "metadata",
    "node",
    "pod",
    "selector_only",
]
