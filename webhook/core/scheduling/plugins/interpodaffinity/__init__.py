"""InterPodAffinity (upstream ``interpodaffinity``): required and preferred pod affinity and
anti-affinity, the existing pods' required anti-affinity towards the pod (symmetry), their
namespaces and namespace selectors, topology from node labels.

``state``      the incoming pod's terms (namespace selectors merged) and the counts per topology pair
``filtering``  PreFilter, Filter and the PreFilterExtensions (``add_pod``, ``remove_pod``)
``scoring``    PreScore, Score, NormalizeScore
"""

from __future__ import annotations

from typing import Final

from ...framework import FilterPlugin, ScorePlugin
from . import filtering, scoring

NAME: Final = "InterPodAffinity"

FILTER: Final = FilterPlugin(
    NAME, filtering.pre_filter, filtering.filter_node, filtering.add_pod, filtering.remove_pod
)
SCORE: Final = ScorePlugin(NAME, 2, scoring.pre_score, scoring.score, scoring.normalize)
