"""DynamicResources' PreFilter: the pod's claims (its user claims; an existing special claim, which
blocks as stale unless a worker reuses it), which of its extended resources a DeviceClass backs, the
special claim's requests where DRA serves every name, and draxr's alignment of them."""

from __future__ import annotations

from typing import Final

from ....allocation.policy import UPSTREAM
from ....api.alignment import NONE, align_by, pod_alignment
from ....api.capacityrequests import capacity_by_class
from ....api.names import is_dra_extended_resource_name
from ....api.objects import (
    Obj,
    as_dict,
    as_list,
    controller_ref,
    is_terminating,
    name,
    namespace,
    spec,
    status,
    uid,
)
from ....api.podresources import Units
from ....cluster.state import ClusterState
from ....cluster.topology import alignment_constraints, constraint_demand
from ...framework import PreFilterFailed, ServedBy
from .mappings import class_demand, create_requests_and_mappings, device_demand
from .state import DraState, Scope

#: ``resourceapi.ResourceClaimReservedForMaxSize``: the apiserver refuses more consumers.
RESERVED_FOR_MAX_SIZE: Final = 256
#: Upstream's PreFilter reason for a claim that cannot be reserved for the pod.
IN_USE: Final = "resourceclaim in use"


def pre_filter(state: ClusterState, pod: Obj, reqs: Units, policy: str, *, ignore_claim: bool) -> DraState:
    """Raises ``PreFilterFailed`` when a claim of the pod is missing or unusable.
    ``ignore_claim``: the pod's special claim will be reused, so it is not stale."""
    extended = {r: v for r, v in reqs.items() if v != 0 and is_dra_extended_resource_name(r)}
    classes: dict[str, str] = {}
    for r in extended:
        cls = state.classes.class_name(r)
        if cls is not None:
            classes[r] = cls
    stale = None
    if classes and not ignore_claim:
        existing = state.allocated.special_claim_for(pod)
        if existing is not None and as_list(as_dict(spec(existing).get("devices")).get("requests")):
            stale = existing
    user_claims, to_allocate = resolve_user_claims(state, pod)
    groups: dict[str, tuple[str, ...]] = {}
    if policy != UPSTREAM:
        for cls in set(classes.values()):
            attrs = align_by(state.classes.get(cls))
            if attrs:
                groups[cls] = attrs
    align = pod_alignment(pod) if groups else NONE
    scopes: list[Scope] = []
    constraints: list[Obj] = []
    notes: list[str] = []
    capacity = capacity_by_class(classes.values(), state.classes.get) if classes else None
    built = (
        create_requests_and_mappings(pod, classes, tolerations=state.classes.tolerations, capacity=capacity)
        if classes
        else None
    )
    if align != NONE and built is not None:
        requests = built[0]
        constraints, notes = alignment_constraints(requests, groups, state.capacity.largest_group)
        scopes = [(str(c["matchAttribute"]), constraint_demand(c, requests)) for c in constraints]
    demand = device_demand(pod, classes, built) if built is not None else {}
    delegated = {r: classes[r] for r in extended if r in classes}
    claim_selectors = [
        sel
        for c in user_claims
        if isinstance(sel := as_dict(status(c).get("allocation")).get("nodeSelector"), dict)
    ]
    return DraState(
        extended=extended,
        classes=classes,
        demand=demand,
        stale=stale,
        user_claims=user_claims,
        to_allocate=to_allocate,
        claim_selectors=claim_selectors,
        built=built,
        align=align,
        groups=groups,
        constraints=constraints,
        notes=notes,
        scopes=scopes,
        delegated=delegated,
        served={r: ServedBy("dra", cls) for r, cls in delegated.items()},
        needs=class_demand(delegated, demand),
    )


def own_claim_names(pod: Obj) -> list[str]:
    """The claims ``spec.resourceClaims`` refers to, by name: named directly, or made from a
    template as ``status.resourceClaimStatuses`` names (one not made yet, or not needed, is left
    out). Lenient, unlike ``resolve_user_claims``: for reading another pod's claims."""
    made = {
        as_dict(s).get("name"): as_dict(s).get("resourceClaimName")
        for s in as_list(status(pod).get("resourceClaimStatuses"))
    }
    out: list[str] = []
    for ref in as_list(spec(pod).get("resourceClaims")):
        r = as_dict(ref)
        claim_name = r.get("resourceClaimName") or made.get(r.get("name"))
        if isinstance(claim_name, str) and claim_name:
            out.append(claim_name)
    return out


def resolve_user_claims(state: ClusterState, pod: Obj) -> tuple[list[Obj], list[Obj]]:
    """The pod's own claims (``spec.resourceClaims``), resolved as upstream's PreFilter does, and
    those of them still to allocate."""
    statuses = {
        as_dict(s).get("name"): as_dict(s).get("resourceClaimName")
        for s in as_list(status(pod).get("resourceClaimStatuses"))
    }
    claims: list[Obj] = []
    to_allocate: list[Obj] = []
    ns = namespace(pod)
    for pc in as_list(spec(pod).get("resourceClaims")):
        pcd = as_dict(pc)
        pc_name = str(pcd.get("name", ""))
        claim_name = pcd.get("resourceClaimName")
        from_template = not claim_name and pcd.get("resourceClaimTemplateName")
        if from_template:
            if pc_name not in statuses:
                raise PreFilterFailed(
                    f'pod "{ns}/{name(pod)}": waiting for resource claim "{pc_name}" to be created'
                )
            claim_name = statuses[pc_name]
            if not claim_name:
                continue  # the claim is not needed
        if not isinstance(claim_name, str) or not claim_name:
            raise PreFilterFailed(f'pod "{ns}/{name(pod)}": resource claim "{pc_name}" names no claim')
        claim = state.allocated.claims.get((ns, claim_name))
        if claim is None:
            raise PreFilterFailed(f'resourceclaim "{claim_name}" not found')
        if is_terminating(claim):
            raise PreFilterFailed(f'resourceclaim "{claim_name}" is being deleted')
        if from_template:
            owner = controller_ref(claim)
            if owner is None or owner.get("uid") != uid(pod):
                pod_name = f"{ns}/{name(pod)}"
                raise PreFilterFailed(
                    f"ResourceClaim {ns}/{claim_name} was not created for pod {pod_name} (pod is not owner)"
                )
        if not can_be_reserved(claim, pod):
            raise PreFilterFailed(IN_USE)
        claims.append(claim)
        if not status(claim).get("allocation"):
            to_allocate.append(claim)
    return claims, to_allocate


def can_be_reserved(claim: Obj, pod: Obj) -> bool:
    """Whether the pod can be added to the claim's ``reservedFor`` (or is there already). Upstream's
    ``CanBeReserved`` says yes to any claim since 1.34 and leaves the 256 limit to the apiserver,
    where PreBind would fail; draxr checks the limit here, before anything is written."""
    reserved = as_list(status(claim).get("reservedFor"))
    if len(reserved) < RESERVED_FOR_MAX_SIZE:
        return True
    pod_uid = uid(pod)
    return any(as_dict(r).get("resource") == "pods" and as_dict(r).get("uid") == pod_uid for r in reserved)
