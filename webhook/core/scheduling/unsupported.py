"""What draxr's worker cannot honour: the pod features kube-scheduler implements and the worker does
not, each with a detector and the name a pod's author is told. The webhook keeps such pods away from
the worker (core/paths/outcome.py), so the list is short by design: what the worker learns to do
leaves it, one entry per upstream plugin (delete the plugin's line in ``UNSUPPORTED``).

Checked against kube-scheduler 1.37's default plugins (``pkg/scheduler/framework/plugins``):

* honoured by the worker: PrioritySort, NodeUnschedulable, NodeName, TaintToleration, NodeAffinity,
  NodePorts, NodeResourcesFit (pod-level resources and overhead included), SchedulingGates (a gated
  pod is not the worker's until its gates are gone), DynamicResources (``firstAvailable``,
  ``adminAccess``, request tolerations, ``allocationMode: All``, partitionable devices), and the
  volume plugins VolumeBinding, VolumeZone, NodeVolumeLimits and VolumeRestrictions (PVC and
  generic ephemeral volumes, CSINode limits, inline disks; plugins/volume*.py), InterPodAffinity
  and PodTopologySpread (the pod's own terms and constraints; the cluster's default spread
  constraints, which only score, are not applied: docs/limitations.md), and workload-aware
  scheduling (GangScheduling, TopologyPlacementGenerator and PodGroupPodsCount;
  ``podgroupcycle.py``) of a PodGroup (``spec.schedulingGroup``, 1.36 on) and of 1.35's Workload
  (``spec.workloadRef``);
* listed, read from the pod's PodGroup when the webhook knows it: what the worker does not place
  yet, a composite group's child (``spec.parentCompositePodGroupName``) and claims shared by the
  group's pods (``spec.resourceClaims``).

Not a pod's feature, so not here: preemption (DefaultPreemption's PostFilter) and the nominated
pods kube-scheduler counts as taking room; a routed pod is never preempted for nor preempts.
Device features the worker lacks are not a pod's either: devices with binding conditions are never
picked (docs/limitations.md), so a class whose devices carry them is one to leave out of
``--managed-classes``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from ..api.objects import Obj, spec


@dataclass(frozen=True, slots=True)
class Unsupported:
    """A pod feature the worker does not implement: the upstream plugin (or feature) that
    implements it, the field that shows it, and its detector."""

    name: str
    field: str
    detect: Callable[[Obj], bool]

    def describe(self) -> str:
        return f"{self.name} ({self.field})"


def _set(field: str) -> Callable[[Obj], bool]:
    def detect(pod: Obj) -> bool:
        return spec(pod).get(field) not in (None, {}, "", [])

    return detect


#: Every pod feature the worker does not implement, in the order a pod's author is told them.
#: One line per upstream plugin (two for InterPodAffinity): when the worker implements one,
#: delete its line.
UNSUPPORTED: Final[tuple[Unsupported, ...]] = ()
#: What of a pod's PodGroup the worker does not place yet (each detector reads the PodGroup).
UNSUPPORTED_GROUPS: Final[tuple[Unsupported, ...]] = (
    Unsupported(
        "a PodGroup of a CompositePodGroup",
        "PodGroup spec.parentCompositePodGroupName",
        _set("parentCompositePodGroupName"),
    ),
    Unsupported("a PodGroup's shared ResourceClaims", "PodGroup spec.resourceClaims", _set("resourceClaims")),
)


def unsupported_features(pod: Obj, pod_group: Obj | None = None) -> list[Unsupported]:
    """The features of ``pod`` (and of its PodGroup, when known) draxr's worker cannot honour
    (none for almost every pod)."""
    out = [u for u in UNSUPPORTED if u.detect(pod)]
    if pod_group is not None:
        out += [u for u in UNSUPPORTED_GROUPS if u.detect(pod_group)]
    return out
