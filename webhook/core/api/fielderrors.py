"""Kubernetes field errors (``field.Error``) and API statuses (``apierrors.StatusError``).

Messages are byte-exact with apimachinery so that a denial from draxr reads exactly like one from
the API server: ``<field>: <Type string>[: <bad value>][: <detail>]``. Bad values are printed the
Go way: strings with ``%q`` (``strconv.Quote``), numbers and booleans plain, ``None`` as ``null``
and anything else as Go's ``json.Marshal`` output.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from enum import StrEnum
from typing import Any, Final


class ErrorType(StrEnum):
    """``field.ErrorType``; the values double as ``metav1.CauseType`` in status causes."""

    NOT_FOUND = "FieldValueNotFound"
    REQUIRED = "FieldValueRequired"
    DUPLICATE = "FieldValueDuplicate"
    INVALID = "FieldValueInvalid"
    NOT_SUPPORTED = "FieldValueNotSupported"
    FORBIDDEN = "FieldValueForbidden"
    TOO_LONG = "FieldValueTooLong"
    TOO_MANY = "FieldValueTooMany"
    TOO_FEW = "FieldValueTooFew"
    TOO_SHORT = "FieldValueTooShort"
    INTERNAL = "InternalError"
    TYPE_INVALID = "FieldValueTypeInvalid"

    @property
    def message(self) -> str:
        """The canonical text (``ErrorType.String()``)."""
        return _TYPE_MESSAGES[self]


_TYPE_MESSAGES: Final = {
    ErrorType.NOT_FOUND: "Not found",
    ErrorType.REQUIRED: "Required value",
    ErrorType.DUPLICATE: "Duplicate value",
    ErrorType.INVALID: "Invalid value",
    ErrorType.NOT_SUPPORTED: "Unsupported value",
    ErrorType.FORBIDDEN: "Forbidden",
    ErrorType.TOO_LONG: "Too long",
    ErrorType.TOO_MANY: "Too many",
    ErrorType.TOO_FEW: "Too few",
    ErrorType.TOO_SHORT: "Too short",
    ErrorType.INTERNAL: "Internal error",
    ErrorType.TYPE_INVALID: "Invalid value",
}

#: Types whose message never shows the bad value (upstream prints the type string only).
_VALUE_HIDDEN: Final = frozenset(
    {ErrorType.REQUIRED, ErrorType.FORBIDDEN, ErrorType.TOO_LONG, ErrorType.TOO_SHORT, ErrorType.INTERNAL}
)


#: ``metav1.CauseType`` of status causes: the same strings as the error types.
CauseType = ErrorType


class _Omitted:
    """Sentinel for "no bad value to show" (upstream ``omitValue``)."""

    _instance: _Omitted | None = None

    def __new__(cls) -> _Omitted:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "OMITTED"


OMITTED: Final = _Omitted()


# --- Go formatting -------------------------------------------------------------------------------


def _printable(ch: str) -> bool:
    # Go's unicode.IsPrint (letters, marks, numbers, punctuation, symbols, ASCII space) is the same
    # set as Python's str.isprintable for a single character.
    return ch.isprintable()


_GO_ESCAPES: Final = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


def go_quote(text: str) -> str:
    """``strconv.Quote`` (Go ``%q``). Lone surrogates become U+FFFD, as Go's JSON decoder does."""
    out = ['"']
    for ch in text:
        cp = ord(ch)
        if 0xD800 <= cp <= 0xDFFF:
            ch, cp = "\ufffd", 0xFFFD
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif _printable(ch):
            out.append(ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif cp < 0x20 or cp == 0x7F:
            out.append(f"\\x{cp:02x}")
        elif cp < 0x10000:
            out.append(f"\\u{cp:04x}")
        else:
            out.append(f"\\U{cp:08x}")
    out.append('"')
    return "".join(out)


def _shortest_digits(value: float) -> tuple[str, int]:
    """Shortest round-trip digits and decimal point position (Go's ``digs.d``/``digs.dp``)."""
    sign_digits_exp = decimal.Decimal(repr(abs(value))).as_tuple()
    digits = "".join(str(d) for d in sign_digits_exp.digits).lstrip("0")
    exponent = int(sign_digits_exp.exponent)
    stripped = digits.rstrip("0")
    exponent += len(digits) - len(stripped)
    return stripped, len(stripped) + exponent


def _go_exp(exp: int) -> str:
    sign = "-" if exp < 0 else "+"
    return f"{sign}{abs(exp):02d}"


def go_float(value: float) -> str:
    """``fmt.Sprintf("%v", float64)``: shortest digits, ``%e`` when the exponent is < -4 or >= 6."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    neg = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return neg + "0"
    digits, dp = _shortest_digits(value)
    exp = dp - 1
    if exp < -4 or exp >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{neg}{mantissa}e{_go_exp(exp)}"
    return neg + _fixed(digits, dp)


def _fixed(digits: str, dp: int) -> str:
    if dp <= 0:
        return "0." + "0" * (-dp) + digits
    if dp >= len(digits):
        return digits + "0" * (dp - len(digits))
    return digits[:dp] + "." + digits[dp:]


def _json_float(value: float) -> str:
    """``encoding/json`` float64: ``%f`` shortest, ``%e`` below 1e-6 or from 1e21 (``e-07`` -> ``e-7``)."""
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    neg = "-" if value < 0 else ""
    digits, dp = _shortest_digits(value)
    if abs(value) < 1e-6 or abs(value) >= 1e21:
        exp = dp - 1
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{neg}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp)}"
    return neg + _fixed(digits, dp)


_JSON_ESCAPES: Final = {
    '"': '\\"',
    "\\": "\\\\",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\b": "\\b",
    "\f": "\\f",
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def _json_string(text: str) -> str:
    out = ['"']
    for ch in text:
        cp = ord(ch)
        if 0xD800 <= cp <= 0xDFFF:
            out.append("\ufffd")
        elif ch in _JSON_ESCAPES:
            out.append(_JSON_ESCAPES[ch])
        elif cp < 0x20:
            out.append(f"\\u{cp:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def go_json(value: Any) -> str:
    """Go ``json.Marshal`` of a JSON-like value: compact, map keys sorted, HTML characters escaped.

    Values JSON cannot hold (non-finite floats, other objects) are rendered readably instead of
    failing, where Go would fall back to ``%#v``.
    """
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _json_float(value) if math.isfinite(value) else go_float(value)
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, dict):
        items = sorted((str(k), v) for k, v in value.items())
        return "{" + ",".join(f"{_json_string(k)}:{go_json(v)}" for k, v in items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(go_json(v) for v in value) + "]"
    return _json_string(str(value))


class GoStringer(str):
    """A bad value Go prints through its ``String()`` method (a ``fmt.Stringer`` such as
    ``resource.Quantity``): as the text itself, unquoted."""

    __slots__ = ()


def format_bad_value(value: Any) -> str:
    """How ``ErrorBody`` prints a bad value."""
    if isinstance(value, GoStringer):
        return str.__str__(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return go_quote(value)
    return go_json(value)


# --- paths ---------------------------------------------------------------------------------------


class Path:
    """``field.Path``: ``Path("spec").child("x").index(0).key("example.com/gpu")``.

    Immutable; every step returns a new path, so a parent can be shared between branches.
    """

    __slots__ = ("_text",)

    def __init__(self, name: str = "", *more: str) -> None:
        self._text = ".".join(n for n in (name, *more) if n)

    @classmethod
    def _of(cls, text: str) -> Path:
        p = cls()
        p._text = text
        return p

    def child(self, name: str, *more: str) -> Path:
        text = self._text
        for part in (name, *more):
            text = f"{text}.{part}" if text else part
        return Path._of(text)

    def index(self, i: int) -> Path:
        return Path._of(f"{self._text}[{i}]")

    def key(self, k: str) -> Path:
        return Path._of(f"{self._text}[{k}]")

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"Path({self._text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Path) and other._text == self._text

    def __hash__(self) -> int:
        return hash(self._text)


PathLike = Path | str


# --- errors --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FieldError:
    """One field-level validation error (``field.Error``)."""

    type: ErrorType
    field: str
    bad_value: Any = dataclass_field(default=OMITTED, hash=False)
    detail: str = ""

    def error_body(self) -> str:
        """``ErrorBody()``: the message without the field path."""
        if self.type in _VALUE_HIDDEN or self.bad_value is OMITTED:
            text = self.type.message
        else:
            text = f"{self.type.message}: {format_bad_value(self.bad_value)}"
        if self.detail:
            text += f": {self.detail}"
        return text

    def __str__(self) -> str:
        return f"{self.field}: {self.error_body()}"

    def cause(self) -> dict[str, str]:
        """The ``metav1.StatusCause`` the API server reports for this error."""
        return {"reason": self.type.value, "message": self.error_body(), "field": self.field}


def not_found(path: PathLike, value: Any) -> FieldError:
    return FieldError(ErrorType.NOT_FOUND, str(path), value)


def required(path: PathLike, detail: str = "") -> FieldError:
    return FieldError(ErrorType.REQUIRED, str(path), "", detail)


def duplicate(path: PathLike, value: Any, detail: str = "") -> FieldError:
    """Upstream ``Duplicate`` carries no detail; draxr adds one to name the conflicting object."""
    return FieldError(ErrorType.DUPLICATE, str(path), value, detail)


def invalid(path: PathLike, value: Any, detail: str) -> FieldError:
    return FieldError(ErrorType.INVALID, str(path), value, detail)


def type_invalid(path: PathLike, value: Any, detail: str) -> FieldError:
    return FieldError(ErrorType.TYPE_INVALID, str(path), value, detail)


def not_supported(path: PathLike, value: Any, valid_values: Sequence[str]) -> FieldError:
    detail = ""
    if valid_values:
        detail = "supported values: " + ", ".join(go_quote(v) for v in valid_values)
    return FieldError(ErrorType.NOT_SUPPORTED, str(path), value, detail)


def forbidden(path: PathLike, detail: str) -> FieldError:
    return FieldError(ErrorType.FORBIDDEN, str(path), "", detail)


def too_long(path: PathLike, value: Any, max_length: int) -> FieldError:
    """``TooLong``: as upstream, the value is never shown (it may be huge)."""
    del value
    if max_length >= 0:
        detail = f"may not be more than {max_length} {'byte' if max_length == 1 else 'bytes'}"
    else:
        detail = "value is too long"
    return FieldError(ErrorType.TOO_LONG, str(path), "<value omitted>", detail)


def too_many(path: PathLike, actual: int, max_quantity: int) -> FieldError:
    if max_quantity >= 0:
        detail = f"must have at most {max_quantity} {'item' if max_quantity == 1 else 'items'}"
    else:
        detail = "has too many items"
    return FieldError(ErrorType.TOO_MANY, str(path), actual if actual >= 0 else OMITTED, detail)


def internal_error(path: PathLike, detail: str) -> FieldError:
    return FieldError(ErrorType.INTERNAL, str(path), None, detail)


#: At most this many field errors reach a status (causes and message); the rest are counted.
#: Upstream's one cap on a status's causes: the apiserver's etcd3 store aggregates at most 100
#: errors (``corruptObjErrAggregatorFactory(100)`` in ``staging/src/k8s.io/apiserver/pkg/storage/
#: etcd3/store.go``) and then appends one ``FieldValueTooMany`` cause, ``errTooMany`` in
#: ``corrupt_obj_deleter.go``.
MAX_STATUS_ERRORS: Final = 100
#: ``errTooMany``'s text; draxr adds how many errors were left out.
MSG_TOO_MANY_ERRORS: Final = "too many errors, the list is truncated"


def too_many_errors_message(omitted: int) -> str:
    """The final line of a truncated error list."""
    noun = "error" if omitted == 1 else "errors"
    return f"{MSG_TOO_MANY_ERRORS}: {omitted} more {noun} not shown"


def aggregate_message(errors: Iterable[FieldError], omitted: int = 0) -> str:
    """``ErrorList.ToAggregate().Error()``: duplicates dropped, ``[a, b]`` when more than one.

    Linear: a set remembers the messages already seen (upstream's ``sets.String``). ``omitted``
    errors that were left out of the list add a final ``too many errors`` line.
    """
    seen: dict[str, None] = {}
    for err in errors:
        seen.setdefault(str(err), None)
    messages = list(seen)
    if omitted > 0:
        messages.append(too_many_errors_message(omitted))
    if len(messages) == 1:
        return messages[0]
    return "[" + ", ".join(messages) + "]" if messages else ""


# --- statuses ------------------------------------------------------------------------------------


def _qualified(kind: str, group: str) -> str:
    """``GroupKind.String()`` / ``GroupResource.String()``."""
    return f"{kind}.{group}" if group else kind


def _details(name: str, group: str, kind: str) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    if kind:
        details["kind"] = kind
    return details


def _status(message: str, reason: str, details: dict[str, Any], code: int) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": details,
        "code": code,
    }


def invalid_status(kind: str, group: str, name: str, errors: Sequence[FieldError]) -> dict[str, Any]:
    """``apierrors.NewInvalid(GroupKind{group, kind}, name, errors).ErrStatus`` (HTTP 422).

    At most ``MAX_STATUS_ERRORS`` errors are reported; beyond that, the message ends with one line
    and the causes with one ``FieldValueTooMany`` cause saying how many were left out.
    """
    subject = f"{_qualified(kind, group)} {go_quote(name)} is invalid"
    kept = errors[:MAX_STATUS_ERRORS]
    omitted = len(errors) - len(kept)
    aggregate = aggregate_message(kept, omitted)
    message = f"{subject}: {aggregate}" if aggregate else subject
    details = _details(name, group, kind)
    causes: list[dict[str, str]] = [e.cause() for e in kept]
    if omitted:
        causes.append({"reason": ErrorType.TOO_MANY.value, "message": too_many_errors_message(omitted)})
    details["causes"] = causes
    return _status(message, "Invalid", details, 422)


def forbidden_status(kind: str, group: str, name: str, reason: str) -> dict[str, Any]:
    """``apierrors.NewForbidden(GroupResource{group, kind}, name, reason).ErrStatus`` (HTTP 403).

    As upstream, ``kind`` is really the resource (``pods``, ``resourceclaims``) and goes to
    ``details.kind``.
    """
    if not kind and not group:
        message = f"forbidden: {reason}"
    elif not name:
        message = f"{_qualified(kind, group)} is forbidden: {reason}"
    else:
        message = f"{_qualified(kind, group)} {go_quote(name)} is forbidden: {reason}"
    return _status(message, "Forbidden", _details(name, group, kind), 403)


class StatusError(Exception):
    """An API error carrying its ``metav1.Status`` dict; ``str()`` is the status message."""

    def __init__(self, status: dict[str, Any]) -> None:
        super().__init__(status.get("message", ""))
        self.status = status

    @property
    def code(self) -> int:
        code = self.status.get("code")
        return code if isinstance(code, int) else 500

    @property
    def reason(self) -> str:
        reason = self.status.get("reason")
        return reason if isinstance(reason, str) else ""

    def __str__(self) -> str:
        message = self.status.get("message")
        return message if isinstance(message, str) else ""

    @classmethod
    def invalid(cls, kind: str, group: str, name: str, errors: Sequence[FieldError]) -> StatusError:
        return cls(invalid_status(kind, group, name, errors))

    @classmethod
    def forbidden(cls, kind: str, group: str, name: str, reason: str) -> StatusError:
        return cls(forbidden_status(kind, group, name, reason))
