"""The filters before the resources, in kube-scheduler's order: NodeUnschedulable, TaintToleration,
NodeAffinity, NodePorts (one module each under ``plugins/``).

What they need from a pod is learnt once per decision (``PodFilter``: their PreFilter); ``basic_filters``
runs them in order and stops at the first that fails, as the framework does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ..api.objects import Obj
from ..cluster.nodeinfo import HostPort, NodeInfo, host_ports
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


class BasicFilters:
    """The four filters as one plugin object of the profile (``profile.BASIC_FILTERS``): PreFilter
    gives the ``PodFilter``; Filter runs them in order, stopping at the first that fails. The usual
    pod's fast path (``usual``) relies on a node that is plain passing all four."""

    names: Final = (nodeunschedulable.NAME, tainttoleration.NAME, nodeaffinity.NAME, nodeports.NAME)

    @staticmethod
    def pre_filter(pod: Obj) -> PodFilter:
        return PodFilter.of(pod, host_ports(pod))

    @staticmethod
    def needed(pf: PodFilter, info: NodeInfo) -> bool:
        """Whether any of the four can refuse this node for this pod (else they all pass)."""
        return bool(info.unschedulable or info.hard_taints or pf.constrained or pf.ports)

    @staticmethod
    def filter(pf: PodFilter, info: NodeInfo) -> list[str]:
        return basic_filters(pf, info)
