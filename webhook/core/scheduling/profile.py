"""The scheduling profile: which plugins a decision runs beyond the built-in ones, in kube-scheduler's default
order (``pkg/scheduler/apis/config/v1/default_plugins.go``).

Upstream's Filter order is NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts,
NodeResourcesFit, VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone, PodTopologySpread,
InterPodAffinity, DynamicResources. The first six are ``BASIC_FILTERS`` (NodeName is the API's own) and
``NODE_RESOURCES_FIT`` (the usual pod's fast path depends on them), then ``FILTERS`` in order, then
DynamicResources (``DYNAMIC_RESOURCES``, one object: the only name of ``plugins/dynamicresources`` the
framework level uses). Score weights are upstream's: TaintToleration 3, NodeAffinity 2, PodTopologySpread 2,
InterPodAffinity 2, VolumeBinding 1 (it scores by default since ``StorageCapacityScoring`` went beta in 1.37;
NodeResourcesFit and BalancedAllocation, 1 each, are ``scoring``'s ``upstream`` policy). A plugin is one
module under ``plugins/`` exposing its ``FilterPlugin`` and/or ``ScorePlugin``; adding it here is the whole of
its wiring.
"""

from __future__ import annotations

from typing import Any, Final

from .framework import FilterPlugin, ScorePlugin
from .nodefilters import BasicFilters
from .plugins import interpodaffinity, nodevolumelimits, podtopologyspread, volumerestrictions, volumezone
from .plugins.dynamicresources.plugin import DynamicResources
from .plugins.noderesources import NodeResourcesFit
from .plugins.volumebinding import plugin as volumebinding

FILTERS: Final[tuple[FilterPlugin[Any], ...]] = (
    volumerestrictions.FILTER,
    nodevolumelimits.FILTER,
    volumebinding.FILTER,
    volumezone.FILTER,
    podtopologyspread.FILTER,
    interpodaffinity.FILTER,
)
SCORES: Final[tuple[ScorePlugin[Any, Any], ...]] = (
    podtopologyspread.SCORE,
    interpodaffinity.SCORE,
    volumebinding.SCORE,
)
#: NodeUnschedulable, TaintToleration, NodeAffinity, NodePorts, then NodeResourcesFit: the filters
#: before the profile's, one object each (the usual pod's fast path depends on them).
BASIC_FILTERS: Final = BasicFilters()
NODE_RESOURCES_FIT: Final = NodeResourcesFit()
#: DynamicResources' factory: the scheduler makes one per engine (state, policy, budget, share IDs).
DYNAMIC_RESOURCES: Final = DynamicResources
