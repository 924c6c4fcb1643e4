"""``draxr plan``: the scheduling engine, offline, on cluster manifests.

Running pods (with ``spec.nodeName``) consume resources and devices; the others are scheduled one
by one (higher ``spec.priority`` first, then input order), each placement visible to the next. Pods
read from files get what kube-apiserver does to a pod it creates (``matchLabelKeys`` merged into
their selectors: ``core/api/labelkeys``); Namespaces' labels reach pod affinity's namespace
selectors, and a pending pod with ``status.nominatedNodeName`` keeps its room on that node until it
is placed, as in a cluster.

Storage objects (PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes, CSIDrivers,
CSIStorageCapacities, VolumeAttachments) are read as the API server would hold them: a claim naming no
class gets the default StorageClass, and a StatefulSet's pods claim their volume claim templates. The
volume plugins (VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone) place the pods, and
each placement's volume bindings are visible to the next: a claim to provision gets its
``volume.kubernetes.io/selected-node``, a volume bound statically its ``claimRef`` (what PreBind
writes), shown per claim after the pods.

The table shows, per pod, what its devices share (``ALIGNMENT``: the attribute value per container,
or the values a ``preferred`` pod's split set spans) and, per node and class that aligns by an
attribute, its ``FRAGMENTATION``: how many topology groups are still whole and how many free devices
sit in groups already broken.

``--mode`` plans the cluster as draxr's webhook would route it: ``native`` (KEP-5004 with
``DRAExtendedResource`` on: the special claim and the pod's request mapping), or ``rewrite`` (the
gate off: pods with DRA-backed names become ordinary claims made from draxr's templates, the
kubelets without the gate serve no DRA-backed name natively, and in a mixed cluster a pod goes
where it fits now, as ``core.paths`` decides at admission). The ``PATH`` column says which.
What the cluster would write is made by the live path's own pure functions: the claims
kube-controller-manager makes from the templates (``core.paths.templateclaims``, named
``<pod>-<pod claim>`` offline) and PreBind's change to each claim (``core.allocation.claims``).

A device with binding conditions (KEP-5007) is allocated in ``native`` mode (1.36 and later, where
``DRADeviceBindingConditions`` is on), after the others: the table says the pod ``waits for binding
conditions`` on it, and the JSON lists them per pod (``bindingConditions``), since the pod binds
only once the driver reports them True. In ``rewrite`` mode (the gates off) such devices are never
picked.

A pod that fits nowhere gets kube-scheduler's DefaultPreemption (``PostFilter``, device-aware,
with the input's PodDisruptionBudgets): the JSON's ``preemption`` and the table's reason say on
which node it would be nominated, which running pods would be preempted, and why. The plan shows
the preemption without doing it: the victims keep running and the pod stays unscheduled.
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ..core.allocation.claims import (
    as_obj,
    deterministic_name,
    extended_resource_claim_status,
    generate_name,
    special_claim_after_prebind,
    with_reservation,
)
from ..core.allocation.placement import alignment_text
from ..core.allocation.policy import DEFAULT_POLICY
from ..core.api.alignment import align_by
from ..core.api.capacityrequests import capacity_by_class
from ..core.api.labelkeys import with_label_keys
from ..core.api.objects import Obj, annotations_of, name, namespace, spec, status, uid
from ..core.api.podgroups import GroupKey, group_of, is_gang, key_of, min_count
from ..core.api.pvhelpers import default_class_name, with_default_class
from ..core.cel import SelectorEngine
from ..core.cluster.slices import parse_slice
from ..core.cluster.state import ClusterState
from ..core.cluster.topology import Groups, whole_groups
from ..core.paths.choice import path_for
from ..core.paths.requested import backing_classes, requested_extended
from ..core.paths.rewrite import (
    REWRITTEN_ANNOTATION,
    alignment,
    plan_rewrite,
    rewritten_annotation,
    rewritten_pod,
    template,
    templates_of,
)
from ..core.paths.templateclaims import claim_from_template, claim_statuses
from ..core.scheduling.framework import ERROR, SCHEDULED, UNSCHEDULABLE, Decision
from ..core.scheduling.plugins.defaultpreemption import DefaultPreemption, PostFilterResult
from ..core.scheduling.plugins.gangscheduling import pre_enqueue
from ..core.scheduling.plugins.volumebinding.prebind import claim_bindings
from ..core.scheduling.podgroupcycle import PodGroupCycle, PodGroupInfo
from ..core.scheduling.sampling import ADAPTIVE
from ..core.scheduling.scheduler import Scheduler
from ..loader import FROM_CLAIM_TEMPLATE, Loaded, LoadError, expand_workloads, load_paths
from ..loader.workloads import object_uid
from .flags import add_cel_engine, add_filename, add_placement, one_line
from .text import MACHINE_FORMATS, binding_text, plural, share_text, table, write_data

MODES = ("native", "rewrite")


@dataclass
class PodResult:
    pod: Obj
    decision: Decision
    claim: Obj | None = None
    claim_status: Obj | None = None
    path: str = "-"  # native, rewrite, device-plugin; "-" for a pod asking for no DRA-backed name
    claims: list[Obj] = field(default_factory=list)  # rewrite: the claims made from templates
    preemption: PostFilterResult | None = None  # an unschedulable pod's PostFilter
    pod_group: str | None = None  # namespace/name of the PodGroup it was placed with

    def to_json(self) -> dict[str, Any]:
        d = self.decision
        out = {
            "namespace": namespace(self.pod),
            "name": name(self.pod),
            "node": d.node,
            "status": d.status,
            "message": d.message,
            "resources": {r: how.to_api() for r, how in sorted(d.served.items())} if d.node else {},
            "claim": self.claim,
            "extendedResourceClaimStatus": self.claim_status,
            "alignment": d.placement.to_api() if d.node and d.placement is not None else None,
            "path": self.path,
            "claims": [_claim_json(c, d) for c in self.claims],
            "preemption": _preemption_json(self.preemption),
            "bindingConditions": _binding_json(d),
            "podGroup": self.pod_group,
        }
        if d.node and d.volumes is not None:  # only for a pod whose claims this placement binds
            out["volumes"] = [b.to_api() for b in claim_bindings(d.volumes, d.node)]
        return out


def _preemption_json(result: PostFilterResult | None) -> Obj | None:
    """Where the pod would be nominated and whom it would preempt (None: not run)."""
    if result is None:
        return None
    return {
        "nominatedNodeName": result.nominated_node if result.success else None,
        "victims": [
            {"namespace": namespace(v.pod), "name": name(v.pod), "priority": v.priority}
            for v in (result.candidate.victims if result.candidate is not None else [])
        ],
        "pdbViolations": result.candidate.pdb_violations if result.candidate is not None else 0,
        "message": result.message,
    }


def _claim_json(claim: Obj, d: Decision) -> Obj:
    """A claim made from a template, with the allocation this decision gives it."""
    allocated = {name(uc.claim): uc.allocation for uc in d.user_claims if uc.allocation is not None}
    alloc = allocated.get(name(claim))
    out = copy.deepcopy(claim)
    if alloc is not None:
        out["status"] = {"allocation": alloc.to_api()}
    return out


@dataclass
class Plan:
    results: list[PodResult] = field(default_factory=list)
    state: ClusterState = field(default_factory=ClusterState)

    @property
    def summary(self) -> dict[str, int]:
        counts = {"scheduled": 0, "unschedulable": 0, "errors": 0}
        for r in self.results:
            if r.decision.status == SCHEDULED:
                counts["scheduled"] += 1
            elif r.decision.status == ERROR:
                counts["errors"] += 1
            else:
                counts["unschedulable"] += 1
        return counts

    def to_json(self) -> dict[str, Any]:
        return {"pods": [r.to_json() for r in self.results], "summary": self.summary}


def check_inputs(loaded: Sequence[Loaded]) -> None:
    """Reject objects the engine cannot use, naming the file, document and field."""

    for item in loaded:
        if item.obj.get("kind") == "ResourceSlice":
            problem = parse_slice(item.obj).problem
            if problem:
                raise LoadError(item.source, item.index, "spec", problem)


def build_plan(
    objects: Sequence[Obj],
    policy: str = DEFAULT_POLICY,
    cel_engine: str | None = None,
    mode: str = "native",
    percentage_of_nodes_to_score: int = ADAPTIVE,
    *,
    whole_storage: bool = False,
) -> Plan:
    """``cel_engine``: the selectors' CEL engine (None: the default); ValueError if not installed.
    ``mode``: ``native`` or ``rewrite`` (see the module's docstring).
    ``percentage_of_nodes_to_score``: as ``draxr serve``'s (``core.sampling``).
    ``whole_storage``: the objects hold every storage object of the cluster, so a claim they do not
    hold is missing (``draxr plan``); otherwise the volume plugins act only once a storage object
    comes (``VolumeState.watched``): a live cluster read without its claims plans as before."""
    state = ClusterState(SelectorEngine(engine=cel_engine))
    # Native mode is a release with DRAExtendedResource on by default (1.36+), so
    # DRADeviceBindingConditions is on too; rewrite mode stands for one with the gates off.
    state.set_binding_conditions(mode == "native")
    state.volumes.watched = whole_storage
    scheduler = Scheduler(state, policy, percentage_of_nodes_to_score=percentage_of_nodes_to_score)
    plan = Plan(state=state)
    pending: list[tuple[int, int, Obj]] = []
    default_class = default_class_name(o for o in objects if o.get("kind") == "StorageClass")
    given = {
        (namespace(o), name(o))
        for o in objects
        if o.get("kind") == "PersistentVolumeClaim" and FROM_CLAIM_TEMPLATE not in annotations_of(o)
    }
    pdbs = [o for o in objects if o.get("kind") == "PodDisruptionBudget"]
    for o in objects:
        kind = o.get("kind")
        if kind == "PersistentVolumeClaim":
            if FROM_CLAIM_TEMPLATE in annotations_of(o) and (namespace(o), name(o)) in given:
                continue  # the StatefulSet controller reuses a claim that exists
            o = with_default_class(o, default_class)
        if kind != "Pod":
            state.apply(str(kind), o)
    if mode == "rewrite":  # the cluster without the gate: no kubelet serves DRA-backed names natively
        for node_name in state.nodes.names():
            state.nodes.set_kubelet_gate(node_name, False)
    for i, o in enumerate(objects):
        if o.get("kind") != "Pod" or status(o).get("phase") in ("Succeeded", "Failed"):
            continue
        o = with_label_keys(o)
        state.apply("Pod", o)  # a pending pod counts only where it is nominated
        if not spec(o).get("nodeName"):
            prio = spec(o).get("priority", 0)
            pending.append((-(prio if isinstance(prio, int) else 0), i, o))
    pod_groups = {key_of(o): o for o in objects if o.get("kind") == "PodGroup"}
    queued = [pod for _, _, pod in sorted(pending, key=lambda t: (t[0], t[1]))]
    placed_groups: set[GroupKey] = set()
    for pod in queued:
        group = group_of(pod)
        if group is not None and group in pod_groups and mode == "native":
            if group not in placed_groups:  # the whole group at its first member, as the worker does
                placed_groups.add(group)
                plan.results += _place_group(scheduler, pod_groups[group], group, queued, objects)
            continue
        result = _take_path(scheduler, pod, mode)
        if result.decision.status == UNSCHEDULABLE:
            result.preemption = DefaultPreemption(scheduler).post_filter(
                result.decision.pod, result.decision, pdbs
            )
        plan.results.append(result)
    return plan


def _place_group(
    scheduler: Scheduler, pod_group: Obj, group: GroupKey, queued: list[Obj], objects: Sequence[Obj]
) -> list[PodResult]:
    """A pod group's pending members placed in one group cycle, as the worker places them
    (``core/scheduling/podgroupcycle.py``); its members already bound count as scheduled. A group
    that waits says why in each member's message (GangScheduling's PreEnqueue, or the cycle's)."""
    members = [p for p in queued if group_of(p) == group]
    scheduled = [
        (o, str(spec(o)["nodeName"]))
        for o in objects
        if o.get("kind") == "Pod" and group_of(o) == group and spec(o).get("nodeName")
    ]
    gang_min = min_count(pod_group) if is_gang(pod_group) else None
    gated = pre_enqueue(group.name, True, gang_min, len(members) + len(scheduled))
    if gated is not None:
        waiting = [Decision(p, UNSCHEDULABLE, message=gated) for p in members]
        return [PodResult(d.pod, d, pod_group=str(group)) for d in waiting]
    decision = PodGroupCycle(scheduler).schedule(PodGroupInfo(pod_group, members, scheduled))
    for d, token in reversed(decision.placed()):
        scheduler.unreserve(d, token)  # applied below, as the API would show them after binding
    out = []
    for d in decision.decisions:
        path = "native" if backing_classes(requested_extended(d.pod), scheduler.state.classes) else "-"
        result = _apply(scheduler, d, path) if d.status == SCHEDULED else PodResult(d.pod, d, path=path)
        result.pod_group = str(group)
        out.append(result)
    return out


def _take_path(scheduler: Scheduler, pod: Obj, mode: str) -> PodResult:
    """The path the webhook would give ``pod`` in ``mode``, then its placement."""
    state = scheduler.state
    resolved = backing_classes(requested_extended(pod), state.classes)
    if not resolved:
        return _place(scheduler, pod, "-")
    if mode == "native":
        return _place(scheduler, pod, "native")
    choice = path_for(state, resolved, "rewrite", apiserver_gate=False, pod=pod)
    if choice.kind != "rewrite":
        return _place(scheduler, pod, choice.kind)
    rewrite = plan_rewrite(
        pod,
        resolved,
        alignment(pod, state.classes.get, state.capacity.largest_group),
        tolerations=state.classes.tolerations,
        capacity=capacity_by_class(resolved.values(), state.classes.get),
    )
    rewritten = rewritten_pod(pod, rewrite)
    rewritten.setdefault("metadata", {}).setdefault("annotations", {})[REWRITTEN_ANNOTATION] = (
        rewritten_annotation(rewrite)
    )
    claims = [_claim_from_template(rewritten, pc) for pc in rewrite.pod_claims]
    for claim in claims:
        state.apply("ResourceClaim", claim)
    rewritten.setdefault("status", {})["resourceClaimStatuses"] = claim_statuses(rewritten, claims)
    result = _place(scheduler, rewritten, "rewrite")
    result.pod, result.claims = pod, claims
    return result


def _claim_from_template(pod: Obj, pod_claim: Obj) -> Obj:
    """The claim kube-controller-manager's resourceclaim controller would make for ``pod_claim``
    (``core.paths.templateclaims``), named ``<pod>-<pod claim>`` offline: no server adds the random
    suffix a real one gets."""
    ns = namespace(pod)
    ref = next(r for r in templates_of(pod) if r.name == pod_claim["resourceClaimTemplateName"])
    claim_name = f"{name(pod)}-{pod_claim['name']}"
    claim = claim_from_template(pod, pod_claim, template(ref, ns), claim_name=claim_name)
    claim["metadata"]["uid"] = object_uid("ResourceClaim", ns, claim_name)
    return claim


def _place(scheduler: Scheduler, pod: Obj, path: str) -> PodResult:
    return _apply(scheduler, scheduler.schedule(pod), path)


def _apply(scheduler: Scheduler, decision: Decision, path: str) -> PodResult:
    """A decision as the cluster shows it once bound: the pod on its node, its claims written."""
    state = scheduler.state
    pod = decision.pod
    result = PodResult(pod, decision, path=path)
    if decision.status != SCHEDULED or decision.node is None:
        return result
    bound = copy.deepcopy(pod)
    bound.setdefault("spec", {})["nodeName"] = decision.node
    if decision.volumes is not None:  # what PreBind writes: volumes bound, claims' selected node
        volumes, claims = decision.volumes.assumed(decision.node)
        for v in volumes:
            state.apply("PersistentVolume", v)
        for c in claims:
            state.apply("PersistentVolumeClaim", c)
    if decision.special is not None:
        claim_name = deterministic_name(generate_name(pod), uid(pod))
        result.claim = as_obj(
            special_claim_after_prebind(
                pod, decision.requests, decision.special, claim_name, decision.constraints
            )
        )
        result.claim_status = extended_resource_claim_status(claim_name, decision.mappings)
        state.apply("ResourceClaim", result.claim)
        bound.setdefault("status", {})["extendedResourceClaimStatus"] = result.claim_status
    for uc in decision.user_claims:  # PreBind's change to each claim, as the worker writes it
        claim = copy.deepcopy(uc.claim)
        with_reservation(claim, pod, uc.allocation.to_api() if uc.allocation is not None else None)
        state.apply("ResourceClaim", claim)
    state.apply("Pod", bound)
    return result


def _devices_text(r: PodResult) -> str:
    d = r.decision
    if d.status != SCHEDULED:
        pre = r.preemption
        if pre is not None and pre.success and pre.candidate is not None:
            victims = ", ".join(f"{namespace(v.pod)}/{name(v.pod)}" for v in pre.candidate.victims)
            return f"{d.message} {pre.message}: {victims}"
        return d.message
    parts: list[str] = []
    if d.special is not None:
        parts.extend(_device_text(x.to_api()) for x in d.special.results)
    for uc in d.user_claims:
        if uc.allocation is not None:
            parts.extend(_device_text(x.to_api()) for x in uc.allocation.results)
    for res, how in sorted(d.served.items()):
        if how.via == "device-plugin":
            parts.append(f"{res} (device plugin)")
    return ", ".join(parts) or "-"


def _device_text(result: Obj) -> str:
    return f"{result['pool']}/{result['device']}{share_text(result)}{binding_text(result)}"


def _binding_json(d: Decision) -> list[Obj]:
    """The devices whose binding conditions the pod will wait for before it binds (KEP-5007)."""
    out: list[Obj] = []
    for allocation in d.allocations() if d.node else []:
        for r in allocation.results:
            if r.binding_conditions:
                out.append(
                    {
                        "device": f"{r.device.driver}/{r.device.pool}/{r.device.name}",
                        "conditions": list(r.binding_conditions),
                        "failureConditions": list(r.binding_failure_conditions),
                    }
                )
    return out


def fragmentation_text(attribute: str, groups: Groups) -> str:
    """``2/4 pcieRoot whole, 3 free in broken``: whole groups, and free devices outside them."""
    if not groups:
        return "-"
    stranded = sum(g.free for g in groups.values() if not g.whole)
    short = attribute.rsplit("/", 1)[-1]
    return f"{whole_groups(groups)}/{len(groups)} {short} whole, {stranded} free in broken"


def write_table(plan: Plan, out: TextIO, where: str = "input") -> None:
    """The plan for people; ``where``: what the objects came from (``the input has no Nodes``)."""
    if not plan.state.nodes:
        out.write(f"no Nodes in the {where}: no pod can be scheduled\n\n")
    rows = [["POD", "PATH", "NODE", "DEVICES / REASON", "ALIGNMENT"]]
    for r in plan.results:
        scheduled = r.decision.status == SCHEDULED
        rows.append(
            [
                f"{namespace(r.pod)}/{name(r.pod)}",
                r.path,
                r.decision.node or "<none>",
                _devices_text(r),
                alignment_text(r.decision.placement) if scheduled else "-",
            ]
        )
    out.write(table(rows) + "\n\n")
    bindings = [["CLAIM", "POD", "NODE", "BINDING"]]
    for r in plan.results:
        if r.decision.node and r.decision.volumes is not None:
            for b in claim_bindings(r.decision.volumes, r.decision.node):
                bindings.append([b.claim, f"{namespace(r.pod)}/{name(r.pod)}", b.node, b.text()])
    if len(bindings) > 1:
        out.write(table(bindings) + "\n\n")
    state = plan.state
    summary = [["NODE", "RESOURCE", "VIA", "USED", "FREE", "FRAGMENTATION"]]
    for dc in state.classes.classes():
        cls = name(dc)
        totals = state.capacity.total(cls)
        free = state.capacity.free(cls)
        attrs = align_by(dc)
        for node in sorted(totals):
            frag = fragmentation_text(attrs[0], state.capacity.groups(cls, node, attrs[0])) if attrs else "-"
            summary.append(
                [node, cls, "dra", str(totals[node] - free.get(node, 0)), str(free.get(node, 0)), frag]
            )
    for node, info in sorted(state.nodes.items()):
        for res, alloc in sorted(info.allocatable.items()):
            if "/" in res and alloc > 0:
                used = info.requested.get(res, 0)
                summary.append([node, res, "device-plugin", str(used), str(alloc - used), "-"])
    if len(summary) > 1:
        out.write(table(summary) + "\n\n")
    s = plan.summary
    out.write(
        f"{s['scheduled']} scheduled, {s['unschedulable']} unschedulable, {plural(s['errors'], 'error')}\n"
    )


def run(
    paths: Sequence[str | Path],
    output: str,
    policy: str,
    out: TextIO,
    err: TextIO,
    cel_engine: str | None = None,
    mode: str = "native",
    percentage_of_nodes_to_score: int = ADAPTIVE,
) -> int:
    try:
        loaded = load_paths(paths)
        check_inputs(loaded)
        cel = SelectorEngine(engine=cel_engine)
    except (LoadError, ValueError) as e:
        err.write(f"draxr plan: error: {one_line(str(e))}\n")
        return 2
    objects = expand_workloads([item.obj for item in loaded])
    plan = build_plan(objects, policy, cel.engine, mode, percentage_of_nodes_to_score, whole_storage=True)
    if output in MACHINE_FORMATS:
        write_data(plan.to_json(), output, out)
    else:
        write_table(plan, out)
    return 0 if all(r.decision.status == SCHEDULED for r in plan.results) else 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("plan", help="schedule pods offline on cluster manifests")
    add_filename(p)
    p.add_argument("-o", "--output", choices=("table", *MACHINE_FORMATS), default="table")
    add_placement(
        p,
        percentage_help="score only this share of the fitting nodes, as draxr serve does "
        "(0: adaptive; 100: every node)",
    )
    add_cel_engine(p)
    p.add_argument(
        "--mode",
        choices=MODES,
        default="native",
        help="plan as the webhook routes pods: native (DRAExtendedResource on: KEP-5004's special claim) "
        "or rewrite (the gate off: DRA-backed names become claims from draxr's templates)",
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    return run(
        args.filename,
        args.output,
        args.policy,
        sys.stdout,
        sys.stderr,
        args.cel_engine,
        args.mode,
        args.percentage_of_nodes_to_score,
    )
