"""The structured allocator: exhaustive backtracking, first complete solution wins.

Mirrors upstream's ``Allocate(node, claims)`` (1.37's incubating allocator, the one its default gates
pick): claims in the given order (user claims, then the special claim), requests in spec order,
subrequests (``firstAvailable``) in order, then the n-th device of a request. Candidates are tried
pools -> slices -> devices. Per candidate, checks run in upstream order: in use, class selectors,
request selectors, per-device node selection, binding conditions, consumable capacity, counters,
taints, constraints. A CEL error is an allocation error, never a silent non-match; an unsatisfiable
node is ``None``.

Binding conditions (KEP-5007, ``DRADeviceBindingConditions``): with the gate off (``binding_conditions``
False, releases before 1.36) a device that has them is never picked. With it on such a device is a
candidate, tried after the others (its pool sorts last in ``slices.gather_pools``, and a policy's
order keeps it last), and its result carries ``bindingConditions`` and ``bindingFailureConditions``;
a device with ``bindsToNode`` pins the allocation's node selector to the node it was allocated for.

Consumable capacity (KEP-5075, ``cluster/consumable``): a device with ``allowMultipleAllocations`` is
never in use through its shares; it takes another share (in another request or claim: one request
takes a device once, as upstream's ordered search does) while the request's capacity fits beside
what allocated claims, in-flight reservations and this allocation's earlier shares consume. Its
result carries a ``shareID`` (from the caller's ``share_ids``: the core draws no random numbers) and
the ``consumedCapacity``. Its counters are charged by its first share only. Every device, shared or
not, must hold the request's capacity requests.

draxr's placement policies (``policy``) change only the order in which each request tries its
candidates (``topology.order_candidates``): the first complete solution is then the policy's
preferred one. Why that is correct and bounded: the search tries the same candidates against the
same checks, only in another order, so every answer still passes every check (constraints
included), a node is unsatisfiable under a policy exactly when it is under upstream's order, and
the step budget bounds the search as before. The order costs one pass over a request's candidates
(grouped once per class and attribute per call) and a sort, before the search. Without ``policy``
(``--policy upstream``) candidates keep upstream's order: first fit.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

from ..api.constants import ALLOCATION_RESULTS_MAX_SIZE
from ..api.nodematch import untolerated
from ..api.objects import Obj, as_dict, as_list, meta, spec
from ..api.objects import name as name_of
from ..api.quantity import Quantity, QuantityError
from ..cel import CelCompileError, CelError, SelectorEngine
from ..cluster.allocated import Share, SharedUse
from ..cluster.consumable import CapacityError, fits, parse_capacity_requests, resolve
from ..cluster.slices import Device, DeviceKey, Pool, device_id, device_selects_node
from ..cluster.topology import Groups, Values, group_devices, order_candidates, values_of

_ZERO = Quantity.parse(0)
_Taken = tuple[tuple[str, str], str, str, Quantity]  # (pool, counter set, counter, amount)

#: Upper bound on search steps for one Allocate call (upstream bounds the time instead).
DEFAULT_STEP_BUDGET = 200_000


#: Upstream's Filter reason when allocation failed and some pool was invalid.
INVALID_POOLS = "invalid resource pools were encountered"

#: Where a share's ``shareID`` comes from (a fresh RFC 4122 UID on each call, lowercase).
ShareIds = Callable[[], str]


def share_id_sequence(start: int = 1) -> ShareIds:
    """Share IDs counted from ``start`` (``00000000-0000-0000-0000-000000000001``, ...): unique within
    one sequence only, so for tests and for callers that persist nothing. A scheduler whose results
    are written takes IDs that are unique everywhere (``uuid4``)."""
    counter = itertools.count(start)
    return lambda: str(uuid.UUID(int=next(counter)))


class AllocationError(Exception):
    """Aborts the scheduling attempt (upstream returns these from ``Allocate`` as errors)."""


class Unsatisfiable(Exception):
    """The claims cannot be allocated on this node; ``str()`` is the Filter reason."""


class NodeCandidates(Protocol):
    """What the allocator needs to know about one node."""

    node: Obj
    pools: list[Pool]

    def class_candidates(self, class_name: str) -> list[tuple[Device, CelError | None]]:
        """Devices of usable pools passing the class selectors (or failing with a CEL error)."""
        ...


@dataclass(slots=True)
class DeviceResult:
    request: str
    device: Device
    admin_access: bool = False
    tolerations: list[Obj] = field(default_factory=list)
    #: KEP-5007: the device's binding conditions, copied (empty with the gate off).
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    #: A share of a multi-allocatable device: its ID, and what it consumes (None when nothing).
    share_id: str | None = None
    consumed: dict[str, Quantity] | None = None

    def to_api(self) -> Obj:
        out: Obj = {
            "request": self.request,
            "driver": self.device.driver,
            "pool": self.device.pool,
            "device": self.device.name,
        }
        if self.admin_access:
            out["adminAccess"] = True
        if self.tolerations:
            out["tolerations"] = self.tolerations
        if self.binding_conditions:
            out["bindingConditions"] = list(self.binding_conditions)
        if self.binding_failure_conditions:
            out["bindingFailureConditions"] = list(self.binding_failure_conditions)
        if self.share_id is not None:
            out["shareID"] = self.share_id
        if self.consumed:
            out["consumedCapacity"] = {k: q.canonical() for k, q in self.consumed.items()}
        return out


@dataclass(slots=True)
class ClaimAllocation:
    results: list[DeviceResult]
    config: list[Obj]
    node_selector: Obj | None

    def to_api(self) -> Obj:
        """``status.allocation`` of a ResourceClaim."""
        devices: Obj = {"results": [r.to_api() for r in self.results]}
        if self.config:
            devices["config"] = self.config
        out: Obj = {"devices": devices}
        if self.node_selector is not None:
            out["nodeSelector"] = self.node_selector
        return out

    @property
    def device_keys(self) -> list[DeviceKey]:
        """Every device the allocation holds, taken or shared (admin access holds none)."""
        return [r.device.key for r in self.results if not r.admin_access]

    @property
    def dedicated_keys(self) -> list[DeviceKey]:
        """The devices the allocation takes: its results without a ``shareID``."""
        return [r.device.key for r in self.results if not r.admin_access and r.share_id is None]

    @property
    def shares(self) -> list[Share]:
        """Its shares of multi-allocatable devices (what an in-flight reservation holds)."""
        return [
            Share(r.device.key, r.share_id, r.consumed or {})
            for r in self.results
            if not r.admin_access and r.share_id is not None
        ]


@dataclass(slots=True)
class _Req:
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


class _Constraint:
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


@dataclass(slots=True)
class _Choice:
    req: _Req
    device: Device
    constraints: list[_Constraint]
    counters: list[_Taken]


@dataclass(slots=True)
class _ShareChoice(_Choice):
    """A share of a multi-allocatable device, and what it consumes."""

    consumed: dict[str, Quantity]


class Allocator:
    """One allocation attempt for one node over several claims (built per Filter call)."""

    def __init__(
        self,
        node: NodeCandidates,
        classes: Callable[[str], Obj | None],
        cel: SelectorEngine,
        allocated: Collection[DeviceKey],
        allocated_counters: Callable[[Pool], dict[str, dict[str, Quantity]]] | None = None,
        step_budget: int = DEFAULT_STEP_BUDGET,
        policy: str | None = None,
        group_attributes: Callable[[str], tuple[str, ...]] | None = None,
        shares: Mapping[DeviceKey, SharedUse] | None = None,
        share_ids: ShareIds | None = None,
        binding_conditions: bool = False,
    ) -> None:
        """``policy``: ``binpack`` or ``spread`` orders candidates by topology group (the attribute of
        a request's ``matchAttribute`` constraint, else the first of ``group_attributes(class)``);
        None keeps upstream's order. ``allocated``: the devices taken (results without a
        ``shareID``, reservations); ``shares``: the devices with shares, and what they consume;
        ``share_ids``: where new shares' IDs come from (default: ``share_id_sequence()`` per call);
        ``binding_conditions``: ``DRADeviceBindingConditions`` is on (devices with binding conditions
        may be picked, their conditions copied into the results)."""
        self.node = node
        self.classes = classes
        self.cel = cel
        self.allocated = allocated
        self.allocated_counters = allocated_counters or (lambda pool: {})
        self._already: dict[tuple[str, str], dict[str, dict[str, Quantity]]] = {}
        self.budget = step_budget
        self.policy = policy
        self.group_attributes = group_attributes
        self.shares: Mapping[DeviceKey, SharedUse] = shares if shares is not None else {}
        self.share_ids = share_ids
        self.binding_conditions = binding_conditions

    # -- public ------------------------------------------------------------------------------

    def allocate(self, claims: list[Obj]) -> list[ClaimAllocation]:
        """Allocate all claims together; raises Unsatisfiable or AllocationError."""
        self._claims = claims
        self._slots: list[list[list[_Req]]] = []
        self._constraints: list[list[_Constraint]] = []
        self._results: list[list[DeviceResult]] = [[] for _ in claims]
        self._picked: dict[DeviceKey, set[int]] = {}  # devices taken by this attempt -> claims
        self._allocating: dict[DeviceKey, SharedUse] = {}  # this attempt's shares, per device
        self._new_share_id = self.share_ids or share_id_sequence()
        self._consumed: dict[tuple[str, str], dict[str, dict[str, Quantity]]] = {}
        self._selected_sub: dict[tuple[int, int], _Req] = {}
        self._steps = 0
        self._match_cache: dict[tuple[int, str, DeviceKey], bool] = {}
        self._groupings: dict[tuple[str, str], tuple[Groups, dict[DeviceKey, Values]]] = {}
        for ci, claim in enumerate(claims):
            self._prepare_claim(ci, claim)
        if self.policy is not None:
            for ci in range(len(claims)):
                self._plan_order(ci)
        if not self._claim(0):
            if any(p.invalid for p in self.node.pools):
                raise Unsatisfiable(INVALID_POOLS)
            raise Unsatisfiable("cannot allocate all claims")
        return [self._finish(ci, claim) for ci, claim in enumerate(claims)]

    # -- preparation ---------------------------------------------------------------------------

    def _claim_ref(self, ci: int) -> str:
        m = meta(self._claims[ci])
        return f"{m.get('namespace', '')}/{m.get('name', '')}"

    def _request_ref(self, req: _Req) -> str:
        """Upstream's ``claim <ns>/<name>, request <name>``, a subrequest by its own name."""
        return f"claim {self._claim_ref(req.claim_index)}, request {req.sub or req.base}"

    def _prepare_claim(self, ci: int, claim: Obj) -> None:
        devices = as_dict(spec(claim).get("devices"))
        slots: list[list[_Req]] = []
        min_total = 0
        for raw in as_list(devices.get("requests")):
            r = as_dict(raw)
            rname = str(r.get("name", ""))
            if r.get("firstAvailable"):
                alts = [
                    self._make_req(
                        ci, as_dict(sub), rname, str(as_dict(sub).get("name", "")), admin_allowed=False
                    )
                    for sub in as_list(r.get("firstAvailable"))
                ]
                min_total += min(a.count for a in alts)
                slots.append(alts)
            elif isinstance(r.get("exactly"), dict):
                req = self._make_req(ci, r["exactly"], rname, "", admin_allowed=True)
                min_total += req.count
                slots.append([req])
            else:
                raise AllocationError(
                    f"claim {self._claim_ref(ci)}, request {rname}: missing device class name "
                    "(unsupported request type?)"
                )
        if min_total > ALLOCATION_RESULTS_MAX_SIZE:
            raise AllocationError(
                f"claim {self._claim_ref(ci)}: number of requested devices {min_total} exceeds the claim "
                f"limit of {ALLOCATION_RESULTS_MAX_SIZE}"
            )
        constraints: list[_Constraint] = []
        for i, raw in enumerate(as_list(devices.get("constraints"))):
            c = as_dict(raw)
            reqs = [str(x) for x in as_list(c.get("requests"))]
            if isinstance(c.get("matchAttribute"), str):
                constraints.append(_Constraint(c["matchAttribute"], reqs, distinct=False))
            elif isinstance(c.get("distinctAttribute"), str):
                constraints.append(_Constraint(c["distinctAttribute"], reqs, distinct=True))
            else:
                raise AllocationError(
                    f"claim {self._claim_ref(ci)}, constraint #{i}: "
                    "empty constraint (unsupported constraint type?)"
                )
        self._slots.append(slots)
        self._constraints.append(constraints)

    def _make_req(self, ci: int, r: Obj, base: str, sub: str, *, admin_allowed: bool) -> _Req:
        full = f"{base}/{sub}" if sub else base
        class_name = r.get("deviceClassName")
        if not isinstance(class_name, str) or not class_name:
            raise AllocationError(
                f"claim {self._claim_ref(ci)}, request {full}: missing device class name "
                "(unsupported request type?)"
            )
        dc = self.classes(class_name)
        if dc is None:
            raise AllocationError(
                f"claim {self._claim_ref(ci)}, request {full}: could not retrieve device class "
                f'{class_name}: deviceclass.resource.k8s.io "{class_name}" not found'
            )
        selectors: list[str] = []
        for i, sel in enumerate(as_list(r.get("selectors"))):
            expr = as_dict(as_dict(sel).get("cel")).get("expression")
            if not isinstance(expr, str):
                raise AllocationError(
                    f"claim {self._claim_ref(ci)}, request {full}, selector #{i}: CEL expression "
                    "empty (unsupported selector type?)"
                )
            selectors.append(expr)
        mode = r.get("allocationMode") or "ExactCount"
        count = r.get("count", 1)
        if mode not in ("ExactCount", "All"):
            raise AllocationError(
                f"claim {self._claim_ref(ci)}, request {full}: unsupported count mode {mode}"
            )
        if mode == "ExactCount" and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
            raise AllocationError(f"claim {self._claim_ref(ci)}, request {full}: invalid count {count!r}")
        try:
            capacity = parse_capacity_requests(r["capacity"]) if r.get("capacity") is not None else None
        except QuantityError as e:
            raise AllocationError(
                f"claim {self._claim_ref(ci)}, request {full}: capacity requests: {e}"
            ) from None
        req = _Req(
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
            for pool in self.node.pools:
                if pool.incomplete:
                    raise AllocationError(
                        f"claim {self._claim_ref(ci)}, request {full}: asks for all devices, but "
                        f"resource pool {pool.id} is currently being updated"
                    )
                if pool.invalid:
                    raise AllocationError(
                        f"claim {self._claim_ref(ci)}, request {full}: asks for all devices, but "
                        f"resource pool {pool.id} is currently invalid"
                    )
            for d, err in self._candidates(req):
                # Matching devices without the capacity even when unused are left out; the capacity
                # in use is checked as each is allocated (a full one then fails the request).
                if self._selectable(req, d, err) and self._capacity_fits(req, d, static=True):
                    req.all_devices.append(d)
            req.count = len(req.all_devices)
        return req

    # -- placement order -----------------------------------------------------------------------

    def _plan_order(self, ci: int) -> None:
        """Which attribute orders each request's candidates, and what its constraint asks for."""
        for alts in self._slots[ci]:
            for req in alts:
                if req.all_mode:
                    continue
                for c in self._constraints[ci]:
                    if not c.distinct and c.applies(req.base, req.sub):
                        req.order_attr = c.attribute
                        req.order_demand = self._constraint_demand(ci, c)
                        break
                else:
                    attrs = self.group_attributes(req.class_name) if self.group_attributes else ()
                    if attrs:
                        req.order_attr = attrs[0]

    def _constraint_demand(self, ci: int, constraint: _Constraint) -> dict[str, int]:
        demand: dict[str, int] = {}
        for alts in self._slots[ci]:
            first = alts[0]  # of subrequests, the preferred one
            if constraint.applies(first.base, first.sub) and not first.all_mode:
                demand[first.class_name] = demand.get(first.class_name, 0) + first.count
        return demand

    def _grouping(self, class_name: str, attribute: str) -> tuple[Groups, dict[DeviceKey, Values]]:
        key = (class_name, attribute)
        found = self._groupings.get(key)
        if found is None:
            devices = [d for d, _ in self.node.class_candidates(class_name)]
            found = self._groupings[key] = group_devices(devices, attribute, self.allocated.__contains__)
        return found

    def _ordered(self, req: _Req) -> list[tuple[Device, CelError | None]]:
        assert req.order_attr is not None
        assert self.policy is not None
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
            self.node.class_candidates(req.class_name),
            values,
            groups,
            self.policy,
            fits,
            self.allocated.__contains__,
        )
        # Devices with binding conditions stay last among equals, as upstream's pool order has them.
        ordered.sort(key=lambda c: bool(c[0].binding_conditions))
        return ordered

    # -- search --------------------------------------------------------------------------------

    def _claim(self, ci: int) -> bool:
        if ci >= len(self._claims):
            return True
        return self._request(ci, 0)

    def _request(self, ci: int, ri: int) -> bool:
        if ri >= len(self._slots[ci]):
            return self._claim(ci + 1)
        for alt in self._slots[ci][ri]:
            if alt.all_mode and not alt.all_devices:
                continue
            if self._device(alt, ri, 0):
                self._selected_sub[(ci, ri)] = alt
                return True
        return False

    def _device(self, req: _Req, ri: int, di: int) -> bool:
        ci = req.claim_index
        if di >= req.count:
            return self._request(ci, ri + 1)
        if len(self._results[ci]) + req.count - di > ALLOCATION_RESULTS_MAX_SIZE:
            return False
        self._steps += 1
        if self._steps > self.budget:
            raise Unsatisfiable("timed out trying to allocate devices")
        if req.all_mode:
            device = req.all_devices[di]
            choice = self._try(req, device, must=True)
            if choice is None:
                return False
            if self._device(req, ri, di + 1):
                return True
            self._undo(choice)
            return False
        # _capacity_matters, inlined (every candidate passes here); what this attempt consumes is the
        # same at each candidate (a deeper level undoes its shares before the next one is tried).
        asks, shares, allocating = req.capacity is not None, self.shares, self._allocating
        consumed = bool(shares) or bool(allocating)
        for device, err in self._candidates(req):
            if self._in_use(req, device):
                continue
            if not self._selectable(req, device, err):
                continue
            if (
                asks
                or device.capacity_rules
                or (consumed and device.capacities and (device.key in shares or device.key in allocating))
            ) and not self._capacity_fits(req, device):
                continue
            choice = self._try(req, device, must=False)
            if choice is None:
                continue
            if self._device(req, ri, di + 1):
                return True
            self._undo(choice)
        return False

    def _candidates(self, req: _Req) -> list[tuple[Device, CelError | None]]:
        if req.order_attr is None:
            return self.node.class_candidates(req.class_name)
        if req.ordered is None:
            req.ordered = self._ordered(req)
        return req.ordered

    def _in_use(self, req: _Req, device: Device) -> bool:
        """Upstream's in-use checks (a share never takes its device), and one share of a device per
        request (upstream's search moves on past a request's last pick)."""
        key = device.key
        claims = self._picked.get(key)
        if req.admin:
            if claims and req.claim_index in claims:
                return True
        elif key in self.allocated or claims:
            return True
        return device.allow_multiple_allocations and key in req.shared_picks

    def _capacity_matters(self, req: _Req, device: Device) -> bool:
        """Whether ``_capacity_fits`` can say no: not for a request naming no capacity on a device
        whose capacities have no rules and that nothing consumes (most exclusive devices), so that
        path costs a few attribute reads."""
        return (
            req.capacity is not None
            or device.capacity_rules
            or (bool(device.capacities) and (device.key in self.shares or device.key in self._allocating))
        )

    def _capacity_fits(self, req: _Req, device: Device, *, static: bool = False, again: bool = False) -> bool:
        """``CmpRequestOverCapacity``: another share of ``req`` fits the device beside what allocated
        claims, reservations and this attempt consume (``static``: an unused device)."""
        already = allocating = None
        if not static:
            use = self.shares.get(device.key)
            already = use.consumed if use is not None else None
            mine = self._allocating.get(device.key)
            allocating = mine.consumed if mine is not None else None
        try:
            return fits(req.capacity, device.capacities, already, allocating)
        except CapacityError as e:
            what = "rechecking" if again else "checking"
            name = device.name if static else device_id(device.key)
            raise AllocationError(
                f"{self._request_ref(req)}: {what} capacity for device {name}: {e}"
            ) from None

    def _selectable(self, req: _Req, device: Device, class_error: CelError | None) -> bool:
        if device.binding_conditions and not self.binding_conditions:
            return False  # DRADeviceBindingConditions is off: such devices are never picked
        if class_error is not None:
            kind = "compile" if isinstance(class_error, CelCompileError) else "runtime"
            index = getattr(class_error, "selector_index", 0)
            raise AllocationError(
                f"class {req.class_name}: selector #{index} on device {device_id(device.key)}: "
                f"CEL {kind} error: {class_error.message}"
            )
        ck = (req.claim_index, req.name, device.key)
        cached = self._match_cache.get(ck)
        if cached is not None:
            return cached
        ok = True
        for i, expr in enumerate(req.selectors):
            try:
                if not self.cel.matches(expr, device):
                    ok = False
                    break
            except CelError as e:
                kind = "compile" if isinstance(e, CelCompileError) else "runtime"
                raise AllocationError(
                    f"claim {self._claim_ref(req.claim_index)}: selector #{i} on device "
                    f"{device_id(device.key)}: CEL {kind} error: {e.message}"
                ) from None
        if ok and (device.node_name or device.all_nodes or device.node_selector is not None):
            ok = device_selects_node(device, self.node.node)
        self._match_cache[ck] = ok
        return ok

    def _try(self, req: _Req, device: Device, *, must: bool) -> _Choice | None:
        ci = req.claim_index
        if self._in_use(req, device):
            return None
        shared = device.allow_multiple_allocations
        if shared and (device.key in self.shares or device.key in self._allocating):
            counters: list[_Taken] | None = []  # an earlier share charged them
        else:
            counters = self._take_counters(device)
        if counters is None:
            return None
        if untolerated(device.taints, req.tolerations) is not None:
            self._return_counters(counters)
            return None
        added: list[_Constraint] = []
        for c in self._constraints[ci]:
            if not c.applies(req.base, req.sub):
                continue
            if not c.add(device):
                for a in added:
                    a.remove()
                self._return_counters(counters)
                if must:
                    raise AllocationError(
                        f"claim {self._claim_ref(ci)}, request {req.name}: cannot add device "
                        f"{device_id(device.key)} because a claim constraint would not be satisfied"
                    )
                return None
            added.append(c)
        # All mode checks the capacity in use only here (the other modes did before, unchanged since).
        if must and self._capacity_matters(req, device) and not self._capacity_fits(req, device, again=True):
            for a in added:
                a.remove()
            self._return_counters(counters)
            return None
        result = DeviceResult(
            req.name,
            device,
            admin_access=req.admin,
            tolerations=list(req.tolerations),
            binding_conditions=device.binding_conditions,
            binding_failure_conditions=device.binding_failure_conditions,
        )
        self._results[ci].append(result)
        if shared:
            consumed = self._take_share(req, device)
            result.share_id = self._new_share_id()
            result.consumed = consumed or None
            return _ShareChoice(req, device, added, counters, consumed)
        self._picked.setdefault(device.key, set()).add(ci)
        return _Choice(req, device, added, counters)

    def _take_share(self, req: _Req, device: Device) -> dict[str, Quantity]:
        """``GetConsumedCapacityFromRequest``, added to what this attempt consumes of the device."""
        try:
            consumed = resolve(req.capacity, device.capacities) or {}
        except CapacityError as e:  # fits() resolved the same already
            where = device_id(device.key)
            raise AllocationError(
                f"{self._request_ref(req)}: computing consumed capacity for device {where}: {e}"
            ) from None
        use = self._allocating.get(device.key)
        if use is None:
            use = self._allocating[device.key] = SharedUse()
        use.shares += 1
        for name, q in consumed.items():
            use.consumed[name] = use.consumed.get(name, Fraction(0)) + q.value
        req.shared_picks.add(device.key)
        return consumed

    def _undo(self, choice: _Choice) -> None:
        ci = choice.req.claim_index
        for c in choice.constraints:
            c.remove()
        if type(choice) is _ShareChoice:
            self._return_share(choice)
        else:
            self._picked[choice.device.key].discard(ci)
        self._return_counters(choice.counters)
        self._results[ci].pop()

    def _return_share(self, choice: _ShareChoice) -> None:
        key = choice.device.key
        choice.req.shared_picks.discard(key)
        use = self._allocating[key]
        use.shares -= 1
        if use.shares == 0:
            del self._allocating[key]
        else:
            for name, q in choice.consumed.items():
                use.consumed[name] -= q.value

    # -- counters (partitionable devices) ------------------------------------------------------

    def _pool_of(self, device: Device) -> Pool | None:
        for p in self.node.pools:
            if p.driver == device.driver and p.name == device.pool:
                return p
        return None

    def _take_counters(self, device: Device) -> list[_Taken] | None:
        if not device.consumes_counters:
            return []
        pool = self._pool_of(device)
        if pool is None:
            return None
        already = self._already.get(pool.key)
        if already is None:
            already = self._already[pool.key] = self.allocated_counters(pool)
        consumed = self._consumed.setdefault(pool.key, {})
        taken: list[_Taken] = []
        for set_name, counters in device.consumes_counters:
            available = pool.counter_sets.get(set_name)
            if available is None:
                self._return_counters(taken)
                return None
            bucket = consumed.setdefault(set_name, {})
            for cname, q in counters.items():
                total = available.get(cname)
                if total is None:
                    continue
                used = bucket.get(cname, _ZERO).value
                pre = already.get(set_name, {}).get(cname, _ZERO).value
                if total.value < pre + used + q.value:
                    self._return_counters(taken)
                    return None
                bucket[cname] = Quantity(used + q.value)
                taken.append((pool.key, set_name, cname, q))
        return taken

    def _return_counters(self, taken: list[_Taken]) -> None:
        for pool_key, set_name, cname, q in taken:
            bucket = self._consumed[pool_key][set_name]
            bucket[cname] = Quantity(bucket[cname].value - q.value)

    # -- result --------------------------------------------------------------------------------

    def _finish(self, ci: int, claim: Obj) -> ClaimAllocation:
        results = self._results[ci]
        devices = as_dict(spec(claim).get("devices"))
        requests = [as_dict(r) for r in as_list(devices.get("requests"))]
        config: list[Obj] = []
        class_ranges: dict[str, tuple[int, int]] = {}
        for ri in range(len(requests)):
            chosen = self._selected_sub.get((ci, ri))
            if chosen is None:
                continue
            rng = class_ranges.get(chosen.class_name)
            if rng is not None:
                for i in range(*rng):
                    config[i]["requests"].append(chosen.name)
                continue
            start = len(config)
            for cfg in as_list(spec(chosen.device_class).get("config")):
                entry = {k: v for k, v in as_dict(cfg).items() if k != "requests"}
                config.append({"source": "FromClass", "requests": [chosen.name], **entry})
            class_ranges[chosen.class_name] = (start, len(config))
        for cfg in as_list(devices.get("config")):
            c = as_dict(cfg)
            wanted = [str(x) for x in as_list(c.get("requests"))]
            body = {k: v for k, v in c.items() if k != "requests"}
            if not wanted:
                config.append({"source": "FromClaim", **body})
                continue
            for ri, r in enumerate(requests):
                chosen = self._selected_sub.get((ci, ri))
                if r.get("name") in wanted or (chosen is not None and chosen.sub and chosen.name in wanted):
                    config.append({"source": "FromClaim", "requests": wanted, **body})
                    break
        for entry in config:
            if len(entry.get("requests", [])) == len(requests):
                entry.pop("requests")
        return ClaimAllocation(list(results), config, self._node_selector(results))

    def _node_selector(self, results: list[DeviceResult]) -> Obj | None:
        fields: list[Obj] = []
        exprs: list[Obj] = []
        slices = {s.name: s for p in self.node.pools for s in p.slices}
        for r in results:
            if r.device.binds_to_node and self.binding_conditions:
                return _pinned(name_of(self.node.node))
            sl = slices.get(r.device.slice_name)
            if sl is None:
                continue
            if sl.per_device:
                node_name, selector = r.device.node_name, r.device.node_selector
            else:
                node_name, selector = sl.node_name, sl.node_selector
            if node_name:
                return _pinned(node_name)
            if selector is not None:
                terms = as_list(selector.get("nodeSelectorTerms"))
                if len(terms) > 1:
                    raise AllocationError(f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms")
                if terms:
                    _merge_requirements(as_list(as_dict(terms[0]).get("matchFields")), fields)
                    _merge_requirements(as_list(as_dict(terms[0]).get("matchExpressions")), exprs)
        if not fields and not exprs:
            return None
        term: Obj = {}
        if exprs:
            term["matchExpressions"] = exprs
        if fields:
            term["matchFields"] = fields
        return {"nodeSelectorTerms": [term]}


def _pinned(node_name: str) -> Obj:
    """A node selector that selects one node by name (``matchFields`` on ``metadata.name``)."""
    return {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
        ]
    }


def _merge_requirements(source: list[Any], into: list[Obj]) -> None:
    for raw in source:
        req = as_dict(raw)
        values = set(as_list(req.get("values")))
        if not any(
            e.get("key") == req.get("key")
            and e.get("operator") == req.get("operator")
            and set(as_list(e.get("values"))) == values
            for e in into
        ):
            into.append(req)
