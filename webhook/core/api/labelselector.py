"""``metav1.LabelSelector`` against a set of labels (``metav1.LabelSelectorAsSelector`` and
``labels.Selector.Matches``): ``matchLabels`` and ``matchExpressions`` (In, NotIn, Exists,
DoesNotExist), all of them. An empty selector (``{}``) selects everything; a missing one (None) is
the caller's to interpret (upstream's callers say "nothing" or skip the check).

What reads one: a PersistentVolumeClaim's ``spec.selector`` over PersistentVolumes' labels, and a
CSIStorageCapacity's ``nodeTopology`` over a node's labels."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .objects import as_dict, as_list

OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist")


class LabelSelectorError(ValueError):
    """A selector ``LabelSelectorAsSelector`` refuses (its message is upstream's)."""


def label_selector_matches(selector: Any, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` satisfy every requirement of ``selector``; raises ``LabelSelectorError``
    for one upstream cannot parse (whatever the labels: it parses before it matches)."""
    sel = as_dict(selector)
    requirements = [_requirement(as_dict(raw)) for raw in as_list(sel.get("matchExpressions"))]
    for k, v in as_dict(sel.get("matchLabels")).items():
        if labels.get(k) != v:
            return False
    for key, op, values in requirements:
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def _requirement(expr: dict[str, Any]) -> tuple[str, str, frozenset[str]]:
    key, op = expr.get("key"), expr.get("operator")
    values = frozenset(v for v in as_list(expr.get("values")) if isinstance(v, str))
    if op not in OPERATORS:
        raise LabelSelectorError(f'"{op}" is not a valid label selector operator')
    if op in ("In", "NotIn") and not values:
        raise LabelSelectorError("for 'in', 'notin' operators, values set can't be empty")
    if op in ("Exists", "DoesNotExist") and values:
        raise LabelSelectorError("values set must be empty for exists and does not exist")
    return str(key or ""), str(op), values
