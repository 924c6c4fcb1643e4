"""VolumeRestrictions: a PersistentVolumeClaim with the ``ReadWriteOncePod`` access mode that a pod
on some node already uses blocks the pod everywhere; and the in-tree disks that cannot be mounted
twice on a node (upstream ``volumerestrictions``): the same GCE PD unless every mount is read-only,
the same AWS EBS volume, the same ISCSI IQN unless every mount is read-only, the same RBD image (a
shared monitor, the same pool and image) unless every mount is read-only.

PreFilter reads the pod's claims (a missing one fails the pod: upstream's not-found error) and
counts its ReadWriteOncePod claims in use; it skips a pod with no such claim in use and no in-tree
disk."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ...api.objects import Obj, as_str, namespace
from ...api.pvhelpers import READ_WRITE_ONCE_POD, access_modes
from ...cluster.nodeinfo import NodeInfo
from ...cluster.podvolumes import CLAIM, DISKS, Disk, disk_of, disks_conflict, volumes_with
from ...cluster.state import ClusterState
from ..framework import FilterPlugin, PreFilterFailed

NAME: Final = "VolumeRestrictions"
#: ``ErrReasonDiskConflict``.
DISK_CONFLICT: Final = "node(s) had no available disk"
#: ``ErrReasonReadWriteOncePodConflict``.
READ_WRITE_ONCE_POD_CONFLICT: Final = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
    "already in-use by another pod"
)


def claim_not_found(claim_name: str) -> str:
    """The PVC lister's not-found error, as upstream's PreFilter returns it."""
    return f'persistentvolumeclaim "{claim_name}" not found'


@dataclass(frozen=True, slots=True)
class RestrictionsState:
    """Upstream's ``preFilterState``, with the pod's in-tree disks."""

    disks: tuple[Disk, ...]
    #: ``conflictingPVCRefCount``: the pod's ReadWriteOncePod claims some scheduled pod uses.
    conflicting: int


_SOURCES: Final = CLAIM | DISKS


def pre_filter(state: ClusterState, pod: Obj) -> RestrictionsState | None:
    if not state.volumes.watched:
        return None
    vols = volumes_with(pod, _SOURCES)
    if not vols:
        return None
    disks: list[Disk] = []
    read_write_once_pod: set[str] = set()
    ns = namespace(pod)
    for vol in vols:
        disk = disk_of(vol)
        if disk is not None:
            disks.append(disk)
        source = vol.get("persistentVolumeClaim")
        if not isinstance(source, dict):
            continue
        claim_name = as_str(source.get("claimName"))
        pvc = state.volumes.claim(ns, claim_name)
        if pvc is None:
            raise PreFilterFailed(claim_not_found(claim_name))
        if READ_WRITE_ONCE_POD in access_modes(pvc):
            read_write_once_pod.add(claim_name)
    conflicting = sum(1 for c in read_write_once_pod if state.nodes.claim_in_use(ns, c))
    if not disks and conflicting == 0:
        return None
    return RestrictionsState(tuple(disks), conflicting)


def filter_node(pre: RestrictionsState, _node: str, info: NodeInfo) -> str | None:
    for disk in pre.disks:
        for mounted in info.volumes.values():
            if any(disks_conflict(disk, existing) for existing in mounted.disks):
                return DISK_CONFLICT
    return READ_WRITE_ONCE_POD_CONFLICT if pre.conflicting > 0 else None


FILTER: Final = FilterPlugin(NAME, pre_filter, filter_node)
