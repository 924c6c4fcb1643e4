"""Node filters in kube-scheduler's order and words: NodeUnschedulable, TaintToleration,
NodeAffinity, NodePorts, NodeResourcesFit. Each returns the reasons a node fails (empty = fits)."""

from __future__ import annotations

from collections.abc import Collection

from .nodematch import pod_node_affinity_matches, tolerates, untolerated
from .objects import Obj, as_dict, as_list, spec, status
from .podresources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Units
from .state import NodeInfo

UNSCHEDULABLE = "node(s) were unschedulable"
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
PORTS = "node(s) didn't have free ports for the requested pod ports"
DEFAULT_MAX_PODS = 110

_UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def readiness_taint(node: Obj) -> Obj | None:
    """The taint the node lifecycle controller would add for a node that is not Ready."""
    for cond in as_list(status(node).get("conditions")):
        c = as_dict(cond)
        if c.get("type") != "Ready":
            continue
        if c.get("status") == "True":
            return None
        key = (
            "node.kubernetes.io/not-ready" if c.get("status") == "False" else "node.kubernetes.io/unreachable"
        )
        return {"key": key, "effect": "NoSchedule"}
    return None


def taint_reason(taint: Obj) -> str:
    return f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"


def basic_filters(pod: Obj, info: NodeInfo, ports: list[tuple[str, str, int]]) -> list[str]:
    """Everything before resource fit; stops at the first failing plugin, as the framework does."""
    node = info.node
    tolerations = as_list(spec(pod).get("tolerations"))
    if spec(node).get("unschedulable") is True and not any(
        tolerates(as_dict(t), _UNSCHEDULABLE_TAINT) for t in tolerations
    ):
        return [UNSCHEDULABLE]
    taints = list(as_list(spec(node).get("taints")))
    ready = readiness_taint(node)
    if ready is not None and not any(as_dict(t).get("key") == ready["key"] for t in taints):
        taints.append(ready)
    bad = untolerated(taints, tolerations)
    if bad is not None:
        return [taint_reason(bad)]
    if not pod_node_affinity_matches(pod, node):
        return [AFFINITY]
    if ports and _ports_conflict(ports, info):
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
