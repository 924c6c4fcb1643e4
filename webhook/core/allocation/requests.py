"""A claim's device requests, read once per attempt into what the search needs: the class, the
selectors, the count (or all devices), admin access, tolerations and capacity requests. Malformed
requests are allocation errors worded as upstream's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..api.constants import ALLOCATION_RESULTS_MAX_SIZE
from ..api.objects import Obj, as_dict, as_list, spec
from ..api.quantity import Quantity, QuantityError
from ..cel import CelError
from ..cluster.consumable import parse_capacity_requests
from ..cluster.slices import Device, DeviceKey, Pool
from .errors import AllocationError, claim_ref


@dataclass(slots=True)
class Request:
    """One request, or one subrequest of ``firstAvailable``, with the search's state for it."""

    claim_index: int
    name: str  # result name: "req" or "req/sub"
    base: str
    sub: str
    class_name: str
    device_class: Obj
    selectors: list[str]
    all_mode: bool
    count: int
    admin: bool
    tolerations: list[Obj]
    capacity: dict[str, Quantity] | None = None  # ``capacity.requests``
    all_devices: list[Device] = field(default_factory=list)
    # Multi-allocatable devices this request holds a share of on the current path (one each).
    shared_picks: set[DeviceKey] = field(default_factory=set)
    # Placement: the attribute whose groups order the candidates (None: upstream's order), and, under
    # a matchAttribute constraint, how many devices per class the constraint asks for.
    order_attr: str | None = None
    order_demand: dict[str, int] | None = None
    ordered: list[tuple[Device, CelError | None]] | None = None


#: Builds one request: (claim index, the request's body, its name, its subrequest's name or "",
#: whether admin access may be asked).
MakeRequest = Callable[[int, Obj, str, str, bool], Request]


def claim_slots(ci: int, claim: Obj, make: MakeRequest) -> list[list[Request]]:
    """The claim's requests in spec order, each a list of alternatives (one unless
    ``firstAvailable``); more devices than a claim may hold is an allocation error."""
    slots: list[list[Request]] = []
    min_total = 0
    for raw in as_list(as_dict(spec(claim).get("devices")).get("requests")):
        r = as_dict(raw)
        rname = str(r.get("name", ""))
        if r.get("firstAvailable"):
            alts = [
                make(ci, as_dict(sub), rname, str(as_dict(sub).get("name", "")), False)
                for sub in as_list(r.get("firstAvailable"))
            ]
            min_total += min(a.count for a in alts)
            slots.append(alts)
        elif isinstance(r.get("exactly"), dict):
            req = make(ci, r["exactly"], rname, "", True)
            min_total += req.count
            slots.append([req])
        else:
            raise AllocationError(
                f"claim {claim_ref(claim)}, request {rname}: missing device class name "
                "(unsupported request type?)"
            )
    if min_total > ALLOCATION_RESULTS_MAX_SIZE:
        raise AllocationError(
            f"claim {claim_ref(claim)}: number of requested devices {min_total} exceeds the claim "
            f"limit of {ALLOCATION_RESULTS_MAX_SIZE}"
        )
    return slots


def parse_request(
    ci: int,
    claim: Obj,
    r: Obj,
    base: str,
    sub: str,
    *,
    admin_allowed: bool,
    classes: Callable[[str], Obj | None],
    pools: list[Pool],
) -> Request:
    """One request's body checked and read; an All-mode request's devices are the caller's to list."""
    full = f"{base}/{sub}" if sub else base
    class_name = r.get("deviceClassName")
    if not isinstance(class_name, str) or not class_name:
        raise AllocationError(
            f"claim {claim_ref(claim)}, request {full}: missing device class name (unsupported request type?)"
        )
    dc = classes(class_name)
    if dc is None:
        raise AllocationError(
            f"claim {claim_ref(claim)}, request {full}: could not retrieve device class "
            f'{class_name}: deviceclass.resource.k8s.io "{class_name}" not found'
        )
    selectors: list[str] = []
    for i, sel in enumerate(as_list(r.get("selectors"))):
        expr = as_dict(as_dict(sel).get("cel")).get("expression")
        if not isinstance(expr, str):
            raise AllocationError(
                f"claim {claim_ref(claim)}, request {full}, selector #{i}: CEL expression "
                "empty (unsupported selector type?)"
            )
        selectors.append(expr)
    mode = r.get("allocationMode") or "ExactCount"
    count = r.get("count", 1)
    if mode not in ("ExactCount", "All"):
        raise AllocationError(f"claim {claim_ref(claim)}, request {full}: unsupported count mode {mode}")
    if mode == "ExactCount" and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
        raise AllocationError(f"claim {claim_ref(claim)}, request {full}: invalid count {count!r}")
    try:
        capacity = parse_capacity_requests(r["capacity"]) if r.get("capacity") is not None else None
    except QuantityError as e:
        raise AllocationError(f"claim {claim_ref(claim)}, request {full}: capacity requests: {e}") from None
    req = Request(
        claim_index=ci,
        name=full,
        base=base,
        sub=sub,
        class_name=class_name,
        device_class=dc,
        selectors=selectors,
        all_mode=mode == "All",
        count=count if mode == "ExactCount" else 0,
        admin=admin_allowed and r.get("adminAccess") is True,
        tolerations=[t for t in as_list(r.get("tolerations")) if isinstance(t, dict)],
        capacity=capacity,
    )
    if req.all_mode:
        for pool in pools:
            if pool.incomplete:
                raise AllocationError(
                    f"claim {claim_ref(claim)}, request {full}: asks for all devices, but "
                    f"resource pool {pool.id} is currently being updated"
                )
            if pool.invalid:
                raise AllocationError(
                    f"claim {claim_ref(claim)}, request {full}: asks for all devices, but "
                    f"resource pool {pool.id} is currently invalid"
                )
    return req
