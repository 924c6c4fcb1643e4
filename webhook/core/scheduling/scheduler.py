"""One scheduling decision for one pod, in the phases of kube-scheduler's framework: the search
(upstream's ``schedule_one.go``) over the framework runtime (``runtime``: the profile's Filter, Score
and Reserve plugins) and DynamicResources' plugin object (``profile.DYNAMIC_RESOURCES``).

``pre_filter``  PreFilter: every plugin's facts about the pod, once (``Cycle``): its requests
                (NodeResourcesFit), what the node filters need, and DynamicResources' claims and
                names (``plugins/dynamicresources/prefilter.py``).
``filter``      Filter, per node, in upstream's order: NodeUnschedulable, TaintToleration,
                NodeAffinity, NodePorts (``nodefilters``), NodeResourcesFit (device-plugin names
                counted against allocatable), the profile's plugins (``profile``: PodTopologySpread,
                InterPodAffinity), then DynamicResources (names with allocatable 0 and a class go to
                DRA; the special claim's requests and the user claims allocated together). On a
                node with nominated pods, first with them added (``nominated``).
``score``       Score: ``binpack``, ``spread`` or ``upstream`` (``scoring``).
``reserve``     Reserve: in-flight devices, the assumed pod and its assumed volume bindings, visible
                to the next decision.
``unreserve``   the in-memory half of Unreserve (the worker's own Unreserve also undoes the binding
                cycle's API writes).

PostFilter, PreBind and Bind write to the API and live in the worker.

draxr's placement (``cluster/topology``, ``allocation/placement``): for classes with
``draxr.io/align-by`` the special claim gets a ``matchAttribute`` constraint per container and
attribute (unless the pod says ``draxr.io/align: none``; ``preferred`` retries without them), and the
allocator tries each request's candidates in the policy's group order. ``--policy upstream`` does
neither: first fit, no constraint.

Scores depend only on counts (free devices, requested and allocatable resources), never on the
outcome of Filter, so candidate nodes are scored first and then filtered and allocated lazily in
score order: the winner is the best-scoring node that passes every filter and on which allocation
succeeds, exactly as if every node had been filtered first. Nodes with a CEL error among their
candidates are always allocated, so the error aborts the attempt as upstream's parallel Filter does.
The usual pod on the usual node is checked in one call (``usual``), by the search and by Filter and
Score alike.
"""

from __future__ import annotations

import heapq
import uuid as _uuid
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from itertools import count, islice
from typing import Any

from ..allocation.errors import AllocationError, Unsatisfiable
from ..allocation.policy import DEFAULT_POLICY, POLICIES, SPREAD, UPSTREAM
from ..allocation.results import ShareIds
from ..api.constants import WRITER_ANNOTATION
from ..api.objects import Obj, annotations_of, as_dict, as_list, spec, status
from ..api.podresources import pod_requests, pod_requests_nonzero
from ..cluster.nodeinfo import NodeInfo
from ..cluster.state import ClusterState
from . import profile
from .cycle import Cycle
from .framework import (
    ERROR,
    SCHEDULED,
    UNSCHEDULABLE,
    CycleState,
    Decision,
    FilterPlugin,
    NodeFit,
    NodePlan,
    PluginError,
    Prefiltered,
    PreFilterFailed,
    ScorePlugin,
    fit_error,
)
from .nominated import WithNominated, with_nominated
from .runtime import Framework
from .sampling import ADAPTIVE, check_percentage, num_feasible_nodes_to_find, start_of
from .scoring import upstream_score
from .usual import Check, Entry, Usual, UsualMemo, is_usual_pod, usual_check


def _new_share_id() -> str:
    return str(_uuid.uuid4())


# A reservation's token names it in this process's memory alone (Reserve to Unreserve): a counter
# serves, without the system call of a random UUID in every decision.
_tokens = count(1)


class Scheduler:
    """The pure engine shared by ``draxr plan``, the webhook's fit warnings and the worker.

    ``writer``: the scheduler name a worker marks its special claims with. A special claim the pod
    already has and that this writer wrote is continued (allocated: ``resumed``) or reused
    (unallocated: ``reuse``) instead of blocking the pod as stale.
    ``percentage_of_nodes_to_score``: 0 adaptive, 100 every node (``sampling``).
    ``filters``, ``scores``: the profile's plugins (``profile``; tests give others).
    ``share_ids``: the ``shareID`` of each new share of a multi-allocatable device (default: a fresh
    ``uuid4``, unique wherever the allocation is written; tests give a deterministic sequence).
    """

    def __init__(
        self,
        state: ClusterState,
        policy: str = DEFAULT_POLICY,
        step_budget: int = 200_000,
        writer: str | None = None,
        percentage_of_nodes_to_score: int = ADAPTIVE,
        *,
        filters: Sequence[FilterPlugin[Any]] = profile.FILTERS,
        scores: Sequence[ScorePlugin[Any, Any]] = profile.SCORES,
        share_ids: ShareIds | None = None,
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; use one of {', '.join(POLICIES)}")
        self.state = state
        self.policy = policy
        self.step_budget = step_budget
        self.writer = writer
        self.percentage_of_nodes_to_score = check_percentage(percentage_of_nodes_to_score)
        #: The profile's Filter and Score plugins, run through their phases (``runtime``).
        self.framework = Framework(state, filters, scores)
        self.share_ids: ShareIds = share_ids or _new_share_id
        #: The filters before the profile's (NodeUnschedulable ... NodePorts), and NodeResourcesFit.
        self.basic = profile.BASIC_FILTERS
        self.fit = profile.NODE_RESOURCES_FIT
        #: DynamicResources, the one plugin the search defers to (candidate nodes, allocation).
        self.dra = profile.DYNAMIC_RESOURCES(state, policy, step_budget, self.share_ids)
        #: The nodes of a pod group's placement while one is assumed (``within``), else every node.
        self.placement: frozenset[str] | None = None
        #: The usual node's verdicts per pod shape, remembered across decisions (``usual``).
        self._usual_memo = UsualMemo()

    @contextmanager
    def within(self, nodes: Collection[str]) -> Iterator[None]:
        """Decide only among ``nodes`` (upstream's ``AssumePlacement``: the snapshot lists the
        placement's nodes alone, so the walk, the sampling and the FitError count only them)."""
        outer = self.placement
        self.placement = frozenset(nodes)
        try:
            yield
        finally:
            self.placement = outer

    def node_names(self) -> list[str]:
        """The nodes a decision may choose among, sorted: the placement's, or every node."""
        names = self.state.nodes.names()
        placement = self.placement
        return names if placement is None else [n for n in names if n in placement]

    # -- PreFilter -----------------------------------------------------------------------------

    def pre_filter(self, pod: Obj, *, ignore_claim: bool = False) -> Cycle:
        """Raises ``PreFilterFailed`` when a claim of the pod is missing or unusable.
        ``ignore_claim``: the pod's special claim will be reused, so it is not stale."""
        if self.policy == UPSTREAM:
            reqs, nonzero = pod_requests_nonzero(pod)
        else:
            reqs, nonzero = pod_requests(pod), {}
        plugins = self.plugin_states(pod)
        cs = CycleState()
        delegated = self.dra.pre_filter(cs, pod, reqs, ignore_claim=ignore_claim)
        return Cycle(
            pod,
            reqs,
            nonzero,
            self.basic.pre_filter(pod),
            self.fit.pre_filter(reqs, delegated),
            cs,
            plugins,
            nominated=self.state.allocated.nominated_for(pod),
        )

    def plugin_states(self, pod: Obj) -> list[Prefiltered]:
        """The profile's Filter plugins that do not skip ``pod``, with their PreFilter state of the
        cluster as it is now (``runtime``). Preemption's dry run asks again whenever it puts a
        victim back or takes it out, as upstream's PreFilterExtensions update them."""
        return self.framework.run_pre_filter_plugins(pod)

    # -- Filter --------------------------------------------------------------------------------

    def filter(self, pod: Obj, cycle: Cycle, node_name: str) -> NodeFit:
        """Every filter plugin on one node, allocation included. Raises ``AllocationError``, which
        aborts the attempt (a CEL runtime error, say)."""
        plan, reasons = self._node_plan(cycle, node_name)
        if plan is None:
            return NodeFit(reasons)
        try:
            return self.dra.allocate(cycle.state, pod, plan)
        except Unsatisfiable as e:
            return NodeFit([str(e)])

    def _usual(self, cycle: Cycle, score: bool) -> Check | None:
        """The usual-node check of the decision (``usual``), or None for any other pod (one the
        profile's plugins check included)."""
        usual = None if cycle.plugins else self._check(cycle, score)
        return None if usual is None else usual.check

    def _check(self, cycle: Cycle, score: bool) -> Usual | None:
        """The usual-node check of every filter but the profile's plugins, whether they check the
        pod or not: for a pod they check, a node the check passes takes their filters after it
        (``runtime``), as upstream runs them after NodeResourcesFit and before
        DynamicResources, which the check has passed too; None for a pod that is not usual."""
        if score not in cycle.checks:
            pf = cycle.filters
            dra = cycle.state.read(self.dra.state_key)
            views = cycle.state.read(self.dra.views_key)
            cycle.checks[score] = (
                usual_check(self.state, dra, views, cycle.fit_checks, self.policy, score, self._usual_memo)
                if is_usual_pod(self.policy, dra, pf.constrained, bool(pf.ports), False)
                else None
            )
        return cycle.checks[score]

    def _node_plan(
        self, cycle: Cycle, node_name: str, count_devices: bool = True
    ) -> tuple[NodePlan | None, list[str]]:
        """The filters before allocation: the node's reasons to refuse the pod, or its plan. On a
        node with nominated pods, every filter runs with them added, then without (``nominated``)."""
        if cycle.nominated and node_name in cycle.nominated:
            added = self._with_nominated(cycle, node_name)
            plan, reasons = self._filters(
                cycle, node_name, added.info, added.plugins, count_devices, added.devices
            )
            if plan is None:
                return plan, reasons
        return self._filters(
            cycle, node_name, self.state.nodes.by_name[node_name], cycle.plugins, count_devices
        )

    def _with_nominated(self, cycle: Cycle, node_name: str) -> WithNominated:
        found = cycle.with_nominated.get(node_name)
        if found is None:
            found = cycle.with_nominated[node_name] = with_nominated(
                self.state, node_name, cycle.nominated[node_name], cycle.plugins, self.dra.nominated_demand
            )
        return found

    def _filters(
        self,
        cycle: Cycle,
        node_name: str,
        info: NodeInfo,
        plugins: list[Prefiltered],
        count_devices: bool,
        nominated: dict[str, int] | None = None,
    ) -> tuple[NodePlan | None, list[str]]:
        """Every filter on one view of the node (the usual check only on the node as it is)."""
        cs = cycle.state
        if count_devices and nominated is None:
            usual = self._check(cycle, False)
            if usual is not None and isinstance(usual.check(info, node_name), float):
                refused = self.framework.run_filter_plugins(plugins, node_name, info)
                if refused:
                    return None, refused
                return self.dra.usual_plan(cs, node_name), []
        pf = cycle.filters
        if self.basic.needed(pf, info):
            reasons = self.basic.filter(pf, info)
            if reasons:
                return None, reasons
        delegated, served = self.dra.served_on(cs, info)
        if not self.dra.serves_as_usual(cs, delegated) or not self.fit.fits(cycle.fit_checks, info):
            reasons = self.fit.filter(cycle.reqs, info, delegated)
            if reasons:
                return None, reasons
        refused = self.framework.run_filter_plugins(plugins, node_name, info)
        if refused is not None:
            return None, refused
        why = self.dra.filter(cs, node_name, info, delegated, count_devices, nominated)
        if why is not None:
            return None, [why]
        return NodePlan(node_name, delegated, served), []

    def erroneous_nodes(self, cycle: Cycle) -> list[str]:
        """The nodes where a free candidate of one of the pod's classes fails its selectors with a
        CEL error (DynamicResources'): the walk leaves them out."""
        erroneous = self.dra.erroneous_nodes(cycle.state)
        placement = self.placement
        return erroneous if placement is None else [n for n in erroneous if n in placement]

    def _walk(self, cycle: Cycle, start: str | None) -> Iterator[str]:
        """The nodes that might fit the pod, once round the ring of names from ``start``:
        DynamicResources' candidate nodes (upstream's ``PreFilterResult``), within the placement."""
        walk = self.dra.candidate_nodes(cycle.state, start)
        placement = self.placement
        return walk if placement is None else (n for n in walk if n in placement)

    # -- Score ---------------------------------------------------------------------------------

    def score(self, cycle: Cycle, node_name: str) -> float:
        """The policy's score from counts alone, so nodes can be ordered before they are filtered
        (the profile's Score plugins, normalized over the feasible nodes, come on top: ``runtime``)."""
        info = self.state.nodes.by_name[node_name]
        if self.policy == UPSTREAM:
            return float(upstream_score(cycle.reqs, cycle.nonzero, info))
        usual = self._check(cycle, True)
        if usual is not None:
            key = usual.check(info, node_name)
            if isinstance(key, float):
                return key if self.policy == SPREAD else -key
        return self.dra.score(cycle.state, node_name, info, cycle.reqs)

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
        total = len(self.node_names())
        try:
            cycle = self.pre_filter(pod, ignore_claim=ignore_claim)
        except PreFilterFailed as e:
            return Decision(pod, UNSCHEDULABLE, message=fit_error(total, {}, str(e)))
        except PluginError as e:
            return Decision(pod, ERROR, message=str(e))
        reasons: dict[str, list[str]] = {}
        try:
            # A stale special claim fails Filter on every node before allocation: nothing to search.
            stale = self.dra.stale(cycle.state)
            if stale is None:
                self._filter_erroneous(pod, cycle)
                found = self._search(pod, cycle, score, reasons)
                if found is not None:
                    return found
            # Nothing fits: explain every node, including those the search never visited.
            for n in self.node_names():
                if n not in reasons:
                    _, why = self._node_plan(cycle, n)
                    reasons[n] = why or [self.dra.CANNOT_ALLOCATE]
        except (AllocationError, PluginError) as e:
            return Decision(pod, ERROR, message=str(e))
        return Decision(
            pod,
            UNSCHEDULABLE,
            message=fit_error(total, reasons),
            reasons=reasons,
            stale_claim=stale,
        )

    def _filter_erroneous(self, pod: Obj, cycle: Cycle) -> None:
        """Nodes with a CEL error among the free candidates of the pod's classes are allocated
        first, by name, so that the error aborts the attempt (``AllocationError``) whichever node
        would have won and wherever the search would have stopped, as upstream's parallel Filter,
        which meets them sooner or later, does."""
        for n in self.erroneous_nodes(cycle):
            self.filter(pod, cycle, n)

    def _search(self, pod: Obj, cycle: Cycle, score: bool, reasons: dict[str, list[str]]) -> Decision | None:
        """Filter until enough nodes pass, then Score them and allocate in score order.

        The walk (``_walk``) visits the nodes that may fit, from the pod's own start
        (``sampling.start_of``), and stops once ``num_feasible_nodes_to_find`` of them pass every
        filter but the allocation itself (which costs the most, and which the device counts
        checked already foresee); those are scored, and allocated best first: the first that
        allocates wins. A node whose allocation fails is replaced by the next node of the walk
        that passes, so the winner is the best of that many nodes on which nothing failed.
        ``score=False`` (does any node fit?) walks by name and stops at the first that fits.

        When the usual pass alone decides a walk round one ring (``_usual_ring``), the best of those
        nodes comes from runs of nodes remembered whole (``Usual.best``) and is allocated on first;
        only if that allocation fails does the walk below take over, meeting it first again.
        """
        nodes = self.node_names()
        wanted = num_feasible_nodes_to_find(self.percentage_of_nodes_to_score, len(nodes)) if score else 1
        start = start_of(pod, nodes) if wanted < len(nodes) and score else None
        cs = cycle.state
        walked = self._usual_ring(cycle) if score else None
        if walked is not None:
            usual, ring = walked
            top = usual.best(ring, start, wanted, lambda n: self._general(cycle, n, score))
            if top is None:
                return None
            if not self.framework.run_pre_score_plugins(cycle):
                _, n, maybe = top
                plan = maybe if maybe is not None else self.dra.usual_plan(cs, n)
                try:
                    fit = self.dra.allocate(cs, pod, plan)
                except Unsatisfiable:
                    pass  # the search below meets it first again, and goes on past it
                else:
                    return self._scheduled(cycle, pod, n, plan, fit)
        feasible = self._feasible(cycle, self._walk(cycle, start), score)
        heap = list(islice(feasible, wanted))  # one C-level pull for all of them
        scorers = self.framework.run_pre_score_plugins(cycle) if score and heap else []
        untried = heap  # with the policy's keys, when the Score plugins come on top
        if scorers:
            heap = self.framework.run_score_plugins(scorers, untried, self.policy)
        heapq.heapify(heap)
        while heap:
            _, n, maybe = heapq.heappop(heap)
            plan = maybe if maybe is not None else self.dra.usual_plan(cs, n)
            try:
                fit = self.dra.allocate(cs, pod, plan)
            except Unsatisfiable as e:
                reasons[n] = [str(e)]
                found = list(islice(feasible, 1))  # the next node that passes takes its place
                if scorers:  # normalized over the feasible nodes not tried yet, which changed
                    untried = [u for u in untried if u[1] != n] + found
                    heap = self.framework.run_score_plugins(scorers, untried, self.policy)
                    heapq.heapify(heap)
                else:
                    for entry in found:
                        heapq.heappush(heap, entry)
                continue
            return self._scheduled(cycle, pod, n, plan, fit)
        return None

    def _usual_ring(self, cycle: Cycle) -> tuple[Usual, list[str]] | None:
        """The usual pass and the one ring the walk goes round, when that pass alone decides the
        walk's nodes: a usual pod, no placement, nominated pods or profile plugins; else None."""
        if self.placement is not None or cycle.nominated or cycle.plugins:
            return None
        usual = self._check(cycle, True)
        rings = self.dra.candidate_rings(cycle.state) if usual is not None else None
        return (usual, rings[0]) if usual is not None and rings is not None and len(rings) == 1 else None

    def _scheduled(self, cycle: Cycle, pod: Obj, n: str, plan: NodePlan, fit: NodeFit) -> Decision:
        """Reserve on the node the search chose."""
        self.dra.chosen(cycle.state, n, fit)
        return self.framework.run_reserve_plugins(
            cycle,
            Decision(
                pod,
                SCHEDULED,
                node=n,
                served=dict(plan.served),
                requests=fit.requests,
                mappings=fit.mappings,
                special=fit.special,
                user_claims=fit.user_claims,
                placement=fit.placement,
            ),
        )

    def _feasible(self, cycle: Cycle, walk: Iterator[str], score: bool) -> Iterator[Entry]:
        """The nodes of the walk that pass every filter but the allocation, with their sort key
        (the score, negated unless the policy spreads; 0 without ``score``) and plan (None for the
        usual node: ``NodePlan(node, dra.delegated, dra.served)``, made when allocated on). The
        usual node is checked in one pass (``usual``), then the profile's plugins that check the pod;
        any other takes Filter and Score (``_general``)."""
        usual = self._check(cycle, score)

        def other(n: str) -> Entry | None:
            return self._general(cycle, n, score)

        if usual is None:
            return (e for n in walk if (e := other(n)) is not None)
        entries = usual.scan(walk, other, cycle.nominated)
        return self._then_plugins_on(cycle, entries) if cycle.plugins else entries

    def _then_plugins_on(self, cycle: Cycle, entries: Iterator[Entry]) -> Iterator[Entry]:
        """The profile's plugins that check the pod, on each node the usual check passed (an entry
        without a plan; the general filters ran them already on the others), as upstream runs them
        after NodeResourcesFit and before DynamicResources."""
        by_name = self.state.nodes.by_name
        plugins = cycle.plugins
        refused = self.framework.run_filter_plugins
        for entry in entries:
            if entry[2] is None and refused(plugins, entry[1], by_name[entry[1]]) is not None:
                continue
            yield entry

    def _general(self, cycle: Cycle, n: str, score: bool) -> Entry | None:
        """Filter and Score on a node that is not the usual one."""
        plan, _ = self._node_plan(cycle, n)
        if plan is None:
            return None
        key = 0.0
        if score:
            key = self.score(cycle, n)
            if self.policy != SPREAD:
                key = -key
        return key, n, plan

    def resume(self, pod: Obj, claim: Obj) -> Decision | None:
        """Continue with an allocated special claim left by an interrupted binding cycle.

        Only when it is consistent: allocated on one node that still fits the pod, with exactly
        the requests this pod needs there, devices the allocator could still give it
        (``resume.still_allocatable``), and every user claim already allocated.
        """
        node = self.dra.resumable_node(claim)
        if node is None:
            return None
        try:
            cycle = self.pre_filter(pod, ignore_claim=True)
            if self.dra.has_claims_to_allocate(cycle.state):
                return None
            plan, _ = self._node_plan(cycle, node, count_devices=False)
        except (PreFilterFailed, PluginError):
            return None
        if plan is None or not plan.dra:
            return None
        requests, mappings = self.dra.requests_and_mappings(pod, plan)
        if requests != as_list(as_dict(spec(claim).get("devices")).get("requests")):
            return None
        return self.framework.run_reserve_plugins(
            cycle,
            Decision(
                pod,
                SCHEDULED,
                node=node,
                served=plan.served,
                requests=requests,
                mappings=mappings,
                user_claims=self.dra.user_claims(cycle.state),
                resumed=claim,
            ),
        )

    # -- Reserve, and the in-memory half of Unreserve -------------------------------------------

    def reserve(self, decision: Decision) -> str:
        """Make the decision's devices, pod resources and volume bindings visible to the next
        decision; the token ``unreserve`` takes back."""
        assert decision.node is not None
        token = f"reservation-{next(_tokens)}"
        self.state.reserve(
            token,
            decision.dedicated_keys(),
            decision.pod,
            decision.node,
            decision.volumes,
            decision.shares(),
        )
        return token

    def unreserve(self, decision: Decision, token: str) -> None:
        """Undo ``reserve`` (the worker's Unreserve calls it after undoing the API writes)."""
        self.state.unreserve(token, decision.pod)
