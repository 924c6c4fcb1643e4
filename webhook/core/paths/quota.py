"""ResourceQuota and the rewrite: a rewritten pod is charged as DRA devices, not as its names.

A pod asking for ``example.com/gpu: 1`` is charged ``requests.example.com/gpu`` by ResourceQuota.
Rewritten into a claim, the same pod no longer asks for the name: quota charges the claim's devices
as ``<class>.deviceclass.resource.k8s.io/devices``. A namespace whose quota limits the name but not
the class would stop limiting those devices; draxr warns about it (at admission and offline).
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping

from ..api.objects import Obj, as_dict, namespace, spec


def class_quota_key(device_class: str) -> str:
    return f"{device_class}.deviceclass.resource.k8s.io/devices"


def limits_by_name(quota: Obj, resource: str) -> bool:
    """The quota limits ``resource`` by its name (``requests.<name>`` or the bare name)."""
    return _by_name(as_dict(spec(quota).get("hard")), resource)


def _by_name(hard: Container[str], resource: str) -> bool:
    return f"requests.{resource}" in hard or resource in hard


def unguarded(quotas: Iterable[Obj], ns: str, classes: Mapping[str, str]) -> list[tuple[str, str]]:
    """(resource name, class) pairs a quota in ``ns`` limits by name but not by class."""
    hard: set[str] = set()
    for q in quotas:
        if namespace(q) == ns:
            hard |= set(as_dict(spec(q).get("hard")))
    return [
        (name, cls)
        for name, cls in sorted(classes.items())
        if _by_name(hard, name) and class_quota_key(cls) not in hard
    ]
