"""DynamicResources' per-decision state: what its PreFilter learns once per pod (``DraState``), the
views of the devices Filter and Score fill lazily (``DraViews``); Filter's per-node answers
(``NodePlan``, ``NodeFit``) are the framework's."""

from __future__ import annotations

from dataclasses import dataclass, field

from ....api.objects import Obj
from ....cluster.topology import Groups
from ...framework import NodeFit, NodePlan, ServedBy

__all__ = ["Counts", "DraState", "DraViews", "NodeFit", "NodePlan", "Scope", "UsageTerm"]

#: A ``matchAttribute`` constraint of draxr's alignment: the attribute, and devices per class.
Scope = tuple[str, dict[str, int]]
#: (free, total) devices of a class by node.
Counts = tuple[dict[str, int], dict[str, int]]
#: One term of the usual node's usage: a class's counts, and the devices the pod asks of it.
UsageTerm = tuple[Counts, int]


@dataclass(slots=True)
class DraState:
    """What PreFilter learns once per pod, for Filter and Score on every node."""

    extended: dict[str, int]  # DRA-candidate names with non-zero requests (overhead included)
    classes: dict[str, str]  # name -> backing class (explicit or implicit)
    demand: dict[str, int]  # name -> devices the special claim asks for it where DRA serves it
    stale: Obj | None  # a special claim from an earlier cycle that blocks every node
    user_claims: list[Obj]  # every claim of the pod, resolved
    to_allocate: list[Obj]  # user claims without allocation
    claim_selectors: list[Obj]  # allocated user claims' node selectors
    # Where DRA serves every name: the special claim's requests and mappings.
    built: tuple[list[Obj], list[Obj]] | None
    # draxr's alignment: the pod's draxr.io/align when a class of the pod aligns, class -> align-by
    # attributes, the constraints (and the alignments no group anywhere can hold), and what the
    # constraints ask of a node.
    align: str
    groups: dict[str, tuple[str, ...]]
    constraints: list[Obj]
    notes: list[str]
    scopes: list[Scope]
    # The usual node, whose allocatable names none of the pod's extended resources: every name with
    # a class goes to DRA (``delegated``, ``served``), and it needs this many devices per class.
    delegated: dict[str, str]
    served: dict[str, ServedBy]
    needs: dict[str, int]


@dataclass(slots=True)
class DraViews:
    """Filter's and Score's views of the devices, once per class and decision (the same dicts,
    kept up in place by the cluster state): class -> (free, total) by node; class -> (groups by
    node, largest group); (class, attribute) -> groups by node."""

    counts: dict[str, Counts] = field(default_factory=dict)
    grouping: dict[str, tuple[dict[str, Groups], int]] = field(default_factory=dict)
    by_attr: dict[tuple[str, str], dict[str, Groups]] = field(default_factory=dict)
    #: The usual node's usage terms (``score.usage_terms``): per delegated name, its class's counts
    #: and the devices the pod asks for it.
    terms: list[UsageTerm] | None = None
