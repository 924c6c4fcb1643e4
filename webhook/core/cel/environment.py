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

import contextlib
import math
import re
import threading
from dataclasses import dataclass
from typing import Any

import lark
from celpy import celtypes
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
_QUANTITY = "kubernetes.Quantity"  # no conversion takes one (``ip``/``cidr`` have ``string``)
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
    checker = _Checker()
    result = checker.infer(tree, frozenset())
    checker.validate()
    if result not in ("bool", "dyn"):
        raise CelCompileError(f"must evaluate to bool or the unknown type, not {result}")
    fold_conversions(tree)
    return CompiledExpression(expression, tree, depth, literal_values(tree))


class _NotConstant(Exception):
    """An expression cel-go's planner does not fold to a constant."""


#: Conversions cel-go's planner folds when their argument is a constant (``duration`` and
#: ``timestamp`` are refused by their literal validators first).
_FOLDED_CONVERSIONS = frozenset({"int", "uint", "double", "bool", "string", "bytes", "dyn", "type"})
_GO_INT = re.compile(r"[+-]?[0-9]+")
_GO_DIGITS = r"[0-9](?:_?[0-9])*"
_GO_HEX_DIGITS = r"[0-9a-fA-F](?:_?[0-9a-fA-F])*"
#: What Go's ``strconv.ParseFloat`` reads: decimal or hexadecimal (with a ``p`` exponent) floats,
#: underscores between digits, infinities and NaN.
_GO_FLOAT = re.compile(
    rf"[+-]?(?:{_GO_DIGITS}(?:\.(?:{_GO_DIGITS})?)?|\.{_GO_DIGITS})(?:[eE][+-]?{_GO_DIGITS})?"
    rf"|[+-]?0[xX]_?(?:{_GO_HEX_DIGITS}(?:\.(?:{_GO_HEX_DIGITS})?)?|\.{_GO_HEX_DIGITS})[pP][+-]?{_GO_DIGITS}"
    r"|(?i:[+-]?inf(?:inity)?|nan)"
)
_GO_BOOLS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True}
_GO_BOOLS |= {"0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}


def fold_conversions(root: lark.Tree[Any]) -> None:
    """cel-go plans a type conversion of a constant (a literal, a literal list or map, another
    folded conversion) by evaluating it, and a failure is the program's instantiation error:
    ``int("x")`` is refused before any device is seen. Raises :class:`CelCompileError` with the
    first such failure in evaluation order."""
    pending: list[tuple[lark.Tree[Any], bool]] = [(root, False)]
    while pending:
        node, visited = pending.pop()
        if not visited:
            pending.append((node, True))
            pending.extend((c, False) for c in reversed(node.children) if isinstance(c, lark.Tree))
        elif node.data == "ident_arg" and str(node.children[0]) in _FOLDED_CONVERSIONS:
            with contextlib.suppress(_NotConstant):
                _constant(node)


def _constant(node: Any) -> Any:
    """The value cel-go's planner folds ``node`` to; ``_NotConstant`` when it does not."""
    node = _unwrap(node)
    if not isinstance(node, lark.Tree):
        raise _NotConstant
    if node.data == "literal":
        value = Evaluator(node, Activation()).literal(node)
        if isinstance(value, CELEvalError):
            raise _NotConstant
        return value
    if node.data == "unary" and node.children[0].data == "unary_neg":
        operand = _unwrap(node.children[1])
        if isinstance(operand, lark.Tree) and operand.data == "literal":
            value = _constant(operand)
            if isinstance(value, int | float) and not isinstance(value, bool | celtypes.BoolType):
                return type(value)(-value)
        raise _NotConstant
    if node.data in ("list_lit", "map_lit"):
        return [_constant(item) for c in node.children for item in c.children]
    if node.data == "ident_arg" and str(node.children[0]) in _FOLDED_CONVERSIONS:
        args = list(node.children[1].children) if len(node.children) > 1 else []
        if len(args) != 1:
            raise _NotConstant
        return _convert(str(node.children[0]), _constant(args[0]))
    raise _NotConstant


def _convert(name: str, value: Any) -> Any:
    """cel-go's conversion of a constant; ``CelCompileError`` with its words when it fails."""

    def failure(words: str) -> CelCompileError:
        return CelCompileError(f"program instantiation failed: {words}")

    if name in ("dyn", "type") or isinstance(value, list):
        return value
    if isinstance(value, bool | celtypes.BoolType) or value is None or isinstance(value, celtypes.NullType):
        if value is None or isinstance(value, celtypes.NullType):
            raise failure(f"no such overload: {name}(null_type)")
        if name == "bool" or name == "string":
            return value
        raise _NotConstant
    if isinstance(value, str):
        text = str(value)
        if name in ("int", "uint"):
            ok = _GO_INT.fullmatch(text) is not None and (name == "int" or text[0] not in "+-")
            number = int(text) if ok else 0
            limit = (-(2**63), 2**63 - 1) if name == "int" else (0, 2**64 - 1)
            if not ok or not limit[0] <= number <= limit[1]:
                raise failure(f"type conversion error from 'string' to '{name}'")
            return celtypes.IntType(number) if name == "int" else celtypes.UintType(number)
        if name == "double":
            if _GO_FLOAT.fullmatch(text) is None:
                raise failure("type conversion error from 'string' to 'double'")
            plain = text.replace("_", "")
            real = float.fromhex(plain) if "x" in plain.lower() else float(plain)
            if math.isinf(real) and "inf" not in plain.lower():  # out of range: Go's ErrRange
                raise failure("type conversion error from 'string' to 'double'")
            return celtypes.DoubleType(real)
        if name == "bool":
            if text not in _GO_BOOLS:
                raise failure("type conversion error from 'string' to 'bool'")
            return celtypes.BoolType(_GO_BOOLS[text])
        return value
    if isinstance(value, bytes):
        if name == "string":
            try:
                return celtypes.StringType(bytes(value).decode("utf-8"))
            except UnicodeDecodeError:
                raise failure("invalid UTF-8 in bytes, cannot convert to string") from None
        return value
    if isinstance(value, float):
        v = float(value)
        if name == "int" and (math.isnan(v) or not -(2.0**63) < v < 2.0**63):
            raise failure("integer overflow")
        if name == "uint" and (math.isnan(v) or not 0 <= v < 2.0**64):
            raise failure("unsigned integer overflow")
        return celtypes.IntType(int(v)) if name == "int" else value
    if isinstance(value, int):
        if name == "int" and value > 2**63 - 1:
            raise failure("integer overflow")
        if name == "uint" and value < 0:
            raise failure("unsigned integer overflow")
        return celtypes.UintType(int(value)) if name == "uint" else celtypes.IntType(int(value))
    raise _NotConstant


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
        node.children = [done.pop(id(c)) if isinstance(c, lark.Tree) else c for c in node.children]
        if node.data in _COLLAPSIBLE and len(node.children) == 1 and isinstance(node.children[0], lark.Tree):
            done[id(node)] = node.children[0]
        elif node.data in _BALANCED and len(node.children) == 2:
            done[id(node)] = _balance(node)
        else:
            done[id(node)] = node
    return done[id(root)]


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
    meta = getattr(node, "meta", None)
    if meta is not None and not meta.empty:  # a literal without tokens (``[]``)
        return f"<input>:{meta.line}:{meta.column}"
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
        #: Types of the comprehension variables in scope that are known (the rest are ``dyn``).
        self._variables: dict[str, str] = {}
        #: A list literal's elements and their types, by the literal's node id.
        self._elements: dict[int, tuple[list[Any], list[str]]] = {}

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
            if str(field) not in _DEVICE_FIELDS:
                raise _fail(field, f"undefined field '{field}'")
            return _DEVICE_FIELDS[str(field)]
        if t in _PRIMITIVES:
            raise _fail(field, f"type '{t}' does not support field selection")
        if t.startswith("map(string, ") and "dyn" not in t:
            return _type_args(t)[1]  # ``device.capacity[domain].memory``: a quantity
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
            if not self._known(item, t) or t == "dyn" or _kind(t) in _FORMAT_KINDS[verb]:
                continue
            if verb == "s" and t not in _PRIMITIVES:  # library types may have a string form
                continue
            given = _kind(t)
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


def _conditional_mismatch(condition: str, accumulator: str) -> str:
    """cel-go's error for a macro whose step is ``condition ? step : accumulator``."""
    return f"found no matching overload for '_?_:_' applied to '({condition}, {accumulator}, {accumulator})'"


def _predicate_mismatch(macro: str, predicate: str, element: str | None) -> str:
    """cel-go's error for a non-bool predicate, as the macro's expansion reports it: ``all`` and
    ``exists`` join it with a bool accumulator, ``exists_one`` counts under ``p ? n + 1 : n``,
    ``filter`` appends under ``p ? l + [x] : l``."""
    if macro in ("all", "exists"):
        return f"expected type 'bool' but found '{predicate}'"
    if macro == "filter":
        return _conditional_mismatch(predicate, f"list({element or 'dyn'})")
    return _conditional_mismatch(predicate, "int")


#: The argument kinds each format clause takes (cel-go's static format check).
_FORMAT_KINDS = {
    "s": frozenset({"list", "map", "int", "uint", "double", "bool", "string", "bytes", "type", "null_type"}),
    "d": frozenset({"int", "uint"}),
    "f": frozenset({"double", "string"}),
    "e": frozenset({"double", "string"}),
    "b": frozenset({"int", "uint", "bool"}),
    "x": frozenset({"int", "uint", "string", "bytes"}),
    "X": frozenset({"int", "uint", "string", "bytes"}),
    "o": frozenset({"int", "uint"}),
}
_FORMAT_ERRORS = {
    "s": "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, "
    "durations, and timestamps",
    "d": "decimal clause can only be used on integers",
    "f": "fixed-point clause can only be used on doubles",
    "e": "scientific clause can only be used on doubles",
    "b": "only integers and bools can be formatted as binary",
    "x": "only integers, byte buffers, and strings can be formatted as hex",
    "X": "only integers, byte buffers, and strings can be formatted as hex",
    "o": "octal clause can only be used on integers",
}


def _format_clauses(text: str, arguments: int) -> list[tuple[int, str]] | str:
    """The (argument index, verb) of each clause of a format string, or the error that parsing
    it gives (as the strings extension's ``format`` reports it)."""
    clauses: list[tuple[int, str]] = []
    i = 0
    while i < len(text):
        if text[i] != "%":
            i += 1
            continue
        i += 1
        if i < len(text) and text[i] == "%":
            i += 1
            continue
        if i < len(text) and text[i] == ".":
            j = i + 1
            while j < len(text) and text[j].isdigit():
                j += 1
            if j == i + 1:
                return 'could not parse formatting clause: unable to convert "" to int'
            i = j
        if i >= len(text):
            return "could not parse formatting clause: unexpected end of string"
        verb = text[i]
        i += 1
        if len(clauses) >= arguments:
            return f"index {len(clauses)} out of range"
        if verb not in _FORMAT_KINDS:
            return f'could not parse formatting clause: unrecognized formatting clause "{verb}"'
        clauses.append((len(clauses), verb))
    return clauses


#: The type conversions' overloads (argument types) in cel-go's standard library.
_CONVERSIONS: dict[str, frozenset[str]] = {
    "int": frozenset(
        {"int", "uint", "double", "string", "google.protobuf.Timestamp", "google.protobuf.Duration"}
    ),
    "uint": frozenset({"int", "uint", "double", "string"}),
    "double": frozenset({"int", "uint", "double", "string"}),
    "string": frozenset(
        {
            "int",
            "uint",
            "double",
            "bool",
            "string",
            "bytes",
            "google.protobuf.Timestamp",
            "google.protobuf.Duration",
        }
    ),
    "bool": frozenset({"bool", "string"}),
    "bytes": frozenset({"bytes", "string"}),
}


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


def _unwrap(node: Any) -> Any:
    """The node that stands for ``node``'s value: ``primary`` wrappers and brackets dropped."""
    while isinstance(node, lark.Tree) and node.children:
        if node.data == "primary" or node.data == "paren_expr":
            node = node.children[0]
        else:
            break
    return node


def _kind(t: str) -> str:
    """``list``, ``map``, ``optional_type`` or the type itself."""
    return t.split("(", 1)[0]


def _most_general(a: str, b: str) -> str | None:
    """cel-go's join of two assignable types (``dyn`` wins, parameter by parameter); None when
    neither is assignable to the other (the checker then joins them to ``dyn``)."""
    if a == b:
        return a
    if a == "dyn" or b == "dyn":
        return "dyn"
    if _kind(a) != _kind(b) or "(" not in a or "(" not in b:
        return None
    params = [_most_general(x, y) for x, y in zip(_type_args(a), _type_args(b), strict=False)]
    if len(_type_args(a)) != len(_type_args(b)) or None in params:
        return None
    return f"{_kind(a)}({', '.join(str(p) for p in params)})"


def _offset(node: Any) -> int:
    """The character offset cel-go gives ``node``'s expression: a call's is its ``(``, a
    selection's its ``.``, an index's its ``[``, an operator's its symbol (near enough: the end of
    the left operand), anything else its first character."""
    node = _unwrap(node)
    meta = getattr(node, "meta", None)
    start = getattr(meta, "start_pos", 0) if meta is not None and not meta.empty else 0
    if not isinstance(node, lark.Tree):
        return int(getattr(node, "start_pos", 0) or 0)
    kind = node.data
    if kind in ("member_dot_arg", "ident_arg"):
        token = node.children[1] if kind == "member_dot_arg" else node.children[0]
        return int(getattr(token, "end_pos", start) or start)
    if kind in ("member_dot", "member_dot_opt", "member_index", "member_index_opt"):
        return _end(node.children[0], start)
    if kind in ("relation", "addition", "multiplication") and len(node.children) == 2:
        return _end(node.children[0].children[0], start)
    if kind in ("conditionalor", "conditionaland", "expr") and len(node.children) >= 2:
        return _end(node.children[0], start)
    return int(start)


def _end(node: Any, default: int) -> int:
    meta = getattr(node, "meta", None)
    if meta is None or meta.empty:
        return default
    return int(meta.end_pos)


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
