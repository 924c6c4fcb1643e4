"""Evaluating a compiled selector against one device's prepared activation.

celpy's interpreted runner is used (its ``CompiledRunner`` writes a module global and gave wrong
results under threads), but not through ``InterpretedRunner``, which rebuilds an activation on
every call: an :class:`Activation` holding the ``device`` variable is prepared once per device
and shared read-only, and each evaluation only creates a small evaluator object. Macros clone the
activation before binding their variable, so the shared one is never written.

The evaluator subclass works on the shaped tree of :mod:`.environment` and replaces celpy's
hottest node handlers (celpy builds ``typing`` generics for ``cast()`` on every node, which was
half the run time, and decodes string literals on every evaluation). It also adds:

* short-circuit ``&&``/``||``/``?:`` with CEL's commutative error absorption;
* ``cel.bind`` (cel-go ``ext.Bindings``);
* upstream's runtime cost tracking (:mod:`.cost`): identifiers and selections cost one, calls
  what cel-go and the Kubernetes libraries charge, comprehensions their expanded loop's steps;
  past ``CELSelectorExpressionMaxCost`` the evaluation stops with cel-go's error.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

import lark
from celpy import celtypes
from celpy.evaluation import Activation, CELEvalError, Evaluator, NameContainer, base_functions

from . import extlib, formatlib, netlib
from .checker import qualified_type
from .checktypes import NAMESPACES, OPERATORS, TWO_VARIABLE_MACROS
from .cost import (
    CEL_SELECTOR_EXPRESSION_MAX_COST,
    COST_LIMIT_MESSAGE,
    COSTS,
    LIST_CREATE,
    MAP_CREATE,
    is_constant,
)
from .environment import CompiledExpression
from .errors import CelRuntimeError
from .formatlib import NONE, OptionalValue
from .gowords import cel_type_name, go_type_name, no_overload
from .library import FUNCTIONS, TYPE_VALUES, op_in

# celpy logs every evaluation step at DEBUG with full reprs of the activation; when nobody chose
# a level for it, keep it quiet so a process-wide DEBUG setting does not flood logs with device data.
_celpy_logger = logging.getLogger("celpy")
if _celpy_logger.level == logging.NOTSET:
    _celpy_logger.setLevel(logging.WARNING)

ALL_FUNCTIONS: dict[str, Callable[..., Any]] = {
    **base_functions,
    **FUNCTIONS,
    **extlib.FUNCTIONS,
    **netlib.FUNCTIONS,
    **formatlib.FUNCTIONS,
}

_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter", "sortBy"})
_ARITHMETIC = frozenset({"_+_", "_-_", "_*_", "_/_", "_%_", "-_"})


class CostLimitExceeded(Exception):
    """Raised inside an evaluation when its cost passes the limit (not a celpy-handled type)."""


def prepare_activation(device: celtypes.MapType) -> Activation:
    """The shared, read-only activation for one device value."""
    return Activation(vars={"device": device}, functions=ALL_FUNCTIONS)


def _call(fn: Callable[..., Any], name: str, args: list[Any]) -> Any:
    """Apply a CEL function, mapping Python exceptions to CEL error values like celpy does."""
    try:
        return fn(*args)
    except ZeroDivisionError:
        return CELEvalError("modulus by zero" if name == "_%_" else "division by zero")
    except (ValueError, OverflowError) as e:
        if name in _ARITHMETIC:  # cel-go's words for int64/uint64 overflow
            unsigned = any(isinstance(a, celtypes.UintType) for a in args)
            return CELEvalError("unsigned integer overflow" if unsigned else "integer overflow")
        return CELEvalError(f"return error for overflow: {e}"[:300])
    except (TypeError, AttributeError, KeyError, IndexError):
        return no_overload(name, *args)


class _Evaluator(Evaluator):
    def __init__(
        self, ast: lark.Tree[Any], activation: Activation, budget: list[int], literals: dict[int, Any]
    ) -> None:
        super().__init__(ast, activation)
        self._budget = budget
        self._literals = literals

    def sub_evaluator(self, ast: lark.Tree[Any]) -> _Evaluator:
        return _Evaluator(ast, self.activation, self._budget, self._literals)

    def _visit_tree(self, tree: lark.Tree[Any]) -> Any:
        return getattr(self, tree.data)(tree)

    def _charge(self, cost: int) -> None:
        budget = self._budget
        budget[0] -= cost
        if budget[0] < 0:
            raise CostLimitExceeded

    def _apply(self, fn: Callable[..., Any], name: str, args: list[Any]) -> Any:
        """Call a CEL function and charge its cost."""
        result = _call(fn, name, args)
        budget = self._budget
        cost = COSTS.get(name)
        budget[0] -= 1 if cost is None else cost(args)
        if budget[0] < 0:
            raise CostLimitExceeded
        return result

    def visit_children(self, tree: lark.Tree[Any]) -> list[Any]:
        return [self._visit_tree(c) if isinstance(c, lark.Tree) else c for c in tree.children]

    # logical operators: short-circuit, but an error only loses against a decisive operand

    def conditionaland(self, tree: lark.Tree[Any]) -> Any:
        left_tree, right_tree = tree.children
        left = self._visit_tree(left_tree)
        if isinstance(left, celtypes.BoolType) and not left:
            return left
        return _logical("_&&_", left, self._visit_tree(right_tree), decisive=False)

    def conditionalor(self, tree: lark.Tree[Any]) -> Any:
        left_tree, right_tree = tree.children
        left = self._visit_tree(left_tree)
        if isinstance(left, celtypes.BoolType) and left:
            return left
        return _logical("_||_", left, self._visit_tree(right_tree), decisive=True)

    def expr(self, tree: lark.Tree[Any]) -> Any:
        cond_tree, then_tree, else_tree = tree.children
        cond = self._visit_tree(cond_tree)
        if isinstance(cond, CELEvalError):
            return cond
        if not isinstance(cond, celtypes.BoolType):
            return no_overload("_?_:_", cond)
        return self._visit_tree(then_tree if cond else else_tree)

    # binary and unary operators

    def _binary(self, tree: lark.Tree[Any]) -> Any:
        op_tree, right_tree = tree.children
        left = self._visit_tree(op_tree.children[0])
        right = self._visit_tree(right_tree)
        name = OPERATORS[op_tree.data]
        if isinstance(left, CELEvalError):
            return left
        if isinstance(right, CELEvalError):
            return right
        return self._apply(ALL_FUNCTIONS[name], name, [left, right])

    relation = _binary
    addition = _binary
    multiplication = _binary

    def in_empty(self, tree: lark.Tree[Any]) -> Any:
        """``x in []``, folded at compile time (``folding.IN_EMPTY``): false, ``x`` not evaluated."""
        return celtypes.BoolType(False)

    def unary(self, tree: lark.Tree[Any]) -> Any:
        op_tree, operand_tree = tree.children
        operand = self._visit_tree(operand_tree)
        if isinstance(operand, CELEvalError):
            return operand
        name = OPERATORS[op_tree.data]
        return self._apply(ALL_FUNCTIONS[name], name, [operand])

    # members

    def member_dot(self, tree: lark.Tree[Any]) -> Any:
        target_tree, field = tree.children
        if field in _QUALIFIED_FIELDS:  # ``net.IP``: a library's type, unless ``net`` is bound
            name = qualified_type(target_tree, str(field))
            if name is not None and not self._bound(name.split(".", 1)[0]):
                return QUALIFIED_TYPE_VALUES[name]
        target = self._visit_tree(target_tree)
        budget = self._budget
        budget[0] -= 1
        if budget[0] < 0:
            raise CostLimitExceeded
        if isinstance(target, CELEvalError):
            return target
        if isinstance(target, OptionalValue):  # ``opt.field`` chains: none stays none
            if not target.present:
                return target
            inner = _select(target.value, str(field))
            return inner if isinstance(inner, CELEvalError) else OptionalValue(inner)
        return _select(target, str(field))

    def member_dot_opt(self, tree: lark.Tree[Any]) -> Any:
        """``x.?field``: optional.of(x.field) when ``x`` has the field, else optional.none()."""
        target_tree, field = tree.children
        target = self._visit_tree(target_tree)
        budget = self._budget
        budget[0] -= 1
        if budget[0] < 0:
            raise CostLimitExceeded
        if isinstance(target, CELEvalError):
            return target
        if isinstance(target, OptionalValue):
            if not target.present:
                return target
            target = target.value
        if isinstance(target, celtypes.MapType):
            return OptionalValue(target[str(field)]) if str(field) in target else NONE
        return CELEvalError(f"type '{cel_type_name(target)}' does not support field selection")

    def member_index_opt(self, tree: lark.Tree[Any]) -> Any:
        """``x[?key]``: optional.of(x[key]) when the key or index is present, else none."""
        target_tree, index_tree = tree.children
        target = self._visit_tree(target_tree)
        if isinstance(target, CELEvalError):
            return target
        index = self._visit_tree(index_tree)
        budget = self._budget
        budget[0] -= 1
        if budget[0] < 0:
            raise CostLimitExceeded
        if isinstance(index, CELEvalError):
            return index
        if isinstance(target, OptionalValue):
            if not target.present:
                return target
            target = target.value
        if isinstance(target, dict):
            present = op_in(index, target)
        elif isinstance(target, list):
            integral = isinstance(index, int) and not isinstance(index, bool | celtypes.BoolType)
            present = celtypes.BoolType(integral and 0 <= index < len(target))
        else:
            return no_overload("_[?_]", target, index)
        if not isinstance(present, celtypes.BoolType):
            return present
        if not present:
            return NONE
        value = _call(ALL_FUNCTIONS["_[_]"], "_[_]", [target, index])
        return value if isinstance(value, CELEvalError) else OptionalValue(value)

    def member_index(self, tree: lark.Tree[Any]) -> Any:
        target_tree, index_tree = tree.children
        target = self._visit_tree(target_tree)
        if isinstance(target, CELEvalError):
            return target
        index = self._visit_tree(index_tree)
        budget = self._budget
        budget[0] -= 1
        if budget[0] < 0:
            raise CostLimitExceeded
        if isinstance(index, CELEvalError):
            return index
        if isinstance(target, OptionalValue):  # ``opt[key]`` chains: none stays none
            if not target.present:
                return target
            inner = _call(ALL_FUNCTIONS["_[_]"], "_[_]", [target.value, index])
            return inner if isinstance(inner, CELEvalError) else OptionalValue(inner)
        return _call(ALL_FUNCTIONS["_[_]"], "_[_]", [target, index])

    def member_dot_arg(self, tree: lark.Tree[Any]) -> Any:
        target_tree, name_token = tree.children[0], tree.children[1]
        name = str(name_token)
        if name == "bind" and len(tree.children) == 3 and _is_ident(target_tree, "cel"):
            return self._bind(tree.children[2])
        arity = len(tree.children[2].children) if len(tree.children) == 3 else 0
        if arity in TWO_VARIABLE_MACROS.get(name, ()):
            return self._two_variables(name, target_tree, tree.children[2])
        if name in _MACROS:
            return self._macro(name, target_tree, tree.children[2])
        if name in ("optMap", "optFlatMap") and arity == 2:
            return self._optional_macro(name, target_tree, tree.children[2])
        namespace = _namespace(target_tree)
        if namespace is not None and not self._bound(namespace):
            qualified = f"{namespace}.{name}"
            args = self._arguments(tree.children[2] if len(tree.children) == 3 else None)
            if isinstance(args, CELEvalError):
                return args
            fn = ALL_FUNCTIONS.get(qualified)
            if fn is None:
                return CELEvalError(f"undeclared reference to '{qualified}'")
            return self._apply(fn, qualified, args)
        target = self._visit_tree(target_tree)
        if isinstance(target, CELEvalError):
            return target
        args = self._arguments(tree.children[2] if len(tree.children) == 3 else None)
        if isinstance(args, CELEvalError):
            return args
        fn = ALL_FUNCTIONS.get(name)
        if fn is None:
            return CELEvalError(f"undeclared reference to '{name}'")
        return self._apply(fn, name, [target, *args])

    def _macro(self, name: str, target_tree: lark.Tree[Any], exprlist: lark.Tree[Any]) -> Any:
        """``all``/``exists``/``exists_one``/``map``/``filter`` with CEL's error rules: a decisive
        element wins over errors in others, and errors stay values (celpy raises from some)."""
        target = self._visit_tree(target_tree)
        if isinstance(target, CELEvalError):
            return target
        if not isinstance(target, list | dict):
            return CELEvalError(f"got '{go_type_name(target)}', expected iterable type")
        var_tree, *rest = exprlist.children
        var = str(var_tree.children[0].children[0])
        body = self.sub_evaluator(rest[-1])

        def apply(item: Any, evaluator: _Evaluator = body) -> Any:
            try:
                return evaluator.evaluate({var: item})
            except CELEvalError as e:
                return e

        charge = self._charge
        if len(rest) == 2:  # map(x, filter, transform)
            guard = self.sub_evaluator(rest[0])
            mapped = []
            for item in target:
                keep = apply(item, guard)
                if not isinstance(keep, celtypes.BoolType):
                    return keep if isinstance(keep, CELEvalError) else no_overload(name, keep)
                charge(_APPEND_COST - 1 if keep else 1)
                if keep:
                    value = apply(item)
                    if isinstance(value, CELEvalError):
                        return value
                    mapped.append(value)
            charge(1)
            return celtypes.ListType(mapped)
        error: CELEvalError | None = None
        if name in ("all", "exists"):
            decisive = name == "exists"
            step = 4 if decisive else 3  # loop condition and accumulator per element
            for item in target:
                charge(step)
                value = apply(item)
                if isinstance(value, celtypes.BoolType):
                    if bool(value) is decisive:
                        charge(1)
                        return value
                elif error is None:
                    error = value if isinstance(value, CELEvalError) else no_overload(name, value)
            charge(1)
            return error if error is not None else celtypes.BoolType(not decisive)
        if name == "sortBy":
            if not isinstance(target, list):
                return no_overload(name, target)
            keys = []
            for item in target:
                charge(_APPEND_COST)
                key = apply(item)
                if isinstance(key, CELEvalError):
                    return key
                keys.append(key)
            return extlib.sort_values(name, list(target), keys)
        results = []
        for item in target:
            value = apply(item)
            if isinstance(value, CELEvalError):
                return value
            if name != "map" and not isinstance(value, celtypes.BoolType):
                return no_overload(name, value)
            if name == "exists_one":
                charge(2 if value else 1)
            else:
                charge(_APPEND_COST - 1 if name == "map" else _APPEND_COST if value else 1)
            results.append((item, value))
        if name != "exists_one":
            charge(1)
        if name == "exists_one":
            return celtypes.BoolType(sum(1 for _, v in results if v) == 1)
        if name == "filter":
            return celtypes.ListType([item for item, v in results if v])
        return celtypes.ListType([v for _, v in results])

    def _two_variables(self, name: str, target_tree: lark.Tree[Any], exprlist: lark.Tree[Any]) -> Any:
        """cel-go's two-variable comprehensions: (index, value) over a list, (key, value) over a
        map; errors as in :meth:`_macro` (a decisive element wins over errors in others)."""
        target = self._visit_tree(target_tree)
        if isinstance(target, CELEvalError):
            return target
        if isinstance(target, list):
            pairs: list[tuple[Any, Any]] = [(celtypes.IntType(i), v) for i, v in enumerate(target)]
        elif isinstance(target, dict):
            pairs = list(target.items())
        else:
            return CELEvalError(f"unsupported comprehension range type: {go_type_name(target)}")
        children = exprlist.children
        first, second = (str(c.children[0].children[0]) for c in children[:2])
        body = self.sub_evaluator(children[-1])
        guard = self.sub_evaluator(children[2]) if len(children) == 4 else None

        def apply(evaluator: _Evaluator, key: Any, value: Any) -> Any:
            try:
                return evaluator.evaluate({first: key, second: value})
            except CELEvalError as e:
                return e

        charge = self._charge
        if name in ("all", "exists"):
            decisive = name == "exists"
            step = 4 if decisive else 3
            error: CELEvalError | None = None
            for key, value in pairs:
                charge(step)
                result = apply(body, key, value)
                if isinstance(result, celtypes.BoolType):
                    if bool(result) is decisive:
                        charge(1)
                        return result
                elif error is None:
                    error = result if isinstance(result, CELEvalError) else no_overload(name, result)
            charge(1)
            return error if error is not None else celtypes.BoolType(not decisive)
        if name in ("existsOne", "exists_one"):
            count = 0
            for key, value in pairs:
                result = apply(body, key, value)
                if not isinstance(result, celtypes.BoolType):
                    return result if isinstance(result, CELEvalError) else no_overload(name, result)
                charge(2 if result else 1)
                count += bool(result)
            return celtypes.BoolType(count == 1)
        out_list: list[Any] = []
        out_map: dict[Any, Any] = {}
        insert = {"transformList": _APPEND_COST - 1, "transformMap": 3}.get(name, 2)
        for key, value in pairs:
            if guard is not None:
                keep = apply(guard, key, value)
                if not isinstance(keep, celtypes.BoolType):
                    return keep if isinstance(keep, CELEvalError) else no_overload(name, keep)
                if not keep:
                    charge(1)
                    continue
            charge(insert)
            result = apply(body, key, value)
            if isinstance(result, CELEvalError):
                return result
            if name == "transformList":
                out_list.append(result)
            elif name == "transformMap":
                out_map[key] = result
            else:
                if not isinstance(result, dict):  # cel-go's expansion inserts the entry
                    return no_overload("cel.@mapInsert", out_map, result)
                for k, v in result.items():
                    if k in out_map:
                        return CELEvalError(f"insert failed: key {k} already exists")
                    out_map[k] = v
        charge(1)
        if name == "transformList":
            return celtypes.ListType(out_list)
        return celtypes.MapType(out_map)

    def _bind(self, exprlist: lark.Tree[Any]) -> Any:
        var_tree, init_tree, body_tree = exprlist.children
        name = str(var_tree.children[0].children[0])
        value = self._visit_tree(init_tree)
        try:
            return self.sub_evaluator(body_tree).evaluate({name: value})
        except CELEvalError as e:
            return e

    def _arguments(self, exprlist: lark.Tree[Any] | None) -> list[Any] | CELEvalError:
        if exprlist is None:
            return []
        args = [self._visit_tree(c) for c in exprlist.children]
        for a in args:
            if isinstance(a, CELEvalError):
                return a
        return args

    # primaries

    def primary(self, tree: lark.Tree[Any]) -> Any:
        child = tree.children[0]
        kind = child.data
        if kind == "literal":
            value = self._literals.get(id(child), _NOT_CACHED)
            return self.literal(child) if value is _NOT_CACHED else value
        if kind == "ident":
            budget = self._budget
            budget[0] -= 1
            if budget[0] < 0:
                raise CostLimitExceeded
            return self._variable(str(child.children[0]))
        if kind == "paren_expr":
            return self._visit_tree(child.children[0])
        if kind == "ident_arg":
            name = str(child.children[0])
            if name not in ("has", "dyn"):
                args = self._arguments(child.children[1] if len(child.children) == 2 else None)
                if isinstance(args, CELEvalError):
                    return args
                fn = ALL_FUNCTIONS.get(name)
                if fn is None:
                    return CELEvalError(f"undeclared reference to '{name}'")
                return self._apply(fn, name, args)
        return super().primary(tree)

    def _bound(self, name: str) -> bool:
        """Whether ``name`` is a variable here (a macro or bind variable shadows a namespace)."""
        container: NameContainer | None = self.activation.identifiers
        while container is not None:
            if dict.get(container, name) is not None:
                return True
            container = container.parent
        return False

    def _variable(self, name: str) -> Any:
        """Innermost binding first (macro and bind variables shadow ``device``)."""
        container: NameContainer | None = self.activation.identifiers
        while container is not None:
            referent = dict.get(container, name)
            if referent is not None:
                return referent.value
            container = container.parent
        kind = TYPE_VALUES.get(name)  # type identifiers such as ``int`` are type values
        if kind is not None:
            return kind
        fn = ALL_FUNCTIONS.get(name)
        return fn if fn is not None else CELEvalError(f"undeclared reference to '{name}'")

    def mapinits(self, tree: lark.Tree[Any]) -> Any:
        """A map literal as cel-go builds it: the first error among keys and values (celpy put an
        error key in the dict and leaked "unhashable type"), and a repeated key's last value wins."""
        out: dict[Any, Any] = {}
        children = tree.children
        if not all(is_constant(c) for c in children):
            self._charge(MAP_CREATE)
        for index in range(0, len(children), 2):
            key_tree = children[index]
            optional = key_tree.data == "opt_expr"  # ``{?k: v}``: the entry only if ``v`` has a value
            key = self._visit_tree(key_tree.children[0] if optional else key_tree)
            if isinstance(key, CELEvalError):
                return key
            value = self._visit_tree(children[index + 1])
            if isinstance(value, CELEvalError):
                return value
            if optional:
                if not isinstance(value, OptionalValue):
                    return no_overload("optional entry", value)
                if not value.present:
                    continue
                value = value.value
            out[key] = value
        return celtypes.MapType(out)

    def exprlist(self, tree: lark.Tree[Any]) -> Any:
        if not all(is_constant(c) for c in tree.children):
            self._charge(LIST_CREATE)
        if any(c.data == "opt_expr" for c in tree.children):
            return self._optional_list(tree)
        args = self._arguments(tree)
        return args if isinstance(args, CELEvalError) else celtypes.ListType(args)

    def _optional_list(self, tree: lark.Tree[Any]) -> Any:
        """A list literal with ``?x`` elements: each present only when ``x`` has a value."""
        out: list[Any] = []
        for c in tree.children:
            optional = c.data == "opt_expr"
            value = self._visit_tree(c.children[0] if optional else c)
            if isinstance(value, CELEvalError):
                return value
            if optional:
                if not isinstance(value, OptionalValue):
                    return no_overload("optional element", value)
                if not value.present:
                    continue
                value = value.value
            out.append(value)
        return celtypes.ListType(out)

    def _optional_macro(self, name: str, target_tree: lark.Tree[Any], exprlist: lark.Tree[Any]) -> Any:
        """``opt.optMap(x, e)``: ``optional.of(e)`` with ``x`` bound to the value, or none;
        ``opt.optFlatMap(x, e)``: ``e`` itself (an optional), or none."""
        target = self._visit_tree(target_tree)
        if isinstance(target, CELEvalError):
            return target
        if not isinstance(target, OptionalValue):
            return no_overload("hasValue", target)
        if not target.present:
            return NONE
        var_tree, body_tree = exprlist.children
        try:
            value = self.sub_evaluator(body_tree).evaluate(
                {str(var_tree.children[0].children[0]): target.value}
            )
        except CELEvalError as e:
            return e
        if name == "optMap":
            return OptionalValue(value)
        return value if isinstance(value, OptionalValue) else no_overload("_?_:_", value)


_NOT_CACHED = object()
QUALIFIED_TYPE_VALUES: dict[str, Any] = {"net.IP": netlib.IPValue, "net.CIDR": netlib.CIDRValue}
_QUALIFIED_FIELDS = frozenset(name.split(".", 1)[1] for name in QUALIFIED_TYPE_VALUES)
#: cel-go's ``map``/``filter`` step appends ``[x]`` to the accumulator: the accumulator, the
#: list's creation, the element and the ``+``.
_APPEND_COST = 1 + LIST_CREATE + 1 + 1


def _select(target: Any, field: str) -> Any:
    """``target.field``: a map's key, or the CEL error."""
    if isinstance(target, celtypes.MapType):
        try:
            return target[field]
        except KeyError:
            return CELEvalError(f"no such key: {field}")
    return CELEvalError(f"type '{cel_type_name(target)}' does not support field selection")


def _logical(name: str, left: Any, right: Any, *, decisive: bool) -> Any:
    """The rest of ``&&`` (decisive False) or ``||`` (decisive True) once ``left`` was not decisive."""
    if isinstance(right, celtypes.BoolType) and bool(right) is decisive:
        return right
    if isinstance(left, celtypes.BoolType):
        return (
            right if isinstance(right, celtypes.BoolType | CELEvalError) else no_overload(name, left, right)
        )
    if isinstance(left, CELEvalError):
        return left
    return no_overload(name, left, right)


def _namespace(node: Any) -> str | None:
    """The identifier of ``ns`` in ``ns.f(...)`` when ``ns`` names a function namespace."""
    if not isinstance(node, lark.Tree) or node.data != "primary":
        return None
    child = node.children[0]
    if isinstance(child, lark.Tree) and child.data == "ident" and str(child.children[0]) in NAMESPACES:
        return str(child.children[0])
    return None


def _is_ident(node: Any, name: str) -> bool:
    if not isinstance(node, lark.Tree) or node.data != "primary":
        return False
    child = node.children[0]
    return isinstance(child, lark.Tree) and child.data == "ident" and str(child.children[0]) == name


def evaluate(compiled: CompiledExpression, activation: Activation) -> bool:
    """True/False, or CelRuntimeError. Other exceptions (RecursionError included) propagate to
    the engine, which converts them without caching the outcome."""
    try:
        budget = [CEL_SELECTOR_EXPRESSION_MAX_COST]
        value = _Evaluator(compiled.ast, activation, budget, compiled.literals).evaluate()
    except CELEvalError as e:
        raise CelRuntimeError(error_message(e)) from None
    except CostLimitExceeded:
        raise CelRuntimeError(COST_LIMIT_MESSAGE) from None
    if isinstance(value, CELEvalError):
        raise CelRuntimeError(error_message(value))
    if not isinstance(value, celtypes.BoolType | bool):
        raise CelRuntimeError(not_bool(value))
    return bool(value)


def error_message(e: CELEvalError) -> str:
    """A short message from a celpy error; celpy's own text can embed the whole activation."""
    args = e.args
    text = str(args[0]) if args else "evaluation error"
    if "(in activation" in text:
        text = text.split("(in activation", 1)[0].rstrip()
    if text.startswith("no such member in mapping: "):
        key = text[len("no such member in mapping: ") :].strip("'\"")
        return f"no such key: {key}"
    if text == "no such key" and len(args) > 2 and isinstance(args[2], tuple) and args[2]:
        return f"no such key: {args[2][0]}"
    if text in ("no such overload", "return error for overflow") and len(args) > 2 and args[2]:
        detail = args[2][0] if isinstance(args[2], tuple) else args[2]
        return f"{text}: {detail}"[:300]
    return text[:300]


def evaluation_cost(compiled: CompiledExpression, activation: Activation) -> int:
    """The runtime cost one evaluation spends (upstream's ``EvalDetails.ActualCost``), whatever
    its outcome; past the limit, the limit plus what the failing step charged."""
    budget = [CEL_SELECTOR_EXPRESSION_MAX_COST]
    with contextlib.suppress(CELEvalError, CostLimitExceeded):
        _Evaluator(compiled.ast, activation, budget, compiled.literals).evaluate()
    return CEL_SELECTOR_EXPRESSION_MAX_COST - budget[0]


#: cel-go's words when a result is not a bool (``ConvertToNative`` of each type).
_NOT_BOOL = {
    "int": "unsupported type conversion from 'int' to bool",
    "uint": "unsupported type conversion from 'uint' to bool",
    "double": "type conversion error from Double to 'bool'",
    "bytes": "type conversion error from Bytes to 'bool'",
    "string": "unsupported native conversion from string to 'bool'",
    "list": "type conversion error from list to 'bool'",
    "map": "type conversion error from map to 'bool'",
    "type": "type conversion not supported for 'type'",
}


def not_bool(value: Any) -> str:
    """The allocator's error for a selector whose (dynamic) result is not a bool."""
    name = cel_type_name(value)
    detail = _NOT_BOOL.get(name, f"type conversion error from '{name.rsplit('.', 1)[-1]}' to 'bool'")
    return f"CEL result of type {name} could not be converted to bool: {detail}"
