"""NodeVolumeLimits: a CSI driver attaches at most ``CSINode.spec.drivers[].allocatable.count`` volumes
to a node (upstream ``nodevolumelimits``, its ``CSILimits``).

Per driver, the node's attached volumes are the unique volumes (``<driver>/<volume handle>``) of the
pods counted on it (bound and assumed), plus the VolumeAttachments to it whose volume no such pod
uses; the pod's own volumes already attached there are not counted twice. A claim's volume is its
PersistentVolume's CSI source, or for an in-tree volume of a migrated plugin (AWS EBS, GCE PD, Azure
Disk, Cinder, Portworx; the node having a CSINode) the CSI volume it translates to; an unbound
claim counts as one volume of its StorageClass's provisioner. Inline in-tree volumes of those
plugins count as the CSI volumes they translate to.

With ``VolumeLimitScaling`` (beta, on in 1.37): a driver whose CSIDriver asks for
``preventPodSchedulingIfMissing`` must be on the node's CSINode."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from ...api.csitranslation import (
    COUNTED,
    TranslationError,
    csi_driver_of,
    in_tree_plugin,
    is_migratable_provisioner,
    pv_handle,
)
from ...api.objects import Obj, as_dict, as_list, as_str, name, namespace, spec, uid
from ...api.pvhelpers import claim_class, ephemeral_owner_error, volume_name
from ...cluster.nodeinfo import NodeInfo
from ...cluster.podvolumes import CLAIMS, IN_TREE, MountedVolumes, mounted_volumes, volumes_with
from ...cluster.state import ClusterState
from ..framework import FilterPlugin, PluginError

NAME: Final = "NodeVolumeLimits"
#: ``ErrReasonMaxVolumeCountExceeded``.
MAX_VOLUME_COUNT_EXCEEDED: Final = "node(s) exceed max volume count"
#: Upstream prefixes an unbound claim's stand-in handle with 32 random characters, so that it never
#: equals a real one; draxr's decisions must not depend on chance, so the prefix is fixed.
UNBOUND_PREFIX: Final = "draxr-unbound-claim"


_SOURCES: Final = CLAIMS | IN_TREE


def driver_not_installed(driver: str) -> str:
    return f"{driver} CSI driver is not installed on the node"


@dataclass(slots=True)
class LimitsState:
    """The cluster, the pod and its volumes (read once); its CSI volumes by whether the node has a
    CSINode (in-tree volumes count only then), worked out on first use."""

    state: ClusterState
    pod: Obj
    volumes: MountedVolumes
    new: dict[bool, dict[str, str]] = field(default_factory=dict)


def pre_filter(state: ClusterState, pod: Obj) -> LimitsState | None:
    """Skip unless the pod has a claim, a generic ephemeral volume or a migratable in-tree volume."""
    if not state.volumes.watched:
        return None
    vols = volumes_with(pod, _SOURCES)
    if not vols or not any(
        isinstance(vol.get("persistentVolumeClaim"), dict)
        or isinstance(vol.get("ephemeral"), dict)
        or in_tree_plugin(vol) is not None
        for vol in vols
    ):
        return None
    volumes = mounted_volumes(pod)
    if volumes is None:  # migratable inline volumes of plugins that are never counted
        volumes = MountedVolumes(namespace(pod), name(pod))
    return LimitsState(state, pod, volumes)


def filter_node(pre: LimitsState, node: str, info: NodeInfo) -> str | None:
    state = pre.state
    csi_node = state.volumes.csi_nodes.get(node)
    has_csi_node = csi_node is not None
    new = pre.new.get(has_csi_node)
    if new is None:
        found: dict[str, str] = {}
        reason = attachable_volumes(state, pre.volumes, uid(pre.pod), has_csi_node, True, found)
        if reason is not None:
            return reason
        new = pre.new[has_csi_node] = found
    if not new:
        return None
    installed = {as_str(as_dict(d).get("name")) for d in as_list(spec(csi_node).get("drivers"))}
    for driver in dict.fromkeys(new.values()):
        prevent = (
            as_dict(state.volumes.csi_drivers.get(driver))
            .get("spec", {})
            .get("preventPodSchedulingIfMissing")
        )
        if prevent is True and driver not in installed:
            return driver_not_installed(driver)
    limits = volume_limits(csi_node)
    if not limits:
        return None
    attached: dict[str, str] = {}
    for pod_uid, mounted in info.volumes.items():
        attachable_volumes(state, mounted, pod_uid, has_csi_node, False, attached)
    counts: dict[str, int] = {}
    for driver in attached.values():
        counts[driver] = counts.get(driver, 0) + 1
    for volume_id, driver in node_attachments(state, node).items():
        if volume_id not in attached:
            counts[driver] = counts.get(driver, 0) + 1
    wanted: dict[str, int] = {}
    for volume_id, driver in new.items():
        if volume_id not in attached:
            wanted[driver] = wanted.get(driver, 0) + 1
    for driver, count in wanted.items():
        limit = limits.get(driver)
        if limit is not None and counts.get(driver, 0) + count > limit:
            return MAX_VOLUME_COUNT_EXCEEDED
    return None


def attachable_volumes(
    state: ClusterState,
    mounted: MountedVolumes,
    pod_uid: str,
    has_csi_node: bool,
    new_pod: bool,
    result: dict[str, str],
) -> str | None:
    """``filterAttachableVolumes``: the pod's CSI volumes into ``result`` (unique name -> driver).
    For the pod being scheduled a missing claim is the node's reason (returned); for a pod already
    on the node it is not counted. An ephemeral claim the pod does not own, and an inline volume
    that does not translate, raise ``PluginError``."""
    ns = mounted.namespace
    claims: Iterable[tuple[str, bool]] = [(c, False) for c in mounted.claims] + [
        (c, True) for c in mounted.ephemeral
    ]
    for inline in mounted.inline:
        if not has_csi_node:
            continue
        if inline.error:
            raise PluginError(f'running "{NAME}" filter plugin: {inline.error}')
        result[f"{inline.driver}/{inline.handle}"] = inline.driver
    for claim_name, ephemeral in claims:
        if not claim_name:
            raise PluginError(f'running "{NAME}" filter plugin: PersistentVolumeClaim had no name')
        pvc = state.volumes.claim(ns, claim_name)
        if pvc is None:
            if new_pod:
                return f'looking up PVC {ns}/{claim_name}: persistentvolumeclaim "{claim_name}" not found'
            continue
        if ephemeral:
            owner = {"metadata": {"namespace": ns, "name": mounted.pod_name, "uid": pod_uid}}
            error = ephemeral_owner_error(owner, pvc)
            if error is not None:
                raise PluginError(f'running "{NAME}" filter plugin: {error}')
        driver, handle = csi_driver_info(state, pvc, has_csi_node)
        if driver and handle:
            result[f"{driver}/{handle}"] = driver
    return None


def csi_driver_info(state: ClusterState, pvc: Obj, has_csi_node: bool) -> tuple[str, str]:
    """``getCSIDriverInfo``: the CSI driver and volume handle of a claim's volume (translated from
    in-tree when migrated), or of its StorageClass's provisioner when it has no volume yet; ("", "")
    when it does not count."""
    pv_name = volume_name(pvc)
    pv = state.volumes.volume(pv_name) if pv_name else None
    if pv is None:
        return _driver_info_from_class(state, pvc, has_csi_node)
    csi = as_dict(spec(pv).get("csi"))
    if csi:
        return as_str(csi.get("driver")), as_str(csi.get("volumeHandle"))
    plugin = in_tree_plugin(spec(pv))
    if plugin is None or not has_csi_node or plugin not in COUNTED:
        return "", ""
    try:
        return csi_driver_of(plugin), pv_handle(plugin, pv)
    except TranslationError:
        return "", ""


def _driver_info_from_class(state: ClusterState, pvc: Obj, has_csi_node: bool) -> tuple[str, str]:
    class_name = claim_class(pvc)
    if not class_name:
        return "", ""
    sc = state.volumes.storage_classes.get(class_name)
    if sc is None:
        return "", ""
    handle = f"{UNBOUND_PREFIX}-{namespace(pvc)}/{name(pvc)}"
    provisioner = as_str(sc.get("provisioner"))
    if is_migratable_provisioner(provisioner):
        if not has_csi_node or provisioner not in COUNTED:
            return "", ""
        return csi_driver_of(provisioner), handle
    return provisioner, handle


def volume_limits(csi_node: Obj | None) -> dict[str, int]:
    """``getVolumeLimits``: per driver of the CSINode, its ``allocatable.count``, when set."""
    limits: dict[str, int] = {}
    for raw in as_list(spec(csi_node).get("drivers")):
        d = as_dict(raw)
        count = as_dict(d.get("allocatable")).get("count")
        if isinstance(count, int) and not isinstance(count, bool):
            limits[as_str(d.get("name"))] = count
    return limits


def node_attachments(state: ClusterState, node: str) -> dict[str, str]:
    """``getNodeVolumeAttachmentInfo``: the CSI volumes the VolumeAttachments to the node attach."""
    out: dict[str, str] = {}
    for va in state.volumes.attachments_on(node):
        attacher = as_str(spec(va).get("attacher"))
        pv_name = as_dict(spec(va).get("source")).get("persistentVolumeName")
        if not attacher or not isinstance(pv_name, str):
            continue
        pv = state.volumes.volume(pv_name)
        csi = as_dict(spec(pv).get("csi")) if pv is not None else {}
        if not csi:
            continue
        out[f"{attacher}/{as_str(csi.get('volumeHandle'))}"] = attacher
    return out


FILTER: Final = FilterPlugin(NAME, pre_filter, filter_node)
