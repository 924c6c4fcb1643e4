"""The part of ``k8s.io/csi-translation-lib`` NodeVolumeLimits reads: which in-tree volume plugin a
volume source (a pod's inline volume, or a PersistentVolume's spec) uses, the CSI driver it migrated
to, and the CSI volume handle the translation gives it, so that in-tree volumes count against the
CSI driver's attach limit as upstream counts them.

Seven plugins migrate (``IsInlineMigratable``, ``IsPVMigratable``); NodeVolumeLimits counts five of
them (``isCSIMigrationOn``: AWS EBS, GCE PD, Azure Disk, Cinder, Portworx), never Azure File or
vSphere. The rest of a translation (topology, attributes, secrets) is not needed and not done."""

from __future__ import annotations

import re
from typing import Any, Final

from .objects import Obj, as_dict, as_str, labels

GCE_PD: Final = "kubernetes.io/gce-pd"
AWS_EBS: Final = "kubernetes.io/aws-ebs"
CINDER: Final = "kubernetes.io/cinder"
AZURE_DISK: Final = "kubernetes.io/azure-disk"
AZURE_FILE: Final = "kubernetes.io/azure-file"
VSPHERE: Final = "kubernetes.io/vsphere-volume"
PORTWORX: Final = "kubernetes.io/portworx-volume"

#: In-tree plugin -> (its volume source field, the CSI driver it migrated to).
IN_TREE_PLUGINS: Final[dict[str, tuple[str, str]]] = {
    GCE_PD: ("gcePersistentDisk", "pd.csi.storage.gke.io"),
    AWS_EBS: ("awsElasticBlockStore", "ebs.csi.aws.com"),
    CINDER: ("cinder", "cinder.csi.openstack.org"),
    AZURE_DISK: ("azureDisk", "disk.csi.azure.com"),
    AZURE_FILE: ("azureFile", "file.csi.azure.com"),
    VSPHERE: ("vsphereVolume", "csi.vsphere.vmware.com"),
    PORTWORX: ("portworxVolume", "pxd.portworx.com"),
}
#: ``nodevolumelimits.isCSIMigrationOn``: the plugins whose volumes count (given a CSINode).
COUNTED: Final = frozenset({AWS_EBS, PORTWORX, GCE_PD, AZURE_DISK, CINDER})

_ZONE_LABELS: Final = ("failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/zone")
_EBS_ID: Final = re.compile(r"^vol-[^/]*$")
_UNSPECIFIED: Final = "UNSPECIFIED"


class TranslationError(ValueError):
    """The in-tree source cannot be translated (upstream's error text)."""


def in_tree_plugin(source: Any) -> str | None:
    """``GetInTreePluginNameFromSpec``: the migratable in-tree plugin of a pod volume or a
    PersistentVolume spec, or None."""
    src = as_dict(source)
    for plugin, (field, _driver) in IN_TREE_PLUGINS.items():
        if isinstance(src.get(field), dict):
            return plugin
    return None


def csi_driver_of(plugin: str) -> str:
    """``GetCSINameFromInTreeName``."""
    return IN_TREE_PLUGINS[plugin][1]


def is_migratable_provisioner(provisioner: str) -> bool:
    """``IsMigratableIntreePluginByName``: a StorageClass provisioner that names an in-tree plugin."""
    return provisioner in IN_TREE_PLUGINS


def inline_handle(plugin: str, volume: Obj) -> str:
    """The CSI volume handle ``TranslateInTreeInlineVolumeToCSI`` gives a pod's inline volume of a
    counted plugin; raises ``TranslationError`` as upstream errs."""
    src = as_dict(volume.get(IN_TREE_PLUGINS[plugin][0]))
    if plugin == GCE_PD:
        return f"projects/{_UNSPECIFIED}/zones/{_UNSPECIFIED}/disks/{as_str(src.get('pdName'))}"
    if plugin == AZURE_DISK:
        _check_azure_kind(src)
    return _handle(plugin, src)


def pv_handle(plugin: str, pv: Obj) -> str:
    """The CSI volume handle ``TranslateInTreePVToCSI`` gives a PersistentVolume of a counted
    plugin; raises ``TranslationError`` as upstream errs."""
    src = as_dict(as_dict(pv.get("spec")).get(IN_TREE_PLUGINS[plugin][0]))
    if plugin == GCE_PD:
        return _gce_pv_handle(as_str(src.get("pdName")), labels(pv))
    if plugin == AZURE_DISK:
        _check_azure_kind(src)
    return _handle(plugin, src)


def _handle(plugin: str, src: Obj) -> str:
    if plugin == AWS_EBS:
        return ebs_volume_id(as_str(src.get("volumeID")))
    if plugin == AZURE_DISK:
        return as_str(src.get("diskURI"))
    return as_str(src.get("volumeID"))  # Cinder, Portworx


def _check_azure_kind(src: Obj) -> None:
    kind = src.get("kind")
    if isinstance(kind, str) and kind.lower() != "managed":
        raise TranslationError(f"kind({kind}) is not supported in csi migration")


def ebs_volume_id(kubernetes_id: str) -> str:
    """``KubernetesVolumeIDToEBSVolumeID``: ``aws://<zone>/vol-...`` (or a bare id) to ``vol-...``."""
    if not kubernetes_id.startswith("aws://"):
        return kubernetes_id
    path = kubernetes_id[len("aws://") :]
    aws_id = path.split("/", 1)[1] if "/" in path else ""
    aws_id = aws_id.split("?", 1)[0].split("#", 1)[0].strip("/")
    if not _EBS_ID.match(aws_id):
        raise TranslationError(
            "failed to translate Kubernetes ID to EBS Volume ID "
            f"Invalid format for AWS volume ({kubernetes_id})"
        )
    return aws_id


def _gce_pv_handle(pd_name: str, pv_labels: dict[str, str]) -> str:
    zones_label = pv_labels.get(_ZONE_LABELS[0], "") or pv_labels.get(_ZONE_LABELS[1], "")
    zones = zones_label.split("__")
    if len(zones) == 1 and zones[0]:
        return f"projects/{_UNSPECIFIED}/zones/{zones[0]}/disks/{pd_name}"
    if len(zones) > 1:
        regions = set()
        for zone in zones:
            parts = zone.split("-")
            if len(parts) != 3:
                raise TranslationError(
                    "failed to get region from zones: zone in unexpected format, "
                    f"expected: {{locale}}-{{region}}-{{zone}}, got: {zone}"
                )
            regions.add("-".join(parts[:2]))
        if len(regions) != 1:
            raise TranslationError(
                "failed to get region from zones: multiple or no regions gotten from zones"
            )
        return f"projects/{_UNSPECIFIED}/regions/{regions.pop()}/disks/{pd_name}"
    return f"projects/{_UNSPECIFIED}/zones/{_UNSPECIFIED}/disks/{pd_name}"
