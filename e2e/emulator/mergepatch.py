"""JSON merge patch (RFC 7386): maps merge recursively, ``null`` deletes, anything else replaces."""

from __future__ import annotations

from typing import Any

from .objmeta import jsoncopy


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply ``patch`` to ``target`` without mutating either."""
    if not isinstance(patch, dict):
        return jsoncopy(patch)
    out: dict[str, Any] = jsoncopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):
            out[key] = merge_patch(out.get(key), value)
        else:
            out[key] = jsoncopy(value)
    return out
