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

import sys
import threading
from dataclasses import dataclass
from typing import Any

import lark
from celpy.celparser import CELParseError
from celpy.evaluation import Activation, CELEvalError, Evaluator

from ..api.constants import CEL_SELECTOR_MAX_LENGTH
from .checker import _Checker
from .errors import CelCompileError
from .folding import fold_conversions, fold_empty_in
from .grammar import Parser
from .releases import SCHEDULER, CelEnvironment, bind_overloads
from .treenodes import _position

MAX_NESTING = 32
MAX_TREE_DEPTH = 128

_COLLAPSIBLE = frozenset(
    {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary", "member"}
)
_BALANCED = frozenset({"conditionaland", "conditionalor"})

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


def compile_expression(expression: str, env: CelEnvironment = SCHEDULER) -> CompiledExpression:
    """Validate and parse in ``env`` (the served release's, stored or new expressions); raises
    :class:`CelCompileError` with an upstream-like message."""
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
    checker = _Checker(env)
    result = checker.infer(tree, frozenset())
    checker.validate()
    checker.check_result(tree, result)
    fold_conversions(tree)
    fold_empty_in(tree)
    bind_overloads(tree, env)
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
            # Lark names a rule with a Token, whose ``==`` is a Python function: as a plain str every
            # comparison and dispatch on ``data`` (the evaluator's hot path) stays in C.
            node.data = sys.intern(str(node.data))
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
