"""Kubernetes' ``format`` library (``library/format.go``) and the optional values it returns.

``format.<name>()`` and ``format.named(name)`` give a format; ``<format>.validate(s)`` gives
``optional.none()`` when ``s`` is valid, else an optional list of upstream's error details.
Optional values come with cel-go's functions on them (``hasValue``, ``value``, ``orValue``,
``or``, ``optional.of/none/ofNonZeroValue``); the optional *syntax* (``.?field``, ``[?key]``)
needs the parser and is not supported.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

from ..api import names
from .gowords import OpaqueValue, no_overload
from .netlib import _parse_url

Fn = Callable[..., Any]

_MISSING = object()


@dataclass(frozen=True, slots=True)
class OptionalValue(OpaqueValue):
    """``optional.of(value)``, or ``optional.none()`` when ``value`` is :data:`_MISSING`."""

    value: Any = _MISSING
    type_name = "optional_type"

    @property
    def present(self) -> bool:
        return self.value is not _MISSING


NONE = OptionalValue()


@dataclass(frozen=True, slots=True)
class FormatValue(OpaqueValue):
    name: str
    validate: Callable[[str], list[str]]
    type_name = "kubernetes.NamedFormat"


# --- the named formats -----------------------------------------------------------------------

_DNS1035_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_RE = re.compile(_DNS1035_FMT)
_DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character"
)
_UUID_RE = re.compile(r"(?i)^(?:urn:uuid:)?[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
_DATETIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def _mask_trailing_dash(name: str) -> str:
    """apimachinery's ``maskTrailingDash``, transcribed (it drops the character before the dash)."""
    if len(name) > 1 and name.endswith("-"):
        return name[:-2] + "a"
    return name


def _dns1035_label(value: str) -> list[str]:
    errs: list[str] = []
    if len(value.encode("utf-8", "surrogatepass")) > names.DNS1123_LABEL_MAX:
        errs.append(names.max_len_error(names.DNS1123_LABEL_MAX))
    if not _DNS1035_RE.fullmatch(value):
        errs.append(names.regex_error(_DNS1035_MSG, _DNS1035_FMT, "my-name", "abc-123"))
    return errs


def _uri(value: str) -> list[str]:
    parsed = _parse_url(value)
    if isinstance(parsed, str):
        return [parsed.removeprefix("URL parse error during conversion from string: ")]
    return []


def _byte(value: str) -> list[str]:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return ["invalid base64"]
    return []


def _date(value: str) -> list[str]:
    try:
        if len(value) != 10:
            raise ValueError(value)
        date.fromisoformat(value)
    except ValueError:
        return ["invalid date"]
    return []


def _datetime(value: str) -> list[str]:
    if not _DATETIME_RE.match(value):
        return ["invalid datetime"]
    try:
        datetime.fromisoformat(value.replace("z", "Z").replace("t", "T"))
    except ValueError:
        return ["invalid datetime"]
    return []


FORMATS: dict[str, FormatValue] = {
    f.name: f
    for f in (
        FormatValue("dns1123Label", names.is_dns1123_label),
        FormatValue("dns1123Subdomain", names.is_dns1123_subdomain),
        FormatValue("dns1035Label", _dns1035_label),
        FormatValue("qualifiedName", names.is_qualified_name),
        FormatValue("dns1123LabelPrefix", lambda s: names.is_dns1123_label(_mask_trailing_dash(s))),
        FormatValue("dns1123SubdomainPrefix", lambda s: names.is_dns1123_subdomain(_mask_trailing_dash(s))),
        FormatValue("dns1035LabelPrefix", lambda s: _dns1035_label(_mask_trailing_dash(s))),
        FormatValue("labelValue", names.is_valid_label_value),
        FormatValue("uri", _uri),
        FormatValue("uuid", lambda s: [] if _UUID_RE.match(s) else ["does not match the UUID format"]),
        FormatValue("byte", _byte),
        FormatValue("date", _date),
        FormatValue("datetime", _datetime),
    )
}


def _constant(fmt: FormatValue) -> Fn:
    def get() -> Any:
        return fmt

    get.__name__ = f"format.{fmt.name}"
    return get


def fn_format_named(name: Any) -> Any:
    if not isinstance(name, str):
        return no_overload("format.named", name)
    fmt = FORMATS.get(str(name))
    return NONE if fmt is None else OptionalValue(fmt)


def fn_validate(fmt: Any, value: Any) -> Any:
    if not isinstance(fmt, FormatValue) or not isinstance(value, str):
        return no_overload("validate", fmt, value)
    errors = fmt.validate(str(value))
    if not errors:
        return NONE
    return OptionalValue(celtypes.ListType([celtypes.StringType(e) for e in errors]))


# --- optional values -------------------------------------------------------------------------


def fn_optional_of(value: Any) -> Any:
    return OptionalValue(value)


def fn_optional_none() -> Any:
    return NONE


def _is_zero(value: Any) -> bool:
    if isinstance(value, bool | celtypes.BoolType):
        return not value
    if isinstance(value, int | float | str | bytes | list | dict):
        return not value
    return value is None


def fn_optional_of_non_zero_value(value: Any) -> Any:
    return NONE if _is_zero(value) else OptionalValue(value)


def fn_has_value(opt: Any) -> Any:
    if not isinstance(opt, OptionalValue):
        return no_overload("hasValue", opt)
    return celtypes.BoolType(opt.present)


def fn_value(opt: Any) -> Any:
    if not isinstance(opt, OptionalValue):
        return no_overload("value", opt)
    if not opt.present:
        return CELEvalError("optional.none() dereference")
    return opt.value


def fn_or_value(opt: Any, default: Any) -> Any:
    if not isinstance(opt, OptionalValue):
        return no_overload("orValue", opt, default)
    return opt.value if opt.present else default


def fn_or(opt: Any, other: Any) -> Any:
    if not isinstance(opt, OptionalValue) or not isinstance(other, OptionalValue):
        return no_overload("or", opt, other)
    return opt if opt.present else other


FUNCTIONS: dict[str, Fn] = {
    **{f"format.{name}": _constant(fmt) for name, fmt in FORMATS.items()},
    "format.named": fn_format_named,
    "validate": fn_validate,
    "optional.of": fn_optional_of,
    "optional.none": fn_optional_none,
    "optional.ofNonZeroValue": fn_optional_of_non_zero_value,
    "hasValue": fn_has_value,
    "value": fn_value,
    "orValue": fn_or_value,
    "or": fn_or,
}

RESULT_TYPES: dict[str, str] = {
    **{f"format.{name}": "kubernetes.NamedFormat" for name in FORMATS},
    "format.named": "optional_type(kubernetes.NamedFormat)",
    "validate": "optional_type(list(string))",
    "optional.of": "optional_type(dyn)",
    "optional.none": "optional_type(dyn)",
    "optional.ofNonZeroValue": "optional_type(dyn)",
    "hasValue": "bool",
}
