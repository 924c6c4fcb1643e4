"""The usual pod on the usual node, checked in one call: Filter's verdict and Score's key at once.

Most pods ask for extended resources and nothing else a filter looks at, and most nodes are
schedulable, untainted, run a kubelet with the gate and advertise none of the pod's names (so DRA
serves all of them). For such a pod ``usual_check`` builds one closure over the decision's shared
lookups; the search calls it for every node it visits, and Filter and Score (the exact path) call the
same closure first, so the usual node has one check and the general filters handle the rest.

The check answers ``None`` (not the usual node: ask the general filters), ``False`` (the usual node,
and it does not fit, or it is short of devices without a CEL error) or the node's sort key (the
score, negated unless the policy spreads; 0.0 when the caller does not score).

The search visits about a hundred nodes per decision, so the same body also runs as the search's
generator over the walk (``Usual.scan``): one resumption per usual node instead of calls, the same
verdicts.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any, Final, NamedTuple

from ..allocation.policy import SPREAD, UPSTREAM
from ..cluster.nodeinfo import NodeInfo
from ..cluster.state import ClusterState
from .plugins.dynamicresources.filter import counts, errors_on
from .plugins.dynamicresources.score import usage_terms
from .plugins.dynamicresources.state import DraState, DraViews

Check = Callable[[NodeInfo, str], "float | bool | None"]
#: A feasible node of the search: its sort key, its name, its plan (None: the usual plan).
Entry = tuple[float, str, Any]
#: The general filters' entry for a node that is not the usual one (None: it does not fit).
Other = Callable[[str], "Entry | None"]
_ASK: Final = object()


def _ask(node: str) -> Entry:
    return 0.0, node, _ASK


class Usual(NamedTuple):
    """One body, two ways to call it: ``check`` one node as given (Filter, Score, a view of a node);
    ``scan`` the walk's nodes as the cluster has them, yielding the feasible ones' entries and asking
    ``other`` (the general filters) about each node that is not the usual one, and about each node
    of ``divert`` (nodes with nominated pods, which the general filters see with those pods)."""

    check: Check
    scan: Callable[[Iterable[str], Other, Collection[str]], Iterator[Entry]]


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
) -> Usual:
    """The check of the usual node for a usual pod (``is_usual_pod``), built once per decision."""
    spread = policy == SPREAD
    extended = dra.extended.keys()
    need_of = [(cls, need, counts(state, views, cls)[0]) for cls, need in dra.needs.items()]
    terms = usage_terms(state, dra, views)
    names = len(terms)
    # The pod's one name of one class (the usual pod's usual shape): free devices, the pod's need,
    # total devices and its demand of that class, so a node's counts are read once.
    single = None
    if len(need_of) == 1 and names == 1 and terms[0][0][0] is need_of[0][2]:
        (_, need, free), ((_, totals), demand) = need_of[0], terms[0]
        single = (free, need, totals, demand)

    def entries(
        nodes: Iterable[str], infos: Mapping[str, NodeInfo], other: Other, divert: Collection[str] = ()
    ) -> Iterator[Entry]:
        # The decision's lookups as the generator's own locals (a closure's cells cost more per node).
        ext, checks, needs, usage, spreads, scored = extended, fit_checks, need_of, terms, spread, score
        one = single
        one_free, one_need, one_totals, one_demand = single or ({}, 0, {}, 0)
        for node in nodes:
            info = infos[node]
            if not info.plain or not info.allocatable_names.isdisjoint(ext) or (divert and node in divert):
                entry = other(node)
                if entry is not None:
                    yield entry
                continue
            # noderesources.fits, inline: this runs for every node a decision visits (about 500
            # per decision on 5,000 nodes); tests/core/scheduling/test_usual_properties.py holds
            # the two to the same verdicts.
            if len(info.pods) >= info.max_pods:
                continue
            if checks:
                room = info.free
                fit = True
                for r, want in checks:
                    if want > room.get(r, 0):
                        fit = False
                        break
                if not fit:
                    continue
            if one is not None:  # one class, one name: its free count read once
                free_here = one_free.get(node, 0)
                if free_here >= one_need:
                    if not scored:
                        yield 0.0, node, None
                        continue
                    total = one_totals.get(node, 0)
                    if total > 0:
                        used = total - free_here + one_demand
                        ratio = used / total if used < total else 1.0
                    else:
                        ratio = 1.0
                    yield (ratio if spreads else -ratio), node, None
                    continue
                short = True
            else:
                short = False
                for _cls, need, free in needs:
                    if free.get(node, 0) < need:
                        short = True
                        break
            if short:
                # A CEL error on the node: the general filters leave it to the allocator.
                if any(errors_on(state, node, cls) for cls, _, _ in needs):
                    entry = other(node)
                    if entry is not None:
                        yield entry
                continue
            if not scored:
                yield 0.0, node, None
                continue
            ratios = 0.0
            for (free, totals), demand in usage:
                total = totals.get(node, 0)
                if total > 0:
                    used = total - free.get(node, 0) + demand
                    ratios += used / total if used < total else 1.0
                else:
                    ratios += 1.0
            yield (ratios / names if spreads else -ratios / names), node, None

    def check(info: NodeInfo, node: str) -> float | bool | None:
        for key, _, plan in entries((node,), {node: info}, _ask):
            return None if plan is _ASK else key
        return False

    def scan(nodes: Iterable[str], other: Other, divert: Collection[str] = ()) -> Iterator[Entry]:
        return entries(nodes, state.nodes.by_name, other, divert)

    return Usual(check, scan)
