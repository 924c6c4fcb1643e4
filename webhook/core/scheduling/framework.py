"""What every phase and plugin of a decision shares (upstream's ``framework`` package): the
decision's outcome, how each extended resource is served on the chosen node, and kube-scheduler's
``FitError`` text."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

from ..allocation.allocator import ClaimAllocation
from ..allocation.placement import Placement
from ..api.objects import Obj, as_dict, status
from ..cluster.slices import DeviceKey

SCHEDULED: Final = "Scheduled"
UNSCHEDULABLE: Final = "Unschedulable"
ERROR: Final = "Error"

#: kube-scheduler's ``ErrNoNodesAvailable`` (the cluster has no nodes at all).
NO_NODES: Final = "no nodes available to schedule pods"

Via = Literal["dra", "device-plugin"]


class PreFilterFailed(Exception):
    """The pod cannot be scheduled anywhere for now (a claim missing or unusable)."""


@dataclass(slots=True)
class ServedBy:
    """How one extended resource is served on a node: by DRA devices of a DeviceClass, or by the
    node's device plugin (allocatable > 0: upstream's ``ShouldDelegateResourceToDRA`` is false)."""

    via: Via
    device_class: str | None

    def to_api(self) -> dict[str, str | None]:
        return {"deviceClass": self.device_class, "via": self.via}


@dataclass(slots=True)
class UserClaim:
    claim: Obj
    allocation: ClaimAllocation | None = None  # set when this decision allocates it


@dataclass(slots=True)
class Decision:
    pod: Obj
    status: str
    node: str | None = None
    message: str = ""
    served: dict[str, ServedBy] = field(default_factory=dict)
    requests: list[Obj] = field(default_factory=list)  # the special claim's device requests
    mappings: list[Obj] = field(default_factory=list)
    special: ClaimAllocation | None = None
    user_claims: list[UserClaim] = field(default_factory=list)
    stale_claim: Obj | None = None  # PostFilter deletes it
    reasons: dict[str, list[str]] = field(default_factory=dict)
    resumed: Obj | None = None  # an existing, allocated special claim this decision continues
    reuse: Obj | None = None  # an existing, unallocated special claim PreBind may reuse
    placement: Placement | None = None  # how the special claim's devices were placed, and why

    @property
    def constraints(self) -> list[Obj]:
        """The special claim's ``spec.devices.constraints`` (draxr's alignment; none upstream)."""
        return list(self.placement.constraints) if self.placement is not None else []

    def special_allocation(self) -> Obj | None:
        if self.special is not None:
            return self.special.to_api()
        if self.resumed is not None:
            alloc = as_dict(status(self.resumed).get("allocation"))
            return alloc or None
        return None

    def device_keys(self) -> list[DeviceKey]:
        keys = list(self.special.device_keys) if self.special else []
        for uc in self.user_claims:
            if uc.allocation is not None:
                keys.extend(uc.allocation.device_keys)
        return keys


def fit_error(total: int, reasons: dict[str, list[str]], pre_message: str = "") -> str:
    """kube-scheduler's ``FitError`` message: a sorted histogram of node reasons; with no nodes at
    all, its ``ErrNoNodesAvailable``."""
    if total == 0:
        return NO_NODES
    msg = f"0/{total} nodes are available:"
    if pre_message:
        return f"{msg} {pre_message}."
    counts: dict[str, int] = {}
    for node_reasons in reasons.values():
        for r in node_reasons:
            counts[r] = counts.get(r, 0) + 1
    parts = sorted(f"{v} {k}" for k, v in counts.items())
    return f"{msg} {', '.join(parts)}." if parts else msg
