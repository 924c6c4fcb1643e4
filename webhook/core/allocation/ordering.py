"""Placement order (``binpack``, ``spread``): which topology attribute orders each request's
candidates, and that order. It changes only the order the search tries candidates in, never the
checks, so every answer still passes them (see the allocator's docstring for why that is bounded)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from ..cel import CelError
from ..cluster.slices import Device, DeviceKey
from ..cluster.topology import Groups, Values, group_devices, order_candidates
from .constraints import Constraint
from .requests import Request

Candidates = list[tuple[Device, CelError | None]]


def plan_order(
    slots: list[list[Request]],
    constraints: list[Constraint],
    group_attributes: Callable[[str], tuple[str, ...]] | None,
) -> None:
    """Which attribute orders each request's candidates (its ``matchAttribute`` constraint's, else
    its class's first group attribute), and what that constraint asks for."""
    for alts in slots:
        for req in alts:
            if req.all_mode:
                continue
            for c in constraints:
                if not c.distinct and c.applies(req.base, req.sub):
                    req.order_attr = c.attribute
                    req.order_demand = _constraint_demand(slots, c)
                    break
            else:
                attrs = group_attributes(req.class_name) if group_attributes else ()
                if attrs:
                    req.order_attr = attrs[0]


def _constraint_demand(slots: list[list[Request]], constraint: Constraint) -> dict[str, int]:
    demand: dict[str, int] = {}
    for alts in slots:
        first = alts[0]  # of subrequests, the preferred one
        if constraint.applies(first.base, first.sub) and not first.all_mode:
            demand[first.class_name] = demand.get(first.class_name, 0) + first.count
    return demand


class CandidateOrder:
    """A request's candidates in the policy's order, grouped once per class and attribute."""

    def __init__(
        self,
        class_candidates: Callable[[str], Candidates],
        policy: str,
        allocated: Collection[DeviceKey],
    ) -> None:
        self.class_candidates = class_candidates
        self.policy = policy
        self.allocated = allocated
        self._groupings: dict[tuple[str, str], tuple[Groups, dict[DeviceKey, Values]]] = {}

    def _grouping(self, class_name: str, attribute: str) -> tuple[Groups, dict[DeviceKey, Values]]:
        key = (class_name, attribute)
        found = self._groupings.get(key)
        if found is None:
            devices = [d for d, _ in self.class_candidates(class_name)]
            found = self._groupings[key] = group_devices(devices, attribute, self.allocated.__contains__)
        return found

    def ordered(self, req: Request) -> Candidates:
        assert req.order_attr is not None
        attr = req.order_attr
        groups, values = self._grouping(req.class_name, attr)
        fits = None
        demand = req.order_demand
        if demand is not None:
            others = {c: self._grouping(c, attr)[0] for c in demand}

            def fits(v: tuple[str, Any]) -> bool:
                for c, n in demand.items():
                    g = others[c].get(v)
                    if g is None or g.free < n:
                        return False
                return True

        ordered = order_candidates(
            self.class_candidates(req.class_name),
            values,
            groups,
            self.policy,
            fits,
            self.allocated.__contains__,
        )
        # Devices with binding conditions stay last among equals, as upstream's pool order has them.
        ordered.sort(key=lambda c: bool(c[0].binding_conditions))
        return ordered
