"""Strategic merge patch for the built-in types the emulator serves.

Upstream reads ``patchStrategy``/``patchMergeKey`` from the Go struct tags. Here a table keyed by
(parent field, list field) says which lists merge by key, which primitive lists merge as sets, and
everything else is replaced, as for an untagged field. Directives: ``$patch`` (merge, replace,
delete), ``$deleteFromPrimitiveList/<f>``, ``$setElementOrder/<f>`` and ``$retainKeys``.
"""

from __future__ import annotations

from typing import Any

from .objmeta import jsoncopy

#: A primitive list with ``patchStrategy:"merge"`` (a set union; finalizers are the common case).
PRIMITIVE = "<primitive>"

#: (parent field, list field) -> merge key; the parent ``*`` matches anywhere.
MERGE_KEYS: dict[tuple[str, str], str] = {
    ("metadata", "ownerReferences"): "uid",
    ("metadata", "finalizers"): PRIMITIVE,
    ("spec", "containers"): "name",
    ("spec", "initContainers"): "name",
    ("spec", "ephemeralContainers"): "name",
    ("spec", "volumes"): "name",
    ("spec", "imagePullSecrets"): "name",
    ("spec", "hostAliases"): "ip",
    ("spec", "resourceClaims"): "name",
    ("spec", "schedulingGates"): "name",
    ("spec", "topologySpreadConstraints"): "topologyKey",
    ("spec", "podCIDRs"): PRIMITIVE,
    ("containers", "ports"): "containerPort",
    ("initContainers", "ports"): "containerPort",
    ("*", "env"): "name",
    ("*", "volumeMounts"): "mountPath",
    ("*", "volumeDevices"): "devicePath",
    ("status", "conditions"): "type",
    ("status", "podIPs"): "ip",
    ("status", "hostIPs"): "ip",
    ("status", "resourceClaimStatuses"): "name",
    ("status", "addresses"): "type",
    ("status", "reservedFor"): "uid",
}


class PatchError(ValueError):
    """The patch cannot be applied (the apiserver answers 400 or 422)."""


def merge_key(parent: str, field: str) -> str | None:
    return MERGE_KEYS.get((parent, field)) or MERGE_KEYS.get(("*", field))


def strategic_merge(original: Any, patch: Any) -> Any:
    """Apply a strategic merge patch to a whole object; neither argument is mutated."""
    if not isinstance(patch, dict):
        raise PatchError("a strategic merge patch must be a JSON object")
    return _merge_map(original if isinstance(original, dict) else {}, patch, "")


def _merge_map(original: dict[str, Any], patch: dict[str, Any], parent: str) -> dict[str, Any]:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: jsoncopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return {}
    if directive not in (None, "merge"):
        raise PatchError(f"unknown patch type: {directive}")
    out: dict[str, Any] = jsoncopy(original)
    retain = patch.get("$retainKeys")
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/"):
            if not isinstance(value, list):
                raise PatchError(f"invalid $setElementOrder for {key[17:]}: must be a list")
            orders[key[17:]] = value
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key[25:]
            if not isinstance(value, list):
                raise PatchError(f"invalid $deleteFromPrimitiveList for {field}: must be a list")
            current = out.get(field)
            if isinstance(current, list):
                out[field] = [v for v in current if v not in value]
            continue
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):
            if value.get("$patch") == "delete":
                out.pop(key, None)
            else:
                cur = out.get(key)
                out[key] = _merge_map(cur if isinstance(cur, dict) else {}, value, key)
        elif isinstance(value, list):
            out[key] = _merge_list(out.get(key), value, parent, key, orders.get(key))
        else:
            out[key] = value
    for field, order in orders.items():
        if isinstance(out.get(field), list) and not isinstance(patch.get(field), list):
            out[field] = _order(out[field], order, as_list(original.get(field)), merge_key(parent, field))
    if retain is not None:
        if not isinstance(retain, list):
            raise PatchError("$retainKeys must be a list")
        keep = set(retain)
        out = {k: v for k, v in out.items() if k in keep}
    return out


def _merge_list(
    original: Any, patch: list[Any], parent: str, field: str, order: list[Any] | None = None
) -> list[Any]:
    key = merge_key(parent, field)
    if any(isinstance(v, dict) and v.get("$patch") == "replace" for v in patch):
        return [jsoncopy(v) for v in patch if not (isinstance(v, dict) and v.get("$patch") == "replace")]
    current = as_list(original)
    if key is None:
        return [_strip(jsoncopy(v)) for v in patch]
    out: list[Any] = jsoncopy(current)
    if key == PRIMITIVE:
        for v in patch:
            if isinstance(v, dict | list):
                raise PatchError(f"{field}: a primitive list may not contain objects")
            if v not in out:
                out.append(v)
        return _order(out, order if order is not None else patch, current, key)
    kept = []
    for item in patch:
        if not isinstance(item, dict):
            raise PatchError(f"{field}: expected a list of objects merged by {key!r}")
        if key not in item:
            raise PatchError(f"map: {item} does not contain declared merge key: {key}")
        idx = next(
            (i for i, cur in enumerate(out) if isinstance(cur, dict) and cur.get(key) == item[key]), -1
        )
        if item.get("$patch") == "delete":
            if idx >= 0:
                del out[idx]
            continue
        kept.append(item)
        if idx >= 0:
            out[idx] = _merge_map(out[idx], item, field)
        else:
            out.append(_merge_map({}, item, field))
    return _order(out, order if order is not None else kept, current, key)


def _strip(value: Any) -> Any:
    """Drop ``$patch`` directives from a list that replaces the old one."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "$patch"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _order(merged: list[Any], patch_order: list[Any], server_order: list[Any], key: str | None) -> list[Any]:
    """Upstream ``normalizeElementOrder``: the items the patch names in the patch's order (or its
    ``$setElementOrder``), the others in the live object's order, merged where both lists have an
    item the live object places (an item new to it goes first)."""

    def ident(item: Any) -> str:
        return repr(item.get(key) if key and key != PRIMITIVE and isinstance(item, dict) else item)

    def rank(order: list[Any]) -> dict[str, int]:
        out: dict[str, int] = {}
        for i, item in enumerate(order):
            out.setdefault(ident(item), i)
        return out

    in_patch, on_server = rank(patch_order), rank(server_order)
    patch_items = sorted((m for m in merged if ident(m) in in_patch), key=lambda m: in_patch[ident(m)])
    server_only = sorted(
        (m for m in merged if ident(m) not in in_patch), key=lambda m: on_server.get(ident(m), len(on_server))
    )
    out: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(patch_items):
        if j >= len(patch_items):
            out.append(server_only[i])
            i += 1
        elif i >= len(server_only):
            out.append(patch_items[j])
            j += 1
        else:
            left, right = on_server.get(ident(server_only[i])), on_server.get(ident(patch_items[j]))
            if left is not None and right is not None and left < right:
                out.append(server_only[i])
                i += 1
            else:
                out.append(patch_items[j])
                j += 1
    return out


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
