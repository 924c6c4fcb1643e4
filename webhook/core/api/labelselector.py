"""Label selectors: a ``metav1.LabelSelector`` read as apimachinery's ``labels.Selector``
(``LabelSelectorAsSelector``), which pod affinity terms, topology spread constraints and namespace
selectors match labels with, and a PersistentVolumeClaim's ``spec.selector`` over volumes' labels
and a CSIStorageCapacity's ``nodeTopology`` over a node's labels (``label_selector_matches``).

A missing (null) selector matches nothing (``labels.Nothing()``); an empty one (``{}``) matches
everything (``labels.Everything()``, the only selector that is ``empty``). ``matchLabels`` entries
and ``matchExpressions`` are ANDed. The apiserver has validated keys and values already; an
operator this cannot read, or ``In``/``NotIn`` without values, raises ``LabelSelectorError`` with
``NewRequirement``'s text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

IN: Final = "In"
NOT_IN: Final = "NotIn"
EXISTS: Final = "Exists"
DOES_NOT_EXIST: Final = "DoesNotExist"


class LabelSelectorError(ValueError):
    """A selector that cannot be read (an unknown operator, values where none belong)."""


@dataclass(frozen=True, slots=True)
class Requirement:
    """One requirement; ``matchLabels``' ``key: value`` is ``In`` with that one value."""

    key: str
    operator: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == IN:
            value = labels.get(self.key)
            return value is not None and value in self.values
        if op == NOT_IN:
            value = labels.get(self.key)
            return value is None or value not in self.values
        if op == EXISTS:
            return self.key in labels
        return self.key not in labels  # DoesNotExist


@dataclass(frozen=True, slots=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    @property
    def empty(self) -> bool:
        """``Selector.Empty()``: the selector that matches everything (never ``NOTHING``)."""
        return not self.nothing and not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self.nothing:
            return False
        have = labels if labels is not None else {}
        for r in self.requirements:  # noqa: SIM110 (a loop: this runs for every pod a selector meets)
            if not r.matches(have):
                return False
        return True


EVERYTHING: Final = LabelSelector()
NOTHING: Final = LabelSelector(nothing=True)


def label_selector(obj: Any) -> LabelSelector:
    """``LabelSelectorAsSelector``: None matches nothing, ``{}`` everything."""
    if obj is None:
        return NOTHING
    if not isinstance(obj, dict):
        raise LabelSelectorError(f"a label selector must be an object, not {type(obj).__name__}")
    match_labels = obj.get("matchLabels") or {}
    expressions = obj.get("matchExpressions") or []
    if not isinstance(match_labels, dict) or not isinstance(expressions, list):
        raise LabelSelectorError("matchLabels must be an object and matchExpressions a list")
    reqs = [Requirement(str(k), IN, frozenset([str(v)])) for k, v in match_labels.items()]
    for expr in expressions:
        reqs.append(requirement(expr))
    return LabelSelector(tuple(reqs)) if reqs else EVERYTHING


def requirement(expr: Any) -> Requirement:
    """One ``matchExpressions`` entry (``NewRequirement``'s checks on operator and values)."""
    if not isinstance(expr, dict):
        raise LabelSelectorError("a label selector requirement must be an object")
    key = str(expr.get("key") or "")
    op = expr.get("operator")
    values = expr.get("values") or []
    if not isinstance(values, list):
        raise LabelSelectorError(f"{key}: values must be a list")
    if op in (IN, NOT_IN):
        if not values:
            raise LabelSelectorError("for 'in', 'notin' operators, values set can't be empty")
    elif op in (EXISTS, DOES_NOT_EXIST):
        if values:
            raise LabelSelectorError("values set must be empty for exists and does not exist")
    else:
        raise LabelSelectorError(f'"{op}" is not a valid label selector operator')
    return Requirement(key, str(op), frozenset(str(v) for v in values))


def with_labels(selector: LabelSelector, labels: Mapping[str, str]) -> LabelSelector:
    """``mergeLabelSetWithSelector``: ``key in (value)`` for each of ``labels``, then the selector's
    own requirements; a selector that matches nothing stays so."""
    if selector.nothing or not labels:
        return selector
    extra = tuple(Requirement(k, IN, frozenset([v])) for k, v in labels.items())
    return LabelSelector(extra + selector.requirements)


def label_selector_matches(selector: Any, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` satisfy ``selector``, a missing one read as empty (the volume plugins'
    callers: a claim without ``spec.selector`` takes any volume); raises ``LabelSelectorError`` for
    one upstream cannot parse, whatever the labels (it parses before it matches)."""
    return label_selector(selector if selector is not None else {}).matches(labels)
