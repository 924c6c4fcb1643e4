"""Workloads as the pods they would make, and the identity of objects read from files.

``draxr plan`` and ``draxr validate`` read manifests, not a live cluster: a Deployment of four
replicas stands for four pods, and objects without a namespace or uid get the default namespace
and a deterministic uid, so every run of ``plan`` on the same files gives the same answer.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterable
from typing import Any, Final

from ..core.api.objects import Obj
from .documents import LoadError

#: Workloads ``expand_workloads`` turns into pods, by (apiVersion, kind), with their count field.
WORKLOADS: Final = {
    ("apps/v1", "Deployment"): "replicas",
    ("apps/v1", "ReplicaSet"): "replicas",
    ("apps/v1", "StatefulSet"): "replicas",
    ("batch/v1", "Job"): "parallelism",
}
#: Where each workload holds its pod template, by (apiVersion, kind); a Pod is its own template.
POD_TEMPLATES: Final[dict[tuple[str, str], tuple[str, ...]]] = {
    ("v1", "Pod"): (),
    ("apps/v1", "Deployment"): ("spec", "template"),
    ("apps/v1", "ReplicaSet"): ("spec", "template"),
    ("apps/v1", "StatefulSet"): ("spec", "template"),
    ("apps/v1", "DaemonSet"): ("spec", "template"),
    ("batch/v1", "Job"): ("spec", "template"),
    ("batch/v1", "CronJob"): ("spec", "jobTemplate", "spec", "template"),
}
#: Kinds without a namespace; any other kind is treated as namespaced.
CLUSTER_SCOPED_KINDS: Final = frozenset(
    {
        "Node",
        "Namespace",
        "DeviceClass",
        "ResourceSlice",
        "DeviceTaintRule",
        "PersistentVolume",
        "StorageClass",
        "PriorityClass",
        "RuntimeClass",
        "CSIDriver",
        "CSINode",
        "VolumeAttachment",
        "IngressClass",
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "APIService",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
)
DEFAULT_NAMESPACE: Final = "default"


def is_namespaced(kind: Any) -> bool:
    return kind not in CLUSTER_SCOPED_KINDS


def object_uid(kind: str, namespace: str, name: str) -> str:
    """Deterministic uid for objects read from files (stable across runs)."""
    key = f"{namespace}/{name}" if is_namespaced(kind) else f"{kind}/{name}"
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, key))


def with_identity(obj: Obj) -> Obj:
    """A copy of ``obj`` with the default namespace (when namespaced) and a deterministic uid, as
    ``expand_workloads`` gives every object that is not a workload."""
    return _with_identity(copy.deepcopy(obj))


def _with_identity(obj: Obj) -> Obj:
    """Fill the default namespace and a deterministic uid (``obj`` is a private copy)."""
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        return obj
    kind = obj.get("kind")
    if is_namespaced(kind) and not meta.get("namespace"):
        meta["namespace"] = DEFAULT_NAMESPACE
    if not meta.get("uid"):
        name = meta.get("name") or meta.get("generateName") or ""
        meta["uid"] = object_uid(str(kind), str(meta.get("namespace", "")), str(name))
    return obj


def template_path(obj: Obj) -> tuple[str, ...] | None:
    """Where ``obj`` holds its pod template (``()`` for a Pod), or None for other kinds."""
    return POD_TEMPLATES.get((str(obj.get("apiVersion")), str(obj.get("kind"))))


def template_pod(obj: Obj) -> Obj | None:
    """The pod template of a Pod or workload as a pod: its ``metadata`` (when it is a mapping) and
    ``spec``, the very objects of ``obj`` (not copies); None for other kinds or a template that
    is not a mapping."""
    path = template_path(obj)
    if path is None:
        return None
    node: Any = obj
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        return None
    if not path:
        return node
    pod: Obj = {"metadata": node["metadata"]} if isinstance(node.get("metadata"), dict) else {}
    pod["spec"] = node.get("spec") if isinstance(node.get("spec"), dict) else {}
    return pod


def _pod_count(obj: Obj, field: str, position: int) -> int:
    spec = obj.get("spec")
    value = spec.get(field) if isinstance(spec, dict) else None
    if value is None:
        return 1
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise LoadError(
            "<objects>", position, f"spec.{field}", f"must be a non-negative integer, not {value!r}"
        )
    return value


def _mapping(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _pods_of(obj: Obj, field: str, position: int) -> list[Obj]:
    meta = _mapping(obj.get("metadata"))
    name = meta.get("name")
    # ``generateName: train-`` makes ``train-0``, ``train-1``...
    base = f"{name}-" if name else str(meta.get("generateName") or "")
    namespace = str(meta.get("namespace") or DEFAULT_NAMESPACE)
    template = _mapping(_mapping(obj.get("spec")).get("template"))
    tmeta = _mapping(template.get("metadata"))
    pods: list[Obj] = []
    for k in range(_pod_count(obj, field, position)):
        pod_meta: Obj = {"name": f"{base}{k}", "namespace": namespace}
        for key in ("labels", "annotations"):
            if isinstance(tmeta.get(key), dict):
                pod_meta[key] = copy.deepcopy(tmeta[key])
        pod_meta["uid"] = object_uid("Pod", namespace, pod_meta["name"])
        pod_spec = copy.deepcopy(_mapping(template.get("spec")))
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec})
    return pods


def expand_workloads(objects: Iterable[Obj]) -> list[Obj]:
    """Workloads become their pods (``<name>-<i>``); every object gets a namespace and a uid.

    Deployments, ReplicaSets and StatefulSets make ``spec.replicas`` pods, Jobs
    ``spec.parallelism`` (both default 1). Other objects pass through in order, as copies: the
    input is never mutated. A count that is not a non-negative integer raises ``LoadError``
    (source ``<objects>``, index = position in ``objects``); ``load_paths`` already rejects those.
    """
    out: list[Obj] = []
    for position, obj in enumerate(objects):
        field = WORKLOADS.get((str(obj.get("apiVersion")), str(obj.get("kind"))))
        if field is not None:
            out.extend(_pods_of(obj, field, position))
        else:
            out.append(with_identity(obj))
    return out
