"""Read Kubernetes manifests from files (``draxr plan``, ``draxr validate``, ``--snapshot``, the demo).

YAML (multi-document) and JSON files, directories recursively, and ``kind: List`` / ``*List``
documents as ``kubectl get -o yaml`` prints them. Every object that comes out is plain JSON
(string keys; timestamps as RFC 3339 strings) and has the field types the engine reads, so the
pure core never meets a wrong type. Problems are ``LoadError`` naming the file, the document and
the field.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import json
import math
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from .core.fielderrors import OMITTED, FieldError, invalid, required, type_invalid
from .core.fielderrors import Path as FieldPath
from .core.quantity import QuantityError, parse_quantity

Obj = dict[str, Any]

#: Workloads ``expand_workloads`` turns into pods, by (apiVersion, kind), with their count field.
WORKLOADS: Final = {
    ("apps/v1", "Deployment"): "replicas",
    ("apps/v1", "ReplicaSet"): "replicas",
    ("apps/v1", "StatefulSet"): "replicas",
    ("batch/v1", "Job"): "parallelism",
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
SUFFIXES: Final = (".yaml", ".yml", ".json")
MAX_DEPTH: Final = 200
MAX_VALUES: Final = 1_000_000

_YAML_LOADER: Final[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True, slots=True)
class Loaded:
    """One object and where it came from: ``index`` is the document, ``item`` the List item."""

    obj: Obj
    source: str
    index: int
    item: int | None = None


class LoadError(Exception):
    """Unusable input; ``str()`` reads ``<file>: document <n>: <field>: <message>``."""

    def __init__(self, source: str, index: int | None, field: str | None, message: str) -> None:
        self.source = source
        self.index = index
        self.field = field
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        parts = [self.source]
        if self.index is not None:
            parts.append(f"document {self.index}")
        if self.field:
            parts.append(self.field)
        parts.append(self.message)
        return ": ".join(parts)


class _Invalid(Exception):
    """A problem inside one document, before the file and index are known."""


# --- files ---------------------------------------------------------------------------------------


def load_paths(paths: Sequence[str | Path], *, errors: list[LoadError] | None = None) -> list[Loaded]:
    """Every object of the given files and directories, in order.

    Raises the first ``LoadError``; with ``errors`` given, problems are appended there instead
    and loading goes on with the next document (or file, after a syntax error).
    """
    out: list[Loaded] = []
    for path in paths:
        try:
            files = _files(Path(path))
        except LoadError as e:
            if errors is None:
                raise
            errors.append(e)
            continue
        for file in files:
            for item in _load_file(file, errors):
                out.append(item)
    return out


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        found = [p for p in path.rglob("*") if p.suffix.lower() in SUFFIXES and p.is_file()]
        return sorted(found, key=lambda p: p.as_posix())
    if not path.exists():
        raise LoadError(str(path), None, None, "no such file or directory")
    return [path]


def _load_file(file: Path, errors: list[LoadError] | None) -> Iterator[Loaded]:
    source = str(file)
    try:
        for index, doc in _documents(file, source):
            try:
                yield from _objects(doc, source, index)
            except LoadError as e:
                if errors is None:
                    raise
                errors.append(e)
    except LoadError as e:
        if errors is None:
            raise
        errors.append(e)


def _read_text(file: Path, source: str) -> str:
    try:
        data = file.read_bytes()
    except OSError as e:
        raise LoadError(source, None, None, f"cannot read: {e.strerror or e}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise LoadError(source, None, None, f"not UTF-8 text (byte {e.start})") from None


def _documents(file: Path, source: str) -> Iterator[tuple[int, Any]]:
    """(document index, parsed document); empty YAML documents keep their index but are skipped."""
    text = _read_text(file, source)
    if file.suffix.lower() == ".json":
        doc = _parse_json(text, source) if text.strip() else None
        if doc is not None:
            yield 0, doc
        return
    docs = yaml.load_all(text, Loader=_YAML_LOADER)
    index = 0
    while True:
        try:
            doc = next(docs)
        except StopIteration:
            return
        except yaml.MarkedYAMLError as e:
            raise LoadError(source, index, None, _yaml_message(e)) from None
        except yaml.YAMLError as e:
            raise LoadError(source, index, None, str(e).splitlines()[0]) from None
        except RecursionError:
            raise LoadError(source, index, None, "document nests too deeply") from None
        except ValueError as e:  # e.g. an integer with more digits than Python converts
            raise LoadError(source, index, None, f"unreadable value: {e}") from None
        if doc is not None:
            yield index, doc
        index += 1


def _yaml_message(e: yaml.MarkedYAMLError) -> str:
    mark = e.problem_mark or e.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    problem = e.problem or e.context or "invalid YAML"
    context = f" ({e.context})" if e.problem and e.context else ""
    return f"{where}{problem}{context}"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _parse_json(text: str, source: str) -> Any:
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise LoadError(source, 0, None, f"line {e.lineno}, column {e.colno}: {e.msg}") from None
    except RecursionError:
        raise LoadError(source, 0, None, "document nests too deeply") from None
    except ValueError as e:
        raise LoadError(source, 0, None, f"unreadable value: {e}") from None


# --- documents -----------------------------------------------------------------------------------


def _objects(doc: Any, source: str, index: int) -> Iterator[Loaded]:
    try:
        obj = _jsonify(doc)
    except _Invalid as e:
        raise LoadError(source, index, None, str(e)) from None
    _fail_first(_check_top(obj), source, index)
    kind: str = obj["kind"]
    if not _is_list_kind(kind):
        _fail_first(check_object(obj), source, index)
        yield Loaded(obj, source, index)
        return
    items = obj.get("items")
    if items is not None and not isinstance(items, list):
        _fail_first([_type_error(FieldPath("items"), items, "a list")], source, index)
    for i, item in enumerate(items or []):
        path = FieldPath("items").index(i)
        if not isinstance(item, dict):
            _fail_first([_type_error(path, item, "a mapping")], source, index)
            continue
        if kind != "List":
            # Typed lists (``PodList``) omit apiVersion and kind on their items.
            item = {"apiVersion": obj["apiVersion"], "kind": kind[: -len("List")], **item}
        _fail_first(_check_top(item, path) or check_object(item, path), source, index)
        yield Loaded(item, source, index, i)


def _fail_first(errors: list[FieldError], source: str, index: int) -> None:
    if errors:
        raise LoadError(source, index, errors[0].field, errors[0].error_body())


def _is_list_kind(kind: str) -> bool:
    return kind == "List" or (kind.endswith("List") and len(kind) > len("List"))


def _json_key(key: Any) -> str:
    """Map keys as sigs.k8s.io/yaml writes them into JSON."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, int | float):
        return str(key)
    if isinstance(key, dt.date):
        return _timestamp(key)
    raise _Invalid(f"unsupported mapping key {key!r}")


def _timestamp(value: dt.date) -> str:
    if not isinstance(value, dt.datetime):
        return value.isoformat()
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return value.isoformat() + "Z"


def _jsonify(doc: Any) -> Any:
    """A JSON-compatible copy: string keys, timestamps as strings, bounded depth and size.

    Bounds stop YAML alias bombs and self-referencing aliases.
    """
    budget = [MAX_VALUES]

    def walk(value: Any, depth: int) -> Any:
        budget[0] -= 1
        if budget[0] < 0:
            raise _Invalid(f"document holds more than {MAX_VALUES} values")
        if depth > MAX_DEPTH:
            raise _Invalid(f"document nests deeper than {MAX_DEPTH} levels")
        if value is None or isinstance(value, str | bool | int):
            return value
        if isinstance(value, float):
            if not math.isfinite(value):
                raise _Invalid(f"{value} is not a JSON number")
            return value
        if isinstance(value, dict):
            return {_json_key(k): walk(v, depth + 1) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [walk(v, depth + 1) for v in value]
        if isinstance(value, set):
            return {_json_key(k): None for k in value}
        if isinstance(value, dt.date):
            return _timestamp(value)
        if isinstance(value, bytes):
            return base64.b64encode(value).decode("ascii")
        raise _Invalid(f"unsupported value of type {type(value).__name__}")

    return walk(doc, 0)


# --- field types ---------------------------------------------------------------------------------

_TYPE_NAMES: Final = {
    dict: "a mapping",
    list: "a list",
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    type(None): "null",
}


def _type_error(path: FieldPath, value: Any, expected: str) -> FieldError:
    shown = value if isinstance(value, str | int | float) else OMITTED
    actual = _TYPE_NAMES.get(type(value), type(value).__name__)
    return type_invalid(path, shown, f"must be {expected}, not {actual}")


def _check_top(obj: Any, prefix: FieldPath | None = None) -> list[FieldError]:
    """A mapping with string ``apiVersion`` and ``kind``."""
    base = prefix or FieldPath()
    if not isinstance(obj, dict):
        return [_type_error(base, obj, "a mapping (a Kubernetes object)")]
    errors: list[FieldError] = []
    for key in ("apiVersion", "kind"):
        value = obj.get(key)
        if value is None or value == "":
            errors.append(required(base.child(key)))
        elif not isinstance(value, str):
            errors.append(_type_error(base.child(key), value, "a string"))
    return errors


class _Checker:
    """Collects type errors of the fields the engine reads."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def typed(self, parent: Obj, key: str, path: FieldPath, kind: type, expected: str) -> Any:
        """``parent[key]`` when absent, null or of type ``kind``; records an error otherwise."""
        value = parent.get(key)
        if value is None:
            return None
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        if not ok:
            self.errors.append(_type_error(path.child(key), value, expected))
            return None
        return value

    def mapping(self, parent: Obj, key: str, path: FieldPath) -> Obj:
        value = self.typed(parent, key, path, dict, "a mapping")
        return value if value is not None else {}

    def items(self, parent: Obj, key: str, path: FieldPath) -> list[tuple[FieldPath, Obj]]:
        """List entries that are mappings, each with its path; others are recorded."""
        value = self.typed(parent, key, path, list, "a list")
        out: list[tuple[FieldPath, Obj]] = []
        for i, entry in enumerate(value or []):
            p = path.child(key).index(i)
            if isinstance(entry, dict):
                out.append((p, entry))
            else:
                self.errors.append(_type_error(p, entry, "a mapping"))
        return out

    def strings(self, parent: Obj, keys: Iterable[str], path: FieldPath) -> None:
        for key in keys:
            self.typed(parent, key, path, str, "a string")

    def string_map(self, parent: Obj, key: str, path: FieldPath) -> None:
        for k, v in self.mapping(parent, key, path).items():
            if not isinstance(v, str):
                self.errors.append(_type_error(path.child(key).key(k), v, "a string"))

    def quantities(self, parent: Obj, key: str, path: FieldPath) -> None:
        for k, v in self.mapping(parent, key, path).items():
            try:
                parse_quantity(v)
            except QuantityError as e:
                self.errors.append(invalid(path.child(key).key(k), v, str(e)))
            except ValueError:
                self.errors.append(invalid(path.child(key).key(k), v, "not a readable quantity"))

    def count(self, parent: Obj, key: str, path: FieldPath) -> None:
        value = self.typed(parent, key, path, int, "an integer")
        if value is not None and value < 0:
            self.errors.append(invalid(path.child(key), value, "must be greater than or equal to 0"))


def check_object(obj: Obj, prefix: FieldPath | None = None) -> list[FieldError]:
    """Type errors in the fields the engine reads (metadata, pod specs, workloads, DRA objects).

    ``obj`` already has string ``apiVersion`` and ``kind``; unknown kinds get the metadata checks.
    """
    base = prefix or FieldPath()
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


def _check_pod_spec(c: _Checker, spec: Obj, path: FieldPath) -> None:
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


# --- workloads -----------------------------------------------------------------------------------


def is_namespaced(kind: Any) -> bool:
    return kind not in CLUSTER_SCOPED_KINDS


def object_uid(kind: str, namespace: str, name: str) -> str:
    """Deterministic uid for objects read from files (stable across runs)."""
    key = f"{namespace}/{name}" if is_namespaced(kind) else f"{kind}/{name}"
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, key))


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
            out.append(_with_identity(copy.deepcopy(obj)))
    return out
