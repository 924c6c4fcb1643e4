"""NodeAffinity: ``spec.nodeSelector`` and the required node affinity terms (upstream
``nodeaffinity``)."""

from __future__ import annotations

from typing import Final

from ...api.nodematch import pod_node_affinity_matches
from ...api.objects import Obj, as_dict, spec
from ...cluster.nodeinfo import NodeInfo

NAME: Final = "NodeAffinity"
REASON: Final = "node(s) didn't match Pod's node affinity/selector"


def pre_filter(pod: Obj) -> bool:
    """Whether the pod constrains its node at all (else the plugin is skipped, as upstream's
    PreFilter returns Skip)."""
    s = spec(pod)
    affinity = as_dict(as_dict(s.get("affinity")).get("nodeAffinity"))
    return bool(as_dict(s.get("nodeSelector"))) or bool(
        affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    )


def filter_node(pod: Obj, info: NodeInfo) -> str | None:
    return None if pod_node_affinity_matches(pod, info.node) else REASON
