"""One decision's state (upstream's ``CycleState``): what each plugin's PreFilter learnt about the
pod, and what Filter and Score fill in as they go.

Facts (set once by PreFilter, never changed): the pod's requests (NodeResourcesFit, overhead
included) and ``NonZeroRequested`` (the upstream scores), what the node filters need
(``PodFilter``), NodeResourcesFit's checks on the usual node, the profile's plugins that did not
skip the pod with their PreFilter state, and DynamicResources' ``DraState``.
Views (filled lazily, once per decision): DynamicResources' per-class counts and groups
(``DraViews``) and the usual-node check (``usual.usual_check``), built on first use."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..api.objects import Obj
from ..api.podresources import Units
from .framework import FilterPlugin, ScorePlugin
from .nodefilters import PodFilter
from .plugins.dynamicresources.state import DraState, DraViews
from .usual import Check


@dataclass(slots=True)
class Cycle:
    pod: Obj
    reqs: Units
    nonzero: Units
    filters: PodFilter
    #: NodeResourcesFit on the usual node (``noderesources.checks``: names DRA serves left out).
    fit_checks: list[tuple[str, int]]
    dra: DraState
    #: The profile's Filter plugins that did not skip this pod, with what their PreFilter learnt.
    plugins: list[tuple[FilterPlugin, Any]] = field(default_factory=list)
    views: DraViews = field(default_factory=DraViews)
    #: The profile's Score plugins that did not skip this pod, once scoring asked (None: not yet).
    scorers: list[tuple[ScorePlugin, Any]] | None = None
    #: The usual-node check with and without scores, once built (None: not built yet).
    checks: dict[bool, Check | None] = field(default_factory=dict)
