"""The filters before the resources, in kube-scheduler's order: NodeUnschedulable, TaintToleration,
NodeAffinity, NodePorts (one module each under ``plugins/``).

What they need from a pod is learnt once per decision (``PodFilter``: their PreFilter); ``basic_filters``
runs them in order and stops at the first that fails, as the framework does."""

from __future__ import annotations

from dataclasses import dataclass

from ..api.objects import Obj
from ..cluster.nodeinfo import HostPort, NodeInfo
from .plugins import nodeaffinity, nodeports, nodeunschedulable, tainttoleration


@dataclass(frozen=True, slots=True)
class PodFilter:
    """What the node filters need from a pod, computed once per decision."""

    pod: Obj
    tolerations: list[Obj]
    tolerates_unschedulable: bool
    constrained: bool  # has a nodeSelector or required node affinity
    ports: list[HostPort]

    @classmethod
    def of(cls, pod: Obj, ports: list[HostPort]) -> PodFilter:
        tolerations = tainttoleration.pre_filter(pod)
        return cls(
            pod, tolerations, nodeunschedulable.pre_filter(tolerations), nodeaffinity.pre_filter(pod), ports
        )


def basic_filters(pf: PodFilter, info: NodeInfo) -> list[str]:
    """Everything before resource fit; stops at the first failing plugin, as the framework does."""
    why = (
        nodeunschedulable.filter_node(info, pf.tolerates_unschedulable)
        or tainttoleration.filter_node(info, pf.tolerations)
        or (nodeaffinity.filter_node(pf.pod, info) if pf.constrained else None)
        or (nodeports.filter_node(pf.ports, info) if pf.ports else None)
    )
    return [why] if why else []
