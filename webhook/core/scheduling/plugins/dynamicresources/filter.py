"""DynamicResources' Filter before allocation: which of the pod's names DRA serves on a node, and the
checks that need no allocation (a stale special claim, the kubelet's gate, an allocated user claim's
node selector, enough free devices of each class, draxr's alignment from the group counts).

Free devices are counted per class (``DraViews.counts``), so a node short of devices is refused
without a search; upstream learns the same only by failing to allocate, and its reason is the
allocator's (``cannot allocate all claims``, or the invalid pools'). A node where a free candidate
fails its selectors with a CEL error is never refused here: its allocation raises the error, which
aborts the attempt as upstream's Filter does."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from ....allocation.errors import INVALID_POOLS
from ....api.alignment import REQUIRED
from ....api.names import is_dra_extended_resource_name
from ....api.nodematch import SelectorError, node_selector_matches
from ....api.objects import Obj, as_dict, as_list, namespace, spec, status
from ....api.podresources import pod_requests
from ....cluster.nodeinfo import NodeInfo
from ....cluster.state import ClusterState
from ...framework import ServedBy
from .mappings import class_demand, device_demand
from .prefilter import own_claim_names
from .state import Counts, DraState, DraViews, Scope

STALE_CLAIM: Final = "cannot schedule extended resource claim"
CANNOT_ALLOCATE: Final = "cannot allocate all claims"
NOT_AVAILABLE: Final = "resourceclaim not available on the node"
#: draxr's Filter reason: the native path needs DRAExtendedResource in the node's kubelet.
KUBELET_GATE_OFF: Final = "node(s) had a kubelet without DRAExtendedResource"


def served_on(dra: DraState, info: NodeInfo) -> tuple[dict[str, str], dict[str, ServedBy]]:
    """Per node: a name with allocatable > 0 is the device plugin's; allocatable 0 (or absent)
    and a backing class means DRA; anything else is left to NodeResourcesFit to reject."""
    if info.allocatable_names.isdisjoint(dra.extended):
        return dra.delegated, dra.served  # shared by every such node: never changed
    delegated: dict[str, str] = {}
    served: dict[str, ServedBy] = {}
    for r in dra.extended:
        cls = dra.classes.get(r)
        if cls is not None and info.allocatable.get(r, 0) == 0:
            delegated[r] = cls
            served[r] = ServedBy("dra", cls)
        elif r in info.allocatable_names:
            served[r] = ServedBy("device-plugin", None)
    return delegated, served


def filter_node(
    state: ClusterState,
    dra: DraState,
    views: DraViews,
    node: str,
    info: NodeInfo,
    delegated: dict[str, str],
    count_devices: bool = True,
    nominated: Mapping[str, int] | None = None,
) -> str | None:
    """The reason the node fails before allocation, or None. ``delegated``: the names DRA serves
    there (``served_on``); ``count_devices=False`` skips the device counts (a resumed claim
    holds its devices already); ``nominated``: per class, the node's free devices the pods
    nominated to it take (``nominated_demand``)."""
    if dra.stale is not None:
        return STALE_CLAIM
    if delegated and not info.kubelet_gate:
        return KUBELET_GATE_OFF
    for selector in dra.claim_selectors:
        try:
            ok = node_selector_matches(info.node, selector)
        except SelectorError:
            ok = False
        if not ok:
            return NOT_AVAILABLE
    if not count_devices or not (delegated or (nominated and dra.to_allocate)):
        return None
    needs: Mapping[str, int] = {}
    if delegated:
        needs = dra.needs if delegated is dra.delegated else class_demand(delegated, dra.demand)
    if nominated and dra.to_allocate:
        # Beside nominated pods the pod's own claims need their devices free of those pods' share
        # too; without nominated pods the allocator alone says whether they fit.
        needs = add_demand(needs, claims_demand(dra.to_allocate))
    for cls, need in needs.items():
        free = counts(state, views, cls)[0].get(node, 0) - (nominated.get(cls, 0) if nominated else 0)
        if free >= need or errors_on(state, node, cls):
            continue
        return INVALID_POOLS if has_invalid_pool(state, node) else CANNOT_ALLOCATE
    if not delegated:
        return None
    if (
        dra.scopes
        and dra.align == REQUIRED
        and delegated.keys() == dra.classes.keys()
        and not any(errors_on(state, node, cls) for cls in needs)
    ):
        # From the group counts; a node with a CEL error is left to the allocator, whose error
        # aborts the attempt.
        unaligned = unalignable(state, views, node, dra.scopes)
        if unaligned is not None:
            return cannot_align(unaligned)
    return None


def nominated_demand(state: ClusterState, pod: Obj, info: NodeInfo) -> dict[str, int]:
    """Per class, the devices a pod nominated to the node would take of its free ones: what its
    special claim would ask there for the names DRA serves on the node (allocatable 0, a class
    backs the name), and what its own claims not yet allocated ask for (``claims_demand``; a pod
    draxr rewrote asks for all its devices so). Upstream (1.37) does not count a nominated pod's
    devices at all; draxr counts this many of the node's free devices as taken, whichever devices
    the pod would get (its allocated claims' devices are taken already)."""
    delegated: dict[str, str] = {}
    for r, v in pod_requests(pod).items():
        if v == 0 or not is_dra_extended_resource_name(r) or info.allocatable.get(r, 0) != 0:
            continue
        cls = state.classes.class_name(r)
        if cls is not None:
            delegated[r] = cls
    out = class_demand(delegated, device_demand(pod, delegated)) if delegated else {}
    claims = state.allocated.claims
    ns = namespace(pod)
    own = [claims.get((ns, n)) for n in own_claim_names(pod)]
    return add_demand(out, claims_demand(c for c in own if c is not None))


def claims_demand(claims: Iterable[Obj]) -> dict[str, int]:
    """Per class, the devices the claims without an allocation ask for: each ``exactly`` request's
    count in ``ExactCount`` mode. A request for ``All`` devices or with ``firstAvailable``
    alternatives is not counted: which and how many devices it takes is known only by allocating."""
    out: dict[str, int] = {}
    for claim in claims:
        if as_dict(status(claim).get("allocation")):
            continue
        for r in as_list(as_dict(spec(claim).get("devices")).get("requests")):
            exact = as_dict(as_dict(r).get("exactly"))
            cls, count = exact.get("deviceClassName"), exact.get("count", 1)
            if exact.get("allocationMode", "ExactCount") != "ExactCount" or not isinstance(cls, str):
                continue
            if isinstance(count, int) and not isinstance(count, bool) and count > 0:
                out[cls] = out.get(cls, 0) + count
    return out


def add_demand(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    """Two per-class demands together."""
    out = dict(a)
    for cls, n in b.items():
        out[cls] = out.get(cls, 0) + n
    return out


def cannot_align(attribute: str) -> str:
    return f"cannot align devices by {attribute}"


def counts(state: ClusterState, views: DraViews, cls: str) -> Counts:
    """(free, total) candidate devices of the class by node: once per class and decision (the
    same dicts, kept up in place)."""
    found = views.counts.get(cls)
    if found is None:
        capacity = state.capacity
        found = views.counts[cls] = (capacity.free(cls), capacity.total(cls))
    return found


def has_invalid_pool(state: ClusterState, node: str) -> bool:
    nd = state.node_devices(node)
    return nd is not None and any(p.invalid for p in nd.pools)


def errors_on(state: ClusterState, node: str, cls: str) -> bool:
    """A free candidate of the class on the node fails its selectors with a CEL error."""
    if node not in state.capacity.error_nodes(cls):
        return False
    nd = state.node_devices(node)
    if nd is None:
        return False
    taken = state.allocated
    return any(err is not None and not taken.is_allocated(d.key) for d, err in nd.class_candidates(cls))


def erroneous_nodes(state: ClusterState, dra: DraState) -> list[str]:
    """The nodes, by name, where a free candidate of one of the pod's classes fails its selectors
    with a CEL error. They hold no free device of the class, so the class's index of nodes leaves
    them out: the scheduler allocates on them first, where the error aborts the attempt."""
    classes = set(dra.classes.values())
    erroneous: set[str] = set()
    for cls in classes:
        erroneous |= state.capacity.error_nodes(cls)
    return [
        n for n in sorted(erroneous) if n in state.nodes and any(errors_on(state, n, cls) for cls in classes)
    ]


def unalignable(state: ClusterState, views: DraViews, node: str, scopes: list[Scope]) -> str | None:
    """The attribute of the first constraint no group of the node has enough free devices for,
    per class, from the group counts (every search under it would fail, so none is started)."""
    for attr, demand in scopes:
        wanted = []
        for cls, need in demand.items():
            by_node = views.by_attr.get((cls, attr))
            if by_node is None:
                by_node = views.by_attr[(cls, attr)] = state.capacity.groups_by_node(cls, attr)
            wanted.append((by_node.get(node, {}), need))
        first, need = wanted[0]
        if not any(
            g.free >= need and all((h := m.get(v)) is not None and h.free >= n for m, n in wanted[1:])
            for v, g in first.items()
        ):
            return attr
    return None
