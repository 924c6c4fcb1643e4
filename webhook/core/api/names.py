"""Name formats of the Kubernetes API (apimachinery ``validation`` and ``v1helper``).

Every ``is_*`` function returns the list of upstream error details; an empty list means valid.
"""

from __future__ import annotations

import functools
import re
from typing import Final

from .constants import DEVICE_CLASS_PREFIX

_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)

_LABEL_VALUE_FMT = "(" + _LABEL_KEY_FMT + ")?"
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
LABEL_VALUE_MAX = 63

_LABEL_KEY_RE = re.compile(_LABEL_KEY_FMT)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)
_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
LABEL_KEY_NAME_MAX = 63

NATIVE_PREFIX = "kubernetes.io/"
REQUESTS_PREFIX = "requests."


def _nbytes(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass"))


def max_len_error(length: int) -> str:
    return f"must be no more than {length} bytes"


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """Upstream ``RegexError``, double spaces included."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def is_dns1123_label(value: str) -> list[str]:
    errs: list[str] = []
    if _nbytes(value) > DNS1123_LABEL_MAX:
        errs.append(max_len_error(DNS1123_LABEL_MAX))
    if not _DNS1123_LABEL_RE.fullmatch(value):
        if _DNS1123_SUBDOMAIN_RE.fullmatch(value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    errs: list[str] = []
    if _nbytes(value) > DNS1123_SUBDOMAIN_MAX:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_qualified_name(value: str) -> list[str]:
    """``IsQualifiedName`` / ``IsLabelKey``: optional DNS-subdomain prefix, '/', name part."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return [
            "a valid label key "
            + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif _nbytes(name) > LABEL_KEY_NAME_MAX:
        errs.append("name part " + max_len_error(LABEL_KEY_NAME_MAX))
    if not _LABEL_KEY_RE.fullmatch(name):
        errs.append(
            "name part " + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


def is_valid_label_value(value: str) -> list[str]:
    """``IsValidLabelValue``."""
    errs: list[str] = []
    if _nbytes(value) > LABEL_VALUE_MAX:
        errs.append(max_len_error(LABEL_VALUE_MAX))
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def is_native_resource(name: str) -> bool:
    """No '/' at all, or ``kubernetes.io/`` anywhere (a substring test, as upstream)."""
    return "/" not in name or NATIVE_PREFIX in name


def extended_resource_name_errors(name: str) -> list[str]:
    """The precise reasons of the declarative ``ExtendedResourceName`` format (strfmt.go)."""
    errs: list[str] = []
    if "/" not in name:
        errs.append("a name must be a domain-prefixed path, such as 'example.com/my-prop'")
    elif NATIVE_PREFIX in name:
        errs.append(f'must not have "{NATIVE_PREFIX}" domain')
    if name.startswith(REQUESTS_PREFIX):
        errs.append(f'must not have "{REQUESTS_PREFIX}" prefix')
    errs.extend(is_qualified_name(REQUESTS_PREFIX + name))
    return errs


def is_extended_resource_name(name: str) -> bool:
    """``v1helper.IsExtendedResourceName``."""
    if is_native_resource(name) or name.startswith(REQUESTS_PREFIX):
        return False
    return not is_qualified_name(REQUESTS_PREFIX + name)


def is_dra_extended_resource_name(name: str) -> bool:
    """``IsDRAExtendedResourceName``: a pod resource name that DRA may back. The few names a
    cluster's pods use are answered from a cache (the worker asks for every container's every name
    of every pod it sees): names no longer than a qualified name may be, so no input can make the
    cache large."""
    if len(name) <= _CACHED_NAME:
        return _dra_extended_cached(name)
    return _is_dra_extended(name)


def _is_dra_extended(name: str) -> bool:
    return is_extended_resource_name(name) or name.startswith(DEVICE_CLASS_PREFIX)


#: A qualified name's longest: a 253-byte prefix, ``/`` and a 63-byte name.
_CACHED_NAME: Final = 317
_dra_extended_cached = functools.lru_cache(maxsize=1024)(_is_dra_extended)


def implicit_name(class_name: str) -> str:
    return DEVICE_CLASS_PREFIX + class_name


def implicit_name_problems(class_name: str) -> list[str]:
    """Why ``deviceclass.resource.kubernetes.io/<class>`` cannot be used in a pod's resources.

    Pod resource names must be qualified names; a class name over 63 bytes (or otherwise not a
    qualified name part) makes the implicit name unusable even though the class is valid.
    """
    return is_qualified_name(implicit_name(class_name))
