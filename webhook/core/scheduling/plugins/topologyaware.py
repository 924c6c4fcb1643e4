"""TopologyPlacementGenerator (upstream ``plugins/topologyaware``): the candidate placements of a
pod group with a topology constraint, one per domain of its key.

A placement is a set of nodes the group cycle tries the whole group on. Without a topology key the
one placement is every node. With one, each value of the node label ``key`` is a domain, and its
nodes are a placement (nodes without the label are in none). When members of the group are already
scheduled, only their domain is a placement; if they sit in more than one domain, or on a node
without the label, placing the group fails with an error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final, NamedTuple

from ...api.fielderrors import go_quote

NAME: Final = "TopologyPlacementGenerator"


class Placement(NamedTuple):
    """A candidate placement: its name (the domain; "" for every node) and its nodes, sorted."""

    name: str
    nodes: tuple[str, ...]


class PlacementError(Exception):
    """The scheduled members do not say which domain is the group's (an error, not a verdict)."""


def scheduled_domain(
    key: str, labels: Mapping[str, Mapping[str, str]], scheduled: Iterable[tuple[str, str]]
) -> str | None:
    """The one domain the group's scheduled members (``(pod key, node)`` pairs) are in; None when
    none is scheduled."""
    domain: str | None = None
    for pod, node in scheduled:
        if node not in labels:
            missing = f"nodeinfo not found for node name {go_quote(node)}"
            raise PlacementError(f"getting node for pod {pod}: {missing}")
        value = labels[node].get(key)
        if value is None:
            raise PlacementError(
                f"cannot determine domain for already scheduled pods: no topology domain found for pod {pod}"
            )
        if domain is not None and domain != value:
            raise PlacementError(
                "cannot determine domain for already scheduled pods: "
                f"more than 1 domain found for pod group: {domain}, {value}"
            )
        domain = value
    return domain


def generate_placements(
    key: str | None,
    labels: Mapping[str, Mapping[str, str]],
    scheduled: Iterable[tuple[str, str]] = (),
    known: Mapping[str, Mapping[str, str]] | None = None,
) -> list[Placement]:
    """``GeneratePlacements`` over the parent placement's nodes (``labels``: each one's labels),
    domains by name; ``scheduled``: the group's scheduled members as ``(pod key, node)``, whose
    nodes are looked up among every node of the snapshot (``known``; the parent's by default)."""
    every = tuple(sorted(labels))
    if key is None:
        return [Placement("", every)]
    required = scheduled_domain(key, labels if known is None else known, scheduled)
    domains: dict[str, list[str]] = {}
    for node in every:
        value = labels[node].get(key)
        if value is not None and (required is None or value == required):
            domains.setdefault(value, []).append(node)
    return [Placement(domain, tuple(nodes)) for domain, nodes in sorted(domains.items())]


__all__ = ["NAME", "Placement", "PlacementError", "generate_placements", "scheduled_domain"]
