"""Upstream's estimated cost of a selector at compile time: what the API server refuses.

The API server compiles every new DeviceClass and ResourceClaim(Template) selector with
``k8s.io/dynamic-resource-allocation/cel`` and refuses it when the worst-case cost estimate passes
``CELSelectorExpressionMaxCost`` (1,000,000): ``Forbidden: too complex, exceeds cost limit``
(``pkg/apis/resource/validation``). This module transcribes that estimate for draxr's syntax tree:

* cel-go ``checker/cost.go``: identifiers and selections on maps or objects cost 1, constants 0,
  a call 1 plus its arguments, a list literal 10, a map literal 30; a comprehension (``all``,
  ``exists``, ``map``, ... as cel-go's macros expand them) costs its range, its init and result,
  plus the range's maximum size times its loop condition and step; ``cel.bind`` 10 plus its parts;
  ``has()`` nothing beyond its operand (the base environment's ``PresenceTestHasCost(false)``);
  string comparison, concatenation, ``contains``, ``startsWith``, ``matches``, ``in`` on a list
  scale with the operands' maximum sizes;
* ``k8s.io/apiserver/pkg/cel/library/cost.go``: the Kubernetes libraries (quantity, semver, lists,
  regex, URL, IP, CIDR, format, ``lowerAscii``/``replace``/``split``/``join``, ...), and cel-go's
  own estimators of ``ext.Sets`` and ``ext.Lists`` (version 3);
* the DRA size estimator: ``device.attributes`` and ``device.capacity`` hold at most 32 domains of
  32 entries, domains are at most 63 characters, identifiers 32, the driver name 63, an attribute
  value 64; a size upstream cannot bound is the maximum uint64, so comparing two such values costs
  about 1.8e18 (``device.attributes.x.a == device.attributes.x.b`` is refused upstream too).

Where draxr's checker knows less than cel-go's (it types many values ``dyn``), the estimate treats
a value as upstream does for the unknown type: its size unknown unless its path or literal bounds
it, and a call on it the dearest of its overloads; comparisons, ``size()`` and arithmetic with a
known number give scalars (size 1) as their overloads do. So the figure can come out higher than
upstream's, never knowingly lower: ``replace`` ignores the minimum size of a non-literal search
string, ``sort``/``sortBy`` on elements draxr cannot type are charged as strings, a comprehension
over a sorted or filtered list of numbers keeps no element type. Against upstream's own compiler
(``bench/cel_differential.py``, the oracle's ``estimatedCost``) no verdict on the limit differs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import lark

from .checker import _Checker
from .checktypes import NAMESPACES
from .cost import CEL_SELECTOR_EXPRESSION_MAX_COST
from .environment import CompiledExpression
from .treenodes import _ident_name

#: ``math.MaxUint64``: cel-go's unknown size and its saturation point for costs.
MAX = 2**64 - 1
#: The words of upstream's validation when the estimate passes the limit (``field.Forbidden``).
COST_LIMIT_DETAIL = "too complex, exceeds cost limit"

STRING_TRAVERSAL = 0.1
REGEX_STRING_LENGTH = 0.25
LIST_CREATE = 10
MAP_CREATE = 30
#: ``k8s.io/apiserver/pkg/cel`` limits of the format library.
MAX_FORMAT_SIZE = 64
MAX_NAME_FORMAT_REGEX_SIZE = 128


def _add(*xs: int) -> int:
    return min(MAX, sum(xs))


def _mul(x: int, y: int) -> int:
    return min(MAX, x * y)


def _factor(x: int, f: float) -> int:
    """cel-go's ``multiplyByCostFactor``: ``ceil(x * f)``, saturated."""
    v = math.ceil(float(x) * f)
    return MAX if v >= 2.0**64 else int(v)


# --- the DRA environment's declared sizes (compile.go's sizeEstimator) ---------------------------


@dataclass(frozen=True, slots=True)
class _Decl:
    kind: str  # struct, map, string, bool, dyn, kubernetes.Quantity
    max_elements: int
    key: _Decl | None = None
    elem: _Decl | None = None
    fields: dict[str, _Decl] = field(default_factory=dict)


_ATTRIBUTE = _Decl("dyn", 64)  # max(DeviceAttributeMaxValueLength, values per device 48)
_DOMAIN = _Decl("string", 63)
_ID = _Decl("string", 32)
_INNER_ATTRIBUTES = _Decl("map", 32, _ID, _ATTRIBUTE)
_INNER_CAPACITY = _Decl("map", 32, _ID, _Decl("kubernetes.Quantity", 8))
_DEVICE = _Decl(
    "struct",
    0,
    fields={
        "driver": _Decl("string", 63),
        "allowMultipleAllocations": _Decl("bool", 1),
        "attributes": _Decl("map", 32, _DOMAIN, _INNER_ATTRIBUTES),
        "capacity": _Decl("map", 32, _DOMAIN, _INNER_CAPACITY),
    },
)


def _decl(path: tuple[str, ...]) -> _Decl | None:
    """The declared type at ``path`` (``device``, field names, ``@keys``/``@values``/``@items``)."""
    if not path or path[0] != "device":
        return None
    node = _DEVICE
    for name in path[1:]:
        if name in ("@items", "@values"):
            if node.elem is None:
                return None
            node = node.elem
        elif name == "@keys":
            if node.key is None:
                return None
            node = node.key
        elif name in node.fields:
            node = node.fields[name]
        elif node.elem is _ATTRIBUTE:  # any attribute name in a domain map
            node = _ATTRIBUTE
        else:
            return None
    return node


# --- the estimate --------------------------------------------------------------------------------

_SCALARS = frozenset({"bool", "int", "uint", "double", "null_type"})


@dataclass(frozen=True, slots=True)
class _Est:
    """One node's estimate: its cost, its size (None: unknown), its path, and, for a list or
    map built by the expression, its container kind and entry sizes."""

    cost: int
    size: int | None = None
    path: tuple[str, ...] = ()
    kind: str = "dyn"
    container: str | None = None
    key_size: int | None = None
    val_size: int | None = None
    #: A list's element kind where known ("dyn" otherwise).
    elem: str = "dyn"


@dataclass(frozen=True, slots=True)
class _Var:
    path: tuple[str, ...]
    size: int | None
    kind: str
    container: str | None = None
    key_size: int | None = None
    val_size: int | None = None


def _sz(size: int | None) -> int:
    return MAX if size is None else size


class _TypedChecker(_Checker):
    """draxr's checker, remembering each node's inferred type."""

    def __init__(self) -> None:
        super().__init__()
        self.types: dict[int, str] = {}

    def infer(self, node: lark.Tree[Any], scope: frozenset[str]) -> str:
        result = super().infer(node, scope)
        self.types[id(node)] = result
        return result


def estimated_cost(compiled: CompiledExpression) -> int:
    """The worst-case cost upstream's checker estimates for ``compiled`` (``MAX`` when unbounded)."""
    checker = _TypedChecker()
    checker.infer(compiled.ast, frozenset())
    return _Estimator(checker.types, compiled.literals).visit(compiled.ast, {}).cost


def exceeds_limit(compiled: CompiledExpression) -> bool:
    """Whether the API server refuses ``compiled`` as too complex."""
    return estimated_cost(compiled) > CEL_SELECTOR_EXPRESSION_MAX_COST


Scope = dict[str, _Var]


class _Estimator:
    def __init__(self, types: dict[int, str], literals: dict[int, Any]) -> None:
        self._types = types
        self._literals = literals

    def _type(self, node: Any) -> str:
        return self._types.get(id(node), "dyn")

    def _kind_of(self, node: Any, path: tuple[str, ...]) -> str:
        decl = _decl(path)
        if decl is not None:
            return decl.kind
        t = self._type(node)
        if t.startswith("map("):
            return "map"
        if t.startswith("list("):
            return "list"
        if t == "kubernetes.DRADevice":
            return "struct"
        return t

    def _size(self, node: Any, path: tuple[str, ...], kind: str, var: _Var | None = None) -> int | None:
        """cel-go's ``computeSize`` after literals: the path's declared size, a scalar's 1, a
        variable's own size."""
        decl = _decl(path)
        if decl is not None:
            return decl.max_elements
        if kind in _SCALARS:
            return 1
        return var.size if var is not None else None

    def visit(self, node: Any, scope: Scope) -> _Est:
        method = getattr(self, f"_{node.data}", None)
        if method is None:
            return _Est(1)  # not reached for checked trees
        result: _Est = method(node, scope)
        return result

    # --- primaries

    def _primary(self, node: lark.Tree[Any], scope: Scope) -> _Est:
        (child,) = node.children
        kind = child.data
        if kind == "literal":
            value = self._literals.get(id(child))
            token = child.children[0]
            if isinstance(value, str | bytes):
                size = len(value)
                return _Est(0, size, kind="string" if isinstance(value, str) else "bytes")
            return _Est(0, 1, kind=_LITERAL_KINDS.get(str(getattr(token, "type", "")), "dyn"))
        if kind == "paren_expr":
            return self.visit(child.children[0], scope)
        if kind in ("ident", "dot_ident"):
            name = str(child.children[0])
            var = scope.get(name) if kind == "ident" else None
            path = var.path if var is not None else (name,)
            k = var.kind if var is not None and _decl(path) is None else self._kind_of(node, path)
            if var is not None:
                return _Est(
                    1, self._size(node, path, k, var), path, k, var.container, var.key_size, var.val_size
                )
            return _Est(1, self._size(node, path, k), path, k)
        if kind == "ident_arg":
            return self._global(node, child, scope)
        if kind == "list_lit":
            items = [self.visit(i, scope) for c in child.children for i in c.children]
            val = max((_sz(i.size) for i in items), default=0)
            cost = _add(LIST_CREATE, *(i.cost for i in items))
            elem = items[0].kind if items else "dyn"
            return _Est(cost, len(items), (), "list", "list", 1, val, elem)
        if kind == "map_lit":
            entries = [self.visit(i, scope) for c in child.children for i in c.children]
            keys, vals = entries[0::2], entries[1::2]
            cost = _add(MAP_CREATE, *(e.cost for e in entries))
            key = max((_sz(k.size) for k in keys), default=0)
            val = max((_sz(v.size) for v in vals), default=0)
            return _Est(cost, len(keys), (), "map", "map", key, val)
        return _Est(1)

    # --- operators

    def _expr(self, node: lark.Tree[Any], scope: Scope) -> _Est:
        cond, a, b = (self.visit(c, scope) for c in node.children)
        size = None if a.size is None or b.size is None else max(a.size, b.size)
        container = a.container if a.container == b.container else None
        key = None if container is None else max(_sz(a.key_size), _sz(b.key_size))
        val = None if container is None else max(_sz(a.val_size), _sz(b.val_size))
        kind = a.kind if a.kind == b.kind else "dyn"
        return _Est(_add(cond.cost, max(a.cost, b.cost)), size, (), kind, container, key, val)

    def _conditionalor(self, node: lark.Tree[Any], scope: Scope) -> _Est:
        a, b = (self.visit(c, scope) for c in node.children)
        return _Est(_add(a.cost, b.cost), 1, kind="bool")

    _conditionaland = _conditionalor

    def _relation(self, node: lark.Tree[Any], scope: Scope) -> _Est:
        op_node, right = node.children
        a = self.visit(op_node.children[0], scope)
        b = self.visit(right, scope)
        args = _add(a.cost, b.cost)
        if op_node.data == "relation_in":
            is_list = b.container == "list" or b.kind == "list" or b.kind == "dyn"
            if is_list and b.kind != "map" and b.container != "map":
                return _Est(_add(_sz(b.size), args), 1, kind="bool")
            return _Est(_add(1, args), 1, kind="bool")
        if a.kind in _SCALARS - {"null_type"} and b.kind in _SCALARS - {"null_type"}:
            return _Est(_add(1, args), 1, kind="bool")
        if a.kind in _SCALAR_OPTIONALS and b.kind in _SCALAR_OPTIONALS:  # optional(int) == ...
            return _Est(_add(1, args), 1, kind="bool")
        if op_node.data == "relation_eq" and a.kind == b.kind and a.kind in _UNIT_EQUALITY:
            return _Est(_add(1, args), 1, kind="bool")
        if op_node.data == "relation_eq" and a.kind == b.kind == _FORMAT:
            return _Est(_add(_factor(MAX_FORMAT_SIZE, STRING_TRAVERSAL), args), 1, kind="bool")
        smallest = min(_sz(a.size), _sz(b.size))
        return _Est(_add(_factor(smallest, STRING_TRAVERSAL), args), 1, kind="bool")

    _in_empty = _relation  # upstream estimates ``x in []`` before its planner folds it

    def _addition(self, node: lark.Tree[Any], scope: Scope) -> _Est:
        op_node, right = node.children
        a = self.visit(op_node.children[0], scope)
        b = self.visit(right, scope)
        args = _add(a.cost, b.cost)
        if op_node.data != "addition_add" or a.kind in _SCALARS or b.kind in _SCALARS:
            return _Est(_add(1, args), *_arithmetic(a, b))
        size = _add(_sz(a.size), _sz(b.size))
        if a.kind == "list" or b.kind == "list" or a.container == "list" or b.container == "list":
            val = max(_sz(a.val_size), _sz(b.val_size)) if a.container and b.container else None
            container = "list" if a.container and b.container else None
            return _Est(_add(1, args), size, (), "list", container, 1, val)
        kind = a.kind if a.kind in ("string", "bytes") else b.kind
        return _Est(_add(_factor(size, STRING_TRAVERSAL), args), size, kind=kind)

    def _multiplication(self, node: lark.Tree[Any], scope: Scope) -> _Est:
        op_node, right = node.children
        a = self.visit(op_node.children[0], scope)
        b = self.visit(right, scope)
        return _Est(_add(1, a.cost, b.cost), *_arithmetic(a, b))

    def _unary(self, node: lark.Tree[Any], scope: Scope) -> _Est:
        op = node.children[0].data
        count, inner = 1, node.children[1]
        while isinstance(inner, lark.Tree) and inner.data == "unary" and inner.children[0].data == op:
            count, inner = count + 1, inner.children[1]
        operand = self.visit(inner, scope)
        if count % 2 == 0:  # cel-go's parser drops pairs of ``!`` and ``-``
            return operand
        if op == "unary_not":
            return _Est(_add(1, operand.cost), 1, kind="bool")
        return _Est(_add(1, operand.cost), *_arithmetic(operand, operand))

    # --- members

    def _member_dot(self, node: lark.Tree[Any], scope: Scope) -> _Est:
        target, name = node.children
        operand = self.visit(target, scope)
        cost = operand.cost
        if operand.kind in ("map", "struct"):
            cost = _add(cost, 1)
        path = (*operand.path, str(name)) if operand.path else ()
        kind = self._kind_of(node, path)
        holder = _decl(operand.path)
        if _decl(path) is None and holder is not None and holder.kind == "map" and holder.elem is not None:
            kind = holder.elem.kind  # a map's field is one of its values (cel-go's checked type)
        return _Est(cost, self._size(node, path, kind), path, kind)

    def _member_index(self, node: lark.Tree[Any], scope: Scope) -> _Est:
        target, index = node.children
        a = self.visit(target, scope)
        b = self.visit(index, scope)
        suffix = "@items" if a.kind == "list" or a.container == "list" else "@values"
        path = (*a.path, suffix) if a.path else ()
        kind = self._kind_of(node, path)
        size = a.val_size if a.container is not None else self._size(node, path, kind)
        return _Est(_add(1, a.cost, b.cost), size, path, kind)

    def _member_dot_opt(self, node: lark.Tree[Any], scope: Scope) -> _Est:
        operand = self.visit(node.children[0], scope)
        return _Est(_add(1, operand.cost), None, kind="optional")

    def _member_index_opt(self, node: lark.Tree[Any], scope: Scope) -> _Est:
        a, b = (self.visit(c, scope) for c in node.children)
        return _Est(_add(1, a.cost, b.cost), None, kind="optional")

    def _member_dot_arg(self, node: lark.Tree[Any], scope: Scope) -> _Est:
        target, name_token = node.children[0], node.children[1]
        args: list[Any] = list(node.children[2].children) if len(node.children) > 2 else []
        name = str(name_token)
        namespace = _ident_name(target)
        if name == "bind" and namespace == "cel" and "cel" not in scope:
            return self._bind(args, scope)
        if namespace in NAMESPACES and namespace not in scope:
            return self._call(f"{namespace}.{name}", node, None, [self.visit(a, scope) for a in args], args)
        receiver = self.visit(target, scope)
        if name == "sortBy" and len(args) == 2 and _ident_name(args[0]) is not None:
            return self._sort_by(receiver, _element_type(self._type(target)), args, scope)
        if name in _COMPREHENSIONS and _is_macro(name, args):
            return self._comprehension(name, receiver, _element_type(self._type(target)), args, scope)
        if name in ("optMap", "optFlatMap") and len(args) == 2 and _ident_name(args[0]) is not None:
            return self._optional_macro(name, receiver, args, scope)
        return self._call(name, node, receiver, [self.visit(a, scope) for a in args], args)

    def _optional_macro(self, name: str, receiver: _Est, args: list[Any], scope: Scope) -> _Est:
        """cel-go's expansion: ``t.hasValue() ? optional.of(cel.bind(x, t.value(), e)) :
        optional.none()`` (``optFlatMap`` without the ``optional.of``); ``t`` is estimated twice."""
        kind = receiver.kind[len("optional(") : -1] if receiver.kind.startswith("optional(") else "dyn"
        var = _Var((), None, kind)
        body = self.visit(args[1], {**scope, str(_ident_name(args[0])): var})
        bound = _add(LIST_CREATE, receiver.cost, 1, body.cost)
        if name == "optMap":
            return _Est(_add(receiver.cost, 1, max(_add(1, bound), 1)), None, kind=f"optional({body.kind})")
        return _Est(_add(receiver.cost, 1, max(bound, 1)), None, kind=body.kind)

    def _opt_expr(self, node: lark.Tree[Any], scope: Scope) -> _Est:
        """``?x`` in a list or map literal: estimated as ``x``."""
        return self.visit(node.children[0], scope)

    def _global(self, node: lark.Tree[Any], call: lark.Tree[Any], scope: Scope) -> _Est:
        name = str(call.children[0])
        args: list[Any] = list(call.children[1].children) if len(call.children) > 1 else []
        if name == "has":  # presence tests cost nothing beyond their operand in the base env
            operand = self.visit(args[0].children[0], scope)
            return _Est(operand.cost, 1, kind="bool")
        estimates = [self.visit(a, scope) for a in args]
        if name == "dyn":
            (inner,) = estimates
            return replace(inner, cost=_add(1, inner.cost), kind="dyn")
        return self._call(name, node, None, estimates, args)

    def _bind(self, args: list[Any], scope: Scope) -> _Est:
        init = self.visit(args[1], scope)
        var = _Var(init.path, init.size, init.kind, init.container, init.key_size, init.val_size)
        body = self.visit(args[2], {**scope, str(_ident_name(args[0])): var})
        return replace(body, cost=_add(LIST_CREATE, init.cost, body.cost))

    # --- comprehensions (cel-go's macro expansions)

    def _comprehension(
        self, name: str, rng: _Est, element: str | None, args: list[Any], scope: Scope
    ) -> _Est:
        two = name.startswith("transform") or (len(args) == 3 and name != "map")
        container = rng.container or ("list" if rng.kind == "list" else "map" if rng.kind == "map" else None)
        inner = dict(scope)
        names = [str(_ident_name(a)) for a in args[: 2 if two else 1]]
        if two:
            key_sub = "@indices" if container == "list" else "@keys"
            val_sub = "@items" if container == "list" else "@values"
            index = "int" if container == "list" else "dyn"
            inner[names[0]] = self._iter_var(
                rng, key_sub, rng.key_size if container == "map" else None, index
            )
            inner[names[1]] = self._iter_var(rng, val_sub, rng.val_size, element)
        elif container == "list":
            inner[names[0]] = self._iter_var(rng, "@items", rng.val_size, element)
        else:
            inner[names[0]] = self._iter_var(rng, "@keys", rng.key_size)
        body = [self.visit(a, inner) for a in args[len(names) :]]
        count = _sz(rng.size)
        init, result, per_iteration, size = self._expansion(name, body)
        cost = _add(rng.cost, init, result, _mul(count, per_iteration))
        if size != "range":
            return _Est(cost, 1, kind="bool")
        if name.startswith("transformMap"):
            return _Est(cost, count, (), "map")
        # the step ``r + [t]`` gives the result list entries of the transform's (or element's) size
        item: _Est | _Var = inner[names[-1]] if name == "filter" else body[-1]
        return _Est(cost, count, (), "list", "list", 1, item.size, item.kind)

    def _sort_by(self, rng: _Est, element: str | None, args: list[Any], scope: Scope) -> _Est:
        """ext.Lists' ``sortBy`` macro: ``cel.bind(in, target, in.@sortByAssociatedKeys(
        in.map(e, key)))``, the sort costing 2 (2.1 for string keys) per pair of elements."""
        var = _Est(1, rng.size, rng.path, rng.kind, rng.container, rng.key_size, rng.val_size, rng.elem)
        keys = self._comprehension("map", var, element, args, scope)
        n = _sz(rng.size)
        factor = 2.0 + (STRING_TRAVERSAL if keys.elem in _TEXT or keys.elem not in _SCALARS else 0.0)
        sort = _add(_factor(_mul(n, n), factor), 1, LIST_CREATE)
        cost = _add(LIST_CREATE, rng.cost, 1, keys.cost, sort)
        return _Est(cost, _mul(n, n), (), "list", elem=rng.elem)

    def _iter_var(self, rng: _Est, sub: str, size: int | None, element: str | None = None) -> _Var:
        path = (*rng.path, sub) if rng.path else (sub,)
        decl = _decl(path)
        kind = decl.kind if decl is not None else _kind_name(element or "dyn")
        return _Var(path, size, kind)

    @staticmethod
    def _expansion(name: str, body: list[_Est]) -> tuple[int, int, int, str]:
        """(init, result, loop condition + step per element, result size) as cel-go expands
        ``name``; ``body`` holds the estimates of the predicate or filter and transform."""
        if name == "all":  # init true; @not_strictly_false(r); r && p; r
            return 0, 1, _add(3, body[0].cost), "bool"
        if name == "exists":  # init false; @not_strictly_false(!r); r || p; r
            return 0, 1, _add(4, body[0].cost), "bool"
        if name in ("exists_one", "existsOne"):  # init 0; true; p ? r + 1 : r; r == 1
            return 0, 2, _add(2, body[0].cost), "bool"
        if name == "filter":  # init []; true; p ? r + [x] : r; r
            return LIST_CREATE, 1, _add(body[0].cost, 13), "range"
        if name in ("map", "transformList"):  # init []; true; [p ?] r + [t] : r; r
            step = _add(12, body[-1].cost)
            return LIST_CREATE, 1, _add(body[0].cost, step) if len(body) == 2 else step, "range"
        # transformMap: cel.@mapInsert(r, k, t); transformMapEntry: cel.@mapInsert(r, t)
        step = _add(3 if name == "transformMap" else 2, body[-1].cost)
        return MAP_CREATE, 1, _add(body[0].cost, step) if len(body) == 2 else step, "range"

    # --- function calls

    def _call(
        self, name: str, node: Any, target: _Est | None, args: list[_Est], arg_nodes: list[Any]
    ) -> _Est:
        """cel-go's ``functionCost``: the extension estimators, then the Kubernetes library's,
        then cel-go's own, else 1; plus the target's and arguments' costs."""
        fn, size, kind = self._function(name, node, target, args, arg_nodes)
        total = _add(fn, target.cost if target is not None else 0, *(a.cost for a in args))
        if target is not None and name in _SAME_ELEMENTS:
            return _Est(total, size, (), kind, elem=target.elem)
        return _Est(total, size, (), kind)

    def _function(
        self, name: str, node: Any, target: _Est | None, args: list[_Est], arg_nodes: list[Any]
    ) -> tuple[int, int | None, str]:
        t = self._type(node)
        kind = _kind_name(t)
        scalar_size: int | None = 1 if kind in _SCALARS else None
        first = args[0] if args else None
        recv = target if target is not None else first
        # cel-go ext.Sets and ext.Lists (version 3) estimators
        if name in ("sets.contains", "sets.intersects", "sets.equivalent") and len(args) == 2:
            factor = 2.0 if name == "sets.equivalent" else 1.0
            return _add(_factor(_mul(_sz(args[0].size), _sz(args[1].size)), factor), 1), 1, "bool"
        if target is not None and (target.kind in ("list", "dyn") or target.container == "list"):
            listed = self._list_function(name, node, target, args, arg_nodes)
            if listed is not None:
                return listed
        if name == "lists.range" and len(args) == 1:
            n = _literal_uint(self._literals, arg_nodes[0], MAX)
            return _add(n, 1, LIST_CREATE), n, "list"
        # Kubernetes library estimator
        if name in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf", "includes") and target:
            element = _element_type(self._target_type(node))
            if target.container == "list" and target.size == 0:  # ``[].sum()``: typed as a number
                scalar_size = 1
            if element is not None:
                cost = 1
                if element in ("string", "bytes"):
                    items = _decl((*target.path, "@items")) if target.path else None
                    cost = _add(1, _factor(MAX if items is None else items.max_elements, STRING_TRAVERSAL))
                return _mul(_sz(target.size), cost), scalar_size, kind
            if name == "includes":
                return _sz(target.size), 1, "bool"
            return _factor(_sz(target.size), STRING_TRAVERSAL), scalar_size, kind
        if name in ("url",) and len(args) == 1:
            return _factor(_sz(args[0].size), STRING_TRAVERSAL), args[0].size, kind
        if name in ("lowerAscii", "upperAscii", "substring", "trim") and target is not None:
            return _factor(_sz(target.size), STRING_TRAVERSAL), target.size, "string"
        if name == "replace" and target is not None and len(args) >= 2:
            return self._replace(target, args, arg_nodes)
        if name == "split" and target is not None:
            limit = _sz(target.size)
            literal = _literal_node(arg_nodes[1]) if len(args) > 1 else None
            value = self._literals.get(id(literal))
            if literal is not None and getattr(literal.children[0], "type", None) == "INT_LIT":
                limit = int(value) % 2**64 if isinstance(value, int) else limit
            return _factor(_sz(target.size), 2 * STRING_TRAVERSAL), limit, "list"
        if name == "join" and target is not None:
            return self._join(node, target, args)
        if name in ("find", "findAll") and target is not None and args:
            str_cost = _factor(_add(_sz(target.size), 1), STRING_TRAVERSAL)
            regex_cost = _factor(_sz(args[0].size), REGEX_STRING_LENGTH)
            return _mul(str_cost, regex_cost), target.size, kind
        if name in ("cidr", "isIP", "isCIDR", "quantity", "isQuantity", "semver", "isSemver") and args:
            return _factor(_sz(args[0].size), STRING_TRAVERSAL), scalar_size, kind
        if name == "ip":
            if target is not None:  # cidr.ip()
                return 1, None, kind
            if args:
                return _factor(_sz(args[0].size), STRING_TRAVERSAL), None, kind
        if name == "ip.isCanonical" and args:
            return _factor(_sz(args[0].size), 2 * STRING_TRAVERSAL), 1, "bool"
        if name in _UNIT_FUNCTIONS:
            if name == "format.named":
                return 1, None, "optional(format)"
            return 1, scalar_size, kind
        if name in ("containsIP", "containsCIDR") and args:
            cost = 4 if name == "containsIP" else 7
            if args[0].kind == "string":
                cost = _add(cost, _factor(_sz(args[0].size), STRING_TRAVERSAL))
            return cost, 1, "bool"
        if name == "validate" and args:
            inner = _factor(_sz(args[0].size), STRING_TRAVERSAL)
            return _factor(inner, MAX_NAME_FORMAT_REGEX_SIZE * REGEX_STRING_LENGTH), None, kind
        if name.startswith("format.") and target is None:
            return 1, None, _FORMAT  # format.dns1123Label() and its siblings
        if name == "value" and target is not None and target.kind == "optional(format)":
            return 1, None, _FORMAT
        if name == "optional.of" and len(args) == 1:
            return 1, None, f"optional({args[0].kind})"
        if name == "orValue" and target is not None and target.kind in _SCALAR_OPTIONALS:
            return 1, 1, target.kind[len("optional(") : -1]
        # cel-go's own estimates
        if name == "format" and target is not None:
            return _factor(_sz(target.size), STRING_TRAVERSAL), None, "string"
        if name in ("bytes", "string", "strings.quote") and len(args) == 1:
            source = args[0].kind
            # a dyn argument: the union of every overload, the string/bytes conversion the dearest
            if (name == "bytes" and source in ("string", "dyn")) or (
                name == "string" and source in ("bytes", "dyn")
            ):
                grow = 4 if name == "bytes" else 1
                size = None if args[0].size is None else _mul(args[0].size, grow)
                return _factor(_sz(args[0].size), STRING_TRAVERSAL), size, name
            if name == "strings.quote":
                size = None if args[0].size is None else _add(_mul(args[0].size, 2), 2)
                return _factor(_sz(args[0].size), STRING_TRAVERSAL), size, "string"
        if name in ("startsWith", "endsWith") and len(args) == 1:
            return _factor(_sz(args[0].size), STRING_TRAVERSAL), 1, "bool"
        if name == "matches" and recv is not None:
            regex = args[0] if target is not None else (args[1] if len(args) > 1 else None)
            if regex is not None:
                str_cost = _factor(_add(_sz(recv.size), 1), STRING_TRAVERSAL)
                return _mul(str_cost, _factor(_sz(regex.size), REGEX_STRING_LENGTH)), 1, "bool"
        if name == "contains" and target is not None and len(args) == 1 and target.kind != "list":
            a = _factor(_sz(target.size), STRING_TRAVERSAL)
            return _mul(a, _factor(_sz(args[0].size), STRING_TRAVERSAL)), 1, "bool"
        return 1, scalar_size, kind

    def _target_type(self, node: Any) -> str:
        return self._type(node.children[0]) if isinstance(node, lark.Tree) and node.children else "dyn"

    def _list_function(
        self, name: str, node: Any, target: _Est, args: list[_Est], arg_nodes: list[Any]
    ) -> tuple[int, int | None, str] | None:
        size = _sz(target.size)
        if name == "slice" and len(args) == 2:
            start = _literal_uint(self._literals, arg_nodes[0], 0)
            end = _literal_uint(self._literals, arg_nodes[1], size)
            n = (end - start) % 2**64  # uint64 arithmetic, as upstream
            return _add(n, 1, LIST_CREATE), n, "list"
        if name == "flatten" and len(args) <= 1:
            depth = _literal_uint(self._literals, arg_nodes[0], MAX) if args else 1
            return _add(_factor(size, float(depth)), 1, LIST_CREATE), size, "list"
        if name == "reverse" and not args:
            return _add(size, 1, LIST_CREATE), size, "list"
        if name in ("distinct", "sort") and not args:
            factor = 2.0
            if name == "sort" and self._maybe_text(node, target):
                factor += STRING_TRAVERSAL
            # sorting a list of dyn values (attribute values): cel-go types the result dyn
            unknown = target.elem == "dyn" and _element_type(self._target_type(node)) in (None, "dyn")
            kind = "dyn" if name == "sort" and unknown else "list"
            return _add(_factor(_mul(size, size), factor), 1, LIST_CREATE), _mul(size, size), kind
        return None

    def _maybe_text(self, node: Any, target: _Est) -> bool:
        """Whether a list's elements may be strings (cel-go unions every overload of ``dyn``)."""
        element = _element_type(self._target_type(node))
        if element is None or element == "dyn":
            element = target.elem
        return element in _TEXT or element not in _SCALARS

    def _replace(self, target: _Est, args: list[_Est], arg_nodes: list[Any]) -> tuple[int, int | None, str]:
        sz = _sz(target.size)
        literal = self._literals.get(id(_literal_node(arg_nodes[0])))
        to_replace_min = len(literal) if isinstance(literal, str) else 0
        with_max = _sz(args[1].size)
        if to_replace_min == 0:
            count, retained = (sz + 1 if sz < MAX else sz), sz
        elif with_max <= to_replace_min:
            count, retained = 0, sz
        else:
            count, retained = math.ceil(sz / to_replace_min), 0
        size = _add(_mul(count, with_max), retained)
        return _factor(sz, 2 * STRING_TRAVERSAL), size, "string"

    def _join(self, node: Any, target: _Est, args: list[_Est]) -> tuple[int, int | None, str]:
        n = _sz(target.size)
        size = 0
        if _element_type(self._target_type(node)) is not None:
            # upstream sizes the element by its path only: a literal list's elements are unbounded
            items = _decl((*target.path, "@items")) if target.path else None
            size = _mul(n, MAX if items is None else items.max_elements)
        if args:
            size = _add(size, _mul(_sz(args[0].size), max(n - 1, 0)))
        return _factor(size, STRING_TRAVERSAL), size, "string"


_TEXT = frozenset({"string", "bytes"})
_FORMAT = "kubernetes.NamedFormat"
#: ext.Lists functions whose result holds the receiver's elements.
_SAME_ELEMENTS = frozenset({"slice", "reverse", "distinct", "sort"})
_SCALAR_OPTIONALS = frozenset(f"optional({k})" for k in ("bool", "int", "uint", "double"))
_LITERAL_KINDS = {
    "INT_LIT": "int",
    "UINT_LIT": "uint",
    "FLOAT_LIT": "double",
    "BOOL_LIT": "bool",
    "NULL_LIT": "null_type",
}
_UNIT_EQUALITY = frozenset({"kubernetes.Quantity", "kubernetes.Semver", "net.IP", "net.CIDR"})
_UNIT_FUNCTIONS = frozenset(
    {
        "format.named",
        "sign",
        "asInteger",
        "isInteger",
        "asApproximateFloat",
        "isGreaterThan",
        "isLessThan",
        "compareTo",
        "add",
        "sub",
        "major",
        "minor",
        "patch",
        "getScheme",
        "getHostname",
        "getHost",
        "getPort",
        "getEscapedPath",
        "getQuery",
        "masked",
        "prefixLength",
        "family",
        "isUnspecified",
        "isLoopback",
        "isLinkLocalMulticast",
        "isLinkLocalUnicast",
        "isGlobalUnicast",
    }
)
_COMPREHENSIONS = frozenset(
    {
        "all",
        "exists",
        "exists_one",
        "existsOne",
        "map",
        "filter",
        "transformList",
        "transformMap",
        "transformMapEntry",
    }
)


def _arithmetic(a: _Est, b: _Est) -> tuple[int | None, tuple[str, ...], str]:
    """Size, path and kind of arithmetic on ``a`` and ``b``: a number when one operand is known
    to be one (that picks the overload), else ``dyn`` of unknown size as cel-go types it."""
    for operand in (a, b):
        if operand.kind in _SCALARS:
            return 1, (), operand.kind
    return None, (), "dyn"


def _is_macro(name: str, args: list[Any]) -> bool:
    if not args or _ident_name(args[0]) is None:
        return False
    if name in ("transformList", "transformMap", "transformMapEntry", "existsOne"):
        return len(args) in (3, 4)
    return len(args) in (2, 3)


def _kind_name(t: str) -> str:
    if t.startswith("list("):
        return "list"
    if t.startswith("map("):
        return "map"
    return t


def _element_type(t: str) -> str | None:
    """The element type of ``list(T)`` (None for anything else: cel-go's element node is nil)."""
    if t.startswith("list(") and t.endswith(")"):
        return t[len("list(") : -1]
    return None


def _literal_node(node: Any) -> Any:
    if isinstance(node, lark.Tree) and node.data == "primary":
        child = node.children[0]
        if isinstance(child, lark.Tree) and child.data == "literal":
            return child
    return None


def _literal_uint(literals: dict[int, Any], node: Any, default: int) -> int:
    """cel-go's ``nodeAsUintValue``: an int literal's value (0 if negative), else ``default``."""
    literal = _literal_node(node)
    value = literals.get(id(literal))
    token = literal.children[0] if literal is not None else None
    if getattr(token, "type", None) == "INT_LIT" and isinstance(value, int):
        return max(int(value), 0)
    return default


__all__ = ["COST_LIMIT_DETAIL", "MAX", "estimated_cost", "exceeds_limit"]
