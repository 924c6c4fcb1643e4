"""What DynamicResources adds to a node's score under draxr's policies: how much of each DRA-served
name's class is in use on the node once the pod is placed (device counts, never an allocation),
and binpack's count of whole topology groups the pod would break there."""

from __future__ import annotations

from ....api.alignment import NONE
from ....cluster.nodeinfo import NodeInfo
from ....cluster.state import ClusterState
from ....cluster.topology import CANNOT_ALIGN, can_align, groups_broken
from ...framework import ServedBy
from ...scoring import Usage
from .filter import counts
from .state import DraState, DraViews, UsageTerm


def usage_terms(state: ClusterState, dra: DraState, views: DraViews) -> list[UsageTerm]:
    """The usual node's terms, once per decision: per delegated name, its class's counts and the
    devices the pod asks for it."""
    if views.terms is None:
        views.terms = [(counts(state, views, cls), dra.demand.get(r, 0)) for r, cls in dra.delegated.items()]
    return views.terms


def usage_by_name(
    state: ClusterState,
    dra: DraState,
    views: DraViews,
    node: str,
    info: NodeInfo,
    delegated: dict[str, str],
    served: dict[str, ServedBy],
) -> dict[str, Usage]:
    """Any other node: per name, devices in use of its class (DRA) or the name's allocatable in use
    (device plugin), after the pod."""
    usage: dict[str, Usage] = {}
    for r, want in dra.extended.items():
        how = served.get(r)
        if how is None:
            continue
        if how.via == "device-plugin":
            usage[r] = Usage(info.requested.get(r, 0) + want, info.allocatable.get(r, 0))
        else:
            free, totals = counts(state, views, delegated[r])
            total = totals.get(node, 0)
            usage[r] = Usage(total - free.get(node, 0) + dra.demand.get(r, 0), total)
    return usage


def whole_groups_broken(
    state: ClusterState, dra: DraState, views: DraViews, node: str, delegated: dict[str, str]
) -> int:
    """Whole topology groups the pod would break on the node (binpack's fragmentation term):
    each weighs more than any difference in utilisation, so a pod goes where it breaks none."""
    demand: dict[str, int] = {}
    for r, cls in delegated.items():
        if cls in dra.groups:
            demand[cls] = demand.get(cls, 0) + dra.demand.get(r, 0)
    broken = 0
    for cls, need in demand.items():
        found = views.grouping.get(cls)
        if found is None:  # once per class and decision
            attr = dra.groups[cls][0]
            capacity = state.capacity
            found = views.grouping[cls] = (
                capacity.groups_by_node(cls, attr),
                capacity.largest_group(cls, attr),
            )
        by_node, largest = found
        aligned = dra.align != NONE and 2 <= need <= largest
        groups = by_node.get(node, {})
        broken += groups_broken(groups, need, aligned)
        if aligned and not can_align(groups, need):
            broken += CANNOT_ALIGN  # preferred: a split set only where nothing better exists
    return broken
