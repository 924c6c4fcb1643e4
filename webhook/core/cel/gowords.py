"""Upstream's words at run time: cel-go's no-overload errors, Go's spelling of values (``%v`` of a
float, ``%q`` of a string, a value's Go type) and ``resource.ParseQuantity``'s errors, shared by
the selector environment's libraries."""

from __future__ import annotations

from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

from ..api.fielderrors import go_float as _go_float
from ..api.fielderrors import go_quote as go_quote  # the libraries' Go words, all from here
from ..api.quantity import MSG_FORMAT, Quantity
from ..api.semver import Semver
from .values import INT64_MAX, INT64_MIN

#: The default of a function's optional argument the call left out (CEL's null is None), so that
#: an error names only the arguments the call gave.
ABSENT: Any = object()


class OpaqueValue:
    """A library's own value type (IP, CIDR, URL, ...): equal by value to its own type only.
    Subclasses are immutable and name their CEL type in ``type_name``."""

    __slots__ = ()
    type_name = "opaque"


def no_overload(name: str, *args: Any) -> CELEvalError:
    """cel-go's runtime error for a call no overload of ``name`` takes (the checker's "found no
    matching overload" is a compile error only). A library function's dispatch names the function
    and the argument types (``decls.MaybeNoSuchOverload``); an operator's is trait-based
    (:func:`_operator_words`)."""
    if name in _OPERATOR_TRAITS or name in _PLAIN_OPERATORS:
        return CELEvalError(_operator_words(name, args))
    types = ", ".join(cel_type_name(a) for a in args)
    return CELEvalError(f"no such overload: {name}({types})")


#: The cel-go types holding each trait the standard operators' singleton bindings ask of their
#: first operand (``common/types/types.go``), by :func:`cel_type_name`.
_NUMBERS = frozenset({"int", "uint", "double"})
_TIMES = frozenset({"google.protobuf.Timestamp", "google.protobuf.Duration"})
_OPERATOR_TRAITS: dict[str, frozenset[str]] = {
    "_+_": _NUMBERS | _TIMES | {"string", "bytes", "list"},
    "_-_": _NUMBERS | _TIMES,
    "_*_": _NUMBERS,
    "_/_": _NUMBERS,
    "_%_": frozenset({"int", "uint"}),
    "-_": frozenset({"int", "double", "bool", "google.protobuf.Duration"}),
    "_<_": _NUMBERS | _TIMES | {"bool", "string", "bytes"},
    "size": frozenset({"string", "bytes", "list", "map"}),
}
for _op in ("_<=_", "_>_", "_>=_"):
    _OPERATOR_TRAITS[_op] = _OPERATOR_TRAITS["_<_"]
#: Types whose values receive any call they lack a trait for (``traits.Receiver``); the receiver
#: answers "no such overload".
_RECEIVERS = _TIMES | {"string"}
#: Calls whose bindings answer a wrong operand with "no such overload" whatever its type:
#: ``!_``, ``@in`` (a non-container right operand), ``_&&_``/``_||_``/``_?_:_`` (a non-bool), the
#: macros (whose non-bool predicates reach one of those in their expansion), and the standard
#: library's string functions, which type-check their operands themselves.
_PLAIN_OPERATORS = frozenset(
    {"!_", "@in", "_&&_", "_||_", "_?_:_", "all", "exists", "exists_one", "existsOne", "filter", "map"}
    | {"transformList", "transformMap", "contains", "startsWith", "endsWith", "matches"}
)


def _operator_words(name: str, args: tuple[Any, ...]) -> str:
    """cel-go's ``evalUnary``/``evalBinary``: a first operand with the operator's trait gets the
    implementation's "no such overload", one without it is received (strings, timestamps and
    durations: "no such overload") or refused with the operator's name."""
    traits = _OPERATOR_TRAITS.get(name)
    if traits is None or not args:
        return "no such overload"
    kind = cel_type_name(args[0])
    if kind in traits or kind in _RECEIVERS:
        return "no such overload"
    return f"no such overload: {name}"


def cel_type_name(value: Any) -> str:
    """The CEL type name used in messages (cel-go spelling)."""
    if isinstance(value, celtypes.BoolType | bool):
        return "bool"
    if isinstance(value, celtypes.UintType):
        return "uint"
    if isinstance(value, celtypes.IntType | int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bytes):
        return "bytes"
    if value is None:
        return "null_type"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "map"
    if isinstance(value, OpaqueValue):
        return value.type_name
    if isinstance(value, Quantity):
        return "kubernetes.Quantity"
    if isinstance(value, Semver):
        return "kubernetes.Semver"
    if isinstance(value, celtypes.TimestampType):
        return "google.protobuf.Timestamp"
    if isinstance(value, celtypes.DurationType):
        return "google.protobuf.Duration"
    if isinstance(value, type):
        return "type"
    return type(value).__name__


def given(*args: Any) -> tuple[Any, ...]:
    """The arguments a call gave (its optional ones left out are :data:`ABSENT`)."""
    return tuple(a for a in args if a is not ABSENT)


def go_type_name(value: Any) -> str:
    """The Go type of cel-go's value as its runtime errors name it (``types.Int``, ``cel.Quantity``)."""
    name = cel_type_name(value)
    if name.startswith("kubernetes."):
        return "cel." + name.removeprefix("kubernetes.")
    if name.startswith("google.protobuf."):
        return "types." + name.removeprefix("google.protobuf.")
    if name == "null_type":
        return "types.Null"
    return "types." + name.capitalize()


def go_float(value: float) -> str:
    """Go's ``%v`` of a float64 (:func:`~webhook.core.api.fielderrors.go_float`) for any CEL double
    (celpy's DoubleType refuses comparisons with ints)."""
    return _go_float(float(value))


_QUANTITY_SUFFIXES = frozenset(
    {"n", "u", "m", "", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}
)
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")


def go_quantity_error(text: str) -> str | None:
    """Which of ``resource.ParseQuantity``'s errors its ``parseQuantityString`` and suffix lookup
    give ``text`` (None: neither, the numeric part decides): ``ErrFormatWrong`` for a character
    out of place, ``ErrSuffix`` for letters that are no suffix (``10Mm``, ``1e``, ``1ki``)."""
    i = 1 if text[:1] in ("+", "-") else 0
    while i < len(text) and text[i].isascii() and text[i].isdigit():
        i += 1
    if i < len(text) and text[i] == ".":
        i += 1
        while i < len(text) and text[i].isascii() and text[i].isdigit():
            i += 1
    start = i
    while i < len(text) and text[i] in _SUFFIX_CHARS:
        i += 1
    if i < len(text) and text[i] in "+-":
        i += 1
    if any(not (c.isascii() and c.isdigit()) for c in text[i:]):
        return MSG_FORMAT
    suffix = text[start:]
    if suffix in _QUANTITY_SUFFIXES:
        return None
    exponent = suffix[1:]
    if len(suffix) > 1 and suffix[0] in "eE" and _go_parse_int(exponent):
        return None
    return "unable to parse quantity's suffix"


def _go_parse_int(text: str) -> bool:
    """Whether Go's ``strconv.ParseInt(text, 10, 64)`` takes ``text``."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not all(c.isascii() and c.isdigit() for c in digits):
        return False
    return INT64_MIN <= int(text) <= INT64_MAX
