"""Which DRA-candidate extended resources a pod asks for, the DeviceClasses backing them, and the
quantities such names must have.

The first step of every path: the webhook, ``draxr convert``, ``validate`` and ``plan`` all start
from the names a pod asks for and the classes that serve them, resolved as kube-scheduler's
``ExtendedResourceCache`` does (``ClassResolver``).
"""

from __future__ import annotations

from collections.abc import Callable

from ..api.fielderrors import FieldError
from ..api.names import is_dra_extended_resource_name
from ..api.objects import Obj
from ..api.podresources import iter_requests
from ..api.quantity import try_parse
from ..api.validation import validate_dra_quantities
from ..cluster.deviceclasses import ClassResolver


def requested_extended(pod: Obj) -> list[str]:
    """Sorted names with a non-zero request or limit in any container or init container that
    ``IsDRAExtendedResourceName`` accepts (explicit names and ``deviceclass.resource.kubernetes.io/``
    implicit ones). Zero is skipped, as upstream skips it: such a request needs no device."""
    found: set[str] = set()
    for _, key, value in iter_requests(pod):
        if not isinstance(key, str) or key in found or not is_dra_extended_resource_name(key):
            continue
        q = try_parse(value)
        if q is not None and q.value != 0:
            found.add(key)
    return sorted(found)


def backing_classes(names: list[str], classes: ClassResolver) -> dict[str, str]:
    """Resource name -> the DeviceClass that serves it (only names some class backs)."""
    out: dict[str, str] = {}
    for resource in names:
        cls = classes.class_name(resource)
        if cls is not None:
            out[resource] = cls
    return out


def dra_backed(classes: ClassResolver) -> Callable[[str], bool]:
    """A predicate for ``validate_dra_quantities``: the name is DRA-backed right now."""

    def check(resource: str) -> bool:
        return is_dra_extended_resource_name(resource) and classes.class_name(resource) is not None

    return check


def quantity_errors(pod: Obj, classes: ClassResolver) -> list[FieldError]:
    """DRA-backed names (explicit or implicit) must have non-negative integer quantities."""
    return validate_dra_quantities(pod, dra_backed(classes))
