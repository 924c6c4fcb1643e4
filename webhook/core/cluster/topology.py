"""Topology: which of a node's devices belong together, and draxr's alignment of a pod's devices.

Annotations (draxr's, not upstream's: upstream's special claim has no constraints; their syntax and
reading are ``api/alignment.py``'s):

* DeviceClass ``draxr.io/align-by: <attribute>[,<attribute>...]``, each a fully qualified device
  attribute (``resource.kubernetes.io/pcieRoot``). Every container's requests of classes that align by
  an attribute get one ``matchAttribute`` constraint on it, so a container asking a GPU class and a NIC
  class that both align by ``pcieRoot`` gets both on one root.
* Pod ``draxr.io/align``: ``none`` (no constraint), ``required`` (the default: never relaxed because
  of what is in use), ``preferred`` (an unaligned set when no aligned one exists).

Groups. For a class and an attribute, the candidates of one node carrying value ``v`` form the group
``v``; a list-typed attribute (KEP-5491) puts a device in the group of each of its values. A group is
*whole* when none of its devices is taken. ``binpack`` keeps whole groups whole, ``spread`` breaks them
first. Attribute values compare as KEP-5491 says: a scalar is a one-element set, ``matchAttribute``
asks for a non-empty intersection and ``distinctAttribute`` for disjoint sets; values of different
types never match.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from ..api.objects import Obj
from ..cel import CelError
from ..cel.values import ELEMENT_KIND
from .slices import Device, DeviceKey

#: One attribute value, typed: ``("int", 3)``, ``("string", "pci0")``; a list is a set of these.
Value = tuple[str, Any]
Values = frozenset[Value]
Candidate = tuple[Device, CelError | None]

_REQUEST_NAME: Final = re.compile(r"container-(\d+)-request-\d+")


# --- values and groups ---------------------------------------------------------------------------


def values_of(device: Device, attribute: str) -> Values | None:
    """The device's values of ``attribute`` as a set (a scalar is a one-element set); None when the
    device does not have it (a ``matchAttribute`` constraint then fails, as upstream's)."""
    attr = device.attribute(attribute)
    return None if attr is None else _as_values(attr)


@functools.lru_cache(maxsize=4096)
def _as_values(attr: tuple[str, Any]) -> Values:
    kind, value = attr
    base = ELEMENT_KIND.get(kind, kind)
    items = value if isinstance(value, tuple) else (value,)
    return frozenset((base, str(v) if base == "version" else v) for v in items)


def show_value(value: Value) -> str:
    kind, v = value
    if kind == "bool":
        return "true" if v else "false"
    return str(v)


class Group:
    """One topology group of one node: how many candidates it has, how many are not taken, and
    the position of its first device in allocation order (a stable tie-break)."""

    __slots__ = ("first", "free", "size")

    def __init__(self, first: int) -> None:
        self.size = 0
        self.free = 0
        self.first = first

    @property
    def whole(self) -> bool:
        return self.size > 0 and self.free == self.size

    def __repr__(self) -> str:
        return f"Group(size={self.size}, free={self.free})"


Groups = dict[Value, Group]


def group_devices(
    devices: Iterable[Device], attribute: str, taken: Callable[[DeviceKey], bool]
) -> tuple[Groups, dict[DeviceKey, Values]]:
    """The groups of ``devices`` by ``attribute``, and each grouped device's values."""
    groups: Groups = {}
    values: dict[DeviceKey, Values] = {}
    for i, d in enumerate(devices):
        vals = values_of(d, attribute)
        if not vals:
            continue
        values[d.key] = vals
        free = not taken(d.key)
        for v in vals:
            g = groups.get(v)
            if g is None:
                g = groups[v] = Group(i)
            g.size += 1
            if free:
                g.free += 1
    return groups, values


def whole_groups(groups: Mapping[Value, Group]) -> int:
    return sum(1 for g in groups.values() if g.whole)


#: Score weight of a node that cannot align a demand that asks for it (more than any whole group a
#: node can break), so a ``preferred`` pod falls back to a split set only where no node can align it.
CANNOT_ALIGN = 1000


def can_align(groups: Mapping[Value, Group], demand: int) -> bool:
    """Some group has ``demand`` free devices."""
    return any(g.free >= demand for g in groups.values())


def groups_broken(groups: Mapping[Value, Group], demand: int, aligned: bool) -> int:
    """How many whole groups the best placement of ``demand`` devices must break (for scores).

    Aligned: none when a group already in use has room, else one. Unaligned (or when no group can
    hold the demand): the free devices of groups in use first, then whole groups, largest first.
    With list-typed attributes groups overlap and this is an estimate; the allocator decides.
    """
    if demand <= 0:
        return 0
    partial_free = 0
    whole: list[int] = []
    room_in_use = room_whole = False
    for g in groups.values():
        if g.whole:
            whole.append(g.size)
            room_whole = room_whole or g.size >= demand
        else:
            partial_free += g.free
            room_in_use = room_in_use or g.free >= demand
    if aligned and room_in_use:
        return 0
    if aligned and room_whole:
        return 1
    need = demand - partial_free
    broken = 0
    for size in sorted(whole, reverse=True):
        if need <= 0:
            break
        need -= size
        broken += 1
    return broken


# --- device order --------------------------------------------------------------------------------


def order_candidates(
    candidates: list[Candidate],
    values: Mapping[DeviceKey, Values],
    groups: Mapping[Value, Group],
    policy: str,
    fits: Callable[[Value], bool] | None = None,
    taken: Callable[[DeviceKey], bool] | None = None,
) -> list[Candidate]:
    """The candidates in the order that makes first fit choose the policy's set.

    ``fits``: for a request under a ``matchAttribute`` constraint, whether a group can hold every
    device the constraint asks for (its groups go first, so the first branch the search explores is
    one that can succeed); None for a request without one.

    ``binpack``: groups in use before whole groups; among groups in use the fullest first (fewest
    free); whole groups the largest first when unconstrained (touching as few as possible), the
    smallest that fits when constrained (the best fit keeps larger groups for larger requests).
    A group's devices stay together, so first fit takes them before starting another group: it
    breaks a whole group only when the groups in use cannot hold the request.
    ``spread``: the opposite, whole groups first, the emptiest first, and the devices interleaved
    across groups (the n-th free device of every group before the n+1-th of any).
    Taken devices (``taken``) and devices without the attribute go last. Only the order changes:
    the search space, and so what is satisfiable and the step bound, stay those of upstream's
    allocator.
    """
    keyed: list[tuple[tuple[Any, ...], int, Candidate]] = []
    group_key: dict[Value, tuple[Any, ...]] = {}
    constrained = fits is not None
    for v, g in groups.items():
        fit = 0 if fits is None or fits(v) else 1
        if policy == "spread":
            group_key[v] = (fit, 0 if g.whole else 1, -g.free, g.first)
        elif g.whole:
            group_key[v] = (fit, 1, g.size if constrained else -g.size, g.first)
        else:
            group_key[v] = (fit, 0, g.free, g.first)
    rank: dict[Value, int] = {}
    for i, cand in enumerate(candidates):
        vals = values.get(cand[0].key)
        if taken is not None and taken(cand[0].key):
            keyed.append(((8,), i, cand))
            continue
        if not vals:
            keyed.append(((9,), i, cand))
            continue
        best = min(vals, key=lambda v: group_key[v])
        gk = group_key[best]
        if policy == "spread":
            r = rank.get(best, 0)
            rank[best] = r + 1
            keyed.append(((gk[0], r, *gk[1:]), i, cand))
        else:
            keyed.append((gk, i, cand))
    keyed.sort(key=lambda t: (t[0], t[1]))
    return [c for _, _, c in keyed]


# --- constraints ---------------------------------------------------------------------------------


def request_owner(request_name: str) -> str:
    """The container a special-claim request belongs to (``container-<i>``), from its name."""
    m = _REQUEST_NAME.fullmatch(request_name)
    return f"container-{m.group(1)}" if m else request_name


def _count(request: Obj) -> int:
    exact = request.get("exactly")
    count = exact.get("count", 1) if isinstance(exact, dict) else 0
    return count if isinstance(count, int) and not isinstance(count, bool) else 0


def _class(request: Obj) -> str:
    exact = request.get("exactly")
    cls = exact.get("deviceClassName") if isinstance(exact, dict) else None
    return cls if isinstance(cls, str) else ""


def alignment_constraints(
    requests: Sequence[Obj],
    attributes: Mapping[str, tuple[str, ...]],
    largest_group: Callable[[str, str], int],
    owner: Callable[[str], str] = request_owner,
) -> tuple[list[Obj], list[str]]:
    """The ``matchAttribute`` constraints draxr adds to a claim, and the alignments it cannot add.

    Per container (``owner`` of each request name) and per attribute: one constraint over that
    container's requests whose class aligns by the attribute, in request order. None when they ask
    a single device (nothing to align), and none, with a note, when a class's share of it exceeds
    ``largest_group(class, attribute)``, the largest such group anywhere: no node could hold it, so
    requiring it would make the pod wait forever (an 8-GPU pod on nodes with roots of four GPUs).
    """
    scopes: dict[tuple[str, str], list[Obj]] = {}
    for r in requests:
        cls = _class(r)
        for attr in attributes.get(cls, ()):
            scopes.setdefault((owner(str(r.get("name", ""))), attr), []).append(r)
    constraints: list[Obj] = []
    notes: list[str] = []
    for (who, attr), reqs in scopes.items():
        if sum(_count(r) for r in reqs) < 2:
            continue
        demand: dict[str, int] = {}
        for r in reqs:
            demand[_class(r)] = demand.get(_class(r), 0) + _count(r)
        too_big = [(c, n, largest_group(c, attr)) for c, n in demand.items() if n > largest_group(c, attr)]
        if too_big:
            c, n, most = too_big[0]
            notes.append(
                f"{who}: {n} devices of class {c} cannot share {attr} (the largest group has {most})"
            )
            continue
        constraints.append({"requests": [str(r.get("name", "")) for r in reqs], "matchAttribute": attr})
    return constraints, notes


def constraint_demand(constraint: Obj, requests: Sequence[Obj]) -> dict[str, int]:
    """Per class, how many devices a constraint's requests ask for."""
    names = set(constraint.get("requests") or [])
    demand: dict[str, int] = {}
    for r in requests:
        if not names or r.get("name") in names:
            demand[_class(r)] = demand.get(_class(r), 0) + _count(r)
    return demand


def shared_values(devices: Iterable[Device], attribute: str) -> Values:
    """The values every one of ``devices`` has (what a satisfied ``matchAttribute`` shares)."""
    shared: Values | None = None
    for d in devices:
        vals = values_of(d, attribute) or frozenset()
        shared = vals if shared is None else shared & vals
    return shared or frozenset()


def spanned_values(devices: Iterable[Device], attribute: str) -> list[Value]:
    """Every value of ``attribute`` the devices carry, in a stable order."""
    out: set[Value] = set()
    for d in devices:
        out |= values_of(d, attribute) or frozenset()
    return sorted(out, key=lambda v: (v[0], str(v[1])))
