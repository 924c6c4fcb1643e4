"""Capacity requests for extended-resource pods: ``draxr.io/capacity-requests`` on a DeviceClass.

Why: upstream 1.37 gives the special claim's requests no capacity requests, so a pod asking for
``example.com/gpu: 1`` takes a whole multi-allocatable device (or its request policy's default).
KEP-6406 (alpha in 1.38) adds ``DeviceClassSpec.extendedResourceCapacityRequests``, a
``CapacityRequirements`` copied onto every request synthesized for the class. draxr does the same
ahead of upstream from an annotation of the same shape, JSON ``{"requests": {"memory": "10Gi"}}``;
where an apiserver serves the field, the field wins. A count of N means N independent shares.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable
from typing import Any, Final

from .alignment import MAX_ID_LENGTH, attribute_name_problems
from .objects import Obj, annotations_of, spec
from .quantity import Quantity, QuantityError

CAPACITY_REQUESTS_ANNOTATION: Final = "draxr.io/capacity-requests"
#: KEP-6406's DeviceClassSpec field (served from 1.38 with its alpha gate).
CAPACITY_REQUESTS_FIELD: Final = "extendedResourceCapacityRequests"

_C_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def capacity_name_problems(key: Any) -> list[str]:
    """Why ``key`` is not a capacity name (upstream ``validateQualifiedName``: a C identifier, or a
    driver-name domain, '/', and a C identifier)."""
    if not isinstance(key, str) or not key:
        return ["capacity names must be non-empty strings"]
    if "/" in key:
        return attribute_name_problems(key)
    if len(key) > MAX_ID_LENGTH:
        return [f"must be no more than {MAX_ID_LENGTH} characters"]
    if not _C_IDENTIFIER.fullmatch(key):
        return ["must be a C identifier (e.g. 'memory' or 'example.com/memory')"]
    return []


def requirements_problems(value: Any) -> list[str]:
    """Why ``value`` (decoded JSON) is not a usable ``CapacityRequirements``: an object with only
    ``requests``, a non-empty map of capacity name to a non-negative quantity."""
    if not isinstance(value, dict):
        return ['must be a JSON object such as {"requests": {"memory": "10Gi"}}']
    problems = [f"{k}: unknown field (only 'requests' is allowed)" for k in value if k != "requests"]
    requests = value.get("requests")
    if not isinstance(requests, dict) or not requests:
        return [*problems, "requests: must be a non-empty object of capacity name to quantity"]
    for k, v in requests.items():
        problems.extend(f"requests[{k}]: {p}" for p in capacity_name_problems(k))
        if not isinstance(v, str):
            problems.append(f"requests[{k}]: must be a quantity string such as '10Gi'")
            continue
        try:
            q = Quantity.parse(v)
        except QuantityError as e:
            problems.append(f"requests[{k}]: {e}")
            continue
        if q.sign() < 0:
            problems.append(f"requests[{k}]: must be greater than or equal to 0")
    return problems


def annotation_problems(raw: Any) -> list[str]:
    """Why the annotation's text is unusable; empty when it is valid."""
    if not isinstance(raw, str):
        return ["must be a string"]
    try:
        value = json.loads(raw)
    except ValueError as e:
        return [f"must be JSON: {e}"]
    return requirements_problems(value)


def class_capacity_requests(device_class: Obj | None) -> dict[str, str] | None:
    """The capacity requests a class puts on each request synthesized for it (name -> quantity as
    written): the KEP-6406 field when set, else the annotation; None when neither is usable (the
    DeviceClass hook denies a malformed annotation, so only classes stored before draxr have one)."""
    if device_class is None:
        return None
    field = spec(device_class).get(CAPACITY_REQUESTS_FIELD)
    if field is not None:
        return _checked(field)
    raw = annotations_of(device_class).get(CAPACITY_REQUESTS_ANNOTATION)
    return _parsed_annotation(raw) if isinstance(raw, str) else None


def _checked(value: Any) -> dict[str, str] | None:
    if requirements_problems(value):
        return None
    return {str(k): str(v) for k, v in sorted(value["requests"].items())}


@functools.lru_cache(maxsize=256)
def _parsed_annotation(raw: str) -> dict[str, str] | None:
    # Cached per text; callers copy what they store.
    if annotation_problems(raw):
        return None
    return _checked(json.loads(raw))


def capacity_of_request(requests: dict[str, str] | None) -> Obj | None:
    """The ``capacity`` field of a synthesized request (a fresh object), None for no requests."""
    return {"requests": dict(requests)} if requests else None


def capacity_by_class(
    classes: Iterable[str], class_of: Callable[[str], Obj | None]
) -> dict[str, dict[str, str]]:
    """Class name -> its capacity requests, for the classes that have any."""
    out: dict[str, dict[str, str]] = {}
    for cls in set(classes):
        requests = class_capacity_requests(class_of(cls))
        if requests:
            out[cls] = requests
    return out
