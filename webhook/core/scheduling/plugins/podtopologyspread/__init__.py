"""PodTopologySpread (upstream ``podtopologyspread``): a pod's ``topologySpreadConstraints``,
DoNotSchedule in Filter and ScheduleAnyway in Score, with ``minDomains``, the node inclusion
policies (``nodeAffinityPolicy``: Honor by default, ``nodeTaintsPolicy``: Ignore by default) and
``matchLabelKeys``; the system default constraints, selected by the cluster's Services and workload
controllers (``common``, ``cluster.workloads``).

``common``     the constraints, the defaults, the policies, the eligible nodes and domains
``filtering``  PreFilter, Filter and the PreFilterExtensions (``add_pod``, ``remove_pod``)
``scoring``    PreScore (with the feasible nodes), Score, NormalizeScore
"""

from __future__ import annotations

from functools import partial
from typing import Final

from ...framework import FilterPlugin, ScorePlugin
from . import filtering, scoring
from .common import DefaultSelector, cluster_default_selector

NAME: Final = "PodTopologySpread"


def plugins(
    default_selector: DefaultSelector | None = None,
) -> tuple[FilterPlugin[filtering.PreFilterState], ScorePlugin[scoring.PreScoreState, scoring.Scores]]:
    """The Filter and Score plugins; ``default_selector`` gives the system defaults their selector
    (upstream's ``DefaultSelector`` over Services and workload controllers; None: no defaults, as a
    profile with ``defaultingType: List`` and no constraints)."""
    return (
        FilterPlugin(
            NAME,
            partial(filtering.pre_filter, default_selector=default_selector),
            filtering.filter_node,
            filtering.add_pod,
            filtering.remove_pod,
        ),
        ScorePlugin(
            NAME,
            2,
            partial(scoring.pre_score, default_selector=default_selector),
            scoring.score,
            scoring.normalize,
            scoring.feasible,
        ),
    )


FILTER, SCORE = plugins(cluster_default_selector)
