"""URL paths to request coordinates, after ``RequestInfoFactory``: verb, group/version, namespace,
resource, name and subresource (including ``/api/v1/namespaces/<ns>`` meaning the Namespace itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_TRUE = frozenset({"true", "1"})


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """``is_resource`` False means a non-resource path (discovery, /version, /healthz)."""

    path: str
    is_resource: bool
    verb: str = ""
    group: str = ""
    version: str = ""
    namespace: str = ""
    resource: str = ""
    name: str = ""
    subresource: str = ""
    parts: tuple[str, ...] = ()

    @property
    def resource_path(self) -> str:
        """``pods`` or ``pods/status``: the form used by failure rules and the request log."""
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


def parse(method: str, path: str, watch_param: str | None) -> RequestInfo:
    raw = [unquote(p) for p in path.strip("/").split("/")] if path.strip("/") else []
    if not raw or raw[0] not in ("api", "apis"):
        return RequestInfo(path, False, parts=tuple(raw))
    if raw[0] == "api":
        if len(raw) < 3:
            return RequestInfo(path, False, parts=tuple(raw))
        group, version, rest = "", raw[1], raw[2:]
    else:
        if len(raw) < 4:
            return RequestInfo(path, False, parts=tuple(raw))
        group, version, rest = raw[1], raw[2], raw[3:]
    is_watch_path = False
    if rest and rest[0] == "watch":
        is_watch_path, rest = True, rest[1:]
    namespace = ""
    if rest and rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    if not rest or any(not p for p in rest) or len(rest) > 3:
        return RequestInfo(path, False, parts=tuple(raw))
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    verb = _verb(method, bool(name), is_watch_path or (watch_param or "").lower() in _TRUE)
    return RequestInfo(path, True, verb, group, version, namespace, resource, name, subresource, tuple(raw))


def _verb(method: str, named: bool, watch: bool) -> str:
    if method in ("GET", "HEAD"):
        if watch:
            return "watch"
        return "get" if named else "list"
    return {
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete" if named else "deletecollection",
    }.get(method, method.lower())
