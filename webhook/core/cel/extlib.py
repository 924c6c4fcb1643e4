"""Libraries of upstream's base CEL environment beyond quantity/semver: lists, sets, regex, and the
strings extension's ``format``/``quote`` (version 2, as Kubernetes enables it).

Sources: ``k8s.io/apiserver/pkg/cel/library/{lists,regex}.go``; cel-go ``ext/lists.go``
(``slice``, ``flatten``, ``distinct``, ``reverse``, ``sort``, ``lists.range``; ``sortBy`` is a
macro, in the evaluator), ``ext/sets.go`` and ``ext/strings.go``. Error texts are upstream's.
Regular expressions use RE2 (PyPI ``google-re2``), as cel-go does through Go's ``regexp``.

Namespaced functions (``sets.contains``, ``lists.range``) are registered as ``"sets.contains"``;
the checker and the evaluator resolve ``ns.f(...)`` to them when ``ns`` is not a variable.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from typing import Any

import re2
from celpy import celtypes
from celpy.evaluation import CELEvalError

from ..api.quantity import Quantity
from ..api.semver import Semver
from .gowords import ABSENT, cel_type_name, go_float, go_quote, go_type_name, no_overload
from .library import (
    MAX_VALUE_SIZE,
    TYPE_VALUES,
    _ordered,
    cel_equal,
    fn_index_of,
    fn_last_index_of,
    op_add,
)

Fn = Callable[..., Any]

#: Element comparisons one quadratic operation (``distinct``, ``sets.*``) may make: upstream's
#: runtime cost limit (1,000,000) charges about one per comparison.
MAX_COMPARISONS = 1_000_000
_COST_LIMIT = "operation cancelled: actual cost limit exceeded"

_ONE = celtypes.IntType(1)
_ALL = celtypes.IntType(-1)


def _is_int(v: Any) -> bool:
    return isinstance(v, celtypes.IntType) and not isinstance(v, bool | celtypes.BoolType)


# --- k8s lists library -----------------------------------------------------------------------


def fn_is_sorted(items: Any) -> Any:
    if not isinstance(items, list):
        return no_overload("isSorted", items)
    for prev, nxt in itertools.pairwise(items):
        c = _ordered("isSorted", prev, nxt)
        if isinstance(c, CELEvalError):
            return c
        if c == 1:
            return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def fn_sum(items: Any) -> Any:
    if not isinstance(items, list):
        return no_overload("sum", items)
    if not items:
        return celtypes.IntType(0)
    total = items[0]
    if not isinstance(total, int | float | celtypes.DurationType) or isinstance(total, celtypes.BoolType):
        return no_overload("sum", items)
    for item in items[1:]:
        total = op_add(total, item)
        if isinstance(total, CELEvalError):
            return total
    return total


def _extreme(name: str, prefer: int) -> Fn:
    def pick(items: Any) -> Any:
        if not isinstance(items, list):
            return no_overload(name, items)
        if not items:
            return CELEvalError(f"{name} called on empty list")
        best = items[0]
        for item in items[1:]:
            c = _ordered(name, best, item)
            if isinstance(c, CELEvalError):
                return c
            if c == prefer:
                best = item
        return best

    pick.__name__ = name
    return pick


def fn_index_of_any(target: Any, item: Any, *rest: Any) -> Any:
    """``indexOf`` of the strings extension or of the lists library, by receiver."""
    if isinstance(target, list) and not rest:
        for i, x in enumerate(target):
            if cel_equal(x, item) is True:
                return celtypes.IntType(i)
        return celtypes.IntType(-1)
    return fn_index_of(target, item, *rest)


def fn_last_index_of_any(target: Any, item: Any, *rest: Any) -> Any:
    if isinstance(target, list) and not rest:
        for i in range(len(target) - 1, -1, -1):
            if cel_equal(target[i], item) is True:
                return celtypes.IntType(i)
        return celtypes.IntType(-1)
    return fn_last_index_of(target, item, *rest)


# --- cel-go ext.Lists ------------------------------------------------------------------------


def fn_slice(items: Any, start: Any, end: Any) -> Any:
    if not isinstance(items, list) or not _is_int(start) or not _is_int(end):
        return no_overload("slice", items, start, end)
    s, e = int(start), int(end)
    if s < 0 or e < 0:
        return CELEvalError(f"cannot slice({s}, {e}), negative indexes not supported")
    if s > e:
        return CELEvalError(f"cannot slice({s}, {e}), start index must be less than or equal to end index")
    if len(items) < e:
        return CELEvalError(f"cannot slice({s}, {e}), list is length {len(items)}")
    return celtypes.ListType(items[s:e])


def fn_flatten(items: Any, depth: Any = ABSENT) -> Any:
    """cel-go's ``flatten``: its runtime cost tracker takes the depth as an int before the call
    (anything else is its recovered panic), and the call names a target that is no list by its type."""
    if depth is ABSENT:
        if not isinstance(items, list):
            return CELEvalError(f"no such overload: {_runtime_type(items)}.flatten()")
        depth = _ONE
    elif not _is_int(depth):
        go = {"list": "*types.baseList", "map": "*types.baseMap"}.get(cel_type_name(depth))
        return CELEvalError(
            f"internal error: interface conversion: ref.Val is {go or go_type_name(depth)}, not types.Int"
        )
    elif not isinstance(items, list):
        return CELEvalError(f"no such overload: {_runtime_type(items)}.flatten(int)")
    if depth < 0:
        return CELEvalError("level must be non-negative")
    out: list[Any] = []
    for item in items:
        if isinstance(item, list) and depth > 0:
            inner = fn_flatten(item, celtypes.IntType(int(depth) - 1))
            out.extend(inner)
        else:
            out.append(item)
    return celtypes.ListType(out)


def _runtime_type(value: Any) -> str:
    """A value's runtime type as cel-go prints it: a list or map is of dyn elements."""
    name = cel_type_name(value)
    return {"list": "list(dyn)", "map": "map(dyn, dyn)"}.get(name, name)


def fn_distinct(items: Any) -> Any:
    if not isinstance(items, list):
        return no_overload("distinct", items)
    if len(items) * len(items) > MAX_COMPARISONS:
        return CELEvalError(_COST_LIMIT)
    out: list[Any] = []
    for item in items:
        if not any(cel_equal(kept, item) is True for kept in out):
            out.append(item)
    return celtypes.ListType(out)


def fn_reverse(value: Any) -> Any:
    """``list.reverse()`` (ext.Lists v2). Strings' ``reverse`` is strings version 3, which
    Kubernetes' base environment (strings version 2) does not have."""
    if isinstance(value, list):
        return celtypes.ListType(value[::-1])
    return no_overload("reverse", value)


def sort_values(name: str, items: list[Any], keys: list[Any]) -> Any:
    """``items`` ordered by ``keys`` (stable); keys must share one comparable type."""
    if not keys:
        return celtypes.ListType()
    first = cel_type_name(keys[0])
    if any(cel_type_name(k) != first for k in keys):
        return CELEvalError("list elements must have the same type")
    err: list[CELEvalError] = []

    def compare(a: tuple[int, Any], b: tuple[int, Any]) -> int:
        c = _ordered(name, a[1], b[1])
        if isinstance(c, CELEvalError):
            err.append(c)
            return 0
        return 0 if c == 2 else c

    order = sorted(enumerate(keys), key=functools.cmp_to_key(compare))
    if err:
        return err[0]
    return celtypes.ListType([items[i] for i, _ in order])


def fn_sort(items: Any) -> Any:
    if not isinstance(items, list):
        return no_overload("sort", items)
    return sort_values("sort", list(items), list(items))


def fn_lists_range(n: Any) -> Any:
    if not _is_int(n):
        return no_overload("lists.range", n)
    if n > MAX_VALUE_SIZE:
        return CELEvalError(_COST_LIMIT)
    return celtypes.ListType([celtypes.IntType(i) for i in range(max(0, int(n)))])


# --- cel-go ext.Sets -------------------------------------------------------------------------


def _sets(name: str, test: Callable[[list[Any], list[Any]], bool]) -> Fn:
    def apply(a: Any, b: Any) -> Any:
        if not isinstance(a, list) or not isinstance(b, list):
            return no_overload(name, a, b)
        if len(a) * len(b) > MAX_COMPARISONS:
            return CELEvalError(_COST_LIMIT)
        return celtypes.BoolType(test(a, b))

    apply.__name__ = name
    return apply


def _contains_all(a: list[Any], b: list[Any]) -> bool:
    return all(any(cel_equal(x, y) is True for x in a) for y in b)


SETS_CONTAINS = _sets("sets.contains", _contains_all)
SETS_EQUIVALENT = _sets("sets.equivalent", lambda a, b: _contains_all(a, b) and _contains_all(b, a))
SETS_INTERSECTS = _sets(
    "sets.intersects", lambda a, b: any(any(cel_equal(x, y) is True for x in a) for y in b)
)


# --- regular expressions (RE2) ---------------------------------------------------------------

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> Any:
    """The RE2 program of ``pattern``; raises ``re2.error``. Compiled programs are immutable."""
    return re2.compile(pattern, _RE2_OPTIONS)


def regex_error(pattern: str) -> str | None:
    """Why ``pattern`` is not a valid RE2 expression, or None."""
    try:
        _compiled(pattern)
    except re2.error as e:
        detail = e.args[0] if e.args else "invalid pattern"
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        code, _, arg = str(detail).partition(": ")
        return f"error parsing regexp: {_GO_REGEX_ERRORS.get(code, code)}: `{arg}`"
    return None


#: RE2's error words -> Go ``regexp/syntax``'s, which upstream's messages carry.
_GO_REGEX_ERRORS = {
    "missing ]": "missing closing ]",
    "missing )": "missing closing )",
    "unexpected )": "unexpected )",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid repetition size": "invalid repeat count",
    "trailing \\": "trailing backslash at end of expression",
    "invalid character class range": "invalid character class range",
    "invalid named capture group": "invalid named capture",
    "invalid escape sequence": "invalid escape sequence",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "no argument for repetition operator": "missing argument to repetition operator",
}


def _regex(name: str, text: Any, pattern: Any, *rest: Any) -> Any:
    if not isinstance(text, str) or not isinstance(pattern, str) or rest:
        if isinstance(pattern, str):  # a constant pattern: upstream's optimised call checks types itself
            return CELEvalError("no such overload")
        return no_overload(name, text, pattern, *rest)
    err = regex_error(str(pattern))
    if err is not None:
        return CELEvalError(err if name == "matches" else f"Illegal regex: {err}")
    return _compiled(str(pattern))


def fn_matches(text: Any, pattern: Any) -> Any:
    compiled = _regex("matches", text, pattern)
    if isinstance(compiled, CELEvalError):
        return compiled
    return celtypes.BoolType(compiled.search(str(text)) is not None)


def fn_find(text: Any, pattern: Any) -> Any:
    compiled = _regex("find", text, pattern)
    if isinstance(compiled, CELEvalError):
        return compiled
    m = compiled.search(str(text))
    return celtypes.StringType("" if m is None else m.group(0))


def fn_find_all(text: Any, pattern: Any, limit: Any = ABSENT) -> Any:
    """Go's ``FindAllString``: non-overlapping matches, an empty match right after a match is
    skipped; ``limit`` < 0 means all, 0 none."""
    if limit is ABSENT:
        limit = _ALL
    elif not _is_int(limit):
        return _regex("findAll", text, pattern, limit)
    compiled = _regex("findAll", text, pattern)
    if isinstance(compiled, CELEvalError):
        return compiled
    s, n = str(text), int(limit)
    out: list[celtypes.StringType] = []
    pos, prev_end = 0, -1
    while (n < 0 or len(out) < n) and pos <= len(s):
        m = compiled.search(s, pos)
        if m is None:
            break
        start, end = m.span()
        if end == start == prev_end:  # an empty match abutting the previous match
            pos = start + 1
            continue
        out.append(celtypes.StringType(m.group(0)))
        prev_end = end
        pos = end if end > start else end + 1
    return celtypes.ListType(out)


# --- strings extension: quote, format --------------------------------------------------------

_QUOTE_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def fn_strings_quote(s: Any) -> Any:
    if not isinstance(s, str):
        return no_overload("strings.quote", s)
    out = ['"']
    for ch in str(s):
        if 0xD800 <= ord(ch) <= 0xDFFF:
            out.append("\ufffd")
        else:
            out.append(_QUOTE_ESCAPES.get(ch, ch))
    out.append('"')
    return celtypes.StringType("".join(out))


_FORMAT_ERROR = "error during formatting: "
#: The strings cel-go's fixed-point and scientific clauses take for a double.
_FLOAT_WORDS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_SUPERSCRIPT = str.maketrans(
    "0123456789-", "\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079\u207b"
)


def _locale_fixed(value: float, precision: int) -> str:
    """``message.NewPrinter(en).Sprintf("%.Nf")``: digits grouped by commas, infinity as ∞, and
    negative zero without its sign."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "\u221e" if value > 0 else "-\u221e"
    return f"{value + 0.0:,.{precision}f}"


def _locale_scientific(value: float) -> str:
    """``message.NewPrinter(en).Sprintf("%e")``: six decimals, then the exponent as a power of
    ten in superscript digits (at least two)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "\u221e" if value > 0 else "-\u221e"
    mantissa, exponent = f"{value + 0.0:.6e}".split("e")
    power = int(exponent)
    digits = ("-" if power < 0 else "") + format(abs(power), "02d")
    return f"{mantissa}\u00d710{digits.translate(_SUPERSCRIPT)}"


def _type_value_name(value: type) -> str:
    """The CEL name of a type value (``type(1)`` is ``int``)."""
    for name, kind in TYPE_VALUES.items():
        if kind is value:
            return name
    type_name = getattr(value, "type_name", None)
    if isinstance(type_name, str):
        return type_name
    return {Quantity: "kubernetes.Quantity", Semver: "kubernetes.Semver"}.get(value, value.__name__)


def _bytes_text(value: bytes) -> str | CELEvalError:
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        return CELEvalError(
            _FORMAT_ERROR
            + 'could not convert argument "invalid UTF-8 in bytes, cannot convert to string" to string'
        )


def _as_string(value: Any) -> str | CELEvalError:
    """cel-go's ``FormatString`` (the ``%s`` clause): a value's string conversion, lists and maps
    as :func:`_format_member` writes their elements; other types are refused."""
    if isinstance(value, bool | celtypes.BoolType):
        return "true" if value else "false"
    if isinstance(value, celtypes.UintType | celtypes.IntType):
        return str(int(value))
    if isinstance(value, float):
        return go_float(float(value))
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes):
        return _bytes_text(value)
    if value is None:
        return "null"
    if isinstance(value, list | dict):
        return _format_member(value)
    if isinstance(value, type):
        return _type_value_name(value)
    if isinstance(value, celtypes.TimestampType | celtypes.DurationType):
        return str(value)
    return CELEvalError(
        _FORMAT_ERROR + "string clause can only be used on strings, bools, bytes, ints, "
        f"doubles, maps, lists, types, durations, and timestamps, was given {cel_type_name(value)}"
    )


def _format_member(value: Any) -> str | CELEvalError:
    """cel-go's ``clauseForType`` and ``quoteForCEL`` for a list element or map value: doubles
    with six decimals, strings and bytes quoted, lists and maps written out (map entries as
    ``key:value`` in key order)."""
    if isinstance(value, float):
        v = float(value)
        if math.isnan(v) or math.isinf(v):
            return '"NaN"' if math.isnan(v) else ('"+Inf"' if v > 0 else '"-Inf"')
        return f"{v:.6f}"
    if isinstance(value, str):
        return go_quote(str(value))
    if isinstance(value, bytes):
        text = _bytes_text(value)
        return text if isinstance(text, CELEvalError) else "b" + go_quote(text)
    if isinstance(value, list):
        parts = []
        size = 0
        for item in value:
            part = _format_member(item)
            if isinstance(part, CELEvalError):
                return part
            size += len(part) + 2
            if size > MAX_VALUE_SIZE:
                return CELEvalError(_COST_LIMIT)
            parts.append(part)
        return "[" + ", ".join(parts) + "]"
    if isinstance(value, dict):
        entries = []
        size = 0
        for k, v in value.items():
            if isinstance(k, str):
                key = go_quote(str(k))
            elif isinstance(k, bool | celtypes.BoolType | int):
                key = str(_as_string(k))
            else:
                return CELEvalError(
                    _FORMAT_ERROR + f"no formatting function for map key of type {cel_type_name(k)}"
                )
            part = _format_member(v)
            if isinstance(part, CELEvalError):
                return part
            size += len(key) + len(part) + 3
            if size > MAX_VALUE_SIZE:
                return CELEvalError(_COST_LIMIT)
            entries.append((key, part))
        return "{" + ", ".join(f"{k}:{v}" for k, v in sorted(entries, key=lambda e: e[0])) + "}"
    if isinstance(value, bool | celtypes.BoolType | int | type | bytes) or value is None:
        return _as_string(value)
    if isinstance(value, celtypes.TimestampType | celtypes.DurationType):
        kind = "timestamp" if isinstance(value, celtypes.TimestampType) else "duration"
        return f"{kind}({go_quote(str(value))})"
    return CELEvalError(_FORMAT_ERROR + f"no formatting function for {cel_type_name(value)}")


def _integer(value: Any) -> int | None:
    if isinstance(value, bool | celtypes.BoolType):
        return None
    if isinstance(value, celtypes.IntType | celtypes.UintType):
        return int(value)
    return None


def _format_clause(verb: str, precision: int | None, arg: Any) -> str | CELEvalError:
    """One clause of cel-go's version-1 formatter (``ext/formatting.go``, the strings library at
    Kubernetes' version 2), numbers printed for the default locale (en)."""
    if verb == "s":
        return _as_string(arg)
    if verb == "d":
        n = _integer(arg)
        if n is None:
            return CELEvalError(
                _FORMAT_ERROR + f"decimal clause can only be used on integers, was given {cel_type_name(arg)}"
            )
        return str(n)
    if verb in "fe":
        if isinstance(arg, str) and str(arg) in _FLOAT_WORDS:
            value = _FLOAT_WORDS[str(arg)]
        elif isinstance(arg, float):
            value = float(arg)
        else:
            name = "fixed-point" if verb == "f" else "scientific"
            return CELEvalError(
                _FORMAT_ERROR + f"{name} clause can only be used on doubles, was given {cel_type_name(arg)}"
            )
        digits = 6 if precision is None else precision
        if verb == "f":
            return _locale_fixed(value, digits)
        # upstream's "%<precision>e": the precision is the field's width, the digits stay six
        return _locale_scientific(value).rjust(digits)
    if verb == "b":
        if isinstance(arg, bool | celtypes.BoolType):
            return "1" if arg else "0"
        n = _integer(arg)
        if n is None:
            return CELEvalError(
                "error during formatting: only integers and bools can be formatted as binary, "
                f"was given {cel_type_name(arg)}"
            )
        return format(n, "b")
    if verb == "o":
        n = _integer(arg)
        if n is None:
            return CELEvalError(
                "error during formatting: octal clause can only be used on integers, "
                f"was given {cel_type_name(arg)}"
            )
        return format(n, "o")
    if verb in "xX":
        n = _integer(arg)
        if n is not None:
            text = format(n, "x")
        elif isinstance(arg, str):
            text = str(arg).encode("utf-8").hex()
        elif isinstance(arg, bytes):
            text = bytes(arg).hex()
        else:
            return CELEvalError(
                "error during formatting: only integers, byte buffers, and strings can be formatted as hex, "
                f"was given {cel_type_name(arg)}"
            )
        return text.upper() if verb == "X" else text
    return CELEvalError(f'could not parse formatting clause: unrecognized formatting clause "{verb}"')


def fn_format(template: Any, args: Any) -> Any:
    """``"...".format([args])`` of the strings extension (version 2 verbs)."""
    if not isinstance(template, str) or not isinstance(args, list):
        return no_overload("format", template, args)
    text = str(template)
    out: list[str] = []
    i, used, size = 0, 0, len(text)
    while i < len(text):
        ch = text[i]
        if ch != "%":
            out.append(ch)
            i += 1
            continue
        i += 1
        if i < len(text) and text[i] == "%":
            out.append("%")
            i += 1
            continue
        precision: int | None = None
        if i < len(text) and text[i] == ".":
            j = i + 1
            while j < len(text) and text[j].isdigit():
                j += 1
            if j == i + 1:
                return CELEvalError('could not parse formatting clause: unable to convert "" to int')
            precision = int(text[i + 1 : j])
            i = j
        if i >= len(text):
            return CELEvalError("could not parse formatting clause: unexpected end of string")
        verb = text[i]
        i += 1
        if used >= len(args):
            return CELEvalError(f"index {used} out of range")
        clause = _format_clause(verb, precision, args[used])
        if isinstance(clause, CELEvalError):
            return clause
        used += 1
        out.append(clause)
        size += len(clause)
        if size > MAX_VALUE_SIZE:
            return CELEvalError(_COST_LIMIT)
    if used < len(args):
        return CELEvalError(
            f"too many arguments supplied to string.format (expected {used}, got {len(args)})"
        )
    return celtypes.StringType("".join(out))


#: The functions this module adds, by CEL name.
FUNCTIONS: dict[str, Fn] = {
    # k8s lists
    "isSorted": fn_is_sorted,
    "sum": fn_sum,
    "min": _extreme("min", 1),
    "max": _extreme("max", -1),
    "indexOf": fn_index_of_any,
    "lastIndexOf": fn_last_index_of_any,
    # cel-go ext.Lists
    "slice": fn_slice,
    "flatten": fn_flatten,
    "distinct": fn_distinct,
    "reverse": fn_reverse,
    "sort": fn_sort,
    "lists.range": fn_lists_range,
    # cel-go ext.Sets
    "sets.contains": SETS_CONTAINS,
    "sets.equivalent": SETS_EQUIVALENT,
    "sets.intersects": SETS_INTERSECTS,
    # regex
    "matches": fn_matches,
    "find": fn_find,
    "findAll": fn_find_all,
    # strings extension
    "strings.quote": fn_strings_quote,
    "format": fn_format,
}

RESULT_TYPES: dict[str, str] = {
    "isSorted": "bool",
    "slice": "list(dyn)",
    "flatten": "list(dyn)",
    "distinct": "list(dyn)",
    "sort": "list(dyn)",
    "lists.range": "list(int)",
    "sets.contains": "bool",
    "sets.equivalent": "bool",
    "sets.intersects": "bool",
    "matches": "bool",
    "find": "string",
    "findAll": "list(string)",
    "strings.quote": "string",
    "format": "string",
}

#: Arguments that are regular expressions (function -> index among receiver and arguments); a
#: literal there is compiled at compile time, as cel-go's ``ValidateRegexLiterals`` and
#: ``OptimizeRegex`` do.
REGEX_ARGUMENT = {"matches": 1, "find": 1, "findAll": 1}
