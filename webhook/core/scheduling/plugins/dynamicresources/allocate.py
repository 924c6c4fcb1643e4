"""DynamicResources' allocation on one node: the user claims still to allocate and the special claim
(its requests from ``createRequestsAndMappings`` for the names DRA serves there) in ONE call of the
structured allocator, so no device is picked twice; draxr's alignment constraints on the special
claim, relaxed for ``draxr.io/align: preferred`` when nothing aligned exists."""

from __future__ import annotations

from collections.abc import Callable

from ....allocation.allocator import Allocator
from ....allocation.errors import Unsatisfiable
from ....allocation.placement import Placement, record_alignment
from ....allocation.policy import UPSTREAM
from ....allocation.results import ShareIds
from ....api.alignment import NONE, PREFERRED, REQUIRED
from ....api.capacityrequests import capacity_by_class
from ....api.constants import EXTENDED_RESOURCE_CLAIM_ANNOTATION, SPECIAL_CLAIM_IN_MEMORY_NAME
from ....api.objects import Obj, namespace
from ....cluster.slices import Device
from ....cluster.state import ClusterState
from ....cluster.topology import Value, alignment_constraints, constraint_demand, values_of, whole_groups
from ...framework import UserClaim
from .filter import cannot_align, unalignable
from .mappings import create_requests_and_mappings
from .state import DraState, DraViews, NodeFit, NodePlan


def allocate(
    state: ClusterState,
    policy: str,
    step_budget: int,
    pod: Obj,
    dra: DraState,
    views: DraViews,
    plan: NodePlan,
    share_ids: ShareIds,
) -> NodeFit:
    """Raises ``Unsatisfiable`` (the node does not fit) or ``AllocationError`` (which aborts the
    attempt: a CEL runtime error, an invalid pool). ``share_ids``: the IDs of new shares."""
    requests: list[Obj] = []
    mappings: list[Obj] = []
    claims: list[Obj] = list(dra.to_allocate)
    # Where DRA serves every name the pod's classes back, PreFilter built all of it already.
    prebuilt = dra.built is not None and plan.dra == dra.classes
    if prebuilt and dra.built is not None:
        requests, mappings = dra.built
    elif plan.dra:
        capacity = capacity_by_class(plan.dra.values(), state.classes.get)
        requests, mappings = create_requests_and_mappings(
            pod, plan.dra, tolerations=state.classes.tolerations, capacity=capacity
        )
    placement = None
    constraints: list[Obj] = []
    scopes = dra.scopes
    if requests and (dra.groups or policy == UPSTREAM):
        placement = Placement(policy, dra.align)
        if dra.align != NONE and prebuilt:
            constraints, placement.notes = dra.constraints, list(dra.notes)
        elif dra.align != NONE:
            constraints, placement.notes = alignment_constraints(
                requests, dra.groups, state.capacity.largest_group
            )
            scopes = [(str(c["matchAttribute"]), constraint_demand(c, requests)) for c in constraints]
    if requests:
        claims.append(in_memory_special_claim(pod, requests, constraints))
    users = [UserClaim(c) for c in dra.user_claims]
    if not claims:
        return NodeFit([], plan, None, [], [], users)
    nd = state.node_devices(plan.node)
    assert nd is not None
    taken = state.allocated
    allocator = Allocator(
        nd,
        state.classes.get,
        state.cel,
        taken.devices,
        taken.allocated_counters,
        step_budget,
        policy=None if policy == UPSTREAM else policy,
        group_attributes=_attributes_of(dra.groups) if dra.groups else None,
        shares=taken.shares,
        share_ids=share_ids,
        binding_conditions=state.devices.binding_conditions,
    )
    relaxed = False
    checked = prebuilt and dra.align == REQUIRED  # by Filter, unless a CEL error lurks
    if constraints and not checked:
        unaligned = unalignable(state, views, plan.node, scopes)
        if unaligned is not None and dra.align != PREFERRED:
            raise Unsatisfiable(cannot_align(unaligned))
        if unaligned is not None:
            relaxed = True
            claims[-1] = in_memory_special_claim(pod, requests, [])
    try:
        results = allocator.allocate(claims)
    except Unsatisfiable:
        if not constraints or relaxed or dra.align != PREFERRED:
            raise
        relaxed = True
        claims[-1] = in_memory_special_claim(pod, requests, [])
        results = allocator.allocate(claims)
    by_claim = {id(c): a for c, a in zip(claims, results, strict=True)}
    for uc in users:
        uc.allocation = by_claim.get(id(uc.claim))
    special = results[-1] if requests else None
    if placement is not None and special is not None:
        placement.constraints = [] if relaxed else constraints
        record_alignment(placement, constraints, special.results, relaxed)
    return NodeFit([], plan, special, requests, mappings, users, placement)


def count_groups(
    state: ClusterState,
    placement: Placement,
    dra: DraState,
    node: str,
    requests: list[Obj],
    devices: list[Device],
) -> None:
    """Whole groups before and after the winner's devices (for the Event), of the aligning class
    the special claim asks most devices of."""
    demand = constraint_demand({}, requests)
    asked = [c for c in sorted(dra.groups) if demand.get(c, 0) > 0]
    if not asked:
        return
    cls = max(asked, key=lambda c: demand[c])
    attr = dra.groups[cls][0]
    groups = state.capacity.groups(cls, node, attr)
    broken: set[Value] = set()
    for d in devices:
        broken |= {v for v in values_of(d, attr) or () if v in groups and groups[v].whole}
    placement.group_attribute = attr
    placement.groups = len(groups)
    placement.whole_before = whole_groups(groups)
    placement.whole_after = placement.whole_before - len(broken)


def in_memory_special_claim(pod: Obj, requests: list[Obj], constraints: list[Obj]) -> Obj:
    """Upstream's special claim before PreBind: an invalid name, the pod's namespace, the annotation
    (draxr's alignment constraints, when any, ride along)."""
    devices: Obj = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {
        "metadata": {
            "name": SPECIAL_CLAIM_IN_MEMORY_NAME,
            "namespace": namespace(pod),
            "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
        },
        "spec": {"devices": devices},
    }


def _attributes_of(groups: dict[str, tuple[str, ...]]) -> Callable[[str], tuple[str, ...]]:
    return lambda cls: groups.get(cls, ())
