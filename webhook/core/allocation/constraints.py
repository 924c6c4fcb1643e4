"""A claim's constraints (``matchAttribute``, ``distinctAttribute``) as the search applies them: each
keeps a stack of what the devices picked so far allow, pushed per pick and popped on backtrack."""

from __future__ import annotations

from collections.abc import Collection

from ..api.objects import Obj, as_dict, as_list, spec
from ..cluster.slices import Device
from ..cluster.topology import Values, values_of
from .errors import AllocationError, claim_ref


class Constraint:
    """``matchAttribute`` (non-empty intersection) or ``distinctAttribute`` (pairwise disjoint).

    Scalars are one-element sets, so both rules also cover KEP-5491 list attributes.
    """

    def __init__(self, attribute: str, requests: Collection[str], distinct: bool) -> None:
        self.attribute = attribute
        self.requests = set(requests)
        self.distinct = distinct
        self.stack: list[Values] = []  # intersection (match) or union (distinct)

    def applies(self, base: str, sub: str) -> bool:
        if not self.requests:
            return True
        return base in self.requests or (bool(sub) and f"{base}/{sub}" in self.requests)

    def add(self, device: Device) -> bool:
        values = values_of(device, self.attribute)
        if values is None:
            return False
        if not self.stack:
            self.stack.append(values)
            return True
        top = self.stack[-1]
        if self.distinct:
            if top & values:
                return False
            self.stack.append(top | values)
        else:
            both = top & values
            if not both:
                return False
            self.stack.append(both)
        return True

    def remove(self) -> None:
        self.stack.pop()


def claim_constraints(claim: Obj) -> list[Constraint]:
    """The claim's ``spec.devices.constraints``; an empty one is an allocation error, as upstream's."""
    constraints: list[Constraint] = []
    for i, raw in enumerate(as_list(as_dict(spec(claim).get("devices")).get("constraints"))):
        c = as_dict(raw)
        reqs = [str(x) for x in as_list(c.get("requests"))]
        if isinstance(c.get("matchAttribute"), str):
            constraints.append(Constraint(c["matchAttribute"], reqs, distinct=False))
        elif isinstance(c.get("distinctAttribute"), str):
            constraints.append(Constraint(c["distinctAttribute"], reqs, distinct=True))
        else:
            raise AllocationError(
                f"claim {claim_ref(claim)}, constraint #{i}: empty constraint (unsupported constraint type?)"
            )
    return constraints
