"""Beyond upstream: one device attribute shared by every device of every member of a pod group.

Inside one claim, ``matchAttribute`` makes every device share an attribute's value; nothing ties
the devices of different pods. A PodGroup annotated ``draxr.io/match-attribute: <qualified name>``
(``gpu.nvidia.com/cliqueID``, say) asks that of the whole group: each value of that attribute
among the devices of its driver (the name's domain) is a candidate, tried as upstream tries a
topology domain, and while one is tried every other device of that driver is held (reserved under
a token of its own, so no member's allocation can take it). A device without the attribute
matches no value. A name without a domain holds every device that lacks the value.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final, NamedTuple

from ..api.objects import Obj, annotations_of
from ..cluster.slices import DeviceKey
from ..cluster.state import ClusterState

MATCH_ATTRIBUTE: Final = "draxr.io/match-attribute"


class Value(NamedTuple):
    """One value of the attribute, and the devices it leaves out (held while it is tried)."""

    name: str
    held: frozenset[DeviceKey]


def match_attribute(pod_group: Obj) -> str | None:
    value = annotations_of(pod_group).get(MATCH_ATTRIBUTE)
    return value.strip() if isinstance(value, str) and value.strip() else None


def values(state: ClusterState, attribute: str) -> list[Value]:
    """Every value of ``attribute`` among the devices, by name, each with the devices it holds."""
    domain = attribute.split("/", 1)[0] if "/" in attribute else None
    every: set[DeviceKey] = set()
    by_value: dict[str, set[DeviceKey]] = {}
    for sl in state.devices.slices.values():
        if domain is not None and sl.driver != domain:
            continue
        for device in sl.devices:
            every.add(device.key)
            found = device.attribute(attribute)
            if found is not None:
                by_value.setdefault(str(found[1]), set()).add(device.key)
    return [Value(v, frozenset(every - keys)) for v, keys in sorted(by_value.items())]


@contextmanager
def holding(state: ClusterState, keys: frozenset[DeviceKey]) -> Iterator[None]:
    """The devices ``keys`` held (as reserved) for the block's length."""
    if not keys:
        yield
        return
    token = f"match-attribute/{uuid.uuid4()}"
    state.allocated.reserve_devices(token, keys)
    state.version += 1
    try:
        yield
    finally:
        state.allocated.unreserve_devices(token)
        state.version += 1


__all__ = ["MATCH_ATTRIBUTE", "Value", "holding", "match_attribute", "values"]
