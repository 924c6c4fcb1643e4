"""Small accessors for Kubernetes objects as plain JSON dicts (no model classes on hot paths).

Every accessor takes any JSON-like value and answers with the expected type (an empty one when the
value is missing or of another type), so the engine can read untrusted input without checks.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

#: A Kubernetes object (or any JSON object) as the API sends it.
Obj = dict[str, Any]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def meta(obj: Any) -> Obj:
    return as_dict(as_dict(obj).get("metadata"))


def spec(obj: Any) -> Obj:
    return as_dict(as_dict(obj).get("spec"))


def status(obj: Any) -> Obj:
    return as_dict(as_dict(obj).get("status"))


def name(obj: Any) -> str:
    return as_str(meta(obj).get("name"))


def namespace(obj: Any) -> str:
    return as_str(meta(obj).get("namespace"))


def uid(obj: Any) -> str:
    return as_str(meta(obj).get("uid"))


def key(obj: Any) -> str:
    """``namespace/name``, or ``name`` for a cluster-scoped object (client-go's object key)."""
    ns = namespace(obj)
    return f"{ns}/{name(obj)}" if ns else name(obj)


def labels(obj: Any) -> dict[str, str]:
    return as_dict(meta(obj).get("labels"))


def annotations_of(obj: Any) -> dict[str, str]:
    return as_dict(meta(obj).get("annotations"))


def format_time(moment: datetime) -> str:
    """``moment`` as the API writes timestamps (RFC 3339, UTC, whole seconds): ``parse_time``'s inverse."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: Any) -> datetime:
    """RFC 3339 timestamp as the API writes it; anything unreadable counts as the epoch."""
    if isinstance(value, str) and value:
        try:
            t = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return _EPOCH
        return t if t.tzinfo else t.replace(tzinfo=UTC)
    return _EPOCH


def is_terminating(obj: Any) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def controller_ref(obj: Any) -> Obj | None:
    """The first owner reference with ``controller: true`` (``metav1.GetControllerOf``)."""
    for ref in as_list(meta(obj).get("ownerReferences")):
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


def not_older(obj: Any, resource_version: str) -> bool:
    """Whether ``obj`` is the version ``resource_version`` names, or a later one. resourceVersions
    are opaque to clients, yet kube-apiserver's are etcd revisions and the DRA assume cache
    (``assumecache``) compares them as integers; so does this. False when either is no integer."""
    try:
        return int(as_str(meta(obj).get("resourceVersion"))) >= int(resource_version)
    except ValueError:
        return False


def pod_priority(pod: Any) -> int:
    """``corev1helpers.PodPriority``: ``spec.priority``, 0 when unset."""
    p = spec(pod).get("priority")
    return p if isinstance(p, int) and not isinstance(p, bool) else 0
