"""One decision's state (upstream's ``CycleState``): what each plugin's PreFilter learnt about the
pod, and what Filter and Score fill in as they go.

Facts (set once by PreFilter, never changed): the pod's requests (NodeResourcesFit, overhead
included) and ``NonZeroRequested`` (the upstream scores), what the node filters need
(``PodFilter``), NodeResourcesFit's checks on the usual node, the profile's plugins that did not
skip the pod with their PreFilter state, DynamicResources' own state under its typed keys
(``state``: ``CycleState``), and the pods nominated to nodes that the pod must leave room for
(``nominated``).
Views (filled lazily, once per decision): the usual-node check (``usual.usual_check``) and the
nodes with their nominated pods added (``nominated.with_nominated``), built on first use."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..api.objects import Obj
from ..api.podresources import Units
from .framework import CycleState, Prefiltered, Prescored
from .nodefilters import PodFilter
from .nominated import WithNominated
from .usual import Usual


@dataclass(slots=True)
class Cycle:
    pod: Obj
    reqs: Units
    nonzero: Units
    filters: PodFilter
    #: NodeResourcesFit on the usual node (``noderesources.checks``: names DRA serves left out).
    fit_checks: list[tuple[str, int]]
    #: The typed per-plugin state (DynamicResources' keys: ``profile.DYNAMIC_RESOURCES``).
    state: CycleState
    #: The profile's Filter plugins that did not skip this pod, with what their PreFilter learnt.
    plugins: list[Prefiltered] = field(default_factory=list)
    #: The profile's Score plugins that did not skip this pod, once scoring asked (None: not yet).
    scorers: list[Prescored] | None = None
    #: The usual-node check with and without scores, once built (None: not built yet).
    checks: dict[bool, Usual | None] = field(default_factory=dict)
    #: Node -> the pods nominated to it with a priority at least the pod's (``nominated``).
    nominated: dict[str, list[Obj]] = field(default_factory=dict)
    #: Node -> Filter's view of it with those pods added, once asked.
    with_nominated: dict[str, WithNominated] = field(default_factory=dict)
