"""Server-side printing: ``meta.k8s.io/v1 Table`` responses for ``kubectl get``.

kubectl asks for ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``; the apiserver's default
convertor prints Name and Age, and pods also get their phase and node.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from webhook.core.api.objects import Obj

from .resources import ResourceType


def wants_table(accept: str | None) -> bool:
    return bool(accept) and "as=Table" in str(accept)


def _age(created: Any, now: datetime) -> str:
    if not isinstance(created, str):
        return "<unknown>"
    try:
        then = datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "<unknown>"
    secs = max(0, int((now - then).total_seconds()))
    if secs < 120:
        return f"{secs}s"
    if secs < 7200:
        return f"{secs // 60}m"
    if secs < 172800:
        return f"{secs // 3600}h"
    return f"{secs // 86400}d"


def _column(name: str, kind: str = "string", fmt: str = "") -> Obj:
    return {"name": name, "type": kind, "format": fmt, "description": "", "priority": 0}


def to_table(rt: ResourceType, items: list[Obj], resource_version: str) -> Obj:
    now = datetime.now(UTC)
    columns = [_column("Name", fmt="name")]
    if rt.kind == "Pod":
        columns += [_column("Status"), _column("Node")]
    columns.append(_column("Age"))
    rows = []
    for obj in items:
        meta = obj.get("metadata", {})
        cells: list[Any] = [meta.get("name", "")]
        if rt.kind == "Pod":
            status = (
                "Terminating" if meta.get("deletionTimestamp") else (obj.get("status") or {}).get("phase", "")
            )
            cells += [status, (obj.get("spec") or {}).get("nodeName") or "<none>"]
        cells.append(_age(meta.get("creationTimestamp"), now))
        partial = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta}
        rows.append({"cells": cells, "object": partial})
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": columns,
        "rows": rows,
    }
