"""Upstream's runtime cost model: what one evaluation step costs, and the allocator's limit.

Transcribed from cel-go's ``interpreter/runtimecost.go`` (the default cost per call and the string,
list and regex size factors) and ``k8s.io/apiserver/pkg/cel/library/cost.go`` (the library
functions' costs), as ``k8s.io/dynamic-resource-allocation/cel`` runs a selector: with
``cel.CostLimit(CELSelectorExpressionMaxCost)``. An evaluation whose cost passes the limit fails
with cel-go's words, :data:`COST_LIMIT_MESSAGE`. The evaluator charges identifiers and selections
one each and calls :func:`call_cost` for every function and operator; constants cost nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .formatlib import OptionalValue
from .releases import INCLUDES_1_36

#: ``resourceapi.CELSelectorExpressionMaxCost``: the runtime cost limit of one selector evaluation.
CEL_SELECTOR_EXPRESSION_MAX_COST = 1_000_000
#: cel-go's error when an evaluation passes its cost limit.
COST_LIMIT_MESSAGE = "operation cancelled: actual cost limit exceeded"

# cel-go common/cost.go
STRING_TRAVERSAL = 0.1
REGEX_STRING_LENGTH = 0.25
LIST_CREATE = 10
MAP_CREATE = 30


def size(value: Any) -> int:
    """cel-go's ``actualSize``: the length of a sized value (an optional's content), else 1."""
    if isinstance(value, str | bytes | list | dict):
        return len(value)
    if isinstance(value, OptionalValue) and value.present:
        return size(value.value)
    return 1


def _traverse(n: int | float, factor: float = STRING_TRAVERSAL) -> int:
    return math.ceil(n * factor)


_SIZED_OR_OPTIONAL = (str, bytes, list, dict, OptionalValue)


def _min_size(args: list[Any]) -> int:
    a, b = args
    if not isinstance(a, _SIZED_OR_OPTIONAL) and not isinstance(b, _SIZED_OR_OPTIONAL):
        return 1  # scalars: the common case, kept fast
    return _traverse(min(size(a), size(b)))


def _concat(args: list[Any]) -> int:
    if isinstance(args[0], str | bytes):
        return _traverse(size(args[0]) + size(args[1]))
    return 1


def _regex(args: list[Any]) -> int:
    return _traverse(1 + size(args[0])) * _traverse(size(args[1]), REGEX_STRING_LENGTH)


def _contains(args: list[Any]) -> int:
    if isinstance(args[0], str):
        return _traverse(size(args[0])) * _traverse(size(args[1]))
    return 1


def _receiver(args: list[Any]) -> int:
    return _traverse(size(args[0])) if args else 1


def _receiver_twice(args: list[Any]) -> int:
    return _traverse(size(args[0]) * 2) if args else 1


def _list_traversal(args: list[Any]) -> int:
    """``isSorted``, ``sum``, ... : one traversal, each element costing its own traversal."""
    if not args or not isinstance(args[0], list):
        return _receiver(args)
    return sum(_traverse(size(e)) if isinstance(e, str | bytes) else 1 for e in args[0])


def _in(args: list[Any]) -> int:
    return size(args[1]) if isinstance(args[1], list) else 1


def _range(args: list[Any]) -> int:
    n = args[0]
    return LIST_CREATE + 1 + (int(n) if isinstance(n, int) and n > 0 else 0)


def _string_compare(args: list[Any]) -> int:
    if isinstance(args[0], str | bytes):
        return _min_size(args)
    return 1


def _join(args: list[Any]) -> int:
    items = args[0] if args and isinstance(args[0], list) else []
    sep = len(args[1]) if len(args) > 1 and isinstance(args[1], str) else 0
    length = sum(len(i) for i in items if isinstance(i, str)) + sep * max(len(items) - 1, 0)
    return _traverse(length * 2)


def _first(args: list[Any]) -> int:
    return _traverse(size(args[1])) if len(args) > 1 else 1


#: Per function, its cost from its arguments; a function not named here costs 1.
COSTS: dict[str, Callable[[list[Any]], int]] = {
    "join": _join,
    "_==_": _min_size,
    "_!=_": _min_size,
    "_<_": _string_compare,
    "_<=_": _string_compare,
    "_>_": _string_compare,
    "_>=_": _string_compare,
    "_+_": _concat,
    "@in": _in,
    "_in_": _in,
    "startsWith": _first,
    "endsWith": _first,
    "contains": _contains,
    "matches": _regex,
    "find": _regex,
    "findAll": _regex,
    "bytes": _receiver,
    "string": lambda args: _receiver(args) if isinstance(args[0], bytes) else 1,
    "strings.quote": _receiver,
    "format": _receiver,
    "url": _receiver,
    "lowerAscii": _receiver,
    "upperAscii": _receiver,
    "substring": _receiver,
    "trim": _receiver,
    "cidr": _receiver,
    "isIP": _receiver,
    "isCIDR": _receiver,
    "ip": lambda args: _receiver(args) if isinstance(args[0], str) else 1,
    "ip.isCanonical": _receiver_twice,
    "replace": _receiver_twice,
    "split": _receiver_twice,
    "isSorted": _list_traversal,
    "sum": _list_traversal,
    "max": _list_traversal,
    "min": _list_traversal,
    "indexOf": _list_traversal,
    "lastIndexOf": _list_traversal,
    "includes": _list_traversal,
    INCLUDES_1_36: _list_traversal,
    "lists.range": _range,
}


def call_cost(name: str, args: list[Any]) -> int:
    """What one call of ``name`` on ``args`` costs (1 unless upstream charges by size)."""
    fn = COSTS.get(name)
    return 1 if fn is None else fn(args)


def is_constant(node: Any) -> bool:
    """Whether a list or map literal's element is a literal (cel-go plans such aggregates as
    constants, which cost nothing)."""
    return getattr(node, "data", None) == "primary" and getattr(node.children[0], "data", None) == "literal"


__all__ = [
    "CEL_SELECTOR_EXPRESSION_MAX_COST",
    "COST_LIMIT_MESSAGE",
    "call_cost",
    "is_constant",
    "size",
]
