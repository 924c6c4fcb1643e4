"""The usual pod on the usual node, checked in one call: Filter's verdict and Score's key at once.

Most pods ask for extended resources and nothing else a filter looks at, and most nodes are
schedulable, untainted, run a kubelet with the gate and advertise none of the pod's names (so DRA
serves all of them). For such a pod ``usual_check`` builds one closure over the decision's shared
lookups; the search calls it for every node it visits, and Filter and Score (the exact path) call the
same closure first, so the usual node has one check and the general filters handle the rest.

The check answers ``None`` (not the usual node: ask the general filters), ``False`` (the usual node,
and it does not fit, or it is short of devices without a CEL error) or the node's sort key (the
score, negated unless the policy spreads; 0.0 when the caller does not score).

The search visits about 500 nodes per decision on a large cluster, and one decision changes one
node, so the search remembers each node's verdict per pod shape (``UsualMemo``), with the stamp the
node had (``NodeInfo.stamp``, renewed by every change of the node and of its device counts): a
node whose stamp has not moved is not read again. Only "short of devices" on a node with a CEL
error is never remembered: whether the error is on a free device depends on claims the stamp does
not follow.

Even remembered, 500 verdicts are read for every decision. So a search round one ring
(``Usual.best``) reads the ring by runs of nodes (``NodeBlocks``: the sorted names cut every 32,
each run with a cell that every change of one of its nodes moves): what a run gives a pod shape,
its entries in order and the least of them, is remembered with the run's cell and taken whole
while the cell has not moved. A decision changes a node or two, so most runs are not read again.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping
from itertools import islice
from typing import Any, Final, NamedTuple

from ..allocation.policy import SPREAD, UPSTREAM
from ..cluster.nodeinfo import NodeBlocks, NodeInfo
from ..cluster.state import ClusterState
from .plugins.dynamicresources.filter import counts, errors_on
from .plugins.dynamicresources.score import usage_terms
from .plugins.dynamicresources.state import DraState, DraViews

Check = Callable[[NodeInfo, str], "float | bool | None"]
#: A feasible node of the search: its sort key, its name, its plan (None: the usual plan).
Entry = tuple[float, str, Any]
#: The general filters' entry for a node that is not the usual one (None: it does not fit).
Other = Callable[[str], "Entry | None"]
#: A node's remembered verdicts per pod shape: node -> (its stamp then, its verdict).
Verdicts = dict[str, tuple[int, object]]
#: What a run of nodes (``NodeBlocks``) gives a pod shape: the names of its nodes in the ring that
#: fit, their entries (in name order) and the least of them.
Run = tuple[list[str], list[Entry], "Entry | None"]
#: The runs remembered per pod shape: run -> (its cell, the stamp in it then, the ring, its ``Run``).
Runs = dict[int, tuple[list[int], int, list[str], Run]]
_ASK: Final = object()
_OTHER: Final = object()  # not the usual node: the general filters decide
_SHORT: Final = object()  # short of devices


class UsualMemo:
    """Per pod shape (``shape_of``), each node's verdict with its stamp and each run of nodes'
    entries with its cell's stamp; the ``shapes`` shapes used last are kept. Safe to share between
    threads: a verdict is only taken while its stamp holds, a run's entries while its cell's does."""

    def __init__(self, shapes: int = 32) -> None:
        self._shapes = shapes
        self._by_shape: dict[Hashable, tuple[Verdicts, Runs]] = {}

    def verdicts(self, shape: Hashable, nodes: int) -> Verdicts:
        """The shape's verdicts (``remembered``)."""
        return self.remembered(shape, nodes)[0]

    def remembered(self, shape: Hashable, nodes: int) -> tuple[Verdicts, Runs]:
        """The shape's verdicts and runs, made the last used; started afresh once they hold far
        more nodes than the cluster has (nodes that went away)."""
        by_shape = self._by_shape
        found = by_shape.pop(shape, None)
        if found is None or len(found[0]) > 2 * nodes + 64:
            found = ({}, {})
            while len(by_shape) >= self._shapes:
                oldest = next(iter(by_shape), None)  # another thread may have emptied it meanwhile
                if oldest is None:
                    break
                by_shape.pop(oldest, None)
        by_shape[shape] = found
        return found


def shape_of(dra: DraState, fit_checks: list[tuple[str, int]], policy: str, score: bool) -> Hashable:
    """What a usual node's verdict depends on besides the node: the pod's names, resource requests,
    needs and demands per class, the policy and whether it scores."""
    return (
        policy == SPREAD,
        score,
        tuple(dra.extended),
        tuple(fit_checks),
        tuple(dra.needs.items()),
        tuple((r, cls, dra.demand.get(r, 0)) for r, cls in dra.delegated.items()),
    )


def _ask(node: str) -> Entry:
    return 0.0, node, _ASK


class Usual(NamedTuple):
    """One body, two ways to call it: ``check`` one node as given (Filter, Score, a view of a node);
    ``scan`` the walk's nodes as the cluster has them, yielding the feasible ones' entries and asking
    ``other`` (the general filters) about each node that is not the usual one, and about each node
    of ``divert`` (nodes with nominated pods, which the general filters see with those pods)."""

    check: Check
    scan: Callable[[Iterable[str], Other, Collection[str]], Iterator[Entry]]
    #: ``best(ring, start, wanted, other)``: what ``scan`` over ``ring`` once round from ``start``
    #: (no node diverted) gives first after a heap of its first ``wanted`` entries, or None.
    best: Callable[[list[str], str | None, int, Other], Entry | None]


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
    memo: UsualMemo | None = None,
) -> Usual:
    """The check of the usual node for a usual pod (``is_usual_pod``), built once per decision;
    ``memo``: where ``scan`` remembers verdicts (``check`` never does: its node may be a what-if)."""
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
    erring = set().union(*(state.capacity.error_nodes(cls) for cls, _, _ in need_of))

    def verdict(node: str, info: NodeInfo) -> Entry | object | None:
        """The node's entry; None if it does not fit; ``_OTHER`` (not the usual node) or ``_SHORT``
        (short of devices on a node with a CEL error among the classes' candidates: the general
        filters take it if the error is on a free one)."""
        if not info.plain or not info.allocatable_names.isdisjoint(extended):
            return _OTHER
        # noderesources.fits, inline: this runs for every node a decision visits (about 500 per
        # decision on 5,000 nodes) unless remembered; tests/core/scheduling/test_usual_properties.py
        # holds the two to the same verdicts.
        if len(info.pods) >= info.max_pods:
            return None
        if fit_checks:
            room = info.free
            for r, want in fit_checks:
                if want > room.get(r, 0):
                    return None
        if single is not None:  # one class, one name: its free count read once
            one_free, one_need, one_totals, one_demand = single
            free_here = one_free.get(node, 0)
            if free_here < one_need:
                return _SHORT if node in erring else None
            if not score:
                return 0.0, node, None
            total = one_totals.get(node, 0)
            if total > 0:
                used = total - free_here + one_demand
                ratio = used / total if used < total else 1.0
            else:
                ratio = 1.0
            return (ratio if spread else -ratio), node, None
        for _cls, need, free in need_of:
            if free.get(node, 0) < need:
                return _SHORT if node in erring else None
        if not score:
            return 0.0, node, None
        ratios = 0.0
        for (free, totals), demand in terms:
            total = totals.get(node, 0)
            if total > 0:
                used = total - free.get(node, 0) + demand
                ratios += used / total if used < total else 1.0
            else:
                ratios += 1.0
        return (ratios / names if spread else -ratios / names), node, None

    def fresh(node: str, info: NodeInfo, memo: Verdicts | None) -> Entry | object | None:
        """The node's verdict read now, remembered in ``memo`` with the stamp it had before it was
        read (a change meanwhile renews it), unless short of devices (never remembered)."""
        stamp = info.stamp
        v = verdict(node, info)
        if v is not _SHORT and memo is not None:
            memo[node] = (stamp, v)
        return v

    def entries(
        nodes: Iterable[str],
        infos: Mapping[str, NodeInfo],
        other: Other,
        divert: Collection[str] = (),
        memo: Verdicts | None = None,
    ) -> Iterator[Entry]:
        get = (memo if memo is not None else {}).get
        for node in nodes:
            found = get(node)
            if found is not None and found[0] == infos[node].stamp and not (divert and node in divert):
                v = found[1]  # remembered, and the node has not changed since: the usual way
                if v is None:
                    continue
                if v is not _OTHER:
                    yield v  # type: ignore[misc]
                    continue
            elif not (divert and node in divert):
                v = fresh(node, infos[node], memo)
                if v is _SHORT:
                    if not any(errors_on(state, node, cls) for cls, _, _ in need_of):
                        continue
                    v = _OTHER
                if v is None:
                    continue
                if v is not _OTHER:
                    yield v  # type: ignore[misc]
                    continue
            entry = other(node)
            if entry is not None:
                yield entry

    def check(info: NodeInfo, node: str) -> float | bool | None:
        for key, _, plan in entries((node,), {node: info}, _ask):
            return None if plan is _ASK else key
        return False

    def scan(nodes: Iterable[str], other: Other, divert: Collection[str] = ()) -> Iterator[Entry]:
        infos = state.nodes.by_name
        if memo is None:
            return entries(nodes, infos, other, divert)
        shape = shape_of(dra, fit_checks, policy, score)
        return entries(nodes, infos, other, divert, memo.verdicts(shape, len(infos)))

    def run_of(
        b: int,
        ring: list[str],
        blocks: NodeBlocks,
        infos: Mapping[str, NodeInfo],
        verdicts: Verdicts,
        runs: Runs,
    ) -> Run | None:
        """The names and entries, in name order, of the nodes of ``ring`` in run ``b`` that fit,
        and the least entry; None when one of them is not the usual node or is short of devices
        with a CEL error (the general filters, node by node, decide those). Remembered while the
        run's cell holds, for this ring (a shared list kept in place: a node comes or goes in it
        with a new stamp)."""
        cell = blocks.cells[b]
        known = runs.get(b)
        if known is not None and known[0] is cell and known[1] == cell[0] and known[2] is ring:
            return known[3]
        seen = cell[0]  # before reading the nodes: a change meanwhile moves it
        lo, hi = blocks.span(ring, b)
        names: list[str] = []
        found: list[Entry] = []
        get = verdicts.get
        for node in ring[lo:hi]:
            info = infos[node]
            remembered = get(node)
            if remembered is not None and remembered[0] == info.stamp:
                v = remembered[1]
            else:
                v = fresh(node, info, verdicts)
            if v is None:
                continue
            if v is _OTHER or v is _SHORT:
                return None
            names.append(node)
            found.append(v)  # type: ignore[arg-type]
        run = (names, found, min(found) if found else None)
        runs[b] = (cell, seen, ring, run)
        return run

    def best(ring: list[str], start: str | None, wanted: int, other: Other) -> Entry | None:
        """The first of a heap of the first ``wanted`` entries of ``ring`` once round from
        ``start``: the lowest sort key, then name. The ring is read by runs of nodes
        (``NodeBlocks``): a run whose cell has not moved since gives its entries from memory,
        without reading its nodes; a run with a node the general filters decide is read node by
        node, as ``scan`` reads it."""
        if not ring:
            return None
        infos = state.nodes.by_name
        shape = shape_of(dra, fit_checks, policy, score)
        verdicts, runs = memo.remembered(shape, len(infos)) if memo is not None else ({}, {})
        blocks = state.nodes.blocks()
        firsts = blocks.firsts
        at = bisect_left(ring, start) if start is not None else 0
        if at == len(ring):
            at = 0
        if not firsts or ring[0] < firsts[0]:  # a ring's names are nodes': the walk fails on it too
            raise KeyError(ring[0])
        first = ring[at]
        b0 = bisect_right(firsts, first) - 1
        # The start's run from the start, every run after it, round to the start's run before it.
        order: list[tuple[int, str | None, str | None]] = [(b0, first, None)]
        order += [(b, None, None) for b in range(b0 + 1, len(firsts))]
        order += [(b, None, None) for b in range(b0)]
        if at > 0:
            order.append((b0, None, first))
        left = wanted
        top: Entry | None = None
        for b, since, until in order:
            run = run_of(b, ring, blocks, infos, verdicts, runs)
            if run is None:  # node by node, the general filters asked in the walk's order
                lo, hi = blocks.span(ring, b)
                if since is not None:
                    lo = bisect_left(ring, since, lo, hi)
                if until is not None:
                    hi = bisect_left(ring, until, lo, hi)
                taken = list(islice(entries(ring[lo:hi], infos, other, (), verdicts), left))
                least = min(taken, default=None)
            else:
                names, found, least = run
                if since is None and until is None and len(found) <= left:
                    taken = found  # the whole run: its least remembered with it
                else:
                    i = 0 if since is None else bisect_left(names, since)
                    j = len(names) if until is None else bisect_left(names, until, i)
                    taken = found[i : min(j, i + left)]
                    least = min(taken, default=None)
            left -= len(taken)
            if least is not None and (top is None or least < top):
                top = least
            if left <= 0:
                break
        return top

    return Usual(check, scan, best)
