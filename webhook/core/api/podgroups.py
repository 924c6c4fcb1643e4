"""Workload-aware scheduling's objects as plain dicts: which pod group a pod belongs to, and what
its PodGroup asks of the group (``scheduling.k8s.io`` PodGroup; upstream's ``schedutil`` helpers).

A pod names its group in ``spec.schedulingGroup.podGroupName`` (immutable). The PodGroup says how
its pods are placed: ``schedulingPolicy.gang.minCount`` (all or nothing, at least that many) or
``schedulingPolicy.basic`` (pod by pod, minCount 1); ``schedulingConstraints.topology[0].key``
(every member in one domain of that node label); ``priority`` (every member must have it) and
``preemptionPolicy``.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from .objects import Obj, as_dict, as_list, as_str, meta, spec

#: The PodGroup condition the scheduler writes (``schedulingapi.PodGroupInitiallyScheduled``);
#: 1.36's (``v1alpha2``) was ``PodGroupScheduled``.
INITIALLY_SCHEDULED: Final = "PodGroupInitiallyScheduled"
SCHEDULED_V1ALPHA2: Final = "PodGroupScheduled"


def condition_type(version: str) -> str:
    """The condition the scheduler of the release serving PodGroups in ``version`` writes."""
    return SCHEDULED_V1ALPHA2 if version == "v1alpha2" else INITIALLY_SCHEDULED


REASON_SCHEDULED: Final = "Scheduled"
REASON_UNSCHEDULABLE: Final = "Unschedulable"
REASON_SCHEDULER_ERROR: Final = "SchedulerError"

PREEMPT_LOWER_PRIORITY: Final = "PreemptLowerPriority"

#: Beyond upstream: a topology level the group prefers beside the one it requires (a node label
#: key, or a preset's name), and the presets of the common conventions.
PREFERRED_TOPOLOGY: Final = "draxr.io/preferred-topology"
TOPOLOGY_PRESETS: Final = {
    "clique": "nvidia.com/gpu.clique",
    "rack": "topology.kubernetes.io/rack",
    "zone": "topology.kubernetes.io/zone",
    "topograph": "accelerator.topograph.run/domain",
}


class GroupKey(NamedTuple):
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def group_of(pod: Obj) -> GroupKey | None:
    """The pod group a pod belongs to (``spec.schedulingGroup.podGroupName``), or None."""
    name = as_str(as_dict(spec(pod).get("schedulingGroup")).get("podGroupName"))
    if not name:
        return None
    return GroupKey(as_str(meta(pod).get("namespace")) or "default", name)


def key_of(pod_group: Obj) -> GroupKey:
    m = meta(pod_group)
    return GroupKey(as_str(m.get("namespace")) or "default", as_str(m.get("name")))


def _policy(pod_group: Obj) -> Obj:
    return as_dict(spec(pod_group).get("schedulingPolicy"))


def is_gang(pod_group: Obj) -> bool:
    return "gang" in _policy(pod_group)


def min_count(pod_group: Obj) -> int:
    """``gang.minCount``; 1 for a basic group (upstream's ``getMinCount``)."""
    gang = _policy(pod_group).get("gang")
    if not isinstance(gang, dict):
        return 1
    count = gang.get("minCount")
    return count if isinstance(count, int) and not isinstance(count, bool) else 1


def topology_key(pod_group: Obj) -> str | None:
    """The first topology constraint's node label key, the one upstream's placements use."""
    constraints = as_list(as_dict(spec(pod_group).get("schedulingConstraints")).get("topology"))
    if not constraints:
        return None
    return as_str(as_dict(constraints[0]).get("key")) or None


def preferred_topology_key(pod_group: Obj) -> str | None:
    """The node label key of ``draxr.io/preferred-topology`` (a preset's name stands for its key)."""
    value = meta(pod_group).get("annotations")
    raw = as_str(as_dict(value).get(PREFERRED_TOPOLOGY)).strip()
    return TOPOLOGY_PRESETS.get(raw, raw) or None


def priority(pod_group: Obj) -> int:
    """``spec.priority``, 0 when unset (``schedutil.PodGroupPriority``)."""
    value = spec(pod_group).get("priority")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def preemption_policy(pod_group: Obj) -> str:
    return as_str(spec(pod_group).get("preemptionPolicy")) or PREEMPT_LOWER_PRIORITY


def condition(pod_group: Obj, kind: str = INITIALLY_SCHEDULED) -> Obj | None:
    for c in as_list(as_dict(pod_group.get("status")).get("conditions")):
        if as_dict(c).get("type") == kind:
            return as_dict(c)
    return None


__all__ = [
    "INITIALLY_SCHEDULED",
    "PREEMPT_LOWER_PRIORITY",
    "PREFERRED_TOPOLOGY",
    "REASON_SCHEDULED",
    "REASON_SCHEDULER_ERROR",
    "REASON_UNSCHEDULABLE",
    "SCHEDULED_V1ALPHA2",
    "TOPOLOGY_PRESETS",
    "GroupKey",
    "condition",
    "condition_type",
    "group_of",
    "is_gang",
    "key_of",
    "min_count",
    "preemption_policy",
    "preferred_topology_key",
    "priority",
    "topology_key",
]
