"""One scheduling decision for one pod, in the phases of kube-scheduler's framework.

``pre_filter``  PreFilter: the pod's claims (user claims; an existing special claim, which a
                worker may resume or reuse, or which blocks as stale) and which extended
                resources a DeviceClass backs.
``filter``      Filter, per node: NodeUnschedulable, TaintToleration, NodeAffinity, NodePorts,
                NodeResourcesFit (device-plugin names counted against allocatable), then
                DynamicResources (names with allocatable 0 and a class go to DRA; the special
                claim's requests and the user claims allocated together).
``score``       Score: ``binpack``, ``spread`` or ``upstream`` (``scoring``).
``reserve``     Reserve: in-flight devices and the assumed pod, visible to the next decision.
``release``     the in-memory half of Unreserve (the worker's ``unreserve`` also undoes the
                binding cycle's API writes).

PostFilter, PreBind and Bind write to the API and live in the worker.

draxr's placement (``topology``, ``placement``): for classes with ``draxr.io/align-by`` the special
claim gets a ``matchAttribute`` constraint per container and attribute (unless the pod says
``draxr.io/align: none``; ``preferred`` retries without them), and the allocator tries each request's
candidates in the policy's group order. ``--policy upstream`` does neither: first fit, no constraint.

Scores depend only on counts (free devices, requested and allocatable resources), never on the
outcome of Filter, so candidate nodes are scored first and then filtered and allocated lazily in
score order: the winner is the best-scoring node that passes every filter and on which allocation
succeeds, exactly as if every node had been filtered first. Nodes with a CEL error among their
candidates are always allocated, so the error aborts the attempt as upstream's parallel Filter does.
"""

from __future__ import annotations

import heapq
import uuid as _uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice

from ..allocation.allocator import INVALID_POOLS, AllocationError, Allocator, ClaimAllocation, Unsatisfiable
from ..allocation.placement import Placement, record_alignment
from ..allocation.policy import BINPACK, POLICIES, SPREAD, UPSTREAM
from ..api.alignment import NONE, PREFERRED, REQUIRED, align_by, pod_alignment
from ..api.constants import (
    EXTENDED_RESOURCE_CLAIM_ANNOTATION,
    SPECIAL_CLAIM_IN_MEMORY_NAME,
    WRITER_ANNOTATION,
)
from ..api.names import is_dra_extended_resource_name
from ..api.nodematch import SelectorError, node_selector_matches
from ..api.objects import (
    Obj,
    annotations_of,
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
from ..api.podresources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Units, pod_requests, pod_requests_nonzero
from ..cluster.devices import NodeDevices
from ..cluster.nodeinfo import NodeInfo, host_ports
from ..cluster.slices import Device, DeviceKey
from ..cluster.state import ClusterState
from ..cluster.topology import (
    CANNOT_ALIGN,
    Groups,
    Value,
    alignment_constraints,
    can_align,
    constraint_demand,
    groups_broken,
    values_of,
    whole_groups,
)
from .fit import DEFAULT_MAX_PODS, PodFilter, basic_filters, fit_resources, is_scalar
from .mappings import class_demand, create_requests_and_mappings, device_demand
from .sampling import (
    ADAPTIVE,
    check_percentage,
    merged_rotation,
    num_feasible_nodes_to_find,
    rotation,
    start_of,
)
from .scoring import Usage, upstream_score, utilisation

SCHEDULED = "Scheduled"
UNSCHEDULABLE = "Unschedulable"
ERROR = "Error"

STALE_CLAIM = "cannot schedule extended resource claim"
CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_AVAILABLE = "resourceclaim not available on the node"
#: draxr's Filter reason: the native path needs DRAExtendedResource in the node's kubelet.
KUBELET_GATE_OFF = "node(s) had a kubelet without DRAExtendedResource"


@dataclass(slots=True)
class Route:
    via: str  # "dra" | "device-plugin"
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
    routes: dict[str, Route] = field(default_factory=dict)
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


Scope = tuple[str, dict[str, int]]  # a matchAttribute constraint: attribute, devices per class


@dataclass(slots=True)
class PreFilterResult:
    """What PreFilter learns once per pod, for Filter and Score on every node."""

    reqs: Units
    extended: dict[str, int]  # DRA-candidate names with non-zero requests (overhead included)
    classes: dict[str, str]  # name -> backing class (explicit or implicit)
    demand: dict[str, int]  # name -> devices the special claim asks for it where DRA serves it
    stale: Obj | None  # a special claim from an earlier cycle that blocks every node
    user_claims: list[Obj]  # every claim of the pod, resolved
    to_allocate: list[Obj]  # user claims without allocation
    filter: PodFilter
    nonzero: Units = field(default_factory=dict)  # cpu and memory as kube-scheduler scores them
    align: str = NONE  # the pod's draxr.io/align, when a class of the pod aligns
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)  # class -> align-by attributes
    # Score's per-decision caches: class -> (free, total) by node; class -> (groups by node, largest).
    counts: dict[str, tuple[dict[str, int], dict[str, int]]] = field(default_factory=dict)
    grouping: dict[str, tuple[dict[str, Groups], int]] = field(default_factory=dict)
    # Where DRA serves every name: the special claim's requests and mappings, draxr's constraints
    # (and the alignments no group anywhere can hold), and what the constraints ask of a node.
    built: tuple[list[Obj], list[Obj]] | None = None
    constraints: list[Obj] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    scopes: list[Scope] = field(default_factory=list)
    by_attr: dict[tuple[str, str], dict[str, Groups]] = field(default_factory=dict)  # Filter's cache
    # Filter's and Score's view of the usual node, whose allocatable names none of the pod's extended
    # resources: every name with a class goes to DRA (``default_dra``, ``default_routes``), what
    # NodeResourcesFit still checks (``default_fit``: resource, amount), devices per class.
    default_dra: dict[str, str] = field(default_factory=dict)
    default_routes: dict[str, Route] = field(default_factory=dict)
    default_fit: list[tuple[str, int]] = field(default_factory=list)
    default_needs: dict[str, int] = field(default_factory=dict)
    claim_selectors: list[Obj] = field(default_factory=list)  # allocated user claims' node selectors


@dataclass(slots=True)
class NodePlan:
    """A node that passed the non-DRA filters: which names DRA serves there, and how each is routed."""

    node: str
    dra: dict[str, str]  # resource -> class, for names DRA serves on this node
    routes: dict[str, Route]


@dataclass(slots=True)
class NodeFit:
    """Filter's answer for one node: ``reasons`` when it does not fit, else the allocation."""

    reasons: list[str]
    plan: NodePlan | None = None
    special: ClaimAllocation | None = None
    requests: list[Obj] = field(default_factory=list)
    mappings: list[Obj] = field(default_factory=list)
    user_claims: list[UserClaim] = field(default_factory=list)
    placement: Placement | None = None


class PreFilterFailed(Exception):
    pass


#: kube-scheduler's ``ErrNoNodesAvailable`` (the cluster has no nodes at all).
NO_NODES = "no nodes available to schedule pods"


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


class Scheduler:
    """The pure engine shared by ``draxr plan``, the webhook's fit warnings and the worker.

    ``writer``: the scheduler name a worker marks its special claims with. A special claim the pod
    already has and that this writer wrote is continued (allocated: ``resumed``) or reused
    (unallocated: ``reuse``) instead of blocking the pod as stale.
    """

    def __init__(
        self,
        state: ClusterState,
        policy: str = "binpack",
        step_budget: int = 200_000,
        writer: str | None = None,
        percentage_of_nodes_to_score: int = ADAPTIVE,
    ) -> None:
        """``percentage_of_nodes_to_score``: 0 adaptive, 100 every node (``sampling``)."""
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; use one of {', '.join(POLICIES)}")
        self.state = state
        self.policy = policy
        self.step_budget = step_budget
        self.writer = writer
        self.percentage_of_nodes_to_score = check_percentage(percentage_of_nodes_to_score)

    # -- PreFilter -----------------------------------------------------------------------------

    def pre_filter(self, pod: Obj, *, ignore_claim: bool = False) -> PreFilterResult:
        """Raises ``PreFilterFailed`` when a claim of the pod is missing or unusable.
        ``ignore_claim``: the pod's special claim will be reused, so it is not stale."""
        nonzero: Units = {}
        if self.policy == UPSTREAM:
            reqs, nonzero = pod_requests_nonzero(pod)
        else:
            reqs = pod_requests(pod)
        extended = {r: v for r, v in reqs.items() if v != 0 and is_dra_extended_resource_name(r)}
        classes: dict[str, str] = {}
        for r in extended:
            cls = self.state.classes.class_name(r)
            if cls is not None:
                classes[r] = cls
        stale = None
        if classes and not ignore_claim:
            existing = self.state.allocated.special_claim_for(pod)
            if existing is not None and as_list(as_dict(spec(existing).get("devices")).get("requests")):
                stale = existing
        user_claims, to_allocate = self._user_claims(pod)
        groups: dict[str, tuple[str, ...]] = {}
        if self.policy != UPSTREAM:
            for cls in set(classes.values()):
                attrs = align_by(self.state.classes.get(cls))
                if attrs:
                    groups[cls] = attrs
        align = pod_alignment(pod) if groups else NONE
        scopes: list[Scope] = []
        constraints: list[Obj] = []
        notes: list[str] = []
        built = create_requests_and_mappings(pod, classes) if classes else None
        if align != NONE and built is not None:
            requests = built[0]
            constraints, notes = alignment_constraints(requests, groups, self.state.capacity.largest_group)
            scopes = [(str(c["matchAttribute"]), constraint_demand(c, requests)) for c in constraints]
        demand = device_demand(pod, classes, built) if built is not None else {}
        default_dra = {r: classes[r] for r in extended if r in classes}
        default_fit = [(r, reqs[r]) for r in (CPU, MEMORY, EPHEMERAL_STORAGE) if reqs.get(r, 0) > 0]
        default_fit += [(r, v) for r, v in reqs.items() if v != 0 and is_scalar(r) and r not in default_dra]
        claim_selectors = [
            sel
            for c in user_claims
            if isinstance(sel := as_dict(status(c).get("allocation")).get("nodeSelector"), dict)
        ]
        return PreFilterResult(
            reqs,
            extended,
            classes,
            demand,
            stale,
            user_claims,
            to_allocate,
            PodFilter.of(pod, host_ports(pod)),
            nonzero,
            align,
            groups,
            scopes=scopes,
            built=built,
            constraints=constraints,
            notes=notes,
            default_dra=default_dra,
            default_routes={r: Route("dra", cls) for r, cls in default_dra.items()},
            default_fit=default_fit,
            default_needs=class_demand(default_dra, demand),
            claim_selectors=claim_selectors,
        )

    def _user_claims(self, pod: Obj) -> tuple[list[Obj], list[Obj]]:
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
            claim = self.state.allocated.claims.get((ns, claim_name))
            if claim is None:
                raise PreFilterFailed(f'resourceclaim "{claim_name}" not found')
            if is_terminating(claim):
                raise PreFilterFailed(f'resourceclaim "{claim_name}" is being deleted')
            if from_template:
                owner = controller_ref(claim)
                if owner is None or owner.get("uid") != uid(pod):
                    raise PreFilterFailed(
                        f"ResourceClaim {ns}/{claim_name} was not created for pod {ns}/{name(pod)} "
                        "(pod is not owner)"
                    )
            claims.append(claim)
            if not status(claim).get("allocation"):
                to_allocate.append(claim)
        return claims, to_allocate

    # -- Filter --------------------------------------------------------------------------------

    def filter(self, pod: Obj, pre: PreFilterResult, node_name: str) -> NodeFit:
        """Every filter plugin on one node, allocation included. Raises ``AllocationError``, which
        aborts the attempt (a CEL runtime error, say)."""
        plan, reasons = self._node_plan(pre, node_name)
        if plan is None:
            return NodeFit(reasons)
        try:
            return self._allocate(pod, pre, plan)
        except Unsatisfiable as e:
            return NodeFit([str(e)])

    def _routes(self, pre: PreFilterResult, info: NodeInfo) -> tuple[dict[str, str], dict[str, Route]]:
        """Per node: a name with allocatable > 0 is the device plugin's; allocatable 0 (or absent)
        and a backing class means DRA; anything else is left to NodeResourcesFit to reject."""
        if info.allocatable_names.isdisjoint(pre.extended):
            return pre.default_dra, pre.default_routes  # shared by every such node: never changed
        dra: dict[str, str] = {}
        routes: dict[str, Route] = {}
        for r in pre.extended:
            cls = pre.classes.get(r)
            if cls is not None and info.allocatable.get(r, 0) == 0:
                dra[r] = cls
                routes[r] = Route("dra", cls)
            elif r in info.allocatable_names:
                routes[r] = Route("device-plugin", None)
        return dra, routes

    def _node_plan(
        self, pre: PreFilterResult, node_name: str, count_devices: bool = True
    ) -> tuple[NodePlan | None, list[str]]:
        """The filters before allocation: the node's reasons to refuse the pod, or its plan."""
        info = self.state.nodes.by_name[node_name]
        pf = pre.filter
        if info.unschedulable or info.hard_taints or pf.constrained or pf.ports:
            reasons = basic_filters(pf, info)
            if reasons:
                return None, reasons
        dra, routes = self._routes(pre, info)
        if dra is not pre.default_dra or not _fits(pre.default_fit, info):
            reasons = fit_resources(pre.reqs, info, dra)
            if reasons:
                return None, reasons
        if pre.stale is not None:
            return None, [STALE_CLAIM]
        if dra and not info.kubelet_gate:
            return None, [KUBELET_GATE_OFF]
        for selector in pre.claim_selectors:
            try:
                ok = node_selector_matches(info.node, selector)
            except SelectorError:
                ok = False
            if not ok:
                return None, [NOT_AVAILABLE]
        if dra and count_devices:
            needs = pre.default_needs if dra is pre.default_dra else class_demand(dra, pre.demand)
            for cls, need in needs.items():
                if self._counts(pre, cls)[0].get(node_name, 0) >= need or self._errors_on(node_name, cls):
                    continue
                # Upstream only learns this by failing to allocate; its reason names invalid pools.
                return None, [INVALID_POOLS if self._has_invalid_pool(node_name) else CANNOT_ALLOCATE]
            if (
                pre.scopes
                and pre.align == REQUIRED
                and dra.keys() == pre.classes.keys()
                and not any(self._errors_on(node_name, cls) for cls in needs)
            ):
                # From the group counts; a node with a CEL error is left to the allocator, whose
                # error aborts the attempt.
                unaligned = self._unalignable(node_name, pre.scopes, pre)
                if unaligned is not None:
                    return None, [f"cannot align devices by {unaligned}"]
        return NodePlan(node_name, dra, routes), []

    def _counts(self, pre: PreFilterResult, cls: str) -> tuple[dict[str, int], dict[str, int]]:
        """(free, total) candidate devices of the class by node: once per class and decision (the
        same dicts, kept up in place)."""
        counts = pre.counts.get(cls)
        if counts is None:
            capacity = self.state.capacity
            counts = pre.counts[cls] = (capacity.free(cls), capacity.total(cls))
        return counts

    def _has_invalid_pool(self, node_name: str) -> bool:
        nd = self.state.node_devices(node_name)
        return nd is not None and any(p.invalid for p in nd.pools)

    def _errors_on(self, node_name: str, cls: str) -> bool:
        """A free candidate of the class on the node fails its selectors with a CEL error."""
        if node_name not in self.state.capacity.error_nodes(cls):
            return False
        nd = self.state.node_devices(node_name)
        return nd is not None and self._has_error_candidate(nd, cls)

    def _has_error_candidate(self, nd: NodeDevices, cls: str) -> bool:
        taken = self.state.allocated
        return any(err is not None and not taken.is_allocated(d.key) for d, err in nd.class_candidates(cls))

    def _allocate(self, pod: Obj, pre: PreFilterResult, plan: NodePlan) -> NodeFit:
        """DynamicResources' allocation: user claims and the special claim in one call."""
        requests: list[Obj] = []
        mappings: list[Obj] = []
        claims: list[Obj] = list(pre.to_allocate)
        # Where DRA serves every name the pod's classes back, PreFilter built all of it already.
        prebuilt = pre.built is not None and plan.dra == pre.classes
        if prebuilt and pre.built is not None:
            requests, mappings = pre.built
        elif plan.dra:
            requests, mappings = create_requests_and_mappings(pod, plan.dra)
        placement = None
        constraints: list[Obj] = []
        scopes = pre.scopes
        if requests and (pre.groups or self.policy == UPSTREAM):
            placement = Placement(self.policy, pre.align)
            if pre.align != NONE and prebuilt:
                constraints, placement.notes = pre.constraints, list(pre.notes)
            elif pre.align != NONE:
                constraints, placement.notes = alignment_constraints(
                    requests, pre.groups, self.state.capacity.largest_group
                )
                scopes = [(str(c["matchAttribute"]), constraint_demand(c, requests)) for c in constraints]
        if requests:
            claims.append(_in_memory_special_claim(pod, requests, constraints))
        users = [UserClaim(c) for c in pre.user_claims]
        if not claims:
            return NodeFit([], plan, None, [], [], users)
        nd = self.state.node_devices(plan.node)
        assert nd is not None
        taken = self.state.allocated
        allocator = Allocator(
            nd,
            self.state.classes.get,
            self.state.cel,
            taken.devices,
            taken.allocated_counters,
            self.step_budget,
            policy=None if self.policy == UPSTREAM else self.policy,
            group_attributes=_attributes_of(pre.groups) if pre.groups else None,
        )
        relaxed = False
        checked = prebuilt and pre.align == REQUIRED  # by _node_plan, unless a CEL error lurks
        if constraints and not checked:
            unaligned = self._unalignable(plan.node, scopes, pre)
            if unaligned is not None and pre.align != PREFERRED:
                raise Unsatisfiable(f"cannot align devices by {unaligned}")
            if unaligned is not None:
                relaxed = True
                claims[-1] = _in_memory_special_claim(pod, requests, [])
        try:
            results = allocator.allocate(claims)
        except Unsatisfiable:
            if not constraints or relaxed or pre.align != PREFERRED:
                raise
            relaxed = True
            claims[-1] = _in_memory_special_claim(pod, requests, [])
            results = allocator.allocate(claims)
        by_claim = {id(c): a for c, a in zip(claims, results, strict=True)}
        for uc in users:
            uc.allocation = by_claim.get(id(uc.claim))
        special = results[-1] if requests else None
        if placement is not None and special is not None:
            placement.constraints = [] if relaxed else constraints
            record_alignment(placement, constraints, special.results, relaxed)
        return NodeFit([], plan, special, requests, mappings, users, placement)

    def _unalignable(self, node_name: str, scopes: list[Scope], pre: PreFilterResult) -> str | None:
        """The attribute of the first constraint no group of the node has enough free devices for,
        per class, from the group counts (every search under it would fail, so none is started)."""
        for attr, demand in scopes:
            wanted: list[tuple[Groups, int]] = []
            for cls, need in demand.items():
                by_node = pre.by_attr.get((cls, attr))
                if by_node is None:
                    by_node = pre.by_attr[(cls, attr)] = self.state.capacity.groups_by_node(cls, attr)
                wanted.append((by_node.get(node_name, {}), need))
            first, need = wanted[0]
            if not any(
                g.free >= need and all((h := m.get(v)) is not None and h.free >= n for m, n in wanted[1:])
                for v, g in first.items()
            ):
                return attr
        return None

    def _walk(self, pre: PreFilterResult, start: str | None) -> Iterator[str]:
        """The nodes that might fit the pod, once round the ring of names from ``start``.

        With extended resources (and no user claim to allocate), only the nodes in one name's index
        are visited: those with a free device of its class (``FreeDevices.available``) or, where a
        device plugin serves it, with some of it left (``Nodes.with_room``), for the name with the
        fewest such nodes. Any other node fails Filter for that name; Filter itself checks the
        rest on the nodes visited."""
        nodes = self.state.nodes
        if not pre.extended or pre.to_allocate:
            return rotation(nodes.names(), start)
        best: list[list[str]] | None = None
        size = 0
        for r in pre.extended:
            rings = [ring for ring in (nodes.with_room(r),) if ring]
            cls = pre.classes.get(r)
            if cls is not None:
                ring = self.state.capacity.available(cls)
                if ring:
                    rings.append(ring)
            n = sum(len(ring) for ring in rings)
            if best is None or n < size:
                best, size = rings, n
        if not best:
            return iter(())
        return merged_rotation(best, start)

    # -- Score ---------------------------------------------------------------------------------

    def score(self, pre: PreFilterResult, node_name: str) -> float:
        """Score from counts alone, so nodes can be ordered before they are filtered."""
        info = self.state.nodes.by_name[node_name]
        if self.policy == UPSTREAM:
            return float(upstream_score(pre.reqs, pre.nonzero, info))
        dra, routes = self._routes(pre, info)
        if dra is pre.default_dra and dra:
            # The usual node: every name with a class goes to DRA (``utilisation`` in one pass).
            ratios = 0.0
            for r, cls in dra.items():
                free, totals = self._counts(pre, cls)
                total = totals.get(node_name, 0)
                if total > 0:
                    used = total - free.get(node_name, 0) + pre.demand.get(r, 0)
                    ratios += used / total if used < total else 1.0
                else:
                    ratios += 1.0
            score = ratios / len(dra)
        else:
            usage: dict[str, Usage] = {}
            for r, want in pre.extended.items():
                route = routes.get(r)
                if route is None:
                    continue
                if route.via == "device-plugin":
                    usage[r] = Usage(info.requested.get(r, 0) + want, info.allocatable.get(r, 0))
                else:
                    free, totals = self._counts(pre, dra[r])
                    total = totals.get(node_name, 0)
                    usage[r] = Usage(total - free.get(node_name, 0) + pre.demand.get(r, 0), total)
            score = utilisation(pre.reqs, info, usage)
        if pre.groups and self.policy == BINPACK:
            score -= self._groups_broken(pre, node_name, dra)
        return score

    def _groups_broken(self, pre: PreFilterResult, node_name: str, dra: dict[str, str]) -> int:
        """Whole topology groups the pod would break on the node (binpack's fragmentation term):
        each weighs more than any difference in utilisation, so a pod goes where it breaks none."""
        demand: dict[str, int] = {}
        for r, cls in dra.items():
            if cls in pre.groups:
                demand[cls] = demand.get(cls, 0) + pre.demand.get(r, 0)
        broken = 0
        for cls, need in demand.items():
            found = pre.grouping.get(cls)
            if found is None:  # once per class and decision
                attr = pre.groups[cls][0]
                capacity = self.state.capacity
                found = pre.grouping[cls] = (
                    capacity.groups_by_node(cls, attr),
                    capacity.largest_group(cls, attr),
                )
            by_node, largest = found
            aligned = pre.align != NONE and 2 <= need <= largest
            groups = by_node.get(node_name, {})
            broken += groups_broken(groups, need, aligned)
            if aligned and not can_align(groups, need):
                broken += CANNOT_ALIGN  # preferred: a split set only where nothing better exists
        return broken

    # -- the decision --------------------------------------------------------------------------

    def schedule(self, pod: Obj, *, score: bool = True) -> Decision:
        """Decide for one pod: PreFilter, then Score and Filter until a node fits.

        A special claim the pod already has and ``writer`` wrote is resumed when allocated and
        still consistent, or reused when unallocated. ``score=False`` answers "does any node
        fit?" (admission warnings): the first feasible node by name wins.
        """
        reuse = None
        existing = self.state.allocated.special_claim_for(pod)
        if (
            existing is not None
            and self.writer is not None
            and annotations_of(existing).get(WRITER_ANNOTATION) == self.writer
        ):
            if not as_dict(status(existing).get("allocation")):
                reuse = existing
            else:
                resumed = self.resume(pod, existing)
                if resumed is not None:
                    return resumed
        decision = self._decide(pod, ignore_claim=reuse is not None, score=score)
        if decision.status == UNSCHEDULABLE and reuse is not None:
            decision.stale_claim = reuse  # PostFilter: a pending pod keeps no leftover claim
        else:
            decision.reuse = reuse
        return decision

    def _decide(self, pod: Obj, *, ignore_claim: bool, score: bool) -> Decision:
        total = len(self.state.nodes)
        try:
            pre = self.pre_filter(pod, ignore_claim=ignore_claim)
        except PreFilterFailed as e:
            return Decision(pod, UNSCHEDULABLE, message=fit_error(total, {}, str(e)))
        reasons: dict[str, list[str]] = {}
        try:
            # A stale special claim fails Filter on every node before allocation: nothing to search.
            if pre.stale is None:
                self._filter_erroneous(pod, pre)
                found = self._search(pod, pre, score, reasons)
                if found is not None:
                    return found
        except AllocationError as e:
            return Decision(pod, ERROR, message=str(e))
        # Nothing fits: explain every node, including those the search never visited.
        for n in self.state.nodes.names():
            if n not in reasons:
                _, why = self._node_plan(pre, n)
                reasons[n] = why or [CANNOT_ALLOCATE]
        return Decision(
            pod, UNSCHEDULABLE, message=fit_error(total, reasons), reasons=reasons, stale_claim=pre.stale
        )

    def _filter_erroneous(self, pod: Obj, pre: PreFilterResult) -> None:
        """Nodes with a CEL error among the free candidates of the pod's classes are allocated
        first, by name, so that the error aborts the attempt (``AllocationError``) whichever node
        would have won and wherever the search would have stopped, as upstream's parallel Filter,
        which meets them sooner or later, does."""
        for n in self.erroneous_nodes(pre):
            self.filter(pod, pre, n)

    def erroneous_nodes(self, pre: PreFilterResult) -> list[str]:
        """The nodes, by name, where a free candidate of one of the pod's classes fails its
        selectors with a CEL error. They hold no free device of the class, so the class's index of
        nodes (``_walk``) leaves them out: ``_filter_erroneous`` visits them instead."""
        classes = set(pre.classes.values())
        erroneous: set[str] = set()
        for cls in classes:
            erroneous |= self.state.capacity.error_nodes(cls)
        return [
            n
            for n in sorted(erroneous)
            if n in self.state.nodes and any(self._errors_on(n, cls) for cls in classes)
        ]

    def _search(
        self, pod: Obj, pre: PreFilterResult, score: bool, reasons: dict[str, list[str]]
    ) -> Decision | None:
        """Filter until enough nodes pass, then Score them and allocate in score order.

        The walk (``_walk``) visits the nodes that may fit, from the pod's own start
        (``sampling.start_of``), and stops once ``num_feasible_nodes_to_find`` of them pass every
        filter but the allocation itself (which costs the most, and which the device counts
        checked already foresee); those are scored, and allocated best first: the first that
        allocates wins. A node whose allocation fails is replaced by the next node of the walk
        that passes, so the winner is the best of that many nodes on which nothing failed.
        ``score=False`` (does any node fit?) walks by name and stops at the first that fits.
        """
        nodes = self.state.nodes
        wanted = num_feasible_nodes_to_find(self.percentage_of_nodes_to_score, len(nodes)) if score else 1
        start = start_of(pod, nodes.names()) if wanted < len(nodes) and score else None
        feasible = self._feasible(pre, self._walk(pre, start), score)
        heap = list(islice(feasible, wanted))  # one C-level pull for all of them
        heapq.heapify(heap)
        while heap:
            _, n, maybe = heapq.heappop(heap)
            plan = maybe if maybe is not None else NodePlan(n, pre.default_dra, pre.default_routes)
            try:
                fit = self._allocate(pod, pre, plan)
            except Unsatisfiable as e:
                reasons[n] = [str(e)]
                for found in islice(feasible, 1):  # the next node that passes takes its place
                    heapq.heappush(heap, found)
                continue
            if fit.placement is not None and fit.special is not None:
                devices = [r.device for r in fit.special.results if not r.admin_access]
                self._count_groups(fit.placement, pre, n, fit.requests, devices)
            return Decision(
                pod,
                SCHEDULED,
                node=n,
                routes=dict(plan.routes),
                requests=fit.requests,
                mappings=fit.mappings,
                special=fit.special,
                user_claims=fit.user_claims,
                placement=fit.placement,
            )
        return None

    def _feasible(
        self, pre: PreFilterResult, walk: Iterator[str], score: bool
    ) -> Iterator[tuple[float, str, NodePlan | None]]:
        """The nodes of the walk that pass every filter but the allocation, with their sort key
        (the score, negated unless the policy spreads; 0 without ``score``) and plan (None for the
        usual node: ``NodePlan(node, pre.default_dra, pre.default_routes)``, made when allocated on).

        For the usual pod and node (no node constraint, ports, allocated claim with a node selector,
        alignment; a schedulable, untainted node whose allocatable names none of the pod's extended
        resources, kubelet gate on, no CEL error on the way) this is ``_node_plan`` and ``score``
        in one loop over shared lookups, which gives the same answers; anything else takes them."""
        spread = self.policy == SPREAD
        pf = pre.filter
        usual = (
            self.policy != UPSTREAM
            and bool(pre.default_dra)
            and pre.stale is None
            and not (pf.constrained or pf.ports or pre.claim_selectors or pre.scopes or pre.groups)
        )
        by_name = self.state.nodes.by_name
        if usual:
            dra = pre.default_dra
            extended = pre.extended.keys()
            checks = pre.default_fit
            need_of = [(cls, need, self._counts(pre, cls)[0]) for cls, need in pre.default_needs.items()]
            ratio_of = [(self._counts(pre, cls), pre.demand.get(r, 0)) for r, cls in dra.items()]
            names = len(dra)
        for n in walk:
            if usual:
                info = by_name[n]
                if not (
                    info.unschedulable
                    or info.hard_taints
                    or not info.kubelet_gate
                    or not info.allocatable_names.isdisjoint(extended)
                ):
                    # _fits, inline: this runs for every node a decision visits.
                    alloc = info.allocatable
                    max_pods = (
                        alloc.get(PODS, DEFAULT_MAX_PODS)
                        if PODS in info.allocatable_names
                        else DEFAULT_MAX_PODS
                    )
                    if len(info.pods) >= max_pods:
                        continue
                    requested = info.requested
                    fits = True
                    for r, want in checks:
                        if want > alloc.get(r, 0) - requested.get(r, 0):
                            fits = False
                            break
                    if not fits:
                        continue
                    short = False
                    for _cls, need, free in need_of:
                        if free.get(n, 0) < need:
                            short = True
                            break
                    if short and not any(self._errors_on(n, cls) for cls, _, _ in need_of):
                        continue
                    if not short:
                        key = 0.0
                        if score:
                            ratios = 0.0
                            for (free, totals), demand in ratio_of:
                                total = totals.get(n, 0)
                                if total > 0:
                                    used = total - free.get(n, 0) + demand
                                    ratios += used / total if used < total else 1.0
                                else:
                                    ratios += 1.0
                            key = ratios / names if spread else -ratios / names
                        yield key, n, None  # the usual plan, made only for the node allocated on
                        continue
            plan, _ = self._node_plan(pre, n)
            if plan is not None:
                key = 0.0
                if score:
                    key = self.score(pre, n)
                    if not spread:
                        key = -key
                yield key, n, plan

    def _count_groups(
        self,
        placement: Placement,
        pre: PreFilterResult,
        node: str,
        requests: list[Obj],
        devices: list[Device],
    ) -> None:
        """Whole groups before and after the winner's devices (for the Event), of the aligning class
        the special claim asks most devices of."""
        demand = constraint_demand({}, requests)
        asked = [c for c in sorted(pre.groups) if demand.get(c, 0) > 0]
        if not asked:
            return
        cls = max(asked, key=lambda c: demand[c])
        attr = pre.groups[cls][0]
        groups = self.state.capacity.groups(cls, node, attr)
        broken: set[Value] = set()
        for d in devices:
            broken |= {v for v in values_of(d, attr) or () if v in groups and groups[v].whole}
        placement.group_attribute = attr
        placement.groups = len(groups)
        placement.whole_before = whole_groups(groups)
        placement.whole_after = placement.whole_before - len(broken)

    def resume(self, pod: Obj, claim: Obj) -> Decision | None:
        """Continue with an allocated special claim left by an interrupted binding cycle.

        Only when it is consistent: allocated on one node that still fits the pod, with exactly
        the requests this pod needs there, and every user claim already allocated.
        """
        node = allocation_node(claim)
        if node is None or node not in self.state.nodes:
            return None
        try:
            pre = self.pre_filter(pod, ignore_claim=True)
        except PreFilterFailed:
            return None
        if pre.to_allocate:
            return None
        plan, _ = self._node_plan(pre, node, count_devices=False)
        if plan is None or not plan.dra:
            return None
        requests, mappings = create_requests_and_mappings(pod, plan.dra)
        current = as_list(as_dict(spec(claim).get("devices")).get("requests"))
        if requests != current:
            return None
        return Decision(
            pod,
            SCHEDULED,
            node=node,
            routes=plan.routes,
            requests=requests,
            mappings=mappings,
            user_claims=[UserClaim(c) for c in pre.user_claims],
            resumed=claim,
        )

    # -- Reserve, and the in-memory half of Unreserve -------------------------------------------

    def reserve(self, decision: Decision, token: str | None = None) -> str:
        """Make the decision's devices and pod resources visible to the next decision."""
        assert decision.node is not None
        token = token or str(_uuid.uuid4())
        self.state.reserve(token, decision.device_keys(), decision.pod, decision.node)
        return token

    def release(self, decision: Decision, token: str) -> None:
        """Undo ``reserve`` (the worker's ``unreserve`` calls it after undoing the API writes)."""
        self.state.release(token, decision.pod)


def allocation_node(claim: Obj) -> str | None:
    """The single node an allocation is pinned to (``matchFields metadata.name In [node]``)."""
    selector = as_dict(as_dict(status(claim).get("allocation")).get("nodeSelector"))
    terms = as_list(selector.get("nodeSelectorTerms"))
    if len(terms) != 1:
        return None
    for req in as_list(as_dict(terms[0]).get("matchFields")):
        r = as_dict(req)
        values = as_list(r.get("values"))
        if r.get("key") == "metadata.name" and r.get("operator") == "In" and len(values) == 1:
            return str(values[0])
    return None


def _attributes_of(groups: dict[str, tuple[str, ...]]) -> Callable[[str], tuple[str, ...]]:
    return lambda cls: groups.get(cls, ())


def _in_memory_special_claim(pod: Obj, requests: list[Obj], constraints: list[Obj]) -> Obj:
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


def _fits(checks: list[tuple[str, int]], info: NodeInfo) -> bool:
    """NodeResourcesFit's verdict for the usual node (``PreFilterResult.default_fit``); the reasons,
    when it fails, come from ``fit_resources``."""
    alloc = info.allocatable
    max_pods = alloc.get(PODS, DEFAULT_MAX_PODS) if PODS in info.allocatable_names else DEFAULT_MAX_PODS
    if len(info.pods) + 1 > max_pods:
        return False
    used = info.requested
    for r, want in checks:  # noqa: SIM110 (a loop, not all(...): this runs for every node visited)
        if want > alloc.get(r, 0) - used.get(r, 0):
            return False
    return True
