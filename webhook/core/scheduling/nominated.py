"""The nominated pods in Filter (upstream's ``RunFilterPluginsWithNominatedPods``).

Pods nominated to a node (``cluster/nominator``) with a priority at least the pod's, the pod itself
aside, count there as if they ran: Filter runs with them added and, when any were added and that
passes, again without them; the node fits only if both pass (pod affinity can need them absent,
resources and anti-affinity present). Added means: their requests, pod count and host ports on a
copy of the node's ``NodeInfo`` (NodeResourcesFit, NodePorts), their labels and terms through the
profile's plugins' ``add_pod`` (InterPodAffinity, PodTopologySpread; a plugin that skipped the pod
is not asked, as upstream), and their device demand against the node's free devices of each class
(DynamicResources' ``nominated_demand``: draxr's; upstream 1.37 does not count nominated pods in
DynamicResources).
Score does not see them, as upstream's does not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..api.objects import Obj, uid
from ..api.podresources import pod_requests_nonzero
from ..cluster.nodeinfo import NodeInfo, host_ports
from ..cluster.podinfo import pod_info
from ..cluster.state import ClusterState
from .framework import Prefiltered


@dataclass(slots=True)
class WithNominated:
    """A node as Filter's first pass sees it: the nominated pods added."""

    info: NodeInfo
    plugins: list[Prefiltered]
    #: Per class, the node's free devices the nominated pods take.
    devices: dict[str, int]


def with_nominated(
    state: ClusterState,
    node: str,
    pods: list[Obj],
    plugins: list[Prefiltered],
    demand: Callable[[Obj, NodeInfo], dict[str, int]],
) -> WithNominated:
    """``addGENominatedPods``: the node's ``NodeInfo`` and the plugins' states with ``pods`` added;
    ``demand``: DynamicResources' per-class demand of a nominated pod on the node."""
    base = state.nodes.by_name[node]
    info = base.snapshot()
    devices: dict[str, int] = {}
    for p in pods:
        reqs, nonzero = pod_requests_nonzero(p)
        info.add_pod(uid(p), reqs, host_ports(p), nonzero)
        added = pod_info(p, node)
        plugins = [(pl, pre if pl.add_pod is None else pl.add_pod(pre, added, info)) for pl, pre in plugins]
        for cls, n in demand(p, base).items():
            devices[cls] = devices.get(cls, 0) + n
    return WithNominated(info, plugins, devices)
