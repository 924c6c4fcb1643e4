"""VolumeRestrictions, from upstream's ``volumerestrictions/volume_restrictions_test.go``:
TestGCEDiskConflicts, TestAWSDiskConflicts, TestRBDDiskConflicts, TestISCSIDiskConflicts (a pod on
an empty node or beside a pod with the same or another disk) and TestAccessModeConflicts (the pod's
ReadWriteOncePod claims in use by scheduled pods); then read-only mounts, and the plugin in a
decision."""

from __future__ import annotations

from typing import Any

import pytest

from tests.core.harness import state_of
from tests.core.podfactory import node, pod
from tests.core.volumefactory import claim_volume, pv, pvc, with_volumes
from webhook.core.api.objects import Obj
from webhook.core.cluster.state import ClusterState
from webhook.core.scheduling.framework import SCHEDULED, UNSCHEDULABLE, PreFilterFailed
from webhook.core.scheduling.plugins import volumerestrictions as vr
from webhook.core.scheduling.scheduler import Scheduler

SKIP = "skip"

GCE = ({"gcePersistentDisk": {"pdName": "foo"}}, {"gcePersistentDisk": {"pdName": "bar"}})
AWS = ({"awsElasticBlockStore": {"volumeID": "foo"}}, {"awsElasticBlockStore": {"volumeID": "bar"}})
RBD = (
    {"rbd": {"monitors": ["a", "b"], "pool": "foo", "image": "bar", "fsType": "ext4"}},
    {"rbd": {"monitors": ["c", "d"], "pool": "foo", "image": "bar", "fsType": "ext4"}},
)
ISCSI = (
    {"iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2016-12.server:storage.target01", "lun": 0}},
    {"iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2017-12.server:storage.target01", "lun": 0}},
)


def volume(source: dict[str, Any], name: str = "v") -> Obj:
    return {"name": name, **source}


def on_node(name: str, *volumes: Obj) -> Obj:
    return with_volumes(pod(name, nodeName="n"), *volumes)


def run(st: ClusterState, p: Obj) -> str | None:
    try:
        pre = vr.pre_filter(st, p)
    except PreFilterFailed as e:
        return str(e)
    if pre is None:
        return SKIP
    return vr.filter_node(pre, "n", st.nodes.by_name["n"])


# TestGCEDiskConflicts, TestAWSDiskConflicts, TestRBDDiskConflicts, TestISCSIDiskConflicts
@pytest.mark.parametrize("disks", [GCE, AWS, RBD, ISCSI], ids=["gce", "aws", "rbd", "iscsi"])
@pytest.mark.parametrize(
    ("case", "mine", "theirs", "want"),
    [
        ("nothing", None, None, SKIP),
        ("one state", None, 0, SKIP),
        ("same state", 0, 0, vr.DISK_CONFLICT),
        ("different state", 1, 0, None),
    ],
)
def test_disk_conflicts(
    disks: tuple[Obj, Obj], case: str, mine: int | None, theirs: int | None, want: str | None
) -> None:
    existing = [on_node("existing", volume(disks[theirs]))] if theirs is not None else []
    st = state_of(node("n"), *existing)
    p = pod("p") if mine is None else with_volumes(pod("p"), volume(disks[mine]))
    assert run(st, p) == want, case


def test_a_volume_without_restrictions_is_skipped() -> None:
    """TestGCEDiskConflicts, "pod with a volume that doesn't have restrictions"."""
    st = state_of(node("n"))
    assert run(st, with_volumes(pod("p"), {"name": "volume with no restriction"})) == SKIP


@pytest.mark.parametrize(
    ("source", "mine_ro", "theirs_ro", "conflict"),
    [
        ("gcePersistentDisk", True, True, False),
        ("gcePersistentDisk", True, False, True),
        ("iscsi", True, True, False),
        ("iscsi", False, True, True),
        ("rbd", True, True, False),
        ("rbd", False, False, True),
    ],
)
def test_read_only_mounts_share_a_disk(source: str, mine_ro: bool, theirs_ro: bool, conflict: bool) -> None:
    """``isVolumeConflict``: GCE PD, ISCSI and RBD allow many mounts when every one is read-only
    (AWS EBS never does)."""
    first: dict[str, Obj] = {"gcePersistentDisk": GCE[0], "iscsi": ISCSI[0], "rbd": RBD[0]}
    base = first[source][source]
    st = state_of(node("n"), on_node("existing", volume({source: {**base, "readOnly": theirs_ro}})))
    got = run(st, with_volumes(pod("p"), volume({source: {**base, "readOnly": mine_ro}})))
    assert got == (vr.DISK_CONFLICT if conflict else None)


def test_rbd_images_conflict_when_they_share_a_monitor() -> None:
    shared = {"rbd": {"monitors": ["b", "z"], "pool": "foo", "image": "bar"}}
    st = state_of(node("n"), on_node("existing", volume(RBD[0])))
    assert run(st, with_volumes(pod("p"), volume(shared))) == vr.DISK_CONFLICT


RWOP_1 = pvc("claim-with-rwop-1", access_modes=["ReadWriteOncePod"])
RWOP_2 = pvc("claim-with-rwop-2", access_modes=["ReadWriteOncePod"])
RWX = pvc("claim-with-rwx", access_modes=["ReadWriteMany"])
WITH_ONE = [claim_volume("claim-with-rwop-1")]
WITH_TWO = [claim_volume("claim-with-rwop-1"), claim_volume("claim-with-rwop-2")]
WITH_RWX = [claim_volume("claim-with-rwx")]


# TestAccessModeConflicts
@pytest.mark.parametrize(
    ("case", "mine", "existing", "claims", "want"),
    [
        ("nothing", [], [], [], SKIP),
        ("failed to get PVC", WITH_ONE, [], [], 'persistentvolumeclaim "claim-with-rwop-1" not found'),
        ("no access mode conflict", WITH_ONE, [WITH_RWX], [RWOP_1, RWX], SKIP),
        (
            "access mode conflict, unschedulable",
            WITH_ONE,
            [WITH_ONE, WITH_RWX],
            [RWOP_1, RWX],
            vr.READ_WRITE_ONCE_POD_CONFLICT,
        ),
        (
            "two conflicts, unschedulable",
            WITH_TWO,
            [WITH_TWO, WITH_RWX],
            [RWOP_1, RWOP_2, RWX],
            vr.READ_WRITE_ONCE_POD_CONFLICT,
        ),
    ],
)
def test_access_mode_conflicts(
    case: str, mine: list[Obj], existing: list[list[Obj]], claims: list[Obj], want: str | None
) -> None:
    pods = [on_node(f"existing-{i}", *vols) for i, vols in enumerate(existing)]
    st = state_of(node("n"), *claims, *pods)
    assert run(st, with_volumes(pod("p"), *mine)) == want, case


BOUND_RWOP = [
    pvc("claim-with-rwop-1", access_modes=["ReadWriteOncePod"], volume_name="pv-1", bound=True),
    pv("pv-1", access_modes=["ReadWriteOncePod"], capacity="1Gi", phase="Bound"),
]


def test_a_read_write_once_pod_claim_is_free_again_once_its_pod_goes() -> None:
    user = on_node("user", *WITH_ONE)
    st = state_of(node("n"), node("m"), *BOUND_RWOP, user)
    s = Scheduler(st)
    d = s.schedule(with_volumes(pod("p"), *WITH_ONE))
    assert d.status == UNSCHEDULABLE
    assert d.message == f"0/2 nodes are available: 2 {vr.READ_WRITE_ONCE_POD_CONFLICT}."
    st.apply("Pod", user, deleted=True)
    assert s.schedule(with_volumes(pod("p"), *WITH_ONE)).status == SCHEDULED


def test_an_assumed_pod_holds_its_read_write_once_pod_claim() -> None:
    """Reserve counts the pod on its node at once, so its claim is in use for the next decision."""
    st = state_of(node("n"), *BOUND_RWOP)
    s = Scheduler(st)
    first = s.schedule(with_volumes(pod("first"), *WITH_ONE))
    token = s.reserve(first)
    assert s.schedule(with_volumes(pod("second"), *WITH_ONE)).status == UNSCHEDULABLE
    s.unreserve(first, token)
    assert s.schedule(with_volumes(pod("second"), *WITH_ONE)).status == SCHEDULED
