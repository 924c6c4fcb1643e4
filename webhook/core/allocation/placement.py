"""How a decision placed a pod's devices on its node: what the special claim carries, and why.

``Placement`` is filled by the scheduler for the winning node; ``describe`` words it for the pod's
Event and ``alignment_text`` for ``draxr plan``. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..api.alignment import PREFERRED
from ..api.objects import Obj
from ..cluster.topology import request_owner, shared_values, show_value, spanned_values
from .policy import BINPACK, SPREAD, UPSTREAM
from .results import DeviceResult


@dataclass(slots=True)
class Aligned:
    """One constraint draxr added and the values its devices share (or span, when relaxed)."""

    requests: list[str]
    attribute: str
    values: list[str]
    relaxed: bool = False  # preferred: no aligned set; the devices span ``values``

    @property
    def owner(self) -> str:
        owners = list(dict.fromkeys(request_owner(r) for r in self.requests))
        return ", ".join(owners)

    def to_api(self) -> dict[str, Any]:
        return {
            "requests": list(self.requests),
            "attribute": self.attribute,
            "values": list(self.values),
            "aligned": not self.relaxed,
        }


@dataclass(slots=True)
class Placement:
    policy: str
    mode: str  # the pod's draxr.io/align
    constraints: list[Obj] = field(default_factory=list)  # carried by the special claim
    aligned: list[Aligned] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # alignments no node could hold
    group_attribute: str | None = None  # the attribute binpack/spread counted groups by
    whole_before: int = 0
    whole_after: int = 0
    groups: int = 0

    @property
    def relaxed(self) -> bool:
        return any(a.relaxed for a in self.aligned)

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "policy": self.policy,
            "mode": self.mode,
            "constraints": [a.to_api() for a in self.aligned],
        }
        if self.notes:
            out["notes"] = list(self.notes)
        if self.group_attribute is not None:
            out["groups"] = {
                "attribute": self.group_attribute,
                "total": self.groups,
                "wholeBefore": self.whole_before,
                "wholeAfter": self.whole_after,
            }
        return out


def record_alignment(
    placement: Placement, constraints: Sequence[Obj], results: Sequence[DeviceResult], relaxed: bool
) -> None:
    """What the chosen devices share for each (requested) constraint, or span when relaxed."""
    for c in constraints:
        names = [str(n) for n in c.get("requests") or []]
        attr = str(c.get("matchAttribute", ""))
        devices = [r.device for r in results if r.request in names or r.request.split("/")[0] in names]
        values = (
            [show_value(v) for v in spanned_values(devices, attr)]
            if relaxed
            else sorted(show_value(v) for v in shared_values(devices, attr))
        )
        placement.aligned.append(Aligned(names, attr, values, relaxed))


def _devices(results: Sequence[DeviceResult]) -> str:
    return ", ".join(f"{r.device.pool}/{r.device.name}" for r in results)


def alignment_text(placement: Placement | None) -> str:
    """One cell of ``draxr plan``'s table: what each container's devices share."""
    if placement is None or not placement.aligned:
        return "-"
    parts: list[str] = []
    for a in placement.aligned:
        short = a.attribute.rsplit("/", 1)[-1]
        if a.relaxed:
            parts.append(f"{a.owner}: split {short}={'|'.join(a.values)} ({PREFERRED})")
        else:
            parts.append(f"{a.owner}: {short}={','.join(a.values)}")
    return "; ".join(parts)


def relaxed_message(placement: Placement, node: str) -> str:
    """The Event of a ``preferred`` pod that got devices without the alignment it asked for."""
    parts = [
        f"no free set of devices on {node} shares {a.attribute} for {a.owner}; "
        f"placed on devices spanning {', '.join(a.values) or 'no value'}"
        for a in placement.aligned
        if a.relaxed
    ]
    return f"draxr.io/align: {PREFERRED}: " + "; ".join(parts)


def describe(placement: Placement | None, results: Sequence[DeviceResult]) -> str:
    """Which devices a pod got and why, for the pod's Scheduled Event."""
    if not results:
        return ""
    text = f"devices {_devices(results)}"
    if placement is None:
        return text
    reasons: list[str] = []
    for a in placement.aligned:
        if a.relaxed:
            reasons.append(f"{a.owner} not aligned by {a.attribute}, spanning {', '.join(a.values)}")
        else:
            reasons.append(f"{a.owner} aligned on {a.attribute}={','.join(a.values)} ({placement.mode})")
    reasons.extend(placement.notes)
    attr = placement.group_attribute
    if placement.policy == UPSTREAM:
        reasons.append("upstream: first fit in allocation order")
    elif attr is not None and placement.policy == BINPACK:
        reasons.append(
            f"binpack fills the fullest {attr} group with room: {placement.whole_after} of "
            f"{placement.groups} groups left whole ({placement.whole_before} before)"
        )
    elif attr is not None and placement.policy == SPREAD:
        reasons.append(
            f"spread takes the emptiest {attr} group: {placement.whole_after} of "
            f"{placement.groups} groups left whole ({placement.whole_before} before)"
        )
    return f"{text}: {'; '.join(reasons)}" if reasons else text
