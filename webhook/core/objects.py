"""Small accessors for Kubernetes objects as plain JSON dicts (no model classes on hot paths)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def meta(obj: Obj) -> Obj:
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}


def spec(obj: Obj) -> Obj:
    s = obj.get("spec")
    return s if isinstance(s, dict) else {}


def status(obj: Obj) -> Obj:
    s = obj.get("status")
    return s if isinstance(s, dict) else {}


def name(obj: Obj) -> str:
    n = meta(obj).get("name")
    return n if isinstance(n, str) else ""


def namespace(obj: Obj) -> str:
    n = meta(obj).get("namespace")
    return n if isinstance(n, str) else ""


def uid(obj: Obj) -> str:
    u = meta(obj).get("uid")
    return u if isinstance(u, str) else ""


def labels(obj: Obj) -> dict[str, str]:
    lab = meta(obj).get("labels")
    return lab if isinstance(lab, dict) else {}


def annotations_of(obj: Obj) -> dict[str, str]:
    a = meta(obj).get("annotations")
    return a if isinstance(a, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def parse_time(value: Any) -> datetime:
    """RFC 3339 timestamp as the API writes it; anything unreadable counts as the epoch."""
    if isinstance(value, str) and value:
        try:
            t = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return _EPOCH
        return t if t.tzinfo else t.replace(tzinfo=UTC)
    return _EPOCH


def is_terminating(obj: Obj) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def controller_ref(obj: Obj) -> Obj | None:
    for ref in as_list(meta(obj).get("ownerReferences")):
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None
