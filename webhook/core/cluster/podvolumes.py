"""What a pod's volumes mean to the volume plugins, read once when the pod counts on a node (bound or
assumed) and kept on its ``NodeInfo``: the claims of its ``persistentVolumeClaim`` volumes (upstream's
``PVCRefCounts``: VolumeRestrictions' ReadWriteOncePod check; NodeVolumeLimits), the claims of its
generic ephemeral volumes (NodeVolumeLimits), its in-tree disks (VolumeRestrictions' disk conflicts:
GCE PD, AWS EBS, ISCSI, RBD) and its migratable in-tree inline volumes as the CSI volumes they count
as (NodeVolumeLimits).

A pod with none of these (most pods: projected tokens, config maps, empty dirs) keeps nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from ..api.csitranslation import (
    COUNTED,
    IN_TREE_PLUGINS,
    TranslationError,
    csi_driver_of,
    in_tree_plugin,
    inline_handle,
)
from ..api.objects import Obj, as_list, as_str, name, namespace
from ..api.pvhelpers import ephemeral_claim_name

#: An in-tree disk as VolumeRestrictions compares it: ("gce", pdName, readOnly), ("aws", volumeID),
#: ("iscsi", iqn, readOnly), ("rbd", monitors, pool, image, readOnly).
Disk = tuple[Any, ...]

GCE: Final = "gce"
AWS: Final = "aws"
ISCSI: Final = "iscsi"
RBD: Final = "rbd"

#: The volume sources each plugin reads: claims (persistentVolumeClaim, generic ephemeral), the
#: in-tree disks VolumeRestrictions compares, the in-tree sources that migrated to CSI.
CLAIM: Final = frozenset({"persistentVolumeClaim"})
CLAIMS: Final = frozenset({"persistentVolumeClaim", "ephemeral"})
DISKS: Final = frozenset({"gcePersistentDisk", "awsElasticBlockStore", "iscsi", "rbd"})
IN_TREE: Final = frozenset(source for source, _driver in IN_TREE_PLUGINS.values())
ANY: Final = CLAIMS | DISKS | IN_TREE


def volumes_with(pod: Obj, sources: frozenset[str]) -> list[Obj]:
    """The pod's volumes with one of these sources, in order: most pods have none (a projected
    token, config maps), found at the cost of one C-level check per volume."""
    s = pod.get("spec")
    vols = s.get("volumes") if isinstance(s, dict) else None
    if not vols or not isinstance(vols, list):
        return []
    return [v for v in vols if isinstance(v, dict) and not sources.isdisjoint(v)]


@dataclass(frozen=True, slots=True)
class InlineVolume:
    """A migratable in-tree inline volume of a counted plugin: the CSI driver and volume handle it
    counts as, or the translation's error (``converting volume(<name>) from inline to csi: ...``)."""

    plugin: str
    driver: str
    handle: str
    error: str = ""


@dataclass(frozen=True, slots=True)
class MountedVolumes:
    """One pod's volumes as the volume plugins count them on its node."""

    namespace: str
    pod_name: str
    claims: tuple[str, ...] = ()  # persistentVolumeClaim.claimName, in order
    ephemeral: tuple[str, ...] = ()  # the claims of generic ephemeral volumes (<pod>-<volume>)
    disks: tuple[Disk, ...] = ()
    inline: tuple[InlineVolume, ...] = ()


def mounted_volumes(pod: Obj) -> MountedVolumes | None:
    """The pod's volumes as ``MountedVolumes``, or None when none of them matters to a plugin."""
    vols = volumes_with(pod, ANY)
    if not vols:
        return None
    claims: list[str] = []
    ephemeral: list[str] = []
    disks: list[Disk] = []
    inline: list[InlineVolume] = []
    for vol in vols:
        pvc = vol.get("persistentVolumeClaim")
        if isinstance(pvc, dict):
            claims.append(as_str(pvc.get("claimName")))
            continue
        if isinstance(vol.get("ephemeral"), dict):
            ephemeral.append(ephemeral_claim_name(pod, vol))
            continue
        disk = disk_of(vol)
        if disk is not None:
            disks.append(disk)
        plugin = in_tree_plugin(vol)
        if plugin in COUNTED:
            inline.append(inline_volume(plugin, vol))
    if not (claims or ephemeral or disks or inline):
        return None
    return MountedVolumes(
        namespace(pod), name(pod), tuple(claims), tuple(ephemeral), tuple(disks), tuple(inline)
    )


def inline_volume(plugin: str, vol: Obj) -> InlineVolume:
    """The CSI volume an in-tree inline volume of a counted plugin counts as."""
    driver = csi_driver_of(plugin)
    try:
        return InlineVolume(plugin, driver, inline_handle(plugin, vol))
    except TranslationError as e:
        return InlineVolume(
            plugin, driver, "", f"converting volume({as_str(vol.get('name'))}) from inline to csi: {e}"
        )


def disk_of(vol: Obj) -> Disk | None:
    """The in-tree disk VolumeRestrictions checks (``needsRestrictionsCheck``), or None."""
    gce = vol.get("gcePersistentDisk")
    if isinstance(gce, dict):
        return (GCE, as_str(gce.get("pdName")), gce.get("readOnly") is True)
    aws = vol.get("awsElasticBlockStore")
    if isinstance(aws, dict):
        return (AWS, as_str(aws.get("volumeID")))
    iscsi = vol.get("iscsi")
    if isinstance(iscsi, dict):
        return (ISCSI, as_str(iscsi.get("iqn")), iscsi.get("readOnly") is True)
    rbd = vol.get("rbd")
    if isinstance(rbd, dict):
        monitors = frozenset(m for m in as_list(rbd.get("monitors")) if isinstance(m, str))
        return (RBD, monitors, as_str(rbd.get("pool")), as_str(rbd.get("image")), rbd.get("readOnly") is True)
    return None


def disks_conflict(new: Disk, existing: Disk) -> bool:
    """``isVolumeConflict`` for two disks: the same GCE PD unless both are read-only; the same EBS
    volume; the same ISCSI IQN unless both are read-only; an RBD image in the same pool sharing a
    monitor, unless both are read-only."""
    kind = new[0]
    if kind != existing[0]:
        return False
    if kind == AWS:
        return bool(new[1] == existing[1])
    if kind in (GCE, ISCSI):
        return bool(new[1] == existing[1] and not (new[2] and existing[2]))
    _, mon, pool, image, ro = new
    _, emon, epool, eimage, ero = existing
    return bool(mon & emon) and pool == epool and image == eimage and not (ro and ero)
