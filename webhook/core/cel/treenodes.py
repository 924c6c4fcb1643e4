"""Where a node of the shaped syntax tree stands, and what it spells: the position and offset cel-go
reports an error at, the node a value's wrappers and brackets stand for, a string literal's value, a
plain identifier's name."""

from __future__ import annotations

import re
from typing import Any

import lark
from celpy.evaluation import Activation, Evaluator

from .errors import CelCompileError


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


def _unwrap(node: Any) -> Any:
    """The node that stands for ``node``'s value: ``primary`` wrappers and brackets dropped."""
    while isinstance(node, lark.Tree) and node.children:
        if node.data == "primary" or node.data == "paren_expr":
            node = node.children[0]
        else:
            break
    return node


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
