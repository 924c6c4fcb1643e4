"""Node selectors, node affinity and taints/tolerations (``component-helpers/scheduling/corev1``).

Used twice: to decide which ResourceSlices (and devices) a node can reach, and by the pod Filter.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .objects import Obj, as_dict, as_list, labels, name, spec


class SelectorError(ValueError):
    """A node selector that cannot be parsed (unknown operator, bad values)."""


def _int64(value: str) -> int | None:
    try:
        n = int(value, 10)
    except (TypeError, ValueError):
        return None
    return n if -(2**63) <= n < 2**63 else None


def requirement_matches(req: Obj, values_source: dict[str, str]) -> bool:
    key = req.get("key")
    op = req.get("operator")
    values = [v for v in as_list(req.get("values")) if isinstance(v, str)]
    if not isinstance(key, str):
        raise SelectorError("node selector requirement without a key")
    present = key in values_source
    actual = values_source.get(key, "")
    if op == "In":
        if not values:
            raise SelectorError(f"{key}: values must be non-empty for operator In")
        return present and actual in values
    if op == "NotIn":
        if not values:
            raise SelectorError(f"{key}: values must be non-empty for operator NotIn")
        return not present or actual not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if len(values) != 1 or _int64(values[0]) is None:
            raise SelectorError(f"{key}: operator {op} needs exactly one integer value")
        have = _int64(actual) if present else None
        if have is None:
            return False
        want = _int64(values[0])
        assert want is not None
        return have > want if op == "Gt" else have < want
    raise SelectorError(f"{key}: {op!r} is not a valid node selector operator")


def term_matches(node: Obj, term: Obj) -> bool:
    """All requirements of one term hold; an empty term matches nothing."""
    exprs = as_list(term.get("matchExpressions"))
    fields = as_list(term.get("matchFields"))
    if not exprs and not fields:
        return False
    node_labels = labels(node)
    for req in exprs:
        if not requirement_matches(as_dict(req), node_labels):
            return False
    node_fields = {"metadata.name": name(node)}
    for req in fields:
        r = as_dict(req)
        if r.get("key") != "metadata.name":
            raise SelectorError(f"{r.get('key')!r} is not a supported field selector key")
        if not requirement_matches(r, node_fields):
            return False
    return True


def node_selector_matches(node: Obj, selector: Obj | None) -> bool:
    """A ``NodeSelector``: any term matches."""
    if not selector:
        return False
    return any(term_matches(node, as_dict(t)) for t in as_list(selector.get("nodeSelectorTerms")))


def pod_node_affinity_matches(pod: Obj, node: Obj) -> bool:
    """``spec.nodeSelector`` and required node affinity (the NodeAffinity filter)."""
    s = spec(pod)
    wanted = as_dict(s.get("nodeSelector"))
    node_labels = labels(node)
    for k, v in wanted.items():
        if node_labels.get(k) != v:
            return False
    required = as_dict(
        as_dict(as_dict(s.get("affinity")).get("nodeAffinity")).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
    )
    if not required:
        return True
    # ``LazyErrorNodeSelector``: a term that cannot be read matches nothing; the others still count.
    for term in as_list(required.get("nodeSelectorTerms")):
        try:
            if term_matches(node, as_dict(term)):
                return True
        except SelectorError:
            continue
    return False


def tolerates(toleration: Obj, taint: Obj) -> bool:
    """``Toleration.ToleratesTaint`` (core) and ``DeviceToleration`` (resource) share this logic."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    op = toleration.get("operator") or "Equal"
    if op == "Exists":
        return True
    if op == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def untolerated(
    taints: Iterable[Any], tolerations: Iterable[Any], effects: tuple[str, ...] = ("NoSchedule", "NoExecute")
) -> Obj | None:
    """The first taint with one of ``effects`` that no toleration tolerates."""
    tols = [t for t in tolerations if isinstance(t, dict)]
    for taint in taints:
        if not isinstance(taint, dict) or taint.get("effect") not in effects:
            continue
        if not any(tolerates(t, taint) for t in tols):
            return taint
    return None
