"""DefaultPreemption's PostFilter for a pod that failed Filter on every node (upstream's
``defaultpreemption`` plugin and ``preemption.Evaluator``), device-aware.

Per-cycle state (``PreemptionCycle``, one per ``post_filter`` call): the preemptor and its priority,
the cluster's PDBs, the lower-priority bound pods by node (the possible victims), the node statuses
of the dry run (for the message when nothing helps) and each candidate found.

The steps, upstream's:
1. ``PodEligibleToPreemptOthers``: not with ``preemptionPolicy: Never``; not while a lower-priority
   pod preempted for it still terminates on its nominated node, nor (device-aware) while devices
   there are still held by claims no live pod holds (a deleted victim's, until draxr's cleanup
   or the claim controller releases them: preempting again would take more victims for the same
   devices).
2. The nodes where preemption might help: those whose Filter reasons are resolvable by removing
   pods (``unresolvable``).
3. On each, ``SelectVictimsOnNode``: remove every lower-priority pod (freeing its devices:
   ``simulation``), check the preemptor fits with the scheduler's own Filter, then reprieve victims
   most important first, PDB-violating ones before the others, keeping each whose return still
   lets the preemptor fit.
4. ``pickOneNodeForPreemption``: fewest PDB violations, lowest highest-victim priority, smallest
   priority sum, fewest victims, latest start of the highest-priority victims, then the first by
   name.

``device_aware=False`` is kube-scheduler 1.37's DefaultPreemption exactly, for comparing with it
(``bench/parity.py``): there DynamicResources' ``cannot allocate all claims`` is
UnschedulableAndUnresolvable (dynamicresources.go ``statusUnschedulable``), so a node short of devices
is never a candidate, and the dry run leaves a victim's devices allocated. kube-scheduler therefore
never preempts for devices; draxr's worker does.

As upstream (``GetOffsetAndNumCandidates``), the dry run stops once it has found
``max(10% of the potential nodes, 100)`` candidates, at least one of them without PDB violations;
it starts at the pod's own place in the ring of names (``sampling.start_of``) where upstream
starts at a random offset, so the answer is deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from ....allocation.errors import AllocationError
from ....api.constants import WRITER_ANNOTATION
from ....api.objects import Obj, annotations_of, as_dict, pod_priority, spec, status
from ...cycle import Cycle
from ...framework import Decision, PreFilterFailed, fit_error
from ...sampling import rotation, start_of
from ...scheduler import Scheduler
from ..dynamicresources.filter import CANNOT_ALLOCATE
from .pdb import split_by_pdb_violation
from .simulation import Removal, releasing_devices
from .unresolvable import unresolvable
from .victims import Victim, by_importance, terminating_by_preemption

NAME: Final = "DefaultPreemption"
NEVER: Final = "Never"
NOT_ELIGIBLE_NEVER: Final = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING: Final = "not eligible due to a terminating pod on the nominated node."
NO_VICTIMS: Final = "No preemption victims found for incoming pod"
NOT_HELPFUL: Final = "Preemption is not helpful for scheduling"

_INT32_OFFSET: Final = 2**31  # MaxInt32 + 1: every priority counts >= 0 in the sum
#: Upstream's DefaultPreemptionArgs defaults.
MIN_CANDIDATE_NODES_PERCENTAGE: Final = 10
MIN_CANDIDATE_NODES_ABSOLUTE: Final = 100


def num_candidates(potential: int) -> int:
    """``calculateNumCandidates``: 10% of the potential nodes, at least 100, at most all."""
    n = potential * MIN_CANDIDATE_NODES_PERCENTAGE // 100
    return min(max(n, MIN_CANDIDATE_NODES_ABSOLUTE), potential)


@dataclass(slots=True)
class Candidate:
    """A node where preemption makes the pod fit: its victims, most important first."""

    node: str
    victims: list[Victim]
    pdb_violations: int

    def pods(self) -> list[Obj]:
        return [v.pod for v in self.victims]


@dataclass(slots=True)
class PostFilterResult:
    """``success``: victims to evict on ``nominated_node``. Otherwise ``nominated_node`` "" clears
    the pod's nomination (no candidate at all) and None leaves it as it is (not eligible).
    ``message``: the status message, upstream's ``preemption: ...``."""

    success: bool
    message: str
    nominated_node: str | None = None
    candidate: Candidate | None = None
    candidates: list[Candidate] = field(default_factory=list)

    @property
    def victims(self) -> list[Obj]:
        return self.candidate.pods() if self.candidate is not None else []


@dataclass(slots=True)
class PreemptionCycle:
    pod: Obj
    priority: int
    pdbs: list[Obj]
    #: Bound pods of lower priority by node: the possible victims (``isPreemptionAllowed``).
    lower: dict[str, list[Victim]] = field(default_factory=dict)
    #: The dry run's status per node that did not become a candidate.
    statuses: dict[str, list[str]] = field(default_factory=dict)
    candidates: list[Candidate] = field(default_factory=list)


class DefaultPreemption:
    """PostFilter on ``scheduler``'s state, checking fits with its Filter (``Scheduler.filter``)."""

    def __init__(self, scheduler: Scheduler, *, device_aware: bool = True) -> None:
        self.scheduler = scheduler
        self.state = scheduler.state
        self.device_aware = device_aware

    def _unresolvable(self, reasons: list[str]) -> bool:
        return unresolvable(reasons) or (not self.device_aware and CANNOT_ALLOCATE in reasons)

    def post_filter(self, pod: Obj, decision: Decision, pdbs: list[Obj] | None = None) -> PostFilterResult:
        """``decision``: the unschedulable decision for ``pod`` (its per-node ``reasons``).
        ``pdbs``: the cluster's PodDisruptionBudgets."""
        result = self._preempt(pod, decision, pdbs or [])
        return PostFilterResult(
            result.success,
            f"preemption: {result.message}" if result.message else "",
            result.nominated_node,
            result.candidate,
            result.candidates,
        )

    def _preempt(self, pod: Obj, decision: Decision, pdbs: list[Obj]) -> PostFilterResult:
        cycle = PreemptionCycle(pod, pod_priority(pod), pdbs)
        self._group_lower(cycle)
        why = self.not_eligible(cycle, decision.reasons)
        if why is not None:
            return PostFilterResult(False, why)
        total = len(self.state.nodes)
        potential = sorted(n for n, r in decision.reasons.items() if r and not self._unresolvable(r))
        wanted = num_candidates(len(potential))
        non_violating = 0
        for node in rotation(potential, start_of(pod, potential)):
            candidate = self.select_victims_on_node(cycle, node)
            if candidate is None:
                continue
            cycle.candidates.append(candidate)
            non_violating += candidate.pdb_violations == 0
            if non_violating and len(cycle.candidates) >= wanted:
                break
        if not cycle.candidates:
            statuses = {n: [NOT_HELPFUL] for n in self.state.nodes.names()}
            statuses.update(cycle.statuses)
            return PostFilterResult(False, fit_error(total, statuses), nominated_node="")
        best = pick_one_node_for_preemption(cycle.candidates)
        return PostFilterResult(
            True,
            f"found a potential placement for pod on node {best.node}, "
            f"preempting {len(best.victims)} victims",
            best.node,
            best,
            cycle.candidates,
        )

    def _group_lower(self, cycle: PreemptionCycle) -> None:
        for p in self.state.allocated.pods.values():
            node = spec(p).get("nodeName")
            if isinstance(node, str) and pod_priority(p) < cycle.priority:
                cycle.lower.setdefault(node, []).append(Victim.of(p))

    def not_eligible(self, cycle: PreemptionCycle, reasons: dict[str, list[str]]) -> str | None:
        """``PodEligibleToPreemptOthers``: why the pod may not preempt now, or None."""
        if spec(cycle.pod).get("preemptionPolicy") == NEVER:
            return NOT_ELIGIBLE_NEVER
        nominated = status(cycle.pod).get("nominatedNodeName")
        if isinstance(nominated, str) and nominated:
            if self._unresolvable(reasons.get(nominated, [])):
                return None
            if any(terminating_by_preemption(v.pod) for v in cycle.lower.get(nominated, [])):
                return NOT_ELIGIBLE_TERMINATING
            if releasing_devices(self.state, nominated):
                return NOT_ELIGIBLE_TERMINATING
        return None

    def select_victims_on_node(self, cycle: PreemptionCycle, node: str) -> Candidate | None:
        """``SelectVictimsOnNode``: the fewest, least important victims on ``node`` that let the pod
        fit, or None (the node's status recorded in the cycle)."""
        possible = cycle.lower.get(node, [])
        if not possible:
            cycle.statuses[node] = [NO_VICTIMS]
            return None
        with Removal(self.state, frees_devices=self.device_aware) as removal:
            for v in possible:
                removal.remove(v.pod)
            try:
                # One PreFilter per node: its views follow the state as victims come and go.
                sched_cycle: Cycle = self.scheduler.pre_filter(
                    cycle.pod, ignore_claim=self._reuses_claim(cycle.pod)
                )
            except PreFilterFailed as e:
                cycle.statuses[node] = [str(e)]
                return None
            why = self.fits(cycle.pod, node, sched_cycle)
            if why:
                cycle.statuses[node] = why
                return None
            ordered = by_importance(possible)
            violating, non_violating = split_by_pdb_violation(ordered, cycle.pdbs)
            victims: list[Victim] = []
            violations = 0
            for v, count in violating:
                if not self._reprieve(removal, cycle.pod, node, v, sched_cycle):
                    victims.append(v)
                    violations += count
            for v in non_violating:
                if not self._reprieve(removal, cycle.pod, node, v, sched_cycle):
                    victims.append(v)
        if violating and non_violating:
            victims = by_importance(victims)
        return Candidate(node, victims, violations)

    def _reprieve(self, removal: Removal, pod: Obj, node: str, victim: Victim, sched_cycle: Cycle) -> bool:
        """Put ``victim`` back; True if the pod still fits, else it is removed again. The plugins'
        PreFilter states follow each move (upstream's ``AddPod``/``RemovePod``): a victim put back
        counts again in a spread or an anti-affinity."""
        removal.add(victim.pod)
        sched_cycle.plugins = self.scheduler.plugin_states(pod)
        if not self.fits(pod, node, sched_cycle):
            return True
        removal.remove(victim.pod)
        sched_cycle.plugins = self.scheduler.plugin_states(pod)
        return False

    def fits(self, pod: Obj, node: str, sched_cycle: Cycle | None = None) -> list[str]:
        """The scheduler's Filter for ``pod`` on ``node`` in the state as it is: [] when it fits,
        else the node's reasons. ``sched_cycle``: a PreFilter already made for ``pod``."""
        try:
            if sched_cycle is None:
                sched_cycle = self.scheduler.pre_filter(pod, ignore_claim=self._reuses_claim(pod))
            return self.scheduler.filter(pod, sched_cycle, node).reasons
        except (PreFilterFailed, AllocationError) as e:
            return [str(e)]

    def _reuses_claim(self, pod: Obj) -> bool:
        """The pod's own unallocated special claim, written by this scheduler, is reused, not
        stale (as ``Scheduler.schedule`` decides)."""
        existing = self.state.allocated.special_claim_for(pod)
        return (
            existing is not None
            and self.scheduler.writer is not None
            and annotations_of(existing).get(WRITER_ANNOTATION) == self.scheduler.writer
            and not as_dict(status(existing).get("allocation"))
        )


def _score_keys(c: Candidate) -> tuple[int, int, int, int, float]:
    """Smaller is better, in ``pickOneNodeForPreemption``'s order."""
    highest = c.victims[0].priority if c.victims else -_INT32_OFFSET
    total = sum(v.priority + _INT32_OFFSET for v in c.victims)
    # ``GetEarliestPodStartTime``: the earliest start among the highest-priority victims
    earliest = min((v.start.timestamp() for v in c.victims if v.priority == highest), default=0.0)
    return (c.pdb_violations, highest, total, len(c.victims), -earliest)


def pick_one_node_for_preemption(candidates: list[Candidate]) -> Candidate:
    """``pickOneNodeForPreemption``: each criterion in turn keeps the best; ties go on to the next;
    the first candidate (by name) wins the last tie."""
    return min(candidates, key=_score_keys)


__all__ = ["NAME", "Candidate", "DefaultPreemption", "PostFilterResult", "PreemptionCycle"]
