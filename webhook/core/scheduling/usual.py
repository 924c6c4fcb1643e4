"""The usual pod on the usual node, checked in one call: Filter's verdict and Score's key at once.

Most pods ask for extended resources and nothing else a filter looks at, and most nodes are
schedulable, untainted, run a kubelet with the gate and advertise none of the pod's names (so DRA
serves all of them). For such a pod ``usual_check`` builds one closure over the decision's shared
lookups; the search calls it for every node it visits, and Filter and Score (the exact path) call the
same closure first, so the usual node has one check and the general filters handle the rest.

The closure answers ``None`` (not the usual node: ask the general filters), ``False`` (the usual node,
and it does not fit, or it is short of devices without a CEL error) or the node's sort key (the
score, negated unless the policy spreads; 0.0 when the caller does not score).
"""

from __future__ import annotations

from collections.abc import Callable

from ..allocation.policy import SPREAD, UPSTREAM
from ..cluster.nodeinfo import NodeInfo
from ..cluster.state import ClusterState
from .plugins.dynamicresources.filter import counts, errors_on
from .plugins.dynamicresources.score import usage_terms
from .plugins.dynamicresources.state import DraState, DraViews
from .plugins.noderesources import fits

Check = Callable[[NodeInfo, str], "float | bool | None"]


def is_usual_pod(policy: str, dra: DraState, constrained: bool, ports: bool, plugins: bool) -> bool:
    """Whether the pod is the usual one: draxr's policies, some name DRA serves, no stale claim, no
    node constraint, host port, allocated claim with a node selector, alignment, or profile plugin
    (volumes, pod affinity, spread) that checks it."""
    return (
        policy != UPSTREAM
        and bool(dra.delegated)
        and dra.stale is None
        and not (constrained or ports or plugins or dra.claim_selectors or dra.scopes or dra.groups)
    )


def usual_check(
    state: ClusterState,
    dra: DraState,
    views: DraViews,
    fit_checks: list[tuple[str, int]],
    policy: str,
    score: bool,
) -> Check:
    """The check of the usual node for a usual pod (``is_usual_pod``), built once per decision."""
    spread = policy == SPREAD
    extended = dra.extended.keys()
    need_of = [(cls, need, counts(state, views, cls)[0]) for cls, need in dra.needs.items()]
    terms = usage_terms(state, dra, views)
    names = len(terms)

    def check(info: NodeInfo, node: str) -> float | bool | None:
        if (
            info.unschedulable
            or info.hard_taints
            or not info.kubelet_gate
            or not info.allocatable_names.isdisjoint(extended)
        ):
            return None
        if not fits(fit_checks, info):
            return False
        for _cls, need, free in need_of:
            if free.get(node, 0) < need:
                # A CEL error on the node: the general filters leave it to the allocator.
                return None if any(errors_on(state, node, cls) for cls, _, _ in need_of) else False
        if not score:
            return 0.0
        ratios = 0.0
        for (free, totals), demand in terms:
            total = totals.get(node, 0)
            if total > 0:
                used = total - free.get(node, 0) + demand
                ratios += used / total if used < total else 1.0
            else:
                ratios += 1.0
        return ratios / names if spread else -ratios / names

    return check
