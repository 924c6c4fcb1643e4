"""One scheduling cycle for a whole pod group (upstream's ``schedule_one_podgroup.go``).

The group is checked first (``validate_pod_group``: one scheduler name, the PodGroup's priority and
one preemption policy for every member); a violation is a SchedulerError for the whole group. Then
the candidate placements are generated (``topologyaware``: one per domain of the group's topology
key; every node when it has none or when topology-aware scheduling is off), and on each, with the
others' nodes hidden (``Scheduler.within``), the default algorithm runs: PlacementFeasible
(``gangscheduling``) before any member, then every member in queue order through the pod's own
PreFilter, Filter, Score and Reserve, each seeing the members placed before it, PlacementFeasible
after each (Unschedulable ends the placement early). Every placement's reservations are undone
after it is tried. Of the placements where the group is feasible, the best by the PlacementScore
plugins (``podgrouppodscount`` and NodeResourcesFit's ``most_allocated_placement``, weight 1 each)
is reserved again, member by member, and returned.

A group is scheduled when its placement is feasible and at least one member was placed. Members
placed then go to binding; the others get their own reason. When the group is unschedulable, every
member gets the group's reason, except those that failed on their own, which keep theirs.

Where upstream picks at random (map order, ties between placements), draxr is deterministic: the
domains in name order, ties to the first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from ..api import podgroups
from ..api.objects import Obj, key, pod_priority, spec
from ..api.podresources import pod_requests_nonzero
from ..cluster.nodeinfo import NodeInfo
from ..cluster.slices import DeviceKey
from . import devicematch, podgroupsearch
from .framework import ERROR, SCHEDULED, UNSCHEDULABLE, Decision
from .plugins import gangscheduling, noderesources, podgrouppodscount, topologyaware
from .scheduler import Scheduler

#: upstream's ``errPodGroupUnschedulable``.
POD_GROUP_UNSCHEDULABLE: Final = "pod group is unschedulable"
NO_FEASIBLE_PLACEMENTS: Final = "no feasible placements found"


def unschedulable(message: str) -> str:
    """A status with upstream's ``errPodGroupUnschedulable``: its message leads the reasons."""
    return f"{POD_GROUP_UNSCHEDULABLE}, {message}" if message else POD_GROUP_UNSCHEDULABLE


def placements_unavailable(count: int) -> str:
    """Every placement infeasible: upstream reports the first's status, always its error."""
    return f"0/{count} placements are available, first placement status: {POD_GROUP_UNSCHEDULABLE}"


@dataclass(slots=True)
class PodGroupInfo:
    """A group as the queue hands it to its cycle: its PodGroup, its members waiting to be
    scheduled (queue order), and its pods already scheduled, each with its node."""

    pod_group: Obj
    members: list[Obj]
    scheduled: list[tuple[Obj, str]] = field(default_factory=list)


@dataclass(slots=True)
class GroupDecision:
    """The cycle's outcome: the group's status and message, one decision per member (in order),
    the chosen placement's name ("" for every node), and the reservation of each member placed
    (``tokens``, None for the others; only when the group is scheduled)."""

    status: str
    message: str
    decisions: list[Decision]
    placement: str | None = None
    tokens: list[str | None] = field(default_factory=list)

    def placed(self) -> list[tuple[Decision, str]]:
        """The members to bind, with their reservation."""
        return [(d, t) for d, t in zip(self.decisions, self.tokens, strict=False) if t is not None]

    def condition(self, kind: str = podgroups.INITIALLY_SCHEDULED) -> Obj:
        """The condition upstream writes for this outcome (``PodGroupInitiallyScheduled``; 1.36's
        ``PodGroupScheduled`` as ``kind``)."""
        if self.status == SCHEDULED:
            state, reason = "True", podgroups.REASON_SCHEDULED
        elif self.status == UNSCHEDULABLE:
            state, reason = "False", podgroups.REASON_UNSCHEDULABLE
        else:
            state, reason = "False", podgroups.REASON_SCHEDULER_ERROR
        return {"type": kind, "status": state, "reason": reason, "message": self.message}


def unsupported_pod_group(pod_group: Obj) -> str | None:
    """What of a PodGroup draxr's worker does not place yet: a composite group's child, and claims
    the group's pods share (``spec.resourceClaims``)."""
    s = spec(pod_group)
    if s.get("parentCompositePodGroupName"):
        return "draxr: a PodGroup of a CompositePodGroup (spec.parentCompositePodGroupName) is not supported"
    if s.get("resourceClaims"):
        return "draxr: a PodGroup's own ResourceClaims (spec.resourceClaims) are not supported"
    return None


def priority_mismatch(pod: Obj, pod_group: Obj) -> str | None:
    """A member whose priority is not its PodGroup's (upstream's message)."""
    p, group_priority = pod_priority(pod), podgroups.priority(pod_group)
    if p == group_priority:
        return None
    return (
        "all pods in a single pod group should have the same priority as the pod group's "
        f"priority, got {p} and {group_priority}"
    )


def validate_pod_group(group: PodGroupInfo, *, pod_group_preemption_policy: bool = False) -> str | None:
    """Why the group cannot be scheduled as one (upstream's ``validatePodGroup``), or None.

    Every member, scheduled ones included, has the first member's scheduler name, the PodGroup's
    priority and one preemption policy: the PodGroup's with the ``PodGroupPreemptionPolicy`` gate,
    else the first member's. What draxr does not place yet is refused first."""
    pg = group.pod_group
    unsupported = unsupported_pod_group(pg)
    if unsupported is not None:
        return unsupported
    scheduler_name: str | None = None
    group_policy = podgroups.preemption_policy(pg) if pod_group_preemption_policy else ""
    for pod in [*group.members, *(p for p, _ in group.scheduled)]:
        name = spec(pod).get("schedulerName") or ""
        if scheduler_name is None:
            scheduler_name = name
        if name != scheduler_name:
            return (
                "all pods in a single pod group should have the same .spec.schedulerName set, "
                f'got: "{name}" and "{scheduler_name}"'
            )
        wrong_priority = priority_mismatch(pod, pg)
        if wrong_priority is not None:
            return wrong_priority
        policy = podgroups.preemption_policy(pod)  # a pod's field, read as a PodGroup's
        if pod_group_preemption_policy:
            if policy != group_policy:
                return (
                    "all pods in a single pod group should have the same preemption policy as the pod "
                    f"group's preemption policy, got {policy} and {group_policy}"
                )
        elif not group_policy:
            group_policy = policy
        elif policy != group_policy:
            return (
                "all pods in a single pod group should have the same preemption policy, "
                f"got {policy} and {group_policy}"
            )
    return None


class Candidate(NamedTuple):
    """A placement the cycle tries: its name, its nodes, and the devices it holds back (those
    without the group's matched attribute value; none without ``draxr.io/match-attribute``)."""

    name: str
    nodes: tuple[str, ...]
    held: frozenset[DeviceKey]


@dataclass(slots=True)
class _Attempt:
    """The default algorithm's result on one placement (its reservations already undone):
    the decisions of the members it evaluated, in order."""

    status: str
    message: str
    evaluated: list[Decision]
    placed: int
    #: The node of each member when the search found the assignment (None: upstream's pass did).
    nodes: list[str | None] | None = None

    def rejected(self, group: PodGroupInfo, message: str) -> list[Decision]:
        """A decision per member for a rejected group with ``message``: a member placed gets it
        behind upstream's error (``NewStatus(Unschedulable, message).WithError(...)``), a member
        not evaluated gets it as it is (``completePodGroupAlgorithmResult``), the others keep
        their own reason."""
        placed = unschedulable(message)
        own = [d if d.status != SCHEDULED else _rejected(d.pod, placed) for d in self.evaluated]
        return own + [_rejected(pod, message) for pod in group.members[len(own) :]]


class PodGroupCycle:
    """Schedules one pod group on the scheduler's state (``schedule``); pure but for the in-memory
    reservations it leaves for the members it places."""

    def __init__(
        self,
        scheduler: Scheduler,
        *,
        topology_aware: bool = True,
        pod_group_preemption_policy: bool = False,
        member_order: Callable[[Sequence[Obj]], list[Obj]] = list,
        search_steps: int = podgroupsearch.DEFAULT_STEPS,
        placement_feasible: gangscheduling.PlacementFeasible = gangscheduling.placement_feasible,
    ) -> None:
        """``search_steps``: the decisions the search may take where upstream's pass fails for a
        gang (``podgroupsearch``, beyond upstream); 0: upstream's pass alone."""
        self.scheduler = scheduler
        self.topology_aware = topology_aware
        self.pod_group_preemption_policy = pod_group_preemption_policy
        self.member_order = member_order
        self.search_steps = search_steps
        #: The PlacementFeasible phase: GangScheduling's (tests give others, as upstream's do).
        self.placement_feasible = placement_feasible

    def schedule(self, group: PodGroupInfo) -> GroupDecision:
        members = self.member_order(group.members)
        group = PodGroupInfo(group.pod_group, members, group.scheduled)
        why = validate_pod_group(group, pod_group_preemption_policy=self.pod_group_preemption_policy)
        if why is not None:
            return self._all(group, ERROR, why)
        domains = [topologyaware.Placement("", tuple(self.scheduler.node_names()))]
        if self.topology_aware:
            try:
                domains = topologyaware.generate_placements(
                    podgroups.topology_key(group.pod_group),
                    self._labels(self.scheduler.node_names()),
                    self._scheduled(group),
                    known=self._labels(self.scheduler.state.nodes.names()),
                )
            except topologyaware.PlacementError as e:
                return self._all(group, ERROR, str(e))
            if not domains:
                return self._all(group, UNSCHEDULABLE, NO_FEASIBLE_PLACEMENTS)
        placements = self._matching(group.pod_group, domains)
        if not placements:
            return self._all(group, UNSCHEDULABLE, NO_FEASIBLE_PLACEMENTS)
        preferred = podgroups.preferred_topology_key(group.pod_group) if self.topology_aware else None
        if preferred is not None:  # beyond upstream: the preferred level first, then the required one
            finer = _refined(placements, preferred, self.scheduler.state.nodes.by_name)
            if finer:
                decision = self._place(group, finer)
                if decision.status != UNSCHEDULABLE:
                    return decision
        return self._place(group, placements)

    def _place(self, group: PodGroupInfo, placements: list[Candidate]) -> GroupDecision:
        """The default algorithm (and the search) on each placement, the best feasible one kept."""
        attempts: list[tuple[Candidate, _Attempt]] = []
        for placement in placements:
            with self.scheduler.within(placement.nodes), self._holding(placement):
                attempt = self._default_algorithm(group)
                if attempt.status == UNSCHEDULABLE:
                    attempt = self._search(group, placement) or attempt
            if attempt.status == ERROR:
                return self._all(group, ERROR, attempt.message)
            attempts.append((placement, attempt))
        feasible = [(p, a) for p, a in attempts if a.status == SCHEDULED]
        if not feasible:
            first = attempts[0][1]
            message = first.message
            if self.topology_aware:
                message = unschedulable(placements_unavailable(len(placements)))
            return GroupDecision(UNSCHEDULABLE, message, first.rejected(group, message))
        try:
            placement, attempt = self._best(group, feasible) if self.topology_aware else feasible[0]
        except podgrouppodscount.NoPodsAssigned as e:
            return self._all(group, ERROR, f"running NormalizePlacementScore on PlacementScore plugins: {e}")
        if not attempt.placed:  # feasible, as minCount was met before, but nobody placed
            return GroupDecision(UNSCHEDULABLE, POD_GROUP_UNSCHEDULABLE, attempt.evaluated)
        return self._commit(group, placement, attempt)

    def _matching(self, pod_group: Obj, placements: list[topologyaware.Placement]) -> list[Candidate]:
        """Each placement, or with ``draxr.io/match-attribute`` each placement with each value of
        the attribute (``devicematch``, beyond upstream)."""
        attribute = devicematch.match_attribute(pod_group)
        if attribute is None:
            return [Candidate(p.name, p.nodes, frozenset()) for p in placements]
        out: list[Candidate] = []
        for value in devicematch.values(self.scheduler.state, attribute):
            for p in placements:
                name = "/".join(x for x in (p.name, f"{attribute}={value.name}") if x)
                out.append(Candidate(name, p.nodes, value.held))
        return out

    def _holding(self, placement: Candidate) -> AbstractContextManager[None]:
        return devicematch.holding(self.scheduler.state, placement.held)

    def _search(self, group: PodGroupInfo, placement: Candidate) -> _Attempt | None:
        """Beyond upstream: a gang's placement where the one pass found none (``podgroupsearch``)."""
        min_count = podgroups.min_count(group.pod_group)
        if (
            not self.search_steps
            or not podgroups.is_gang(group.pod_group)
            or len(group.members) + len(group.scheduled) < min_count
        ):
            return None
        found = podgroupsearch.search(
            self.scheduler, group.members, placement.nodes, min_count, len(group.scheduled), self.search_steps
        )
        if found is None:
            return None
        placed = sum(n is not None for n in found.nodes)
        return _Attempt(SCHEDULED, "", found.decisions, placed, found.nodes)

    # -- the default algorithm on one placement ------------------------------------------------

    def _default_algorithm(self, group: PodGroupInfo) -> _Attempt:
        """Every member in order, PlacementFeasible before and after each; reservations undone."""
        min_count = podgroups.min_count(group.pod_group)
        remaining, scheduled = len(group.members), len(group.scheduled)
        decisions: list[Decision] = []
        tokens: list[tuple[Decision, str]] = []
        feasible = self.placement_feasible
        verdict = feasible(min_count, gangscheduling.Progress(remaining, scheduled))
        try:
            if verdict is not None and verdict[0] == gangscheduling.ERROR:
                why = f"failed to evaluate placement feasibility: {verdict[1]}"
                return _Attempt(ERROR, why, decisions, 0)
            if verdict is not None and verdict[0] == gangscheduling.UNSCHEDULABLE:
                return _Attempt(UNSCHEDULABLE, unschedulable(verdict[1]), decisions, 0)
            placed = 0
            for pod in group.members:
                d = self.scheduler.schedule(pod)
                decisions.append(d)
                if d.status == ERROR:
                    why = f"failed to schedule other pod from a pod group: {d.message}"
                    return _Attempt(ERROR, why, decisions, 0)
                remaining -= 1
                if d.status == SCHEDULED:
                    tokens.append((d, self.scheduler.reserve(d)))
                    scheduled += 1
                    placed += 1
                verdict = feasible(min_count, gangscheduling.Progress(remaining, scheduled))
                if verdict is not None and verdict[0] == gangscheduling.ERROR:
                    why = f"failed to evaluate placement feasibility: {verdict[1]}"
                    return _Attempt(ERROR, why, decisions, 0)
                if verdict is not None and verdict[0] == gangscheduling.UNSCHEDULABLE:
                    break
            return self._finish(decisions, verdict, placed)
        finally:
            for d, token in reversed(tokens):
                self.scheduler.unreserve(d, token)

    @staticmethod
    def _finish(
        decisions: list[Decision], verdict: tuple[gangscheduling.Code, str] | None, placed: int
    ) -> _Attempt:
        """After the last member: minCount met (feasible, whoever was placed), still waiting (the
        Wait's reasons behind upstream's error), or found unreachable (its reason alone)."""
        if verdict is None:
            return _Attempt(SCHEDULED, "", decisions, placed)
        code, message = verdict
        if code == gangscheduling.WAIT:
            message = unschedulable(message)
        return _Attempt(UNSCHEDULABLE, message, decisions, placed)

    # -- PlacementScore and the commit ---------------------------------------------------------

    def _best(
        self, group: PodGroupInfo, feasible: list[tuple[Candidate, _Attempt]]
    ) -> tuple[Candidate, _Attempt]:
        by_name = self.scheduler.state.nodes.by_name
        counts = podgrouppodscount.normalize(
            [podgrouppodscount.score_placement(len(group.scheduled), a.placed) for _, a in feasible]
        )
        best: tuple[Candidate, _Attempt] | None = None
        best_score = -1
        for (placement, attempt), count in zip(feasible, counts, strict=True):
            requests = [pod_requests_nonzero(d.pod)[1] for d in attempt.evaluated if d.status == SCHEDULED]
            fit = noderesources.most_allocated_placement(requests, [by_name[n] for n in placement.nodes])
            total = podgrouppodscount.WEIGHT * count + fit
            if total > best_score:
                best, best_score = (placement, attempt), total
        assert best is not None
        return best

    def _commit(self, group: PodGroupInfo, placement: Candidate, attempt: _Attempt) -> GroupDecision:
        """The chosen placement once more, its reservations kept: the same members in the same
        order on the same state decide the same (each on its node, when the search chose them)."""
        min_count = podgroups.min_count(group.pod_group)
        scheduled = len(group.scheduled)
        decisions: list[Decision] = []
        tokens: list[str | None] = []
        for i, pod in enumerate(group.members):
            node = attempt.nodes[i] if attempt.nodes is not None else ""
            if node is None:  # the search left it unplaced: its own reason
                decisions.append(attempt.evaluated[i])
                tokens.append(None)
                continue
            with self.scheduler.within([node] if node else placement.nodes), self._holding(placement):
                d = self.scheduler.schedule(pod)
            decisions.append(d)
            token = self.scheduler.reserve(d) if d.status == SCHEDULED else None
            tokens.append(token)
            scheduled += token is not None
        if scheduled < min_count or not any(tokens):  # the state changed under the cycle
            for d, t in zip(reversed(decisions), reversed(tokens), strict=True):
                if t is not None:
                    self.scheduler.unreserve(d, t)
            return self._all(group, UNSCHEDULABLE, POD_GROUP_UNSCHEDULABLE)
        return GroupDecision(SCHEDULED, "", decisions, placement.name, tokens)

    # -- helpers -------------------------------------------------------------------------------

    def _labels(self, names: list[str]) -> dict[str, dict[str, str]]:
        by_name = self.scheduler.state.nodes.by_name
        return {n: by_name[n].labels for n in names}

    @staticmethod
    def _scheduled(group: PodGroupInfo) -> list[tuple[str, str]]:
        return [(key(pod), node) for pod, node in group.scheduled]

    @staticmethod
    def _all(group: PodGroupInfo, status: str, message: str) -> GroupDecision:
        return GroupDecision(status, message, [Decision(p, status, message=message) for p in group.members])


def _refined(placements: list[Candidate], key: str, nodes: Mapping[str, NodeInfo]) -> list[Candidate]:
    """Each placement split by the domains of the preferred ``key`` (nodes without it in none)."""
    out: list[Candidate] = []
    for p in placements:
        domains: dict[str, list[str]] = {}
        for n in p.nodes:
            value = nodes[n].labels.get(key)
            if value is not None:
                domains.setdefault(value, []).append(n)
        for value, members in sorted(domains.items()):
            name = "/".join(x for x in (p.name, f"{key}={value}") if x)
            out.append(Candidate(name, tuple(members), p.held))
    return out


def _rejected(pod: Obj, message: str) -> Decision:
    return Decision(pod, UNSCHEDULABLE, message=message)


__all__ = [
    "NO_FEASIBLE_PLACEMENTS",
    "POD_GROUP_UNSCHEDULABLE",
    "GroupDecision",
    "PodGroupCycle",
    "PodGroupInfo",
    "priority_mismatch",
    "unsupported_pod_group",
    "validate_pod_group",
]
