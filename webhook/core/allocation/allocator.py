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

This module is the search and the per-candidate checks; beside it: ``errors`` (the error
contract), ``requests`` (a claim's requests, read), ``constraints`` (``matchAttribute``,
``distinctAttribute``), ``counters`` (partitionable devices' shared counters), ``ordering`` (the
placement policies' candidate order) and ``results`` (what an allocation returns).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

from ..api.constants import ALLOCATION_RESULTS_MAX_SIZE
from ..api.nodematch import untolerated
from ..api.objects import Obj
from ..api.quantity import Quantity
from ..cel import CelCompileError, CelError, SelectorEngine
from ..cluster.allocated import SharedUse
from ..cluster.consumable import CapacityError, fits, resolve
from ..cluster.slices import Device, DeviceKey, Pool, device_id, device_selects_node
from .constraints import Constraint, claim_constraints
from .counters import Counters, PoolCounters, Taken
from .errors import INVALID_POOLS, AllocationError, Unsatisfiable, claim_ref
from .ordering import CandidateOrder, plan_order
from .requests import Request, claim_slots, parse_request
from .results import ClaimAllocation, DeviceResult, ShareIds, claim_config, node_selector, share_id_sequence

#: Upper bound on search steps for one Allocate call (upstream bounds the time instead).
DEFAULT_STEP_BUDGET = 200_000


class NodeCandidates(Protocol):
    """What the allocator needs to know about one node."""

    node: Obj
    pools: list[Pool]

    def class_candidates(self, class_name: str) -> list[tuple[Device, CelError | None]]:
        """Devices of usable pools passing the class selectors (or failing with a CEL error)."""
        ...


@dataclass(slots=True)
class _Choice:
    req: Request
    device: Device
    constraints: list[Constraint]
    counters: list[Taken]


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
        allocated_counters: PoolCounters | None = None,
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
        self._counters = Counters(node.pools, allocated_counters)
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
        self._slots: list[list[list[Request]]] = []
        self._constraints: list[list[Constraint]] = []
        self._results: list[list[DeviceResult]] = [[] for _ in claims]
        self._picked: dict[DeviceKey, set[int]] = {}  # devices taken by this attempt -> claims
        self._allocating: dict[DeviceKey, SharedUse] = {}  # this attempt's shares, per device
        self._new_share_id = self.share_ids or share_id_sequence()
        self._counters.reset()
        self._selected_sub: dict[tuple[int, int], Request] = {}
        self._steps = 0
        self._match_cache: dict[tuple[int, str, DeviceKey], bool] = {}
        self._order: CandidateOrder | None = None
        for ci, claim in enumerate(claims):
            self._slots.append(claim_slots(ci, claim, self._make_req))
            self._constraints.append(claim_constraints(claim))
        if self.policy is not None:
            self._order = CandidateOrder(self.node.class_candidates, self.policy, self.allocated)
            for ci in range(len(claims)):
                plan_order(self._slots[ci], self._constraints[ci], self.group_attributes)
        if not self._claim(0):
            if any(p.invalid for p in self.node.pools):
                raise Unsatisfiable(INVALID_POOLS)
            raise Unsatisfiable("cannot allocate all claims")
        return [self._finish(ci, claim) for ci, claim in enumerate(claims)]

    # -- preparation ---------------------------------------------------------------------------

    def _request_ref(self, req: Request) -> str:
        """Upstream's ``claim <ns>/<name>, request <name>``, a subrequest by its own name."""
        return f"claim {claim_ref(self._claims[req.claim_index])}, request {req.sub or req.base}"

    def _make_req(self, ci: int, r: Obj, base: str, sub: str, admin_allowed: bool) -> Request:
        req = parse_request(
            ci,
            self._claims[ci],
            r,
            base,
            sub,
            admin_allowed=admin_allowed,
            classes=self.classes,
            pools=self.node.pools,
        )
        if req.all_mode:
            for d, err in self._candidates(req):
                # Matching devices without the capacity even when unused are left out; the capacity
                # in use is checked as each is allocated (a full one then fails the request).
                if self._selectable(req, d, err) and self._capacity_fits(req, d, static=True):
                    req.all_devices.append(d)
            req.count = len(req.all_devices)
        return req

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

    def _device(self, req: Request, ri: int, di: int) -> bool:
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

    def _candidates(self, req: Request) -> list[tuple[Device, CelError | None]]:
        if req.order_attr is None:
            return self.node.class_candidates(req.class_name)
        if req.ordered is None:
            assert self._order is not None  # an order attribute is planned only under a policy
            req.ordered = self._order.ordered(req)
        return req.ordered

    def _in_use(self, req: Request, device: Device) -> bool:
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

    def _capacity_matters(self, req: Request, device: Device) -> bool:
        """Whether ``_capacity_fits`` can say no: not for a request naming no capacity on a device
        whose capacities have no rules and that nothing consumes (most exclusive devices), so that
        path costs a few attribute reads."""
        return (
            req.capacity is not None
            or device.capacity_rules
            or (bool(device.capacities) and (device.key in self.shares or device.key in self._allocating))
        )

    def _capacity_fits(
        self, req: Request, device: Device, *, static: bool = False, again: bool = False
    ) -> bool:
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

    def _selectable(self, req: Request, device: Device, class_error: CelError | None) -> bool:
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
                    f"claim {claim_ref(self._claims[req.claim_index])}: selector #{i} on device "
                    f"{device_id(device.key)}: CEL {kind} error: {e.message}"
                ) from None
        if ok and (device.node_name or device.all_nodes or device.node_selector is not None):
            ok = device_selects_node(device, self.node.node)
        self._match_cache[ck] = ok
        return ok

    def _try(self, req: Request, device: Device, *, must: bool) -> _Choice | None:
        ci = req.claim_index
        if self._in_use(req, device):
            return None
        shared = device.allow_multiple_allocations
        if shared and (device.key in self.shares or device.key in self._allocating):
            counters: list[Taken] | None = []  # an earlier share charged them
        else:
            counters = self._counters.take(device)
        if counters is None:
            return None
        if untolerated(device.taints, req.tolerations) is not None:
            self._counters.give_back(counters)
            return None
        added: list[Constraint] = []
        for c in self._constraints[ci]:
            if not c.applies(req.base, req.sub):
                continue
            if not c.add(device):
                for a in added:
                    a.remove()
                self._counters.give_back(counters)
                if must:
                    raise AllocationError(
                        f"claim {claim_ref(self._claims[ci])}, request {req.name}: cannot add device "
                        f"{device_id(device.key)} because a claim constraint would not be satisfied"
                    )
                return None
            added.append(c)
        # All mode checks the capacity in use only here (the other modes did before, unchanged since).
        if must and self._capacity_matters(req, device) and not self._capacity_fits(req, device, again=True):
            for a in added:
                a.remove()
            self._counters.give_back(counters)
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

    def _take_share(self, req: Request, device: Device) -> dict[str, Quantity]:
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
        self._counters.give_back(choice.counters)
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

    # -- result --------------------------------------------------------------------------------

    def _finish(self, ci: int, claim: Obj) -> ClaimAllocation:
        results = self._results[ci]
        selected = self._selected_sub
        config = claim_config(claim, lambda ri: selected.get((ci, ri)))
        return ClaimAllocation(
            list(results),
            config,
            node_selector(self.node.node, self.node.pools, results, self.binding_conditions),
        )
