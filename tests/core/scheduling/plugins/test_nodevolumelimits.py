"""NodeVolumeLimits, from upstream's ``nodevolumelimits/csi_test.go``: TestCSILimits (its fixture:
per driver, claims and volumes ``csi-<driver>-<0..3>``; ``csi-4`` unbound in class ``csi-sc``,
``csi-5`` without a class, ``csi-6`` naming a missing volume; a CSINode with each driver, limited to
``maxVols`` or not) and TestVolumeLimitScalingGate; then the limits in decisions."""

from __future__ import annotations

from typing import Any

import pytest

from tests.core.harness import state_of
from tests.core.podfactory import container, node, pod
from tests.core.volumefactory import (
    claim_volume,
    csi_driver,
    csi_node,
    ephemeral_volume,
    pv,
    pvc,
    storage_class,
    volume_attachment,
    with_volumes,
)
from webhook.core.api.objects import Obj
from webhook.core.cluster.state import ClusterState
from webhook.core.scheduling.framework import SCHEDULED, UNSCHEDULABLE, PluginError
from webhook.core.scheduling.plugins import nodevolumelimits as nvl
from webhook.core.scheduling.scheduler import Scheduler

EBS = "ebs.csi.aws.com"
GCE = "pd.csi.storage.gke.io"
EBS_IN_TREE = "kubernetes.io/aws-ebs"
HOSTPATH = "kubernetes.io/hostpath"
NODE = "node-for-max-pd-test-1"
SKIP = "skip"
EXCEEDED = nvl.MAX_VOLUME_COUNT_EXCEEDED


def volumes_of(driver: str) -> list[Obj]:
    """``getFakeCSIPVLister`` and ``getFakeCSIPVCLister`` for one driver."""
    out: list[Obj] = []
    for j in range(4):
        handle = f"csi-{driver}-{j}"
        if driver == EBS_IN_TREE:
            volume = pv(handle, phase=None, awsElasticBlockStore={"volumeID": handle})
        elif driver == HOSTPATH:
            volume = pv(handle, phase=None, hostPath={"path": "/tmp"})
        else:
            volume = pv(handle, phase=None, csi=(driver, handle))
        out += [volume, pvc(handle, volume_name=handle)]
    return out


def cluster(
    limit_source: str,
    existing: list[Obj],
    max_vols: int,
    drivers: list[str],
    *,
    va_count: int = 0,
    extra: list[Obj] | None = None,
    prevent_if_missing: bool | None = None,
) -> ClusterState:
    objs: list[Obj] = [node(NODE), storage_class("csi-sc", provisioner=drivers[0])]
    for d in drivers:
        objs += volumes_of(d)
        objs += [volume_attachment(f"va-{d}-{j}", NODE, d, f"csi-{d}-{j}") for j in range(va_count)]
    objs += [
        pvc("csi-4", "csi-sc"),
        pvc("csi-5"),
        pvc("csi-6", "csi-sc", volume_name="missing-in-action"),
    ]
    if limit_source == "csinode":
        objs.append(csi_node(NODE, dict.fromkeys(drivers, max_vols)))
    elif limit_source == "csinode-with-no-limit":
        objs.append(csi_node(NODE, dict.fromkeys(drivers)))
    elif limit_source == "no-csi-driver":
        objs.append(csi_node(NODE, {}))
    if prevent_if_missing is not None:
        objs.append(
            csi_driver(EBS, **({"preventPodSchedulingIfMissing": True} if prevent_if_missing else {}))
        )
    objs += [{**p, "spec": {**p["spec"], "nodeName": NODE}} for p in existing]
    return state_of(*objs, *(extra or []))


def with_claims(*claims: str, name: str = "p", namespace: str = "default", uid: str | None = None) -> Obj:
    return with_volumes(pod(name, namespace=namespace, uid=uid), *(claim_volume(c) for c in claims))


def inline_ebs(volume_id: str) -> Obj:
    return with_volumes(pod("inline"), {"name": "ebs", "awsElasticBlockStore": {"volumeID": volume_id}})


RUNNING = with_claims(f"csi-{EBS}-3", name="running")
PENDING = with_claims("csi-4", name="pending")
UNBOUND_2 = with_claims("csi-4", name="unbound2")
MISSING_PV = with_claims("csi-6", name="missing-pv")
NO_SC = with_claims("csi-5", name="no-sc")
GCE_TWO = with_claims(f"csi-{GCE}-1", f"csi-{GCE}-2", name="gce-two")
IN_TREE_ONE = with_claims(f"csi-{EBS_IN_TREE}-0", name="in-tree-one")
IN_TREE_TWO = with_claims(f"csi-{EBS_IN_TREE}-1", f"csi-{EBS_IN_TREE}-2", name="in-tree-two")
EBS_ONE = with_claims(f"csi-{EBS}-0", name="ebs-one")
EBS_TWO = with_claims(f"csi-{EBS}-1", f"csi-{EBS}-2", name="ebs-two")
NON_MIGRATABLE = with_claims(f"csi-{HOSTPATH}-0", name="hostpath")
EPHEMERAL = with_volumes(pod("abc", namespace="test", uid="12345"), ephemeral_volume("xyz"))
EPHEMERAL_CLAIM = pvc("abc-xyz", "csi-sc", namespace="test", owner_uid="12345")
CONFLICTING_CLAIM = pvc("abc-xyz", "csi-sc", namespace="test")
EPHEMERAL_TWO = with_volumes(
    pod("abc", namespace="test", uid="12345II"), ephemeral_volume("x"), ephemeral_volume("y")
)
EPHEMERAL_CLAIMS_XY = [
    pvc("abc-x", "csi-sc", namespace="test", owner_uid="12345II"),
    pvc("abc-y", "csi-sc", namespace="test", owner_uid="12345II"),
]
CONFIG_AND_SECRET = [{"name": "cm", "configMap": {"name": "c"}}, {"name": "s", "secret": {"secretName": "s"}}]


def run(st: ClusterState, p: Obj) -> str | None:
    pre = nvl.pre_filter(st, p)
    if pre is None:
        return SKIP
    return nvl.filter_node(pre, NODE, st.nodes.by_name[NODE])


# TestCSILimits: (test, new pod, existing pods, maxVols, drivers, limit source, want)
CASES: list[tuple[str, Obj, list[Obj], int, list[str], str, dict[str, Any], str | None]] = [
    (
        "fits when node volume limit >= new pods CSI volume",
        EBS_ONE,
        [RUNNING, EBS_TWO],
        4,
        [EBS],
        "csinode",
        {},
        None,
    ),
    (
        "doesn't when node volume limit <= pods CSI volume",
        EBS_ONE,
        [RUNNING, EBS_TWO],
        2,
        [EBS],
        "csinode",
        {},
        EXCEEDED,
    ),
    (
        "should when driver does not support volume limits",
        EBS_ONE,
        [RUNNING, EBS_TWO],
        2,
        [EBS],
        "csinode-with-no-limit",
        {},
        None,
    ),
    (
        "count pending PVCs towards volume limit <= pods CSI volume",
        EBS_ONE,
        [PENDING, EBS_TWO],
        2,
        [EBS],
        "csinode",
        {},
        EXCEEDED,
    ),
    (
        "count multiple pending pvcs towards volume limit >= pods CSI volume",
        EBS_ONE,
        [PENDING, UNBOUND_2, EBS_TWO],
        4,
        [EBS],
        "csinode",
        {},
        None,
    ),
    (
        "should count PVCs with invalid PV name but valid SC",
        EBS_ONE,
        [MISSING_PV, EBS_TWO],
        2,
        [EBS],
        "csinode",
        {},
        EXCEEDED,
    ),
    (
        "don't count pvcs with missing SC towards volume limit",
        EBS_ONE,
        [RUNNING, NO_SC],
        2,
        [EBS],
        "csinode",
        {},
        None,
    ),
    (
        "count pvcs with the same type towards volume limit",
        EBS_ONE,
        [GCE_TWO, EBS_TWO],
        2,
        [EBS, GCE],
        "csinode",
        {},
        EXCEEDED,
    ),
    (
        "don't count pvcs with different type towards volume limit",
        GCE_TWO,
        [EBS_TWO, RUNNING],
        2,
        [EBS, GCE],
        "csinode",
        {},
        None,
    ),
    (
        "should count in-tree volumes if migration is enabled",
        IN_TREE_ONE,
        [IN_TREE_TWO],
        2,
        [EBS_IN_TREE, EBS],
        "csinode",
        {},
        EXCEEDED,
    ),
    ("nil csi node", inline_ebs("aws-inline1"), [IN_TREE_TWO], 0, [EBS_IN_TREE, EBS], "", {}, None),
    (
        "should count unbound in-tree volumes if migration is enabled",
        PENDING,
        [IN_TREE_TWO],
        2,
        [EBS_IN_TREE, EBS],
        "csinode",
        {},
        EXCEEDED,
    ),
    (
        "should not limit pod if volume used does not report limits",
        IN_TREE_ONE,
        [IN_TREE_TWO],
        2,
        [EBS_IN_TREE, EBS],
        "csinode-with-no-limit",
        {},
        None,
    ),
    (
        "should not count non-migratable in-tree volumes",
        NON_MIGRATABLE,
        [EBS_TWO],
        2,
        [HOSTPATH, EBS],
        "csinode",
        {},
        None,
    ),
    (
        "should count in-tree inline volumes if migration is enabled",
        inline_ebs("aws-inline1"),
        [IN_TREE_TWO],
        2,
        [EBS_IN_TREE, EBS],
        "csinode",
        {},
        EXCEEDED,
    ),
    (
        "should count in-tree and csi volumes if migration is enabled (when scheduling in-tree volumes)",
        IN_TREE_ONE,
        [EBS_TWO],
        2,
        [EBS_IN_TREE, EBS],
        "csinode",
        {},
        EXCEEDED,
    ),
    (
        "should count in-tree, inline and csi volumes if migration is enabled "
        "(when scheduling in-tree volumes)",
        inline_ebs("aws-inline1"),
        [EBS_TWO, IN_TREE_ONE],
        3,
        [EBS_IN_TREE, EBS],
        "csinode",
        {},
        EXCEEDED,
    ),
    (
        "should not count in-tree, inline and csi volumes if migration is enabled "
        "(when scheduling in-tree volumes)",
        inline_ebs(f"csi-{EBS}-1"),
        [EBS_TWO, IN_TREE_ONE],
        3,
        [EBS_IN_TREE, EBS],
        "csinode",
        {},
        None,
    ),
    (
        "should count in-tree and csi volumes if migration is enabled (when scheduling csi volumes)",
        EBS_ONE,
        [IN_TREE_TWO],
        2,
        [EBS_IN_TREE, EBS],
        "csinode",
        {},
        EXCEEDED,
    ),
    # ephemeral volumes (a real lister's not-found text: ``persistentvolumeclaim``, singular)
    (
        "ephemeral volume missing",
        EPHEMERAL,
        [],
        0,
        [EBS],
        "csinode-with-no-limit",
        {},
        'looking up PVC test/abc-xyz: persistentvolumeclaim "abc-xyz" not found',
    ),
    (
        "ephemeral volume unbound",
        EPHEMERAL,
        [],
        0,
        [EBS],
        "csinode-with-no-limit",
        {"extra": [EPHEMERAL_CLAIM]},
        None,
    ),
    (
        "ephemeral doesn't when node volume limit <= pods CSI volume",
        EPHEMERAL,
        [RUNNING, EBS_TWO],
        2,
        [EBS],
        "csinode",
        {"extra": [EPHEMERAL_CLAIM]},
        EXCEEDED,
    ),
    (
        "ephemeral doesn't when node volume limit <= pods ephemeral CSI volume",
        EBS_ONE,
        [RUNNING, EPHEMERAL_TWO],
        2,
        [EBS],
        "csinode",
        {"extra": EPHEMERAL_CLAIMS_XY},
        EXCEEDED,
    ),
    (
        "persistent doesn't when node volume limit <= pods ephemeral CSI volume + persistent volume",
        EBS_ONE,
        [RUNNING, EPHEMERAL, EBS_TWO],
        3,
        [EBS],
        "csinode",
        {"extra": [EPHEMERAL_CLAIM]},
        EXCEEDED,
    ),
    (
        "persistent okay when node volume limit > pods ephemeral CSI volume + persistent volume",
        EBS_ONE,
        [RUNNING, EPHEMERAL, EBS_TWO],
        5,
        [EBS],
        "csinode",
        {"extra": [EPHEMERAL_CLAIM]},
        None,
    ),
    (
        "skip Filter when the pod only uses secrets and configmaps",
        with_volumes(pod("cm"), *CONFIG_AND_SECRET),
        [],
        2,
        [EBS],
        "csinode",
        {},
        SKIP,
    ),
    (
        "don't skip Filter when the pod has pvcs",
        with_volumes(pod("cm"), *CONFIG_AND_SECRET, claim_volume(f"csi-{EBS}-0")),
        [],
        2,
        [EBS],
        "csinode",
        {},
        None,
    ),
    (
        "don't skip Filter when the pod has ephemeral volumes",
        with_volumes(pod("abc", namespace="test"), *CONFIG_AND_SECRET, ephemeral_volume("xyz")),
        [],
        0,
        [EBS],
        "csinode-with-no-limit",
        {},
        'looking up PVC test/abc-xyz: persistentvolumeclaim "abc-xyz" not found',
    ),
    (
        "don't skip Filter when the pod has inline migratable volumes",
        with_volumes(
            pod("cm"),
            *CONFIG_AND_SECRET,
            {"name": "ebs", "awsElasticBlockStore": {"volumeID": "aws-inline1"}},
        ),
        [IN_TREE_TWO],
        2,
        [EBS_IN_TREE, EBS],
        "csinode",
        {},
        EXCEEDED,
    ),
    (
        "should count VolumeAttachments towards volume limit when no pods exist",
        EBS_ONE,
        [],
        2,
        [EBS],
        "csinode",
        {"va_count": 2},
        EXCEEDED,
    ),
    (
        "should schedule pod when VolumeAttachments count does not exceed limit",
        EBS_ONE,
        [],
        2,
        [EBS],
        "csinode",
        {"va_count": 1},
        None,
    ),
]


@pytest.mark.parametrize(
    ("case", "new", "existing", "max_vols", "drivers", "limit_source", "extra", "want"),
    CASES,
    ids=[c[0] for c in CASES],
)
def test_csi_limits(
    case: str,
    new: Obj,
    existing: list[Obj],
    max_vols: int,
    drivers: list[str],
    limit_source: str,
    extra: dict[str, Any],
    want: str | None,
) -> None:
    st = cluster(limit_source, existing, max_vols, drivers, **extra)
    assert run(st, new) == want, case


def test_an_ephemeral_claim_the_pod_does_not_own_is_an_error() -> None:
    """TestCSILimits, "ephemeral volume not owned": an error status, which aborts the attempt."""
    st = cluster("csinode-with-no-limit", [], 0, [EBS], extra=[CONFLICTING_CLAIM])
    with pytest.raises(PluginError) as e:
        run(st, EPHEMERAL)
    assert str(e.value) == (
        'running "NodeVolumeLimits" filter plugin: '
        "PVC test/abc-xyz was not created for pod test/abc (pod is not owner)"
    )


# TestVolumeLimitScalingGate (the gate is on in 1.37: its "gate disabled" case does not apply)
@pytest.mark.parametrize(
    ("case", "limit_source", "limit", "present", "prevent", "want"),
    [
        (
            "gate enabled - allow scheduling when CSIDriver exists but "
            "PreventPodSchedulingIfMissing is not set",
            "no-csi-driver",
            0,
            True,
            False,
            None,
        ),
        (
            "gate enabled - fail when driver not installed and PreventPodSchedulingIfMissing is true",
            "no-csi-driver",
            0,
            True,
            True,
            f"{EBS} CSI driver is not installed on the node",
        ),
        ("gate enabled - driver installed within limit", "csinode", 2, True, True, None),
        (
            "gate enabled - allow scheduling when CSIDriver object missing",
            "no-csi-driver",
            0,
            False,
            False,
            None,
        ),
    ],
)
def test_volume_limit_scaling(
    case: str, limit_source: str, limit: int, present: bool, prevent: bool, want: str | None
) -> None:
    st = cluster(limit_source, [], limit, [EBS], prevent_if_missing=prevent if present else None)
    assert run(st, with_claims(f"csi-{EBS}-0")) == want, case


def test_the_limit_holds_across_decisions_and_reservations() -> None:
    """Three pods, each with its own EBS volume, on nodes allowing two: the third goes elsewhere,
    and with one node only it waits; the assumed pods count at once."""
    objs: list[Obj] = [node("a"), node("b"), csi_node("a", {EBS: 2}), csi_node("b", {EBS: 2})]
    for i in range(5):
        objs += [
            pv(f"v{i}", csi=(EBS, f"h{i}"), phase="Bound"),
            pvc(f"c{i}", volume_name=f"v{i}", bound=True),
        ]
    st = state_of(*objs)
    s = Scheduler(st)
    placed: dict[str, int] = {}
    for i in range(4):
        d = s.schedule(with_volumes(pod(f"p{i}", [container("c")]), claim_volume(f"c{i}")))
        assert d.status == SCHEDULED
        assert d.node is not None
        s.reserve(d)
        placed[d.node] = placed.get(d.node, 0) + 1
    assert placed == {"a": 2, "b": 2}
    d = s.schedule(with_volumes(pod("p4"), claim_volume("c4")))
    assert d.status == UNSCHEDULABLE
    assert d.message == f"0/2 nodes are available: 2 {EXCEEDED}."
