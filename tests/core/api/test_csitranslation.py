"""The in-tree to CSI translation NodeVolumeLimits counts with, from upstream's csi-translation-lib
tests (aws_ebs_test.go's TestKubernetesVolumeIDToEBSVolumeID, gce_pd_test.go's handles): which
plugin a source uses, the driver it migrated to, and the volume handles."""

from __future__ import annotations

import pytest

from webhook.core.api.csitranslation import (
    AWS_EBS,
    AZURE_DISK,
    AZURE_FILE,
    COUNTED,
    GCE_PD,
    TranslationError,
    csi_driver_of,
    ebs_volume_id,
    in_tree_plugin,
    inline_handle,
    pv_handle,
)


# TestKubernetesVolumeIDToEBSVolumeID
@pytest.mark.parametrize(
    ("name", "kubernetes_id", "want"),
    [
        ("Normal ID format", "vol-02399794d890f9375", "vol-02399794d890f9375"),
        ("aws:///{volumeId} format", "aws:///vol-02399794d890f9375", "vol-02399794d890f9375"),
        ("aws://{zone}/{volumeId} format", "aws://us-west-2a/vol-02399794d890f9375", "vol-02399794d890f9375"),
        ("fails on invalid volume ID", "aws://us-west-2a/02399794d890f9375", None),
    ],
)
def test_kubernetes_volume_id_to_ebs_volume_id(name: str, kubernetes_id: str, want: str | None) -> None:
    if want is None:
        with pytest.raises(TranslationError):
            ebs_volume_id(kubernetes_id)
    else:
        assert ebs_volume_id(kubernetes_id) == want, name


def test_plugins_drivers_and_what_counts() -> None:
    assert in_tree_plugin({"awsElasticBlockStore": {"volumeID": "v"}}) == AWS_EBS
    assert in_tree_plugin({"azureFile": {}}) == AZURE_FILE
    assert in_tree_plugin({"hostPath": {"path": "/"}}) is None
    assert csi_driver_of(GCE_PD) == "pd.csi.storage.gke.io"
    assert AZURE_FILE not in COUNTED
    assert AZURE_DISK in COUNTED


@pytest.mark.parametrize(
    ("zones", "want"),
    [
        ("", "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/pd"),
        ("us-central1-a", "projects/UNSPECIFIED/zones/us-central1-a/disks/pd"),
        ("us-central1-a__us-central1-c", "projects/UNSPECIFIED/regions/us-central1/disks/pd"),
    ],
)
def test_gce_pd_handles_follow_the_zone_labels(zones: str, want: str) -> None:
    pv = {"metadata": {"labels": {"topology.kubernetes.io/zone": zones} if zones else {}}}
    pv["spec"] = {"gcePersistentDisk": {"pdName": "pd"}}
    assert pv_handle(GCE_PD, pv) == want
    assert inline_handle(GCE_PD, {"gcePersistentDisk": {"pdName": "pd"}}) == (
        "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/pd"
    )


def test_gce_pd_zones_of_two_regions_do_not_translate() -> None:
    pv = {"metadata": {"labels": {"topology.kubernetes.io/zone": "us-central1-a__europe-west1-b"}}}
    pv["spec"] = {"gcePersistentDisk": {"pdName": "pd"}}
    with pytest.raises(TranslationError):
        pv_handle(GCE_PD, pv)


def test_azure_disks_other_than_managed_do_not_translate() -> None:
    disk = {"azureDisk": {"diskURI": "uri", "kind": "Dedicated"}}
    with pytest.raises(TranslationError, match=r"^kind\(Dedicated\) is not supported in csi migration$"):
        inline_handle(AZURE_DISK, disk)
    assert inline_handle(AZURE_DISK, {"azureDisk": {"diskURI": "uri", "kind": "Managed"}}) == "uri"
