"""What cel-go's planner folds when it creates the program (``OptOptimize``, which the DRA compiler
uses): a type conversion of a constant, where a failing one (``int("x")``) is an instantiation
error before any device is seen, and ``x in []``, which is false without evaluating ``x``."""

from __future__ import annotations

import contextlib
import math
import re
from typing import Any

import lark
from celpy import celtypes
from celpy.evaluation import Activation, CELEvalError, Evaluator

from .errors import CelCompileError
from .treenodes import _unwrap


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


#: The rule a folded ``x in []`` relation takes: the engines answer false without evaluating ``x``,
#: the estimate prices it as the relation it was (upstream estimates the checked expression, before
#: the planner folds anything).
IN_EMPTY = "in_empty"


def fold_empty_in(root: lark.Tree[Any]) -> None:
    """Mark every ``x in []`` (the empty list literal, parentheses allowed) as :data:`IN_EMPTY`."""
    for node in root.iter_subtrees():
        if node.data != "relation" or node.children[0].data != "relation_in":
            continue
        if _empty_list(node.children[1]):
            node.data = IN_EMPTY


def _empty_list(node: Any) -> bool:
    while isinstance(node, lark.Tree) and node.data == "primary" and node.children:
        child = node.children[0]
        if not isinstance(child, lark.Tree) or child.data not in ("list_lit", "paren_expr"):
            return False
        if child.data == "list_lit":
            return not child.children
        node = child.children[0]
    return False
