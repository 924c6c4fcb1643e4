"""DynamicResources as one plugin object, the only door the framework level uses into this package
(``profile.DYNAMIC_RESOURCES`` names it). Its PreFilter writes its state into the cycle state under
its own typed keys; every later phase reads them back: the candidate nodes (upstream's
``PreFilterResult``), Filter before allocation, Score from device counts, the allocation deferred to
the search's score order, the resume of an earlier binding cycle, and the nominated pods' demand."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Final

from ....allocation.policy import BINPACK
from ....allocation.results import ShareIds
from ....api.capacityrequests import capacity_by_class
from ....api.objects import Obj
from ....api.podresources import Units
from ....cluster.nodeinfo import NodeInfo
from ....cluster.state import ClusterState
from ...framework import CycleState, NodeFit, NodePlan, ServedBy, StateKey, UserClaim
from ...sampling import merged_rotation, rotation
from ...scoring import utilisation
from . import filter as dra_filter
from . import score as dra_score
from .allocate import allocate, count_groups
from .mappings import create_requests_and_mappings
from .prefilter import pre_filter
from .resume import allocation_node, still_allocatable
from .state import DraState, DraViews

NAME: Final = "DynamicResources"
#: What PreFilter learns about the pod, and the device views Filter and Score fill lazily.
STATE: Final = StateKey[DraState](f"{NAME}/state")
VIEWS: Final = StateKey[DraViews](f"{NAME}/views")


class DynamicResources:
    """One per scheduler: the cluster state, the policy, the allocator's step budget and the
    share IDs are the plugin's arguments (upstream's plugin factory)."""

    name: Final = NAME
    state_key: Final = STATE
    views_key: Final = VIEWS
    #: The reason of a node whose allocation failed without saying why.
    CANNOT_ALLOCATE: Final = dra_filter.CANNOT_ALLOCATE

    def __init__(self, state: ClusterState, policy: str, step_budget: int, share_ids: ShareIds) -> None:
        self.state = state
        self.policy = policy
        self.step_budget = step_budget
        self.share_ids = share_ids

    # -- PreFilter -------------------------------------------------------------------------------

    def pre_filter(self, cs: CycleState, pod: Obj, reqs: Units, *, ignore_claim: bool) -> dict[str, str]:
        """Writes the plugin's state; returns the names DRA serves on the usual node, which
        NodeResourcesFit leaves out. Raises ``PreFilterFailed``."""
        dra = pre_filter(self.state, pod, reqs, self.policy, ignore_claim=ignore_claim)
        cs.write(STATE, dra)
        cs.write(VIEWS, DraViews())
        return dra.delegated

    def stale(self, cs: CycleState) -> Obj | None:
        """A special claim of an earlier cycle that fails Filter on every node."""
        return cs.read(STATE).stale

    def candidate_nodes(self, cs: CycleState, start: str | None) -> Iterator[str]:
        """The nodes that might fit the pod, once round the ring of names from ``start``.

        With extended resources (and no user claim to allocate), only the nodes in one name's index
        are visited: those with a free device of its class (``FreeDevices.available``) or, where a
        device plugin serves it, with some of it left (``Nodes.with_room``), for the name with the
        fewest such nodes. Any other node fails Filter for that name."""
        rings = self.candidate_rings(cs)
        if rings is None:
            return rotation(self.state.nodes.names(), start)
        if not rings:
            return iter(())
        return merged_rotation(rings, start)

    def candidate_rings(self, cs: CycleState) -> list[list[str]] | None:
        """The sorted rings ``candidate_nodes`` walks as one (shared lists: do not change them);
        None for every node."""
        dra = cs.read(STATE)
        nodes = self.state.nodes
        if not dra.extended or dra.to_allocate:
            return None
        best: list[list[str]] | None = None
        size = 0
        for r in dra.extended:
            rings = [ring for ring in (nodes.with_room(r),) if ring]
            cls = dra.classes.get(r)
            if cls is not None:
                ring = self.state.capacity.available(cls)
                if ring:
                    rings.append(ring)
            n = sum(len(ring) for ring in rings)
            if best is None or n < size:
                best, size = rings, n
        return best or []

    def erroneous_nodes(self, cs: CycleState) -> list[str]:
        """The nodes where a free candidate of one of the pod's classes fails its selectors with a
        CEL error: the candidate nodes leave them out; the search allocates on them first."""
        return dra_filter.erroneous_nodes(self.state, cs.read(STATE))

    # -- Filter ----------------------------------------------------------------------------------

    def served_on(self, cs: CycleState, info: NodeInfo) -> tuple[dict[str, str], dict[str, ServedBy]]:
        """Which names DRA serves on the node, and how each name is served there."""
        return dra_filter.served_on(cs.read(STATE), info)

    def serves_as_usual(self, cs: CycleState, delegated: dict[str, str]) -> bool:
        """Whether ``served_on`` gave the usual node's answer (NodeResourcesFit's checks hold)."""
        return delegated is cs.read(STATE).delegated

    def usual_plan(self, cs: CycleState, node: str) -> NodePlan:
        dra = cs.read(STATE)
        return NodePlan(node, dra.delegated, dra.served)

    def filter(
        self,
        cs: CycleState,
        node: str,
        info: NodeInfo,
        delegated: dict[str, str],
        count_devices: bool = True,
        nominated: Mapping[str, int] | None = None,
    ) -> str | None:
        """The node's reason before allocation, or None (``filter.filter_node``)."""
        return dra_filter.filter_node(
            self.state, cs.read(STATE), cs.read(VIEWS), node, info, delegated, count_devices, nominated
        )

    def nominated_demand(self, pod: Obj, info: NodeInfo) -> dict[str, int]:
        """Per class, the node's free devices a pod nominated to it takes."""
        return dra_filter.nominated_demand(self.state, pod, info)

    # -- Score -----------------------------------------------------------------------------------

    def score(self, cs: CycleState, node: str, info: NodeInfo, reqs: Units) -> float:
        """draxr's policies' utilisation from device counts, minus binpack's broken groups."""
        dra = cs.read(STATE)
        views = cs.read(VIEWS)
        delegated, served = dra_filter.served_on(dra, info)
        usage = dra_score.usage_by_name(self.state, dra, views, node, info, delegated, served)
        score = utilisation(reqs, info, usage)
        if dra.groups and self.policy == BINPACK:
            score -= dra_score.whole_groups_broken(self.state, dra, views, node, delegated)
        return score

    # -- the allocation, deferred in score order ---------------------------------------------------

    def allocate(self, cs: CycleState, pod: Obj, plan: NodePlan) -> NodeFit:
        """Raises ``Unsatisfiable`` (the node does not fit) or ``AllocationError`` (the attempt
        aborts)."""
        return allocate(
            self.state,
            self.policy,
            self.step_budget,
            pod,
            cs.read(STATE),
            cs.read(VIEWS),
            plan,
            self.share_ids,
        )

    def chosen(self, cs: CycleState, node: str, fit: NodeFit) -> None:
        """The winner's whole groups before and after (for the Event)."""
        if fit.placement is not None and fit.special is not None:
            devices = [r.device for r in fit.special.results if not r.admin_access]
            count_groups(self.state, fit.placement, cs.read(STATE), node, fit.requests, devices)

    # -- resuming an earlier binding cycle ---------------------------------------------------------

    def resumable_node(self, claim: Obj) -> str | None:
        """The node of an allocated special claim whose devices the allocator could still give."""
        node = allocation_node(claim)
        if node is None or node not in self.state.nodes or not still_allocatable(self.state, claim, node):
            return None
        return node

    def has_claims_to_allocate(self, cs: CycleState) -> bool:
        return bool(cs.read(STATE).to_allocate)

    def user_claims(self, cs: CycleState) -> list[UserClaim]:
        return [UserClaim(c) for c in cs.read(STATE).user_claims]

    def requests_and_mappings(self, pod: Obj, plan: NodePlan) -> tuple[list[Obj], list[Obj]]:
        """The special claim's requests and the pod's mappings for the names DRA serves there."""
        capacity = capacity_by_class(plan.dra.values(), self.state.classes.get)
        return create_requests_and_mappings(
            pod, plan.dra, tolerations=self.state.classes.tolerations, capacity=capacity
        )
