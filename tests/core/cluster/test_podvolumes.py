"""A pod's volumes as the volume plugins count them on its node: claims, generic ephemeral claims,
in-tree disks, and the migratable inline volumes as the CSI volumes they count as."""

from __future__ import annotations

from tests.core.podfactory import pod
from tests.core.volumefactory import claim_volume, ephemeral_volume, with_volumes
from webhook.core.cluster.podvolumes import (
    AWS,
    GCE,
    RBD,
    InlineVolume,
    disk_of,
    disks_conflict,
    mounted_volumes,
)


def test_a_pod_with_nothing_that_counts_has_no_mounted_volumes() -> None:
    assert mounted_volumes(pod("p")) is None
    assert mounted_volumes(with_volumes(pod("p"), {"name": "e", "emptyDir": {}})) is None


def test_claims_ephemeral_claims_disks_and_inline_volumes() -> None:
    p = with_volumes(
        pod("web-0", namespace="ns"),
        claim_volume("data"),
        ephemeral_volume("scratch"),
        {"name": "pd", "gcePersistentDisk": {"pdName": "disk", "readOnly": True}},
        {"name": "ebs", "awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-1"}},
        {"name": "bad", "awsElasticBlockStore": {"volumeID": "aws://us-east-1a/nope"}},
        {"name": "file", "azureFile": {"shareName": "s"}},
    )
    m = mounted_volumes(p)
    assert m is not None
    assert (m.namespace, m.pod_name, m.claims, m.ephemeral) == ("ns", "web-0", ("data",), ("web-0-scratch",))
    assert m.disks == ((GCE, "disk", True), (AWS, "aws://us-east-1a/vol-1"), (AWS, "aws://us-east-1a/nope"))
    assert m.inline[:2] == (
        InlineVolume(
            "kubernetes.io/gce-pd",
            "pd.csi.storage.gke.io",
            "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/disk",
        ),
        InlineVolume("kubernetes.io/aws-ebs", "ebs.csi.aws.com", "vol-1"),
    )
    assert m.inline[2].error == (
        "converting volume(bad) from inline to csi: failed to translate Kubernetes ID to EBS Volume ID "
        "Invalid format for AWS volume (aws://us-east-1a/nope)"
    )
    assert len(m.inline) == 3  # Azure File migrates but never counts


def test_disk_conflicts() -> None:
    rbd = disk_of({"rbd": {"monitors": ["a", "b"], "pool": "p", "image": "i"}})
    assert rbd == (RBD, frozenset({"a", "b"}), "p", "i", False)
    other_pool = disk_of({"rbd": {"monitors": ["b"], "pool": "q", "image": "i"}})
    assert rbd is not None
    assert other_pool is not None
    assert not disks_conflict(rbd, other_pool)
    gce = (GCE, "disk", False)
    assert not disks_conflict(gce, rbd)
    assert disks_conflict(gce, (GCE, "disk", True))
