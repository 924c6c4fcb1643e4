"""Functions of the selector environment that celpy lacks or gets wrong.

* Kubernetes quantity library (``library/quantity.go``) and semver library (``library/semver.go``)
  working on :class:`Quantity` and :class:`Semver` objects.
* DRA's ``<target>.includes(<arg>)`` (KEP-5491 list attributes).
* Parts of cel-go's strings extension that selectors use (``lowerAscii``, ``split``, ...).
* Operators with cel-go's runtime semantics where celpy deviates: heterogeneous equality
  (``true == 1`` and ``'a' == 1`` are false, ``1 == 1.0`` is true; a quantity or semver on the
  left of ``==`` with another type is "no such overload"), ordering only between comparable types,
  arithmetic only between equal types, strict list indexing, and size caps on concatenation.

Functions return a ``CELEvalError`` value for a runtime error instead of raising: celpy then
treats it like any CEL error value (``false && error`` is false).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

from ..api.constants import MAX_ATTRIBUTE_VALUES_PER_DEVICE
from ..api.quantity import MSG_FORMAT, Quantity, QuantityError
from ..api.semver import Semver, SemverError
from .gowords import (
    ABSENT,
    OpaqueValue,
    cel_type_name,
    given,
    go_float,
    go_quantity_error,
    go_quote,
    no_overload,
)
from .releases import INCLUDES_1_36
from .values import INT64_MAX, INT64_MIN

#: Longest list (and string or bytes other than by ``+``) a single operation may build: a stand-in
#: for upstream's runtime cost limit where that does not bound the size (cel-go concatenates
#: lists lazily at a constant cost; ``replace`` and ``format`` charge their inputs only). A string's
#: ``+`` needs none: its cost is a tenth of the result's length.
MAX_VALUE_SIZE = 1 << 20

Fn = Callable[..., Any]

_FALSE = celtypes.BoolType(False)
_ZERO = celtypes.IntType(0)
_ALL = celtypes.IntType(-1)
_EMPTY = celtypes.StringType("")


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool | celtypes.BoolType)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not _is_bool(v)


def _num(v: Any) -> int | float:
    """A plain Python number: celpy's numeric types refuse mixed-type comparisons."""
    return float(v) if isinstance(v, float) else int(v)


# --- equality and ordering -------------------------------------------------------------------


def cel_equal(a: Any, b: Any) -> Any:
    """cel-go's ``Equal``: True/False, or an error value (opaque left operand of another type)."""
    if isinstance(a, CELEvalError):
        return a
    if isinstance(b, CELEvalError):
        return b
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, OpaqueValue) or isinstance(b, OpaqueValue):
        return type(a) is type(b) and bool(a == b)
    if isinstance(a, Quantity | Semver):
        if type(a) is not type(b):
            return no_overload("_==_", a, b)
        return a == b
    if isinstance(b, Quantity | Semver):
        return False
    if _is_bool(a) or _is_bool(b):
        return _is_bool(a) and _is_bool(b) and bool(a) == bool(b)
    if _is_number(a) and _is_number(b):
        return _num(a) == _num(b)
    if isinstance(a, str) and isinstance(b, str):
        return str.__eq__(a, b)
    if isinstance(a, bytes) and isinstance(b, bytes):
        return bytes.__eq__(a, b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(cel_equal(x, y) is True for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        if len(a) != len(b):
            return False
        for k, v in a.items():
            if not dict.__contains__(b, k) or cel_equal(v, dict.__getitem__(b, k)) is not True:
                return False
        return True
    if isinstance(a, celtypes.TimestampType | celtypes.DurationType) and type(a) is type(b):
        return bool(a == b)
    if isinstance(a, type) and isinstance(b, type):
        return a is b
    return False


def op_eq(a: Any, b: Any) -> Any:
    r = cel_equal(a, b)
    return r if isinstance(r, CELEvalError) else celtypes.BoolType(r)


def op_ne(a: Any, b: Any) -> Any:
    r = cel_equal(a, b)
    return r if isinstance(r, CELEvalError) else celtypes.BoolType(not r)


def _ordered(name: str, a: Any, b: Any) -> int | CELEvalError:
    if isinstance(a, CELEvalError):
        return a
    if isinstance(b, CELEvalError):
        return b
    x: Any
    y: Any
    if _is_number(a) and _is_number(b):
        x, y = _num(a), _num(b)
    elif _is_bool(a) and _is_bool(b):
        x, y = int(a), int(b)
    elif isinstance(a, str) and isinstance(b, str):
        x, y = str(a), str(b)
    elif isinstance(a, bytes) and isinstance(b, bytes):
        x, y = bytes(a), bytes(b)
    elif isinstance(a, celtypes.TimestampType | celtypes.DurationType) and type(a) is type(b):
        x, y = a, b
    else:
        return no_overload(name, a, b)
    if (isinstance(x, float) and math.isnan(x)) or (isinstance(y, float) and math.isnan(y)):
        return 2  # unordered: every comparison is false
    return int(x > y) - int(x < y)


def _relation(name: str, accept: Callable[[int], bool]) -> Fn:
    def compare(a: Any, b: Any) -> Any:
        c = _ordered(name, a, b)
        if isinstance(c, CELEvalError):
            return c
        return celtypes.BoolType(c != 2 and accept(c))

    compare.__name__ = name
    return compare


def op_in(item: Any, container: Any) -> Any:
    """``x in list`` by heterogeneous equality; ``k in map`` by key presence."""
    if isinstance(item, CELEvalError):
        return item
    if isinstance(container, CELEvalError):
        return container
    if isinstance(container, dict):
        if isinstance(item, str | int) and not isinstance(item, float):
            return celtypes.BoolType(dict.__contains__(container, item))
        return celtypes.BoolType(False)
    if isinstance(container, list):
        return celtypes.BoolType(any(cel_equal(item, x) is True for x in container))
    return no_overload("@in", item, container)


def op_index(container: Any, index: Any) -> Any:
    """``m[k]`` / ``l[i]``: strict indices (no negative or fractional list indices)."""
    if isinstance(container, list):
        integral = isinstance(index, float) and index.is_integer()
        if (_is_number(index) and not isinstance(index, float)) or integral:
            i = int(index)
        elif isinstance(index, float):
            return CELEvalError(f"unsupported index value {go_float(index)} in list")
        else:
            return CELEvalError(f"unsupported index type '{cel_type_name(index)}' in list")
        if not 0 <= i < len(container):
            shown = go_float(index) if isinstance(index, float) else str(i)
            return CELEvalError(f"index out of bounds: {shown}")
        return container[i]
    if isinstance(container, dict):
        if isinstance(container, celtypes.MapType) and isinstance(index, str | int):
            try:
                return container[index]
            except KeyError:
                return CELEvalError(f"no such key: {index}")
        return CELEvalError(f"no such key: {index}")
    # cel-go's attribute qualifier: a value that is neither list nor map has no such key
    return CELEvalError(f"no such key: {index}")


# --- arithmetic ------------------------------------------------------------------------------


def _same_kind(a: Any, b: Any) -> bool:
    if _is_bool(a) or _is_bool(b):
        return False
    for kind in (celtypes.UintType, celtypes.IntType, float, str, bytes, list):
        if isinstance(a, kind) or isinstance(b, kind):
            return isinstance(a, kind) and isinstance(b, kind)
    return True  # timestamps and durations: celpy decides


def _too_big(size: int) -> CELEvalError | None:
    if size > MAX_VALUE_SIZE:
        return CELEvalError("operation cancelled: actual cost limit exceeded")
    return None


def op_add(a: Any, b: Any) -> Any:
    if not _same_kind(a, b):
        return no_overload("_+_", a, b)
    # Strings and bytes need no cap: the runtime cost charges a tenth of the result's length, so
    # the limit bounds what an evaluation builds as upstream's does (some 10 million characters).
    if isinstance(a, str):
        return celtypes.StringType(str(a) + str(b))
    if isinstance(a, bytes):
        return celtypes.BytesType(bytes(a) + bytes(b))
    if isinstance(a, list):
        # cel-go concatenates lists without copying and charges a constant: a copy needs the cap
        err = _too_big(len(a) + len(b))
        if err is not None:
            return err
        return celtypes.ListType([*a, *b])
    return operator.add(a, b)


def _arith(name: str, fn: Callable[[Any, Any], Any]) -> Fn:
    def apply(a: Any, b: Any) -> Any:
        if not _same_kind(a, b) or isinstance(a, str | bytes | list):
            return no_overload(name, a, b)
        return fn(a, b)

    apply.__name__ = name
    return apply


def _divide(a: Any, b: Any) -> Any:
    """``a / b``; a double divided by zero is IEEE's (celpy makes every such quotient +Inf)."""
    if isinstance(a, float) and float(b) == 0.0:
        x, y = float(a), float(b)
        if x == 0.0 or math.isnan(x):
            return celtypes.DoubleType(math.nan)
        return celtypes.DoubleType(math.copysign(math.inf, x) * math.copysign(1.0, y))
    return operator.truediv(a, b)


def op_neg(a: Any) -> Any:
    if _is_bool(a) or not isinstance(a, int | float | celtypes.DurationType):
        return no_overload("-_", a)
    if isinstance(a, celtypes.UintType):
        return no_overload("-_", a)
    return operator.neg(a)


def op_not(a: Any) -> Any:
    if not _is_bool(a):
        return no_overload("!_", a)
    return celtypes.BoolType(not a)


def fn_size(value: Any) -> Any:
    if isinstance(value, str | bytes | list | dict):
        return celtypes.IntType(len(value))
    return no_overload("size", value)


# --- quantity --------------------------------------------------------------------------------


def _parse_quantity(text: Any) -> Quantity | CELEvalError:
    if not isinstance(text, str):
        return no_overload("quantity", text)
    if text != text.strip() or not text or not text.isascii():  # Go reads bytes: no Unicode digits
        return CELEvalError(MSG_FORMAT)
    # resource.ParseQuantity reads a missing integer part as 0 ("Gi", "+", "." and ".5" parse).
    sign = text[:1] if text[:1] in ("+", "-") else ""
    rest = str(text)[len(sign) :]
    if not rest[:1].isdigit():
        rest = "0" + rest
    try:
        return Quantity.parse(sign + rest)
    except QuantityError as e:
        return CELEvalError(go_quantity_error(str(text)) or str(e))


def fn_quantity(text: Any) -> Any:
    return _parse_quantity(text)


def fn_is_quantity(text: Any) -> Any:
    if not isinstance(text, str):
        return no_overload("isQuantity", text)
    return celtypes.BoolType(isinstance(_parse_quantity(text), Quantity))


def fn_is_integer(q: Any) -> Any:
    if not isinstance(q, Quantity):
        return no_overload("isInteger", q)
    return celtypes.BoolType(q.as_int64() is not None)


def fn_as_integer(q: Any) -> Any:
    if not isinstance(q, Quantity):
        return no_overload("asInteger", q)
    v = q.as_int64()
    if v is None:
        return CELEvalError("cannot convert value to integer")
    return celtypes.IntType(v)


def fn_as_approximate_float(q: Any) -> Any:
    if not isinstance(q, Quantity):
        return no_overload("asApproximateFloat", q)
    try:
        return celtypes.DoubleType(float(q.value))
    except OverflowError:
        return celtypes.DoubleType(math.copysign(math.inf, q.value))


def fn_sign(q: Any) -> Any:
    if not isinstance(q, Quantity):
        return no_overload("sign", q)
    return celtypes.IntType(q.sign())


def _quantity_operand(name: str, q: Any, other: Any) -> Fraction | CELEvalError:
    if not isinstance(q, Quantity):
        return no_overload(name, q, other)
    if isinstance(other, Quantity):
        return other.value
    if isinstance(other, celtypes.IntType) and not _is_bool(other):
        return Fraction(int(other))
    return no_overload(name, q, other)


def fn_add(q: Any, other: Any) -> Any:
    v = _quantity_operand("add", q, other)
    if isinstance(v, CELEvalError):
        return v
    return Quantity(q.value + v)


def fn_sub(q: Any, other: Any) -> Any:
    v = _quantity_operand("sub", q, other)
    if isinstance(v, CELEvalError):
        return v
    return Quantity(q.value - v)


def _compare(name: str, a: Any, b: Any) -> int | CELEvalError:
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return (a.value > b.value) - (a.value < b.value)
    if isinstance(a, Semver) and isinstance(b, Semver):
        return a.compare(b)
    return no_overload(name, a, b)


def fn_compare_to(a: Any, b: Any) -> Any:
    c = _compare("compareTo", a, b)
    return c if isinstance(c, CELEvalError) else celtypes.IntType(c)


def fn_is_less_than(a: Any, b: Any) -> Any:
    c = _compare("isLessThan", a, b)
    return c if isinstance(c, CELEvalError) else celtypes.BoolType(c < 0)


def fn_is_greater_than(a: Any, b: Any) -> Any:
    c = _compare("isGreaterThan", a, b)
    return c if isinstance(c, CELEvalError) else celtypes.BoolType(c > 0)


# --- semver ----------------------------------------------------------------------------------


def _parse_semver(name: str, text: Any, normalize: Any) -> Semver | CELEvalError:
    if normalize is ABSENT:
        normalize = _FALSE
        if not isinstance(text, str):
            return no_overload(name, text)
    if not isinstance(text, str) or not _is_bool(normalize):
        return no_overload(name, text, normalize)
    try:
        version = Semver.parse(str(text), bool(normalize))
        if max(version.major, version.minor, version.patch) >= 1 << 64:  # Go parses uint64
            big = next(str(p) for p in (version.major, version.minor, version.patch) if p >= 1 << 64)
            return CELEvalError(f"strconv.ParseUint: parsing {go_quote(big)}: value out of range")
        return version
    except SemverError as e:
        words = None if normalize else _blang_parse_error(str(text))
        return CELEvalError(words or str(e))


_DIGITS = frozenset("0123456789")
_ALPHANUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-") | _DIGITS


def _blang_number(text: str, what: str) -> str | None:
    if not set(text) <= _DIGITS:
        return f"Invalid character(s) found in {what.lower()} number {go_quote(text)}"
    if len(text) > 1 and text[0] == "0":
        return f"{what} number must not contain leading zeroes {go_quote(text)}"
    if not text:
        return 'strconv.ParseUint: parsing "": invalid syntax'
    if int(text) >= 1 << 64:
        return f"strconv.ParseUint: parsing {go_quote(text)}: value out of range"
    return None


def _blang_parse_error(text: str) -> str | None:
    """The words of blang/semver's ``Parse`` error for ``text`` (what upstream's ``semver()``
    reports), checked in its order; None when it would accept the text."""
    if not text:
        return "Version string empty"
    parts = text.split(".", 2)
    if len(parts) != 3:
        return "No Major.Minor.Patch elements found"
    for part, what in ((parts[0], "Major"), (parts[1], "Minor")):
        error = _blang_number(part, what)
        if error:
            return error
    patch, build, prerelease = parts[2], [], []
    if "+" in patch:
        patch, _, rest = patch.partition("+")
        build = rest.split(".")
    if "-" in patch:
        patch, _, rest = patch.partition("-")
        prerelease = rest.split(".")
    error = _blang_number(patch, "Patch")
    if error:
        return error
    for pr in prerelease:
        if not pr:
            return "Prerelease is empty"
        if set(pr) <= _DIGITS:
            if len(pr) > 1 and pr[0] == "0":
                return f"Numeric PreRelease version must not contain leading zeroes {go_quote(pr)}"
        elif not set(pr) <= _ALPHANUM:
            return f"Invalid character(s) found in prerelease {go_quote(pr)}"
    for meta in build:
        if not meta:
            return "Build meta data is empty"
        if not set(meta) <= _ALPHANUM:
            return f"Invalid character(s) found in build meta data {go_quote(meta)}"
    return None


def fn_semver(text: Any, normalize: Any = ABSENT) -> Any:
    return _parse_semver("semver", text, normalize)


def fn_is_semver(text: Any, normalize: Any = ABSENT) -> Any:
    v = _parse_semver("isSemver", text, normalize)
    if isinstance(v, CELEvalError) and not (
        isinstance(text, str) and (normalize is ABSENT or _is_bool(normalize))
    ):
        return v
    return celtypes.BoolType(isinstance(v, Semver))


def _semver_part(name: str) -> Fn:
    def part(v: Any) -> Any:
        if not isinstance(v, Semver):
            return no_overload(name, v)
        return celtypes.IntType(getattr(v, name))

    part.__name__ = name
    return part


# --- DRA includes ----------------------------------------------------------------------------


def fn_includes(target: Any, arg: Any) -> Any:
    """``list_includes_dyn_dyn`` (1.37, Kubernetes' lists library version 1): list membership, or
    scalar equality."""
    if isinstance(target, list):
        return celtypes.BoolType(any(cel_equal(item, arg) is True for item in target))
    return celtypes.BoolType(cel_equal(target, arg) is True)


def fn_includes_1_36(target: Any, arg: Any) -> Any:
    """``dra_includes_dyn_dyn`` (1.36, with list-typed attributes): as 1.37's, but a list longer
    than a device may hold is refused."""
    if isinstance(target, list):
        for i, item in enumerate(target):
            if i >= MAX_ATTRIBUTE_VALUES_PER_DEVICE:
                return CELEvalError(
                    "'includes' function cannot be applied to lists longer than "
                    f"{MAX_ATTRIBUTE_VALUES_PER_DEVICE} values"
                )
            if cel_equal(item, arg) is True:
                return celtypes.BoolType(True)
        return celtypes.BoolType(False)
    return fn_includes(target, arg)


def fn_as_list(target: Any) -> Any:
    """KEP-5491's migration helper: a list-typed attribute as it is, a scalar as a one-element
    list, so one selector serves drivers that publish either (``x.asList().exists(...)``)."""
    if isinstance(target, list):
        return target
    return celtypes.ListType([target])


# --- strings extension (subset) ---------------------------------------------------------------

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _is_int(v: Any) -> bool:
    return isinstance(v, celtypes.IntType) and not _is_bool(v)


def fn_lower_ascii(s: Any) -> Any:
    if not isinstance(s, str):
        return no_overload("lowerAscii", s)
    return celtypes.StringType(str(s).translate(_ASCII_LOWER))


def fn_upper_ascii(s: Any) -> Any:
    if not isinstance(s, str):
        return no_overload("upperAscii", s)
    return celtypes.StringType(str(s).translate(_ASCII_UPPER))


def fn_trim(s: Any) -> Any:
    if not isinstance(s, str):
        return no_overload("trim", s)
    return celtypes.StringType(str(s).strip())


def fn_char_at(s: Any, i: Any) -> Any:
    if not isinstance(s, str) or not _is_int(i):
        return no_overload("charAt", s, i)
    if not 0 <= i <= len(s):
        return CELEvalError(f"index out of range: {int(i)}")
    return celtypes.StringType(str(s)[int(i) : int(i) + 1])


def _offset_outcome(s: str, sub: str, offset: int) -> Any:
    """cel-go's indexOf/lastIndexOf before the search: a negative offset is an error, an empty
    substring is found at the offset (capped at the length), an offset at or past the end finds
    nothing; None when the search decides."""
    if offset < 0:
        return CELEvalError(f"index out of range: {offset}")
    if not sub:
        return celtypes.IntType(min(offset, len(s)))
    if offset >= len(s):
        return celtypes.IntType(-1)
    return None


def fn_index_of(s: Any, sub: Any, offset: Any = ABSENT) -> Any:
    if not isinstance(s, str) or not isinstance(sub, str) or not (offset is ABSENT or _is_int(offset)):
        return no_overload("indexOf", *given(s, sub, offset))
    if offset is ABSENT:
        offset = _ZERO
    early = _offset_outcome(s, sub, int(offset))
    if early is not None:
        return early
    return celtypes.IntType(str(s).find(str(sub), int(offset)))


def fn_last_index_of(s: Any, sub: Any, offset: Any = ABSENT) -> Any:
    if not isinstance(s, str) or not isinstance(sub, str) or not (offset is ABSENT or _is_int(offset)):
        return no_overload("lastIndexOf", *given(s, sub, offset))
    if offset is ABSENT:
        offset = None
    end = len(s) if offset is None else int(offset)
    if offset is not None:
        early = _offset_outcome(s, sub, end)
        if early is not None:
            return early
    # The match may start at ``end`` at the latest.
    return celtypes.IntType(str(s).rfind(str(sub), 0, end + len(sub)))


def fn_replace(s: Any, old: Any, new: Any, n: Any = ABSENT) -> Any:
    if not (
        isinstance(s, str) and isinstance(old, str) and isinstance(new, str) and (n is ABSENT or _is_int(n))
    ):
        return no_overload("replace", *given(s, old, new, n))
    if n is ABSENT:
        n = _ALL
    count = str(s).count(str(old)) if old else len(s) + 1
    if n >= 0:
        count = min(count, int(n))
    err = _too_big(len(s) + count * max(0, len(new) - len(old)))
    if err is not None:
        return err
    return celtypes.StringType(str(s).replace(str(old), str(new), int(n) if n >= 0 else -1))


def fn_split(s: Any, sep: Any, n: Any = ABSENT) -> Any:
    if not (isinstance(s, str) and isinstance(sep, str) and (n is ABSENT or _is_int(n))):
        return no_overload("split", *given(s, sep, n))
    if n is ABSENT:
        n = _ALL
    text, limit = str(s), int(n)
    if limit == 0:
        return celtypes.ListType()
    if sep == "":
        parts = list(text)
        if 0 < limit < len(parts):
            parts = [*parts[: limit - 1], "".join(parts[limit - 1 :])]
    else:
        parts = text.split(str(sep), limit - 1 if limit > 0 else -1)
    return celtypes.ListType([celtypes.StringType(p) for p in parts])


def fn_substring(s: Any, start: Any, end: Any = ABSENT) -> Any:
    if not isinstance(s, str) or not _is_int(start) or not (end is ABSENT or _is_int(end)):
        return no_overload("substring", *given(s, start, end))
    if end is ABSENT:
        end = None
    stop = len(s) if end is None else int(end)
    if not 0 <= start <= len(s):
        return CELEvalError(f"index out of range: {int(start)}")
    if not 0 <= stop <= len(s):
        return CELEvalError(f"index out of range: {stop}")
    if start > stop:
        return CELEvalError(f"invalid substring range. start: {int(start)}, end: {stop}")
    return celtypes.StringType(str(s)[int(start) : stop])


def fn_join(items: Any, sep: Any = ABSENT) -> Any:
    if (
        not isinstance(items, list)
        or not (sep is ABSENT or isinstance(sep, str))
        or not all(isinstance(i, str) for i in items)
    ):
        return no_overload("join", *given(items, sep))
    if sep is ABSENT:
        sep = _EMPTY
    err = _too_big(sum(len(i) for i in items) + len(sep) * max(0, len(items) - 1))
    if err is not None:
        return err
    return celtypes.StringType(str(sep).join(str(i) for i in items))


def fn_contains(s: Any, sub: Any) -> Any:
    if not isinstance(s, str) or not isinstance(sub, str):
        return no_overload("contains", s, sub)
    return celtypes.BoolType(str(sub) in str(s))


def fn_starts_with(s: Any, prefix: Any) -> Any:
    if not isinstance(s, str) or not isinstance(prefix, str):
        return no_overload("startsWith", s, prefix)
    return celtypes.BoolType(str(s).startswith(str(prefix)))


def fn_ends_with(s: Any, suffix: Any) -> Any:
    if not isinstance(s, str) or not isinstance(suffix, str):
        return no_overload("endsWith", s, suffix)
    return celtypes.BoolType(str(s).endswith(str(suffix)))


def _checked_int(fn: Fn) -> Fn:
    """celpy's ``int()`` conversion, reporting int64 overflow as a CEL error."""

    def convert(value: Any) -> Any:
        if _is_bool(value):
            return no_overload("int", value)
        try:
            result = fn(value)
        except (ValueError, TypeError, OverflowError) as e:
            return CELEvalError(f"cannot convert {cel_type_name(value)} to int: {e}")
        if isinstance(result, int) and not INT64_MIN <= result <= INT64_MAX:
            return CELEvalError("return error for overflow")
        return result

    return convert


#: Type identifiers as values (``type(x) == int``), by CEL type name.
TYPE_VALUES: dict[str, Any] = {
    "bool": celtypes.BoolType,
    "int": celtypes.IntType,
    "uint": celtypes.UintType,
    "double": celtypes.DoubleType,
    "string": celtypes.StringType,
    "bytes": celtypes.BytesType,
    "list": celtypes.ListType,
    "map": celtypes.MapType,
    "null_type": type(None),
    "type": celtypes.TypeType,
}


def fn_type(value: Any) -> Any:
    """``type(x)``: the type value its identifier names (a domain map is a ``map``)."""
    kind = TYPE_VALUES.get(cel_type_name(value))
    return kind if kind is not None else type(value)


def fn_string(value: Any) -> Any:
    """celpy's ``string()``, minus quantities and versions: upstream has no such overload, and
    their text would tell ``1Gi`` from ``1024Mi`` although devices with equal values share
    cached results."""
    if isinstance(value, Quantity | Semver):
        return no_overload("string", value)
    if _is_bool(value):
        return celtypes.StringType("true" if value else "false")
    if isinstance(value, OpaqueValue):
        text = getattr(value, "cel_string", None)
        return celtypes.StringType(text()) if callable(text) else no_overload("string", value)
    return celtypes.StringType(value)


#: Overrides and additions on top of celpy's ``base_functions``.
FUNCTIONS: dict[str, Fn] = {
    "_==_": op_eq,
    "_!=_": op_ne,
    "_<_": _relation("_<_", lambda c: c < 0),
    "_<=_": _relation("_<=_", lambda c: c <= 0),
    "_>_": _relation("_>_", lambda c: c > 0),
    "_>=_": _relation("_>=_", lambda c: c >= 0),
    "_in_": op_in,
    "_[_]": op_index,
    "_+_": op_add,
    "_-_": _arith("_-_", operator.sub),
    "_*_": _arith("_*_", operator.mul),
    "_/_": _arith("_/_", _divide),
    "_%_": _arith("_%_", operator.mod),
    "-_": op_neg,
    "!_": op_not,
    "size": fn_size,
    "int": _checked_int(celtypes.IntType),
    "string": fn_string,
    "type": fn_type,
    "contains": fn_contains,
    "startsWith": fn_starts_with,
    "endsWith": fn_ends_with,
    # Kubernetes quantity library
    "quantity": fn_quantity,
    "isQuantity": fn_is_quantity,
    "isInteger": fn_is_integer,
    "asInteger": fn_as_integer,
    "asApproximateFloat": fn_as_approximate_float,
    "sign": fn_sign,
    "add": fn_add,
    "sub": fn_sub,
    "isLessThan": fn_is_less_than,
    "isGreaterThan": fn_is_greater_than,
    "compareTo": fn_compare_to,
    # Kubernetes semver library
    "semver": fn_semver,
    "isSemver": fn_is_semver,
    "major": _semver_part("major"),
    "minor": _semver_part("minor"),
    "patch": _semver_part("patch"),
    # DRA list attributes
    "includes": fn_includes,
    INCLUDES_1_36: fn_includes_1_36,
    "asList": fn_as_list,
    # cel-go strings extension (subset)
    "lowerAscii": fn_lower_ascii,
    "upperAscii": fn_upper_ascii,
    "trim": fn_trim,
    "charAt": fn_char_at,
    "indexOf": fn_index_of,
    "lastIndexOf": fn_last_index_of,
    "replace": fn_replace,
    "split": fn_split,
    "substring": fn_substring,
    "join": fn_join,
}

#: celpy built-ins that a Kubernetes selector may also use (the rest are rejected at compile time).
CELPY_FUNCTIONS = frozenset(
    {
        *("matches", "type", "dyn", "bool", "bytes", "double", "string", "uint", "timestamp", "duration"),
        *("getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear", "getFullYear", "getMonth"),
        *("getHours", "getMilliseconds", "getMinutes", "getSeconds"),
    }
)

#: Every function or method name the compile-time check accepts.
KNOWN_FUNCTIONS = frozenset(FUNCTIONS) | CELPY_FUNCTIONS
