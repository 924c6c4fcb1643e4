"""Workload-aware scheduling's objects as plain dicts: which pod group a pod belongs to, and what
its PodGroup asks of the group (``scheduling.k8s.io`` PodGroup; upstream's ``schedutil`` helpers).

A pod names its group in ``spec.schedulingGroup.podGroupName`` (immutable; 1.36 on). The PodGroup says how
its pods are placed: ``schedulingPolicy.gang.minCount`` (all or nothing, at least that many) or
``schedulingPolicy.basic`` (pod by pod, minCount 1); ``schedulingConstraints.topology[0].key``
(every member in one domain of that node label); ``priority`` (every member must have it) and
``preemptionPolicy``.

1.35 had no PodGroup object: a pod named ``spec.workloadRef`` (a Workload, one of its
``spec.podGroups`` by name, and an optional replica key), and the Workload held each group's
``policy``. Such a group is keyed ``<workload>/<podGroup>[/<replica key>]`` and read as a PodGroup
of that policy (``from_workload``).
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
    """The pod group a pod belongs to (``spec.schedulingGroup.podGroupName``, or 1.35's
    ``spec.workloadRef``), or None."""
    s = spec(pod)
    ns = as_str(meta(pod).get("namespace")) or "default"
    name = as_str(as_dict(s.get("schedulingGroup")).get("podGroupName"))
    if name:
        return GroupKey(ns, name)
    ref = as_dict(s.get("workloadRef"))
    workload, group = as_str(ref.get("name")), as_str(ref.get("podGroup"))
    if not workload or not group:
        return None
    replica = as_str(ref.get("podGroupReplicaKey"))
    return GroupKey(ns, "/".join(x for x in (workload, group, replica) if x))


def workload_of(group: GroupKey) -> tuple[str, str] | None:
    """The Workload and its pod group a 1.35 group's key names, or None for a PodGroup's."""
    parts = group.name.split("/")
    return (parts[0], parts[1]) if len(parts) >= 2 else None


def from_workload(workload: Obj, group: GroupKey) -> Obj | None:
    """A 1.35 Workload's pod group as a PodGroup of its policy (None: the Workload has no such
    group). It has no status: 1.35's scheduler wrote no condition."""
    names = workload_of(group)
    if names is None:
        return None
    for entry in as_list(spec(workload).get("podGroups")):
        if as_dict(entry).get("name") == names[1]:
            return {
                "apiVersion": "scheduling.k8s.io/v1alpha1",
                "kind": "Workload",
                "metadata": {"name": group.name, "namespace": group.namespace},
                "spec": {"schedulingPolicy": as_dict(as_dict(entry).get("policy"))},
            }
    return None


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
    """``spec.preemptionPolicy`` (a PodGroup's, or a pod's: the same field), upstream's default
    when unset."""
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
    "from_workload",
    "group_of",
    "is_gang",
    "key_of",
    "min_count",
    "preemption_policy",
    "preferred_topology_key",
    "priority",
    "topology_key",
    "workload_of",
]
