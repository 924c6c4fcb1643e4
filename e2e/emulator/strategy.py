"""Per-resource storage strategy: what create and update do to an object before it is stored.

Mirrors the registry strategies upstream (``PrepareForCreate``/``PrepareForUpdate``): a create
resets ``status`` where a status subresource owns it, the main resource cannot change ``status``,
``/status`` changes nothing but ``status`` and (for most kinds, pods among them) user metadata, system
metadata is kept, ``generation`` follows spec
changes (for the kinds that keep one), and disabled feature-gated fields are dropped unless the old
object already used them.
"""

from __future__ import annotations

from typing import Any

from webhook.core.api.objects import Obj

from . import defaults
from .features import DRA_EXTENDED_RESOURCE, FeatureGates
from .resources import ResourceType

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
#: Metadata only the server sets; a client's values are ignored on update.
SYSTEM_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation")
_NOT_SPEC = frozenset({"metadata", "status", "apiVersion", "kind"})


def _spec_part(obj: Obj) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in _NOT_SPEC}


def prepare_create(rt: ResourceType, obj: Obj, gates: FeatureGates) -> None:
    """Status reset and feature-gated field dropping for a new object (in place)."""
    if rt.reset_status_on_create:
        if rt.kind == "Pod":
            obj["status"] = {"phase": "Pending", "qosClass": defaults.qos_class(obj.get("spec"))}
        else:
            obj["status"] = {}
    elif rt.kind == "Namespace":
        obj["status"] = {"phase": "Active"}
    drop_disabled_fields(rt, obj, None, gates)


def finish_meta(rt: ResourceType, obj: Obj) -> None:
    """Labels the server derives from the final name (``kubernetes.io/metadata.name`` on namespaces)."""
    if rt.kind == "Namespace":
        meta = obj["metadata"]
        labels = dict(meta.get("labels") or {})
        labels[NAMESPACE_NAME_LABEL] = meta.get("name", "")
        meta["labels"] = labels


def prepare_update(rt: ResourceType, subresource: str, new: Obj, old: Obj, gates: FeatureGates) -> Obj:
    """The object to store for an update of ``old`` by ``new`` (``new`` is owned by the caller)."""
    old_meta = old["metadata"]
    if subresource == "status":
        out = {k: v for k, v in old.items() if k != "status"}
        if rt.status_keeps_meta:
            out["metadata"] = dict(old_meta)
        else:
            out["metadata"] = _with_system_meta(dict(new["metadata"]), old_meta)
            if rt.kind == "Pod":  # old kubelets corrupted owner references through pods/status
                _copy(out["metadata"], old_meta, "ownerReferences")
        if "status" in new:
            out["status"] = new["status"]
    else:
        out = new
        meta = _with_system_meta(dict(out["metadata"]), old_meta)
        out["metadata"] = meta
        if rt.has_status:
            _copy(out, old, "status")
        if rt.generation and _spec_part(out) != _spec_part(old):
            meta["generation"] = int(old_meta.get("generation") or 0) + 1
    drop_disabled_fields(rt, out, old, gates)
    finish_meta(rt, out)
    return out


def _copy(target: Obj, source: Obj, key: str) -> None:
    """``target[key]`` becomes ``source[key]``, or absent when ``source`` has none."""
    if key in source:
        target[key] = source[key]
    else:
        target.pop(key, None)


def _with_system_meta(meta: Obj, old_meta: Obj) -> Obj:
    """Request metadata with the server's own fields as they were."""
    for key in SYSTEM_META:
        _copy(meta, old_meta, key)
    return meta


def _has_path(obj: Obj | None, *path: str) -> bool:
    cur: Any = obj
    for part in path:
        if not isinstance(cur, dict) or part not in cur:
            return False
        cur = cur[part]
    return cur is not None


def _drop(obj: Obj, outer: str, field: str) -> None:
    inner = obj.get(outer)
    if isinstance(inner, dict) and field in inner:
        obj[outer] = {k: v for k, v in inner.items() if k != field}


def drop_disabled_fields(rt: ResourceType, obj: Obj, old: Obj | None, gates: FeatureGates) -> None:
    """``dropDisabledFields``: with DRAExtendedResource off, clear its fields unless ``old`` had them."""
    if gates.enabled(DRA_EXTENDED_RESOURCE):
        return
    if rt.kind == "Pod" and not _has_path(old, "status", "extendedResourceClaimStatus"):
        _drop(obj, "status", "extendedResourceClaimStatus")
    elif rt.kind == "DeviceClass" and not _has_path(old, "spec", "extendedResourceName"):
        _drop(obj, "spec", "extendedResourceName")
