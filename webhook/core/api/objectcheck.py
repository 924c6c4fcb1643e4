"""Type checks of the fields the engine reads, so the pure core never meets a wrong type.

The loader runs them on every object read from a file; the admission webhook on every object in an
AdmissionReview (the apiserver would never send a wrong type, but a hostile client could). Each
problem is a ``FieldError`` with its path, as the apiserver would word it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from .fielderrors import OMITTED, FieldError, Path, invalid, required, type_invalid
from .objects import Obj
from .quantity import QuantityError, parse_quantity

_TYPE_NAMES: Final = {
    dict: "a mapping",
    list: "a list",
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    type(None): "null",
}


def type_error(path: Path, value: Any, expected: str) -> FieldError:
    shown = value if isinstance(value, str | int | float) else OMITTED
    actual = _TYPE_NAMES.get(type(value), type(value).__name__)
    return type_invalid(path, shown, f"must be {expected}, not {actual}")


def check_top(obj: Any, prefix: Path | None = None) -> list[FieldError]:
    """A mapping with string ``apiVersion`` and ``kind``."""
    base = prefix or Path()
    if not isinstance(obj, dict):
        return [type_error(base, obj, "a mapping (a Kubernetes object)")]
    errors: list[FieldError] = []
    for key in ("apiVersion", "kind"):
        value = obj.get(key)
        if value is None or value == "":
            errors.append(required(base.child(key)))
        elif not isinstance(value, str):
            errors.append(type_error(base.child(key), value, "a string"))
    return errors


class _Checker:
    """Collects type errors of the fields the engine reads."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def typed(self, parent: Obj, key: str, path: Path, kind: type, expected: str) -> Any:
        """``parent[key]`` when absent, null or of type ``kind``; records an error otherwise."""
        value = parent.get(key)
        if value is None:
            return None
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        if not ok:
            self.errors.append(type_error(path.child(key), value, expected))
            return None
        return value

    def mapping(self, parent: Obj, key: str, path: Path) -> Obj:
        value = self.typed(parent, key, path, dict, "a mapping")
        return value if value is not None else {}

    def items(self, parent: Obj, key: str, path: Path) -> list[tuple[Path, Obj]]:
        """List entries that are mappings, each with its path; others are recorded."""
        value = self.typed(parent, key, path, list, "a list")
        out: list[tuple[Path, Obj]] = []
        for i, entry in enumerate(value or []):
            p = path.child(key).index(i)
            if isinstance(entry, dict):
                out.append((p, entry))
            else:
                self.errors.append(type_error(p, entry, "a mapping"))
        return out

    def strings(self, parent: Obj, keys: Iterable[str], path: Path) -> None:
        for key in keys:
            self.typed(parent, key, path, str, "a string")

    def string_map(self, parent: Obj, key: str, path: Path) -> None:
        for k, v in self.mapping(parent, key, path).items():
            if not isinstance(v, str):
                self.errors.append(type_error(path.child(key).key(k), v, "a string"))

    def quantities(self, parent: Obj, key: str, path: Path) -> None:
        for k, v in self.mapping(parent, key, path).items():
            try:
                parse_quantity(v)
            except QuantityError as e:
                self.errors.append(invalid(path.child(key).key(k), v, str(e)))
            except ValueError:
                self.errors.append(invalid(path.child(key).key(k), v, "not a readable quantity"))

    def count(self, parent: Obj, key: str, path: Path) -> None:
        value = self.typed(parent, key, path, int, "an integer")
        if value is not None and value < 0:
            self.errors.append(invalid(path.child(key), value, "must be greater than or equal to 0"))


def check_object(obj: Obj, prefix: Path | None = None) -> list[FieldError]:
    """Type errors in the fields the engine reads (metadata, pod specs, workloads, DRA objects).

    ``obj`` already has string ``apiVersion`` and ``kind``; unknown kinds get the metadata checks.
    """
    base = prefix or Path()
    c = _Checker()
    kind = obj["kind"]
    meta = c.mapping(obj, "metadata", base)
    mpath = base.child("metadata")
    c.strings(
        meta, ("name", "generateName", "namespace", "uid", "creationTimestamp", "deletionTimestamp"), mpath
    )
    if not meta.get("name") and not meta.get("generateName"):
        c.errors.append(required(mpath.child("name"), "name or generateName is required"))
    c.string_map(meta, "labels", mpath)
    c.string_map(meta, "annotations", mpath)
    for rpath, ref in c.items(meta, "ownerReferences", mpath):
        c.strings(ref, ("apiVersion", "kind", "name", "uid"), rpath)
    spec = c.mapping(obj, "spec", base)
    spath = base.child("spec")
    status = c.mapping(obj, "status", base)
    stpath = base.child("status")
    if kind == "Pod":
        _check_pod_spec(c, spec, spath)
        c.strings(status, ("phase",), stpath)
        ercs = c.mapping(status, "extendedResourceClaimStatus", stpath)
        c.items(ercs, "requestMappings", stpath.child("extendedResourceClaimStatus"))
    elif kind in ("Deployment", "ReplicaSet", "StatefulSet", "Job"):
        c.count(spec, "parallelism" if kind == "Job" else "replicas", spath)
        template = c.mapping(spec, "template", spath)
        tpath = spath.child("template")
        tmeta = c.mapping(template, "metadata", tpath)
        c.string_map(tmeta, "labels", tpath.child("metadata"))
        c.string_map(tmeta, "annotations", tpath.child("metadata"))
        _check_pod_spec(c, c.mapping(template, "spec", tpath), tpath.child("spec"))
    elif kind == "Node":
        c.quantities(status, "allocatable", stpath)
        c.quantities(status, "capacity", stpath)
        c.typed(spec, "unschedulable", spath, bool, "a boolean")
    elif kind == "DeviceClass":
        c.strings(spec, ("extendedResourceName",), spath)
        c.items(spec, "selectors", spath)
    elif kind == "ResourceSlice":
        c.strings(spec, ("driver", "nodeName"), spath)
        c.mapping(spec, "pool", spath)
        c.items(spec, "devices", spath)
    elif kind == "ResourceClaim":
        c.items(c.mapping(spec, "devices", spath), "requests", spath.child("devices"))
        c.mapping(status, "allocation", stpath)
        c.items(status, "reservedFor", stpath)
    return c.errors


def _check_pod_spec(c: _Checker, spec: Obj, path: Path) -> None:
    c.strings(spec, ("nodeName", "schedulerName"), path)
    c.typed(spec, "priority", path, int, "an integer")
    c.mapping(spec, "nodeSelector", path)
    c.items(spec, "resourceClaims", path)
    for section in ("initContainers", "containers"):
        for cpath, container in c.items(spec, section, path):
            c.strings(container, ("name",), cpath)
            resources = c.mapping(container, "resources", cpath)
            rpath = cpath.child("resources")
            c.quantities(resources, "requests", rpath)
            c.quantities(resources, "limits", rpath)
            c.items(resources, "claims", rpath)
