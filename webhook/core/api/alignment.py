"""draxr's alignment annotations: their syntax, their validation, and how the engine reads them.

* DeviceClass ``draxr.io/align-by: <attribute>[,<attribute>...]``, each a fully qualified device
  attribute (``resource.kubernetes.io/pcieRoot``);
* Pod ``draxr.io/align``: ``none``, ``required`` (the default) or ``preferred``.

What they mean for a pod's devices is ``cluster/topology.py``'s business (groups, constraints); here
is only what the API objects carry, so that validation needs nothing above the API layer."""

from __future__ import annotations

import functools
import re
from typing import Any, Final

from .names import is_dns1123_subdomain, regex_error
from .objects import Obj, annotations_of

ALIGN_BY_ANNOTATION: Final = "draxr.io/align-by"
ALIGN_ANNOTATION: Final = "draxr.io/align"
NONE: Final = "none"
REQUIRED: Final = "required"
PREFERRED: Final = "preferred"
ALIGN_MODES: Final = (NONE, REQUIRED, PREFERRED)


#: ``resource.DeviceMaxIDLength`` and the driver-name limit of a fully qualified attribute name.
MAX_ID_LENGTH: Final = 32
MAX_DOMAIN_LENGTH: Final = 63
_C_IDENTIFIER_FMT: Final = "[A-Za-z_][A-Za-z0-9_]*"
_C_IDENTIFIER_RE: Final = re.compile(_C_IDENTIFIER_FMT)
_C_IDENTIFIER_MSG: Final = (
    "a valid C identifier must start with alphabetic character or '_', followed by a string of "
    "alphanumeric characters or '_'"
)


def attribute_name_problems(attribute: str) -> list[str]:
    """Why ``attribute`` is not a fully qualified attribute name (upstream ``validateFullyQualifiedName``:
    a domain that is a driver name, a '/', and a C identifier of at most 32 characters)."""
    if not attribute:
        return ["must not be empty"]
    parts = attribute.split("/")
    if len(parts) != 2:
        return ["must be a domain and a name separated by one '/' (e.g. 'resource.kubernetes.io/pcieRoot')"]
    domain, ident = parts
    problems: list[str] = []
    if not domain:
        problems.append("domain part must not be empty")
    else:
        if len(domain) > MAX_DOMAIN_LENGTH:
            problems.append(f"domain part must be no more than {MAX_DOMAIN_LENGTH} characters")
        problems.extend(f"domain part: {m}" for m in is_dns1123_subdomain(domain.lower()))
    if not ident:
        problems.append("name part must not be empty")
    else:
        if len(ident) > MAX_ID_LENGTH:
            problems.append(f"name part must be no more than {MAX_ID_LENGTH} characters")
        if not _C_IDENTIFIER_RE.fullmatch(ident):
            examples = ("my_name", "MY_NAME", "MyName")
            problems.append("name part: " + regex_error(_C_IDENTIFIER_MSG, _C_IDENTIFIER_FMT, *examples))
    return problems


def split_align_by(value: str) -> list[str]:
    """The comma-separated attribute names, blanks around them stripped (empty entries kept)."""
    return [part.strip() for part in value.split(",")]


def align_by_problems(value: Any) -> list[str]:
    """Every reason the annotation's value is unusable; empty when it is valid."""
    if not isinstance(value, str):
        return ["must be a string"]
    names = split_align_by(value)
    if names == [""]:
        return ["must name at least one device attribute"]
    problems: list[str] = []
    seen: set[str] = set()
    for n in names:
        if n in seen:
            problems.append(f"{n}: named twice")
            continue
        seen.add(n)
        problems.extend(f"{n or '(empty)'}: {p}" for p in attribute_name_problems(n))
    return problems


def align_by(device_class: Obj | None) -> tuple[str, ...]:
    """The attributes a class aligns by; none when the annotation is absent or malformed (the
    DeviceClass hook denies a malformed one, so only classes stored before draxr can carry it)."""
    if device_class is None:
        return ()
    raw = annotations_of(device_class).get(ALIGN_BY_ANNOTATION)
    return _parsed_align_by(raw) if isinstance(raw, str) else ()


@functools.lru_cache(maxsize=256)
def _parsed_align_by(raw: str) -> tuple[str, ...]:
    return () if align_by_problems(raw) else tuple(split_align_by(raw))


def pod_alignment(pod: Obj) -> str:
    """The pod's ``draxr.io/align``; ``required`` when absent (or not one of the three words: the
    strict reading, so a typo never loosens what the class asks)."""
    value = annotations_of(pod).get(ALIGN_ANNOTATION)
    return value if value in ALIGN_MODES else REQUIRED
