"""Compiling a selector: length and nesting limits, parsing, AST shaping, compile-time checks.

Upstream compiles with cel-go's type checker and enforces a runtime cost limit. celpy has neither,
so this module stands in for both as far as it cheaply can:

* ``CEL_SELECTOR_MAX_LENGTH`` (10 KiB, counted in bytes like the API validation);
* at most :data:`MAX_NESTING` levels of ``()``, ``[]`` and ``{}``, checked by a linear scan before
  parsing, so a hostile 10 KiB of brackets costs a millisecond instead of a quarter second;
* at most :data:`MAX_TREE_DEPTH` levels in the shaped syntax tree (operator chains such as
  ``a + a + ...`` or ``!!!!x`` nest without brackets). celpy evaluates recursively, about 2.5
  Python frames per tree level, so 128 levels stay near 320 frames: well inside the default
  recursion limit of 1000 even when the caller is itself deep in a backtracking allocator.
  32 bracket levels is far beyond any real selector and uses at most 64 tree levels;
* the shaped tree drops celpy's single-child grammar wrappers (``expr`` -> ``conditionalor`` ->
  ... -> ``member``: ten levels per parenthesis) and balances ``&&``/``||`` chains, as cel-go's
  parser does, so that long conjunctions do not nest deeply;
* compile-time checks that cel-go's checker would make: undeclared identifiers and functions,
  unknown ``device`` fields, ``has()`` arguments, macro shapes, literal operand mismatches,
  mixed-type list and map literals (``HomogeneousAggregateLiterals``), invalid literal regular
  expressions (``ValidateRegexLiterals``) and a result type that cannot be bool (``must evaluate
  to bool or the unknown type, not string``);
* namespaced functions (``sets.contains``, ``ip.isCanonical``, ``format.dns1123Label``) resolve
  when the namespace is not a variable; two-variable comprehensions and optional syntax
  (:mod:`.grammar`) are checked like the one-variable macros.

Nothing here changes the process recursion limit: celpy's ``Environment`` (which raises it to
2500) is never created; the parser is used directly.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

import lark
from celpy.celparser import CELParseError
from celpy.evaluation import Activation, CELEvalError, Evaluator

from ..api.constants import CEL_SELECTOR_MAX_LENGTH
from . import extlib, formatlib, netlib
from .errors import CelCompileError
from .grammar import Parser
from .library import KNOWN_FUNCTIONS as _LIBRARY_FUNCTIONS

#: Every function or method name the compile-time check accepts (namespaced ones as ``ns.f``).
KNOWN_FUNCTIONS = (
    _LIBRARY_FUNCTIONS
    | frozenset(extlib.FUNCTIONS)
    | frozenset(netlib.FUNCTIONS)
    | frozenset(formatlib.FUNCTIONS)
)
#: Identifiers that, when not a variable, qualify a function name (``sets.contains(...)``).
NAMESPACES = frozenset(name.split(".", 1)[0] for name in KNOWN_FUNCTIONS if "." in name)
#: Functions whose receiver must be a list (or, for ``indexOf``/``lastIndexOf``, a string).
_LIST_RECEIVER = frozenset(
    {"isSorted", "sum", "min", "max", "slice", "flatten", "distinct", "sort", "sortBy", "reverse"}
)
_LIST_OR_STRING_RECEIVER = frozenset({"indexOf", "lastIndexOf"})

#: Grammar rule of an operator -> the CEL function that implements it (checker and evaluator).
OPERATORS = {
    "relation_eq": "_==_",
    "relation_ne": "_!=_",
    "relation_lt": "_<_",
    "relation_le": "_<=_",
    "relation_gt": "_>_",
    "relation_ge": "_>=_",
    "relation_in": "_in_",
    "addition_add": "_+_",
    "addition_sub": "_-_",
    "multiplication_mul": "_*_",
    "multiplication_div": "_/_",
    "multiplication_mod": "_%_",
    "unary_not": "!_",
    "unary_neg": "-_",
}

MAX_NESTING = 32
MAX_TREE_DEPTH = 128

_COLLAPSIBLE = frozenset(
    {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary", "member"}
)
_BALANCED = frozenset({"conditionaland", "conditionalor"})
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter", "sortBy"})
_UNSUPPORTED_METHODS = frozenset({"reduce"})
#: cel-go's optional macros (``cel.OptionalTypes``): ``opt.optMap(x, e)``, ``opt.optFlatMap(x, e)``.
_OPTIONAL_MACROS = frozenset({"optMap", "optFlatMap"})
#: The accumulator cel-go's macros expand to; an iteration variable may not take its name.
_ACCUMULATOR = "__result__"
#: cel-go's two-variable comprehensions (``ext.TwoVarComprehensions``) by name: argument counts.
TWO_VARIABLE_MACROS = {
    "all": (3,),
    "exists": (3,),
    "existsOne": (3,),
    "exists_one": (3,),  # cel-go registers both spellings for two variables
    "transformList": (3, 4),
    "transformMap": (3, 4),
    "transformMapEntry": (3, 4),
}  # celpy extensions that are not CEL
_TYPE_IDENTS = frozenset(
    {"int", "uint", "double", "bool", "string", "bytes", "null_type", "type", "list", "map"}
)
_DEVICE_FIELDS = {
    "driver": "string",
    "allowMultipleAllocations": "bool",
    "attributes": "map(string, map(string, dyn))",
    "capacity": "map(string, map(string, kubernetes.Quantity))",
}
_DEVICE = "kubernetes.DRADevice"
_STRING_ARG = frozenset({"quantity", "isQuantity", "semver", "isSemver"}) | netlib.STRING_ARGUMENT
_PRIMITIVES = frozenset({"bool", "int", "uint", "double", "string", "bytes", "null_type"})
_NUMERIC = frozenset({"int", "uint", "double"})

_parser_lock = threading.Lock()
_parser: Parser | None = None


@dataclass(frozen=True, slots=True)
class CompiledExpression:
    """A checked, shaped syntax tree; immutable and safe to share between threads."""

    expression: str
    ast: lark.Tree[Any]
    depth: int
    #: Decoded literal values by node id (see :func:`literal_values`).
    literals: dict[int, Any]


def compile_expression(expression: str) -> CompiledExpression:
    """Validate and parse; raises :class:`CelCompileError` with an upstream-like message."""
    if not isinstance(expression, str):
        raise CelCompileError(f"expression must be a string, not {type(expression).__name__}")
    size = len(expression.encode("utf-8", "surrogatepass"))
    if size > CEL_SELECTOR_MAX_LENGTH:
        raise CelCompileError(
            f"Too long: may not be more than {CEL_SELECTOR_MAX_LENGTH} bytes (expression has {size})"
        )
    nesting = bracket_nesting(expression)
    if nesting > MAX_NESTING:
        raise CelCompileError(
            f"compilation failed: expression nested too deeply: {nesting} levels of brackets, "
            f"at most {MAX_NESTING} are supported"
        )
    tree = shape(_parse(expression))
    depth = tree_depth(tree)
    if depth > MAX_TREE_DEPTH:
        raise CelCompileError(
            f"compilation failed: expression nested too deeply: {depth} levels of operators and "
            f"selections, at most {MAX_TREE_DEPTH} are supported"
        )
    result = _Checker().infer(tree, frozenset())
    if result not in ("bool", "dyn"):
        raise CelCompileError(f"must evaluate to bool or the unknown type, not {result}")
    return CompiledExpression(expression, tree, depth, literal_values(tree))


def literal_values(root: lark.Tree[Any]) -> dict[int, Any]:
    """Decoded literal values by node id, computed once instead of on every evaluation.

    Literals that decode to an error (an out-of-range int, say) are left out and decoded at
    evaluation time, so no exception object is ever shared between threads.
    """
    decoder = Evaluator(root, Activation())
    values: dict[int, Any] = {}
    pending = [root]
    while pending:
        node = pending.pop()
        if node.data == "literal":
            value = decoder.literal(node)
            if not isinstance(value, CELEvalError):
                values[id(node)] = value
        pending.extend(c for c in node.children if isinstance(c, lark.Tree))
    return values


def bracket_nesting(text: str) -> int:
    """Deepest ``()``/``[]``/``{}`` nesting outside string literals and ``//`` comments."""
    depth = best = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "([{":
            depth += 1
            best = max(best, depth)
        elif c in ")]}":
            depth = max(0, depth - 1)
        elif c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif c in "'\"":
            i = _skip_string(text, i)
            continue
        i += 1
    return best


def _skip_string(text: str, start: int) -> int:
    raw = False
    j = start - 1
    while j >= 0 and text[j] in "rRbB":
        raw = raw or text[j] in "rR"
        j -= 1
    quote = text[start] * 3 if text.startswith(text[start] * 3, start) else text[start]
    i = start + len(quote)
    while i < len(text):
        if not raw and text[i] == "\\":
            i += 2
            continue
        if text.startswith(quote, i):
            return i + len(quote)
        if len(quote) == 1 and text[i] == "\n":
            return i  # unterminated: the parser reports it
        i += 1
    return i


def _parse(expression: str) -> lark.Tree[Any]:
    global _parser
    with _parser_lock:
        if _parser is None:
            _parser = Parser()
        parser = _parser
        try:
            return parser.parse(expression)
        except RecursionError:
            raise  # the caller's stack, not the expression: not a compile error (never cached)
        except CELParseError as e:
            if isinstance(e.__context__, RecursionError):
                raise RecursionError(str(e.__context__)) from None
            detail = str(e.__context__ or e).strip().splitlines()[0]
            where = f"<input>:{e.line or '?'}:{e.column or '?'}"
            raise CelCompileError(f"compilation failed: ERROR: {where}: Syntax error: {detail}") from None
        except Exception as e:  # lark reports some malformed input with other exception types
            raise CelCompileError(f"compilation failed: Syntax error: {type(e).__name__}: {e}") from None


def shape(root: lark.Tree[Any]) -> lark.Tree[Any]:
    """Collapse single-child wrappers and balance ``&&``/``||`` chains (iteratively: the raw tree
    of a hostile expression can be thousands of levels deep)."""
    done: dict[int, lark.Tree[Any]] = {}
    stack: list[tuple[lark.Tree[Any], bool]] = [(root, False)]
    while stack:
        node, visited = stack.pop()
        if not visited:
            stack.append((node, True))
            stack.extend((c, False) for c in node.children if isinstance(c, lark.Tree))
            continue
        if node.data == "unary" and _mixes_operators(node):
            # cel-go's grammar: a run of ``!`` or of ``-`` before a member, never both
            run = "!-" if node.children[0].data == "unary_not" else "-!"
            raise CelCompileError(
                f"compilation failed: ERROR: {_position(node.children[1])}: Syntax error: "
                f"no viable alternative at input '{run}'"
            )
        node.children = [done.pop(id(c)) if isinstance(c, lark.Tree) else c for c in node.children]
        if node.data in _COLLAPSIBLE and len(node.children) == 1 and isinstance(node.children[0], lark.Tree):
            done[id(node)] = node.children[0]
        elif node.data == "unary" and _repeats_operator(node):
            # cel-go's parser drops ``!!`` and ``--`` (a run of one operator, not through
            # parentheses): ``!!x`` is ``x`` whatever its type; children are shaped already
            done[id(node)] = node.children[1].children[1]
        elif node.data in _BALANCED and len(node.children) == 2:
            done[id(node)] = _balance(node)
        else:
            done[id(node)] = node
    return done[id(root)]


def _mixes_operators(node: lark.Tree[Any]) -> bool:
    """Whether an unshaped unary node's operand is a unary node of the other operator (``!-x``)."""
    if len(node.children) != 2:
        return False
    op, operand = node.children
    while isinstance(operand, lark.Tree) and operand.data == "unary" and len(operand.children) == 1:
        operand = operand.children[0]  # celpy's unary -> member wrapper is not an operator
    return (
        isinstance(operand, lark.Tree)
        and operand.data == "unary"
        and len(operand.children) == 2
        and isinstance(op, lark.Tree)
        and operand.children[0].data != op.data
    )


def _repeats_operator(node: lark.Tree[Any]) -> bool:
    """Whether a unary node's operand is a unary node of the same operator (``!!x``)."""
    if len(node.children) != 2:
        return False
    op, operand = node.children
    return (
        isinstance(operand, lark.Tree)
        and operand.data == "unary"
        and len(operand.children) == 2
        and isinstance(op, lark.Tree)
        and operand.children[0].data == op.data
    )


def _balance(node: lark.Tree[Any]) -> lark.Tree[Any]:
    operands: list[lark.Tree[Any]] = []
    pending = [node]
    while pending:
        n = pending.pop()
        if n.data == node.data and len(n.children) == 2:
            pending.extend(reversed(n.children))
        else:
            operands.append(n)
    # CEL's && and || are commutative (errors are absorbed by a decisive operand), so the
    # grouping does not change the result; operand order is kept.
    while len(operands) > 1:
        paired = [
            lark.Tree(node.data, [operands[i], operands[i + 1]], meta=node.meta)
            for i in range(0, len(operands) - 1, 2)
        ]
        if len(operands) % 2:
            paired.append(operands[-1])
        operands = paired
    return operands[0]


def tree_depth(root: lark.Tree[Any]) -> int:
    best = 0
    stack = [(root, 1)]
    while stack:
        node, d = stack.pop()
        best = max(best, d)
        stack.extend((c, d + 1) for c in node.children if isinstance(c, lark.Tree))
    return best


def _position(node: Any) -> str:
    """``<input>:line:column`` of the first token in ``node`` (shaped nodes may lack a meta)."""
    pending = [node]
    while pending:
        current = pending.pop()
        if isinstance(current, lark.Token):
            if current.line is not None:
                return f"<input>:{current.line}:{current.column}"
        elif isinstance(current, lark.Tree):
            pending.extend(reversed(current.children))
    return "<input>:?:?"


def _fail(node: Any, message: str) -> CelCompileError:
    # cel-go names the null type ``null`` in its messages (``null_type`` is the identifier).
    message = re.sub(r"\bnull_type\b(?=[,)'])", "null", message)
    return CelCompileError(f"compilation failed: ERROR: {_position(node)}: {message}")


class _Checker:
    """A small stand-in for cel-go's checker: names, shapes, and obvious type errors.

    Types are CEL type names; ``dyn`` means unknown (attribute values, indexing, ...), and
    checks only fire when both sides are known, so valid selectors are never rejected.
    """

    def __init__(self) -> None:
        #: Nodes whose type is ``dyn`` in cel-go's checker too (an attribute value, ``dyn(x)``),
        #: not merely unknown here: only these count as ``dyn`` in a literal's element types.
        self._surely_dyn: set[int] = set()

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
        return "bool"

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
            if str(field) not in _DEVICE_FIELDS:
                raise _fail(field, f"undefined field '{field}'")
            return _DEVICE_FIELDS[str(field)]
        if t in _PRIMITIVES:
            raise _fail(field, f"type '{t}' does not support field selection")
        if _is_attribute_domain(target, t):
            self._surely_dyn.add(id(node))
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
            if qualified not in KNOWN_FUNCTIONS:
                raise _fail(name_token, f"undeclared reference to '{qualified}' (in container '')")
            for a in args:
                self.infer(a, scope)
            self._check_regex(qualified, args, 0)
            return _RESULT_TYPES.get(qualified, "dyn")
        t = self.infer(target, scope)
        if name in TWO_VARIABLE_MACROS and len(args) in TWO_VARIABLE_MACROS[name]:
            return self._two_variables(node, name_token, t, args, scope)
        if name in _MACROS:
            arity_ok = len(args) == 2 or (name == "map" and len(args) == 3)  # map(x, filter, transform)
            if not arity_ok:
                raise _fail(name_token, f"{name}() requires an identifier and an expression")
            if _ident_name(args[0]) is None:
                raise _fail(args[0], "argument must be a simple name")
            if _ident_name(args[0]) == _ACCUMULATOR:
                raise _fail(args[0], "iteration variable overwrites accumulator variable")
            if name != "sortBy":
                _check_range(node, t)
            if t in _PRIMITIVES or t == _DEVICE or (name == "sortBy" and t.startswith("map(")):
                raise _fail(name_token, f"found no matching overload for '{name}' applied to '({t})'")
            inner = scope | {str(_ident_name(args[0]))}
            if len(args) == 3 and _known_not(self.infer(args[1], inner), "bool"):
                raise _fail(name_token, "map() filter must be bool")
            body = self.infer(args[-1], inner)
            if name in ("all", "exists", "exists_one", "filter") and _known_not(body, "bool"):
                raise _fail(name_token, f"{name}() predicate must be bool, not {body}")
            return "list(dyn)" if name in ("map", "filter", "sortBy") else "bool"
        if name in _OPTIONAL_MACROS and len(args) == 2:
            return self._optional_macro(name_token, t, args, scope)
        if name in _UNSUPPORTED_METHODS or name not in KNOWN_FUNCTIONS:
            raise _fail(name_token, f"undeclared reference to '{name}' (in container '')")
        if name == "format" and len(args) == 1 and _list_literal(args[0]) is not None:
            # cel-go's format validator exempts its argument list from homogeneous literals
            for item in _list_literal(args[0]) or []:
                self.infer(item, scope)
            types = ["list(dyn)"]
        else:
            types = [self.infer(a, scope) for a in args]
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
        body = self.infer(args[1], scope | {var})
        if name == "optMap":
            return _optional(body)
        if body != "dyn" and not body.startswith("optional_type("):
            raise _fail(
                name_token,
                f"found no matching overload for '_?_:_' applied to '(bool, {body}, optional_type(dyn))'",
            )
        return body

    def _two_variables(
        self, node: lark.Tree[Any], name_token: Any, t: str, args: list[Any], scope: frozenset[str]
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
        _check_range(node, t)
        if t in _PRIMITIVES or t == _DEVICE:
            raise _fail(name_token, f"found no matching overload for '{name}' applied to '({t})'")
        inner = scope | {first, second}
        types = [self.infer(a, inner) for a in args[2:]]
        if (name in ("all", "exists", "existsOne", "exists_one") or len(args) == 4) and _known_not(
            types[0], "bool"
        ):
            raise _fail(name_token, f"{name}() predicate must be bool, not {types[0]}")
        if name == "transformList":
            return "list(dyn)"
        if name.startswith("transformMap"):
            return "map(dyn, dyn)"
        return "bool"

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
                return "dyn"
            if name == "device":
                return _DEVICE
            if name in _TYPE_IDENTS:
                return "type"
            raise _fail(child.children[0], f"undeclared reference to '{name}' (in container '')")
        if kind == "ident_arg":
            return self._call(child, scope)
        if kind == "list_lit":
            items = [item for c in child.children for item in c.children]
            return f"list({self._homogeneous(items, scope)})"
        if kind == "map_lit":
            entries = [item for c in child.children for item in c.children]
            for i in range(0, len(entries), 2):  # ``{?k: v}``: ``v`` must be optional
                if isinstance(entries[i], lark.Tree) and entries[i].data == "opt_expr":
                    entries[i : i + 2] = [entries[i].children[0], lark.Tree("opt_expr", [entries[i + 1]])]
            keys = self._homogeneous(entries[0::2], scope)
            return f"map({keys}, {self._homogeneous(entries[1::2], scope)})"
        raise _fail(child, f"unsupported syntax: {kind}")

    def _opt_expr(self, node: lark.Tree[Any], scope: frozenset[str]) -> str:
        """``?x`` in a list or map literal: ``x`` must be optional; the element is its value."""
        t = self.infer(node.children[0], scope)
        if t.startswith("optional_type("):
            return t[len("optional_type(") : -1]
        if t != "dyn":
            raise _fail(node.children[0], f"expected type 'optional_type({t})' but found '{t}'")
        return "dyn"

    def _homogeneous(self, items: list[Any], scope: frozenset[str]) -> str:
        """The one type of a literal's elements (cel-go's ``HomogeneousAggregateLiterals``, which
        Kubernetes enables): every element's type must equal the first's, ``dyn`` included
        (``[attribute, 1]`` is rejected). An element only unknown here is skipped."""
        found: str | None = None
        for item in items:
            t = self.infer(item, scope)
            if t == "dyn" and not self._is_surely_dyn(item):
                continue
            if t != "dyn" and "dyn" in t:  # list(dyn), map(string, dyn): unknown parts here
                continue
            if found is None:
                found = t
            elif t != found:
                raise _fail(item, f"expected type '{found}' but found '{t}'")
        return "dyn" if found is None else found

    def _is_surely_dyn(self, node: Any) -> bool:
        if isinstance(node, lark.Tree) and node.data == "primary" and node.children:
            node = node.children[0]
        return id(node) in self._surely_dyn

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
        if name in _STRING_ARG and types and _known_not(types[0], "string"):
            applied = ", ".join(types)
            raise _fail(name_token, f"found no matching overload for '{name}' applied to '({applied})'")
        return _RESULT_TYPES.get(name, "dyn")

    @staticmethod
    def _want_bool(node: lark.Tree[Any], op: str, t: str) -> None:
        if _known_not(t, "bool"):
            raise _fail(node, f"found no matching overload for '{op}' applied to '({t}, ...)'")


#: The overloads of the strings extension (version 2, as Kubernetes' base environment declares it)
#: on a string receiver; ``reverse`` is version 3 only (lists have their own).
_STRING_METHODS: dict[str, tuple[tuple[str, ...], ...]] = {
    "charAt": (("int",),),
    "indexOf": (("string",), ("string", "int")),
    "lastIndexOf": (("string",), ("string", "int")),
    "replace": (("string", "string"), ("string", "string", "int")),
    "split": (("string",), ("string", "int")),
    "substring": (("int",), ("int", "int")),
    "reverse": (),
}


def _check_range(node: lark.Tree[Any], t: str) -> None:
    """A comprehension's range must be a list, a map or dyn (cel-go's checker, before the body)."""
    if t in _PRIMITIVES or t == _DEVICE or t.startswith(("kubernetes.", "optional_type(")):
        raise _fail(
            node,
            f"expression of type '{t}' cannot be range of a comprehension (must be list, map, or dynamic)",
        )


def _fits(types: list[str], overloads: tuple[tuple[str, ...], ...]) -> bool:
    """Whether some overload takes these argument types (a ``dyn`` argument takes any)."""
    return any(
        len(params) == len(types) and all(t in ("dyn", p) for t, p in zip(types, params, strict=True))
        for params in overloads
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


def _type_args(t: str) -> list[str]:
    """The parameters of ``list(T)`` or ``map(K, V)`` (top-level commas only)."""
    inner = t[t.index("(") + 1 : -1]
    args, depth, start = [], 0, 0
    for i, c in enumerate(inner):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "," and depth == 0:
            args.append(inner[start:i].strip())
            start = i + 1
    args.append(inner[start:].strip())
    return args


def _optional(t: str) -> str:
    return t if t.startswith("optional_type(") else f"optional_type({t})"


def _known_not(t: str, wanted: str) -> bool:
    return t != "dyn" and t != wanted


def _list_literal(node: Any) -> list[Any] | None:
    """The element nodes of a list literal, or None for anything else."""
    if isinstance(node, lark.Tree) and node.data == "primary":
        child = node.children[0]
        if isinstance(child, lark.Tree) and child.data == "list_lit":
            return [item for c in child.children for item in c.children]
    return None


def _string_literal(node: Any) -> str | None:
    """The value of a string literal node, or None for anything else."""
    if not (isinstance(node, lark.Tree) and node.data == "primary"):
        return None
    child = node.children[0]
    if not (isinstance(child, lark.Tree) and child.data == "literal"):
        return None
    token = child.children[0]
    if not (isinstance(token, lark.Token) and token.type in ("STRING_LIT", "MLSTRING_LIT")):
        return None
    value = Evaluator(node, Activation()).literal(child)
    return str(value) if isinstance(value, str) else None


def _ident_name(node: Any) -> str | None:
    """The name when ``node`` is a plain identifier (a macro or bind variable)."""
    if isinstance(node, lark.Tree) and node.data == "primary":
        child = node.children[0]
        if isinstance(child, lark.Tree) and child.data == "ident":
            return str(child.children[0])
    return None


_LITERAL_TYPES = {
    "INT_LIT": "int",
    "UINT_LIT": "uint",
    "FLOAT_LIT": "double",
    "STRING_LIT": "string",
    "MLSTRING_LIT": "string",
    "BYTES_LIT": "bytes",
    "BOOL_LIT": "bool",
    "NULL_LIT": "null_type",
}

_RESULT_TYPES = {
    "size": "int",
    "int": "int",
    "uint": "uint",
    "double": "double",
    "string": "string",
    "bool": "bool",
    "bytes": "bytes",
    "type": "type",
    "matches": "bool",
    "contains": "bool",
    "startsWith": "bool",
    "endsWith": "bool",
    "quantity": "kubernetes.Quantity",
    "isQuantity": "bool",
    "isInteger": "bool",
    "asInteger": "int",
    "asApproximateFloat": "double",
    "sign": "int",
    "add": "kubernetes.Quantity",
    "sub": "kubernetes.Quantity",
    "isLessThan": "bool",
    "isGreaterThan": "bool",
    "compareTo": "int",
    "semver": "kubernetes.Semver",
    "isSemver": "bool",
    "major": "int",
    "minor": "int",
    "patch": "int",
    "includes": "bool",
    "asList": "list(dyn)",
    "lowerAscii": "string",
    "upperAscii": "string",
    "trim": "string",
    "charAt": "string",
    "indexOf": "int",
    "lastIndexOf": "int",
    "replace": "string",
    "split": "list(string)",
    "substring": "string",
    "join": "string",
    **extlib.RESULT_TYPES,
    **netlib.RESULT_TYPES,
    **formatlib.RESULT_TYPES,
}


#: Qualified type identifiers of the libraries (``type(ip(x)) == net.IP``).
QUALIFIED_TYPES = frozenset({"net.IP", "net.CIDR"})


def qualified_type(target: Any, field: str, scope: frozenset[str] | None = None) -> str | None:
    """``net.IP`` when ``target.field`` spells a library type and ``net`` is no variable in ``scope``."""
    namespace = _ident_name(target)
    if namespace is None or (scope is not None and namespace in scope):
        return None
    name = f"{namespace}.{field}"
    return name if name in QUALIFIED_TYPES else None


def empty_list_literal(node: Any) -> bool:
    """Whether ``node`` is ``[]`` (parentheses allowed). cel-go's planner (``OptOptimize``, which
    the DRA compiler uses) folds ``x in []`` to false without evaluating ``x``."""
    while isinstance(node, lark.Tree) and node.data == "primary" and node.children:
        child = node.children[0]
        if not isinstance(child, lark.Tree):
            return False
        if child.data == "list_lit":
            return not child.children
        if child.data != "paren_expr":
            return False
        node = child.children[0]
    return False
