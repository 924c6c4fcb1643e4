"""The compile-time type check: a string-typed stand-in for cel-go's checker and the validators
Kubernetes enables (homogeneous aggregate literals, string format, regular expressions)."""

from __future__ import annotations

from typing import Any

import lark

from . import extlib
from .checktypes import (
    _ACCUMULATOR,
    _CONVERSIONS,
    _DEVICE,
    _DEVICE_FIELDS,
    _FORMAT_ERRORS,
    _FORMAT_KINDS,
    _LIST_OR_STRING_RECEIVER,
    _LIST_RECEIVER,
    _LITERAL_TYPES,
    _MACROS,
    _NUMERIC,
    _PRIMITIVES,
    _QUANTITY,
    _RESULT_TYPES,
    _STRING_ARG,
    _STRING_METHODS,
    _TYPE_IDENTS,
    _UNSUPPORTED_METHODS,
    KNOWN_FUNCTIONS,
    NAMESPACES,
    OPERATORS,
    TWO_VARIABLE_MACROS,
    _conditional_mismatch,
    _fits,
    _format_clauses,
    _kind,
    _known_not,
    _most_general,
    _optional,
    _predicate_mismatch,
    _type_args,
)
from .errors import CelCompileError
from .releases import SCHEDULER, CelEnvironment
from .treenodes import _fail, _ident_name, _offset, _string_literal, _unwrap

#: cel-go's optional macros (``cel.OptionalTypes``): ``opt.optMap(x, e)``, ``opt.optFlatMap(x, e)``.
_OPTIONAL_MACROS = frozenset({"optMap", "optFlatMap"})


class _Checker:
    """A small stand-in for cel-go's checker: names, shapes, and obvious type errors.

    Types are CEL type names; ``dyn`` means unknown (attribute values, indexing, ...), and
    checks only fire when both sides are known, so valid selectors are never rejected.
    """

    def __init__(self, env: CelEnvironment = SCHEDULER) -> None:
        #: The release's environment: what it declares (``releases.py``).
        self._env = env
        self._undeclared = env.undeclared  # asked at every call: built once
        #: Nodes whose type, ``dyn`` in it included, is cel-go's too (an attribute value, ``dyn(x)``,
        #: a literal of such elements), not merely unknown here: only these count in a literal's
        #: element types.
        self._surely_dyn: set[int] = set()
        #: Empty list and map literals: their element type is free (bound by what they join).
        self._free: set[int] = set()
        #: The validators' errors (homogeneous literals) by upstream position: cel-go validates
        #: only a cleanly checked expression, so these are raised after the whole check.
        self._issues: list[tuple[int, CelCompileError]] = []
        #: Inside a ``format`` call: its literals are exempt from the homogeneous validator.
        self._in_format = 0
        #: Attribute values (``device.attributes[domain].name``): ``dyn`` where selectors are
        #: stored, cel-go's ``any`` where the API server validates new ones (no list-typed
        #: attributes), which cannot be a comprehension's range.
        self._attributes: set[int] = set()
        #: Types of the comprehension variables in scope that are known (the rest are ``dyn``).
        self._variables: dict[str, str] = {}
        #: A list literal's elements and their types, by the literal's node id.
        self._elements: dict[int, tuple[list[Any], list[str]]] = {}

    def _range_type(self, target: Any, t: str) -> str:
        """The type a comprehension's range check sees: an attribute value is ``any`` where
        selectors are validated as new."""
        if not self._env.stored and id(_unwrap(target)) in self._attributes:
            return "any"
        return t

    def check_result(self, root: lark.Tree[Any], result: str) -> None:
        """The DRA compiler's check of the result: bool, or exactly the environment's attribute
        type (``dyn`` where selectors are stored; ``any`` where they are validated as new, so
        there an attribute value passes and a value cel-go types ``dyn`` does not)."""
        if result == "bool":
            return
        if result == "dyn":
            node = id(_unwrap(root))
            if self._env.stored or node in self._attributes or node not in self._surely_dyn:
                return
        raise CelCompileError(f"must evaluate to bool or the unknown type, not {result}")

    def validate(self) -> None:
        """Raises the validators' first error by position (cel-go sorts its errors so)."""
        if self._issues:
            raise min(self._issues, key=lambda issue: issue[0])[1]

    def infer(self, node: lark.Tree[Any], scope: frozenset[str]) -> str:
        kind = node.data
        method = getattr(self, f"_{kind}", None)
        if method is None:
            raise _fail(node, f"unsupported syntax: {kind}")
        result: str = method(node, scope)
        return result

    # operators

    def _expr(self, node: lark.Tree[Any], scope: frozenset[str]) -> str:
        cond, a, b = (self.infer(c, scope) for c in node.children)
        self._want_bool(node, "_?_:_", cond)
        _, left, right = node.children
        if self._is_free(left) or self._is_free(right):
            other, t = (right, b) if self._is_free(left) else (left, a)
            return self._exact_result(node, t) if self._known(other, t) else t
        if a != b and self._known(left, a) and self._known(right, b):
            joined = _most_general(a, b)
            if joined is None:
                raise _fail(node, f"found no matching overload for '_?_:_' applied to '({cond}, {a}, {b})'")
            self._surely_dyn.add(id(node))
            return joined
        if a == b and self._known(left, a) and self._known(right, b) and "dyn" in a:
            self._surely_dyn.add(id(node))
        return a if a == b else "dyn"

    def _conditionalor(self, node: lark.Tree[Any], scope: frozenset[str]) -> str:
        return self._logical(node, scope, "_||_")

    def _conditionaland(self, node: lark.Tree[Any], scope: frozenset[str]) -> str:
        return self._logical(node, scope, "_&&_")

    def _logical(self, node: lark.Tree[Any], scope: frozenset[str], op: str) -> str:
        a, b = (self.infer(c, scope) for c in node.children)
        if _known_not(a, "bool") or _known_not(b, "bool"):
            raise _fail(node, f"found no matching overload for '{op}' applied to '({a}, {b})'")
        return "bool"

    def _relation(self, node: lark.Tree[Any], scope: frozenset[str]) -> str:
        op_node, right = node.children
        a = self.infer(op_node.children[0], scope)
        b = self.infer(right, scope)
        op = op_node.data
        if op == "relation_in":
            element = _type_args(b)[0] if b.startswith(("list(", "map(")) else "dyn"
            if b in _PRIMITIVES or (a in _PRIMITIVES and element in _PRIMITIVES and a != element):
                raise _fail(node, f"found no matching overload for '@in' applied to '({a}, {b})'")
            return "bool"
        symbol = OPERATORS[op]
        # Cross-type numeric comparison is ordering only: ``1 == 1.0`` does not type-check.
        numeric_mix = a in _NUMERIC and b in _NUMERIC and op not in ("relation_eq", "relation_ne")
        if a in _PRIMITIVES and b in _PRIMITIVES and a != b and not numeric_mix:
            raise _fail(node, f"found no matching overload for '{symbol}' applied to '({a}, {b})'")
        left = op_node.children[0]
        if (
            op in ("relation_eq", "relation_ne")
            and _most_general(a, b) is None
            and self._known(left, a)
            and self._known(right, b)
            and all(_kind(x) in ("list", "map", "optional_type") or x in _PRIMITIVES for x in (a, b))
        ):  # ``_==_(A, A)``: aggregates whose types do not join
            raise _fail(node, f"found no matching overload for '{symbol}' applied to '({a}, {b})'")
        return "bool"

    _in_empty = _relation  # a compiled tree (the estimate checks it again): ``x in []`` folded

    def _addition(self, node: lark.Tree[Any], scope: frozenset[str]) -> str:
        return self._arith(node, scope)

    def _multiplication(self, node: lark.Tree[Any], scope: frozenset[str]) -> str:
        return self._arith(node, scope)

    def _arith(self, node: lark.Tree[Any], scope: frozenset[str]) -> str:
        op_node, right = node.children
        a = self.infer(op_node.children[0], scope)
        b = self.infer(right, scope)
        symbol = OPERATORS[op_node.data]
        if a in _PRIMITIVES and b in _PRIMITIVES and (a != b or a in ("bool", "null_type")):
            raise _fail(node, f"found no matching overload for '{symbol}' applied to '({a}, {b})'")
        left, right = op_node.children[0], node.children[1]
        if symbol == "_+_" and _kind(a) == _kind(b) == "list":
            if self._is_free(left) or self._is_free(right):  # ``[] + l``: the free element binds
                other, t = (right, b) if self._is_free(left) else (left, a)
                return self._exact_result(node, t) if self._known(other, t) else t
            joined = _most_general(a, b)
            if joined is None and self._known(left, a) and self._known(right, b):
                raise _fail(node, f"found no matching overload for '{symbol}' applied to '({a}, {b})'")
            if joined is not None and self._known(left, a) and self._known(right, b):
                self._surely_dyn.add(id(node))
                return joined
        return a if a == b else "dyn"

    def _unary(self, node: lark.Tree[Any], scope: frozenset[str]) -> str:
        op_node, operand = node.children
        t = self.infer(operand, scope)
        if op_node.data == "unary_not":
            if _known_not(t, "bool"):
                raise _fail(node, f"found no matching overload for '!_' applied to '({t})'")
            return "bool"
        if t in _PRIMITIVES and t not in ("int", "double"):
            raise _fail(node, f"found no matching overload for '-_' applied to '({t})'")
        return t

    # members

    def _member_dot(self, node: lark.Tree[Any], scope: frozenset[str]) -> str:
        target, field = node.children
        if node.data == "member_dot" and qualified_type(target, str(field), scope) is not None:
            return "type"
        t = self.infer(target, scope)
        if t.startswith("optional_type("):  # selection on an optional chains
            return "optional_type(dyn)"
        if t == _DEVICE:
            if str(field) not in _DEVICE_FIELDS or (
                str(field) == "allowMultipleAllocations" and not self._env.multiple_allocations
            ):
                raise _fail(field, f"undefined field '{field}'")
            return _DEVICE_FIELDS[str(field)]
        if t in _PRIMITIVES:
            raise _fail(field, f"type '{t}' does not support field selection")
        if t.startswith("map(string, ") and "dyn" not in t:
            return _type_args(t)[1]  # ``device.capacity[domain].memory``: a quantity
        if _is_attribute_domain(target, t):
            self._surely_dyn.add(id(node))
            self._attributes.add(id(node))
        return "dyn"

    def _member_dot_opt(self, node: lark.Tree[Any], scope: frozenset[str]) -> str:
        """``x.?field``: an optional of what ``x.field`` would be."""
        return _optional(self._member_dot(node, scope))

    def _member_index_opt(self, node: lark.Tree[Any], scope: frozenset[str]) -> str:
        """``x[?key]``: an optional of what ``x[key]`` would be."""
        return _optional(self._member_index(node, scope))

    def _member_index(self, node: lark.Tree[Any], scope: frozenset[str]) -> str:
        target, index = node.children
        t = self.infer(target, scope)
        self.infer(index, scope)
        if t.startswith("optional_type("):
            return "optional_type(dyn)"
        if t in _PRIMITIVES or t == _DEVICE:
            raise _fail(node, f"found no matching overload for '_[_]' applied to '({t}, ...)'")
        if t.startswith("map(string, map(string, "):
            return t[len("map(string, ") : -1]
        if _is_attribute_domain(target, t):
            self._surely_dyn.add(id(node))
            self._attributes.add(id(node))
        return "dyn"

    def _member_object(self, node: lark.Tree[Any], scope: frozenset[str]) -> str:
        raise _fail(node, "unsupported syntax: message construction")

    def _member_dot_arg(self, node: lark.Tree[Any], scope: frozenset[str]) -> str:
        target, name_token = node.children[0], node.children[1]
        args: list[Any] = list(node.children[2].children) if len(node.children) > 2 else []
        name = str(name_token)
        if name == "bind" and _ident_name(target) == "cel" and "cel" not in scope:
            if len(args) != 3 or _ident_name(args[0]) is None:
                raise _fail(name_token, "cel.bind() requires an identifier, an init and an expression")
            self.infer(args[1], scope)
            return self.infer(args[2], scope | {str(_ident_name(args[0]))})
        namespace = _ident_name(target)
        if namespace in NAMESPACES and namespace not in scope:
            qualified = f"{namespace}.{name}"
            if qualified in self._undeclared:  # cel-go then checks the namespace as a variable
                for a in args:
                    self.infer(a, scope)
                raise _fail(target, f"undeclared reference to '{namespace}' (in container '')")
            if qualified not in KNOWN_FUNCTIONS:
                raise _fail(name_token, f"undeclared reference to '{qualified}' (in container '')")
            types = [self.infer(a, scope) for a in args]
            self._check_regex(qualified, args, 0)
            if qualified == "optional.none" and not args:
                self._free.add(id(node))
                self._surely_dyn.add(id(node))
            elif qualified == "optional.of" and len(args) == 1 and self._known(args[0], types[0]):
                self._surely_dyn.add(id(node))
                return f"optional_type({types[0]})"
            return _RESULT_TYPES.get(qualified, "dyn")
        if name == "format":
            # cel-go exempts every literal anywhere inside a format call from the homogeneous
            # validator (the receiver's and the arguments', however deep)
            self._in_format += 1
            try:
                return self._method(node, name_token, target, args, scope)
            finally:
                self._in_format -= 1
        return self._method(node, name_token, target, args, scope)

    def _method(
        self, node: lark.Tree[Any], name_token: Any, target: Any, args: list[Any], scope: frozenset[str]
    ) -> str:
        name = str(name_token)
        t = self.infer(target, scope)
        if name in self._undeclared:  # a macro too: its arguments are then plain expressions
            for a in args:
                self.infer(a, scope)
            raise _fail(name_token, f"undeclared reference to '{name}' (in container '')")
        if name in TWO_VARIABLE_MACROS and len(args) in TWO_VARIABLE_MACROS[name]:
            return self._two_variables(node, name_token, target, t, args, scope)
        if name in _MACROS:
            arity_ok = len(args) == 2 or (name == "map" and len(args) == 3)  # map(x, filter, transform)
            if not arity_ok:
                raise _fail(name_token, f"{name}() requires an identifier and an expression")
            if _ident_name(args[0]) is None:
                raise _fail(args[0], "argument must be a simple name")
            if _ident_name(args[0]) == _ACCUMULATOR:
                raise _fail(args[0], "iteration variable overwrites accumulator variable")
            if name != "sortBy":
                _check_range(node, self._range_type(target, t))
            if t in _PRIMITIVES or t == _DEVICE or (name == "sortBy" and t.startswith("map(")):
                raise _fail(name_token, f"found no matching overload for '{name}' applied to '({t})'")
            variable = str(_ident_name(args[0]))
            inner = scope | {variable}
            first, _ = self._range_types(target, t)
            saved = self._bind({variable: first})
            try:
                condition = self.infer(args[1], inner) if len(args) == 3 else "bool"
                body = self.infer(args[-1], inner)
            finally:
                self._variables = saved
            if name == "map" and _known_not(condition, "bool"):
                result = f"list({body if self._known(args[-1], body) else 'dyn'})"
                raise _fail(name_token, _conditional_mismatch(condition, result))
            if name in ("all", "exists", "exists_one", "filter") and _known_not(body, "bool"):
                raise _fail(name_token, _predicate_mismatch(name, body, first))
            if name in ("filter", "sortBy") and first is not None:
                return self._exact_result(node, f"list({first})")
            if name == "map" and self._known(args[-1], body):
                return self._exact_result(node, f"list({body})")
            return "list(dyn)" if name in ("map", "filter", "sortBy") else "bool"
        if name in _OPTIONAL_MACROS and len(args) == 2:
            return self._optional_macro(name_token, t, args, scope)
        if name in _UNSUPPORTED_METHODS or name not in KNOWN_FUNCTIONS:
            raise _fail(name_token, f"undeclared reference to '{name}' (in container '')")
        types = [self.infer(a, scope) for a in args]
        if name == "format" and len(args) == 1:
            self._check_format(node, target, args[0])
        receiver_ok = (
            t not in _PRIMITIVES
            or (name in _LIST_OR_STRING_RECEIVER and t == "string")
            or name not in (_LIST_RECEIVER | _LIST_OR_STRING_RECEIVER)
        )
        if not receiver_ok or (name in _LIST_RECEIVER and t.startswith("map(")):
            applied = ", ".join(types)
            raise _fail(name_token, f"found no matching overload for '{name}' applied to '{t}.({applied})'")
        if t in _PRIMITIVES - {"string"} and name in _STRING_METHODS:  # ``42.charAt(2)``
            applied = ", ".join(types)
            raise _fail(name_token, f"found no matching overload for '{name}' applied to '{t}.({applied})'")
        if t == "string" and name in _STRING_METHODS and not _fits(types, _STRING_METHODS[name]):
            applied = ", ".join(types)
            raise _fail(
                name_token, f"found no matching overload for '{name}' applied to 'string.({applied})'"
            )
        self._check_regex(name, args, 1)
        generic = self._generic_result(node, name, target, t, types)
        if generic is not None:
            return generic
        if name == "sum" and t.startswith("list(") and t != "list(dyn)":
            return t[len("list(") : -1]
        return _RESULT_TYPES.get(name, "dyn")

    def _optional_macro(self, name_token: Any, t: str, args: list[Any], scope: frozenset[str]) -> str:
        """cel-go's ``opt.optMap(x, e)`` (``optional.of(e)`` with ``x`` the value, or none) and
        ``opt.optFlatMap(x, e)`` (``e`` itself, an optional); they expand to ``opt.hasValue()``."""
        name = str(name_token)
        var = _ident_name(args[0])
        if var is None:
            raise _fail(args[0], f"{name}() variable name must be a simple identifier")
        if t != "dyn" and not t.startswith("optional_type("):
            raise _fail(name_token, f"found no matching overload for 'hasValue' applied to '{t}.()'")
        saved = self._bind({var: t[len("optional_type(") : -1] if t.startswith("optional_type(") else None})
        try:
            body = self.infer(args[1], scope | {var})
        finally:
            self._variables = saved
        if name == "optMap":
            return _optional(body)
        if body != "dyn" and not body.startswith("optional_type("):
            raise _fail(
                name_token,
                f"found no matching overload for '_?_:_' applied to '(bool, {body}, optional_type(dyn))'",
            )
        return body

    def _generic_result(
        self, node: lark.Tree[Any], name: str, target: Any, t: str, types: list[str]
    ) -> str | None:
        """The result of a type-parameterised method as cel-go's checker binds it, when the
        receiver's type is known: ``optional(T).orValue(T)`` is a ``T`` (the optional's element
        binds first), ``list(T).reverse()`` a ``list(T)``, ``list(T).max()`` a ``T``, and
        ``sort``/``sum`` over ``dyn`` elements match several overloads with different results:
        ``dyn``. None: not such a call (or nothing known)."""
        if not self._known(target, t):
            return None
        element = _type_args(t)[0] if t.startswith(("list(", "optional_type(")) else None
        result: str | None = None
        if name == "orValue" and t.startswith("optional_type(") and len(types) == 1:
            free = id(_unwrap(target)) in self._free
            result = types[0] if free else element
            if id(_unwrap(target)) in self._attributes:  # ``.?name.orValue(x)``: an attribute value
                self._attributes.add(id(node))
        elif element is None or not t.startswith("list("):
            return None
        elif name in ("reverse", "distinct", "slice"):
            result = t
        elif name in ("max", "min"):
            result = element
        elif name == "sort" and element in _PRIMITIVES - {"null_type"}:
            result = t
        elif name in ("sort", "sum"):
            result = "dyn" if element == "dyn" else None
        elif name == "flatten" and not types:
            result = t if element == "dyn" else (element if element.startswith("list(") else None)
        if result is not None and "dyn" in result:
            self._surely_dyn.add(id(node))
        return result

    def _two_variables(
        self,
        node: lark.Tree[Any],
        name_token: Any,
        target: Any,
        t: str,
        args: list[Any],
        scope: frozenset[str],
    ) -> str:
        """cel-go's ``TwoVarComprehensions``: ``all/exists/existsOne(i, v, p)``,
        ``transformList/transformMap/transformMapEntry(i, v, [filter,] expr)``."""
        name = str(name_token)
        first, second = _ident_name(args[0]), _ident_name(args[1])
        if first is None or second is None:
            raise _fail(args[0] if first is None else args[1], "argument must be a simple name")
        for var, arg in ((first, args[0]), (second, args[1])):
            if var == _ACCUMULATOR:
                raise _fail(arg, "iteration variable overwrites accumulator variable")
        if first == second:
            raise _fail(args[1], f"duplicate variable name: {first}")
        _check_range(node, self._range_type(target, t))
        if t in _PRIMITIVES or t == _DEVICE:
            raise _fail(name_token, f"found no matching overload for '{name}' applied to '({t})'")
        inner = scope | {first, second}
        saved = self._bind(dict(zip((first, second), self._range_types(target, t, two=True), strict=True)))
        try:
            types = [self.infer(a, inner) for a in args[2:]]
        finally:
            self._variables = saved
        if name in ("all", "exists", "existsOne", "exists_one"):
            if _known_not(types[0], "bool"):
                raise _fail(name_token, _predicate_mismatch(name, types[0], None))
            return "bool"
        # cel-go expands the transforms to comprehensions whose step is ``accu + [transform]``,
        # ``cel.@mapInsert(accu, i, transform)`` or ``cel.@mapInsert(accu, transform)``, under
        # ``filter ? step : accu`` when there is a filter: their errors are these calls'.
        transform, known = types[-1], self._known(args[-1], types[-1])
        value = transform if known else "dyn"
        if name == "transformList":
            accumulator = f"list({value})"
        elif name == "transformMap":
            keys = self._range_types(target, t, two=True)[0] if self._known(target, t) else None
            accumulator = f"map({keys or 'dyn'}, {value})"
        else:
            if known and _kind(transform) != "map" and transform != "dyn":
                applied = f"(map(dyn, dyn), {transform})"
                raise _fail(
                    name_token, f"found no matching overload for 'cel.@mapInsert' applied to '{applied}'"
                )
            accumulator = transform if known and _kind(transform) == "map" else "map(dyn, dyn)"
        if len(args) == 4 and _known_not(types[0], "bool"):
            raise _fail(name_token, _conditional_mismatch(types[0], accumulator))
        return self._exact_result(node, accumulator) if known else accumulator

    def _range_types(self, target: Any, t: str, *, two: bool = False) -> tuple[str | None, str | None]:
        """The iteration variables' types over a range of type ``t`` (a list's index and element,
        a map's key and value; the element or key alone for one variable); None: unknown here."""
        if not self._known(target, t):
            return None, None
        if t == "dyn":
            return "dyn", "dyn"
        if _kind(t) == "list":
            element = _type_args(t)[0]
            return ("int", element) if two else (element, None)
        if _kind(t) == "map":
            key, value = _type_args(t)
            return key, value
        return None, None

    def _bind(self, variables: dict[str, str | None]) -> dict[str, str]:
        """Declares comprehension variables (None: unknown type); returns the previous ones."""
        saved = self._variables
        known = {name: t for name, t in variables.items() if t is not None}
        self._variables = {k: v for k, v in saved.items() if k not in variables} | known
        return saved

    def _exact_result(self, node: lark.Tree[Any], t: str) -> str:
        """``t``, which is cel-go's type for ``node`` (``dyn`` parts included)."""
        self._surely_dyn.add(id(node))
        return t

    def _check_format(self, node: lark.Tree[Any], target: Any, argument: Any) -> None:
        """cel-go's string format validator: a literal format string's clauses against a list
        literal's element types (an element of type ``dyn`` passes); recorded like the
        homogeneous validator's errors."""
        template = _string_literal(target)
        elements = self._elements.get(id(_unwrap(argument)))
        if template is None or elements is None:
            return
        items, types = elements
        clauses = _format_clauses(template, len(items))
        if isinstance(clauses, str):
            self._issues.append((_offset(node), _fail(node, clauses)))
            return
        for index, verb in clauses:
            t, item = types[index], items[index]
            given = _format_mismatch(verb, t) if self._known(item, t) else None
            if not self._env.stored and id(_unwrap(item)) in self._attributes:
                given = "google.protobuf.Any"  # an attribute value validated as new: no clause takes it
            if given is None:
                continue
            message = f"error during formatting: {_FORMAT_ERRORS[verb]}, was given {given}"
            self._issues.append((_offset(item), _fail(item, message)))
            return
        if len(items) > len(clauses):
            message = (
                f"too many arguments supplied to string.format (expected {len(clauses)}, got {len(items)})"
            )
            self._issues.append((_offset(node), _fail(node, message)))

    @staticmethod
    def _check_regex(name: str, args: list[Any], receivers: int) -> None:
        """A literal regular expression must compile (cel-go's ``ValidateRegexLiterals``)."""
        index = extlib.REGEX_ARGUMENT.get(name)
        if index is None or index - receivers >= len(args) or index - receivers < 0:
            return
        pattern = _string_literal(args[index - receivers])
        if pattern is None:
            return
        error = extlib.regex_error(pattern)
        if error is not None:
            word = "invalid matches argument" if name == "matches" else error
            raise _fail(args[index - receivers], word)

    # primaries

    def _primary(self, node: lark.Tree[Any], scope: frozenset[str]) -> str:
        (child,) = node.children
        kind = child.data
        if kind == "literal":
            token = child.children[0]
            return _LITERAL_TYPES.get(token.type, "dyn") if isinstance(token, lark.Token) else "dyn"
        if kind == "paren_expr":
            return self.infer(child.children[0], scope)
        if kind in ("ident", "dot_ident"):
            name = str(child.children[0])
            if name in scope and kind == "ident":
                known = self._variables.get(name)
                if known is None:
                    return "dyn"
                return self._exact_result(child, known)
            if name == "device":
                return _DEVICE
            if name in _TYPE_IDENTS:
                return "type"
            raise _fail(child.children[0], f"undeclared reference to '{name}' (in container '')")
        if kind == "ident_arg":
            return self._call(child, scope)
        if kind in ("list_lit", "map_lit"):
            items = [item for c in child.children for item in c.children]
            for i in range(0, len(items), 2) if kind == "map_lit" else ():  # ``{?k: v}``: v optional
                if isinstance(items[i], lark.Tree) and items[i].data == "opt_expr":
                    items[i : i + 2] = [items[i].children[0], lark.Tree("opt_expr", [items[i + 1]])]
            types = [self.infer(item, scope) for item in items]
            if not items:
                self._free.add(id(child))
                self._surely_dyn.add(id(child))
            if kind == "list_lit":
                self._elements[id(child)] = (items, types)
                self._homogeneous(items, types, stop=True)
                element, exact = self._element_type(items, types)
                if exact:
                    self._surely_dyn.add(id(child))
                return f"list({element})"
            self._homogeneous(items[0::2], types[0::2], stop=False)
            self._homogeneous(items[1::2], types[1::2], stop=False)
            keys, exact_keys = self._element_type(items[0::2], types[0::2])
            values, exact_values = self._element_type(items[1::2], types[1::2])
            if exact_keys and exact_values:
                self._surely_dyn.add(id(child))
            return f"map({keys}, {values})"
        raise _fail(child, f"unsupported syntax: {kind}")

    def _opt_expr(self, node: lark.Tree[Any], scope: frozenset[str]) -> str:
        """``?x`` in a list or map literal: ``x`` must be optional; the element is its value."""
        t = self.infer(node.children[0], scope)
        if t.startswith("optional_type("):
            return t[len("optional_type(") : -1]
        if t != "dyn":
            raise _fail(node.children[0], f"expected type 'optional_type({t})' but found '{t}'")
        return "dyn"

    def _homogeneous(self, items: list[Any], types: list[str], *, stop: bool) -> None:
        """cel-go's ``HomogeneousAggregateLiterals`` validator (Kubernetes enables it): every
        element's type must equal the first's, ``dyn`` included (``[attribute, 1]`` is refused);
        a list reports its first mismatch, a map each. An element only unknown here is skipped;
        literals anywhere inside a ``format`` call are exempt. Recorded, raised by :meth:`validate`."""
        if self._in_format:
            return
        found: str | None = None
        found_free = False
        for item, t in zip(items, types, strict=True):
            if not self._known(item, t):
                continue
            free = self._is_free(item)
            if found is None or (found_free and not free and _kind(t) == _kind(found)):
                found, found_free = t, free
            elif t != found and not (free and _kind(t) == _kind(found)):
                message = f"expected type '{found}' but found '{t}'"
                self._issues.append((_offset(item), _fail(item, message)))
                if stop:
                    return

    def _element_type(self, items: list[Any], types: list[str]) -> tuple[str, bool]:
        """A literal's element type as cel-go's checker joins it (``[1, 2.0]`` is a
        ``list(dyn)``) and whether that is surely cel-go's (every element's type is)."""
        if all(self._known(item, t) for item, t in zip(items, types, strict=True)):
            bound = [t for item, t in zip(items, types, strict=True) if not self._is_free(item)]
            joined = (bound or types or ["dyn"])[0]
            for t in bound[1:]:
                joined = _most_general(joined, t) or "dyn"
            return joined, True
        found = next((t for item, t in zip(items, types, strict=True) if self._known(item, t)), "dyn")
        return found, False

    def _known(self, node: Any, t: str) -> bool:
        """Whether ``t`` is the node's type in cel-go's checker too (see ``_surely_dyn``)."""
        return "dyn" not in t or self._is_surely_dyn(node)

    def _is_free(self, node: Any) -> bool:
        return id(_unwrap(node)) in self._free

    def _is_surely_dyn(self, node: Any) -> bool:
        return id(_unwrap(node)) in self._surely_dyn

    def _call(self, node: lark.Tree[Any], scope: frozenset[str]) -> str:
        name_token = node.children[0]
        name = str(name_token)
        args: list[Any] = list(node.children[1].children) if len(node.children) > 1 else []
        if name == "has":
            if len(args) != 1 or args[0].data != "member_dot":
                raise _fail(name_token, "invalid argument to has() macro")
            self.infer(args[0].children[0], scope)
            return "bool"
        if name in _UNSUPPORTED_METHODS or name not in KNOWN_FUNCTIONS:
            raise _fail(name_token, f"undeclared reference to '{name}' (in container '')")
        types = [self.infer(a, scope) for a in args]
        self._check_regex(name, args, 0)
        if name == "dyn":
            if len(args) != 1:
                raise _fail(name_token, "dyn() requires one argument")
            self._surely_dyn.add(id(node))
            return "dyn"
        accepted = _CONVERSIONS.get(name)
        if (
            accepted is not None
            and len(args) == 1
            and self._known(args[0], types[0])
            and types[0] not in accepted
            and (types[0] in _PRIMITIVES or _kind(types[0]) in ("list", "map", "optional_type", _QUANTITY))
            and types[0] != "null_type"
        ):
            raise _fail(name_token, f"found no matching overload for '{name}' applied to '({types[0]})'")
        if name in _STRING_ARG and types and _known_not(types[0], "string"):
            applied = ", ".join(types)
            raise _fail(name_token, f"found no matching overload for '{name}' applied to '({applied})'")
        return _RESULT_TYPES.get(name, "dyn")

    @staticmethod
    def _want_bool(node: lark.Tree[Any], op: str, t: str) -> None:
        if _known_not(t, "bool"):
            raise _fail(node, f"found no matching overload for '{op}' applied to '({t}, ...)'")


def _check_range(node: lark.Tree[Any], t: str) -> None:
    """A comprehension's range must be a list, a map or dyn (cel-go's checker, before the body)."""
    if t in _PRIMITIVES or t in (_DEVICE, "any") or t.startswith(("kubernetes.", "optional_type(")):
        raise _fail(
            node,
            f"expression of type '{t}' cannot be range of a comprehension (must be list, map, or dynamic)",
        )


def _is_attribute_domain(target: Any, t: str) -> bool:
    """Whether ``target`` is ``device.attributes[domain]`` (a ``map(string, dyn)``): its fields
    are ``dyn`` in cel-go's checker too."""
    if t != "map(string, dyn)" or not isinstance(target, lark.Tree) or target.data != "member_index":
        return False
    inner = target.children[0]
    return (
        isinstance(inner, lark.Tree)
        and inner.data == "member_dot"
        and str(inner.children[1]) == "attributes"
        and _ident_name(inner.children[0]) == "device"
    )


def _format_mismatch(verb: str, t: str) -> str | None:
    """The kind a format clause refuses a value of type ``t`` by; None when it takes it (``dyn``
    passes, and ``%s`` any library type, which may have a string form)."""
    if t == "dyn" or _kind(t) in _FORMAT_KINDS[verb] or (verb == "s" and t not in _PRIMITIVES):
        return None
    return _kind(t)


#: Qualified type identifiers of the libraries (``type(ip(x)) == net.IP``).
QUALIFIED_TYPES = frozenset({"net.IP", "net.CIDR"})


def qualified_type(target: Any, field: str, scope: frozenset[str] | None = None) -> str | None:
    """``net.IP`` when ``target.field`` spells a library type and ``net`` is no variable in ``scope``."""
    namespace = _ident_name(target)
    if namespace is None or (scope is not None and namespace in scope):
        return None
    name = f"{namespace}.{field}"
    return name if name in QUALIFIED_TYPES else None
