"""Node filters in kube-scheduler's order and words: NodeUnschedulable, TaintToleration,
NodeAffinity, NodePorts, NodeResourcesFit. Each returns the reasons a node fails (empty = fits)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from ..api.nodematch import pod_node_affinity_matches, tolerates, untolerated
from ..api.objects import Obj, as_dict, as_list, spec
from ..api.podresources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Units
from ..cluster.nodeinfo import NodeInfo

UNSCHEDULABLE = "node(s) were unschedulable"
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
PORTS = "node(s) didn't have free ports for the requested pod ports"
DEFAULT_MAX_PODS = 110

_UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def taint_reason(taint: Obj) -> str:
    return f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"


@dataclass(frozen=True, slots=True)
class PodFilter:
    """What the node filters need from a pod, computed once per decision."""

    pod: Obj
    tolerations: list[Obj]
    tolerates_unschedulable: bool
    constrained: bool  # has a nodeSelector or required node affinity
    ports: list[tuple[str, str, int]]

    @classmethod
    def of(cls, pod: Obj, ports: list[tuple[str, str, int]]) -> PodFilter:
        s = spec(pod)
        tolerations = [t for t in as_list(s.get("tolerations")) if isinstance(t, dict)]
        affinity = as_dict(as_dict(s.get("affinity")).get("nodeAffinity"))
        return cls(
            pod,
            tolerations,
            any(tolerates(t, _UNSCHEDULABLE_TAINT) for t in tolerations),
            bool(as_dict(s.get("nodeSelector")))
            or bool(affinity.get("requiredDuringSchedulingIgnoredDuringExecution")),
            ports,
        )


def basic_filters(pf: PodFilter, info: NodeInfo) -> list[str]:
    """Everything before resource fit; stops at the first failing plugin, as the framework does."""
    if info.unschedulable and not pf.tolerates_unschedulable:
        return [UNSCHEDULABLE]
    if info.hard_taints:
        bad = untolerated(info.hard_taints, pf.tolerations)
        if bad is not None:
            return [taint_reason(bad)]
    if pf.constrained and not pod_node_affinity_matches(pf.pod, info.node):
        return [AFFINITY]
    if pf.ports and _ports_conflict(pf.ports, info):
        return [PORTS]
    return []


def _ports_conflict(wanted: list[tuple[str, str, int]], info: NodeInfo) -> bool:
    for used in info.host_ports.values():
        for proto, ip, port in used:
            for wproto, wip, wport in wanted:
                if port == wport and proto == wproto and (ip == wip or "0.0.0.0" in (ip, wip)):
                    return True
    return False


def is_scalar(resource: str) -> bool:
    return "/" in resource or resource.startswith("hugepages-")


def fit_resources(reqs: Units, info: NodeInfo, delegated: Collection[str]) -> list[str]:
    """NodeResourcesFit: every insufficient resource, skipping names delegated to DRA here."""
    reasons: list[str] = []
    alloc = info.allocatable
    used = info.requested
    max_pods = alloc.get(PODS, DEFAULT_MAX_PODS) if PODS in info.allocatable_names else DEFAULT_MAX_PODS
    if len(info.pods) + 1 > max_pods:
        reasons.append("Too many pods")
    for res in (CPU, MEMORY, EPHEMERAL_STORAGE):
        want = reqs.get(res, 0)
        if want > 0 and want > alloc.get(res, 0) - used.get(res, 0):
            reasons.append(f"Insufficient {res}")
    for res, want in reqs.items():
        if want == 0 or not is_scalar(res) or res in delegated:
            continue
        if want > alloc.get(res, 0) - used.get(res, 0):
            reasons.append(f"Insufficient {res}")
    return reasons
