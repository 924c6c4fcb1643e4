"""What the commands' human output shares: counted nouns, aligned tables and data in a machine format."""

from __future__ import annotations

import json
from typing import Any, TextIO

import yaml

#: ``-o`` choices of commands that print data: ``text`` for people, ``json`` and ``yaml`` for machines.
MACHINE_FORMATS = ("json", "yaml")


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 object``, ``0 objects``, ``2 objects`` (``nouns``: an irregular plural)."""
    return f"{count} {noun if count == 1 else (nouns or noun + 's')}"


def table(rows: list[list[str]], indent: str = "") -> str:
    """``rows`` (the first is the header) in columns two spaces apart, each as wide as its widest
    cell, each line after ``indent`` and without trailing blanks (no final newline)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def write_data(value: Any, fmt: str, out: TextIO) -> None:
    """``value`` as ``json`` (indented) or ``yaml`` (block style, keys in their order)."""
    if fmt == "json":
        json.dump(value, out, indent=2, default=str)
        out.write("\n")
    elif fmt == "yaml":
        out.write(yaml.safe_dump(value, sort_keys=False, default_flow_style=False))
    else:
        raise ValueError(f"unknown output format {fmt!r}")


def binding_text(result: Any) -> str:
    """`` (waits for binding conditions: a, b)`` for an allocation result with ``bindingConditions``
    (KEP-5007: the pod binds only once the driver reports them True), else empty."""
    conditions = result.get("bindingConditions") if isinstance(result, dict) else None
    if not isinstance(conditions, list) or not conditions:
        return ""
    return f" (waits for binding conditions: {', '.join(str(c) for c in conditions)})"


def share_text(result: Any) -> str:
    """`` (share memory=10Gi)`` for an allocation result with a ``shareID`` (one share of a
    multi-allocatable device, and what it consumes), else empty: people see a device is shared."""
    if not isinstance(result, dict) or not isinstance(result.get("shareID"), str):
        return ""
    consumed = result.get("consumedCapacity")
    amounts = ", ".join(f"{k}={v}" for k, v in sorted(consumed.items())) if isinstance(consumed, dict) else ""
    return f" (share {amounts})" if amounts else " (share)"
