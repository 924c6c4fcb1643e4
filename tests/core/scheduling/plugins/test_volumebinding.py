"""VolumeBinding, from upstream's ``volumebinding`` tests: TestVolumeBinding (PreFilter, Filter on each
node, Score), ``binder_test.go``'s TestFindPodVolumesWithoutProvisioning,
TestFindPodVolumesWithProvisioning, TestCapacity, TestAssumePodVolumes, TestRevertAssumedPodVolumes,
TestFindAssumeVolumes and TestCheckBindings, and ``scorer_test.go``'s TestScore; then the plugin in
decisions and PreBind's writes.

The binder tests' fixture: namespace ``testns``, ``node1`` labelled ``nodeKey: node1``, classes
``waitClass`` (no provisioner), ``waitClassWithProvisioner`` (allowed on ``nodeKey`` in node1 or
``reference-value``), ``topoMismatchClass`` (allowed on ``reference-value`` only) and
``immediateClass``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.core.harness import state_of
from tests.core.podfactory import node, pod
from tests.core.volumefactory import (
    HOSTNAME,
    IMMEDIATE,
    WAIT,
    capacity,
    claim_volume,
    csi_driver,
    ephemeral_volume,
    pv,
    pvc,
    storage_class,
    with_volumes,
)
from webhook.core.api.objects import Obj, annotations_of, name, spec
from webhook.core.api.pvhelpers import ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE
from webhook.core.cluster.state import ClusterState
from webhook.core.cluster.volumes import DynamicProvision, PodVolumes, StaticBinding
from webhook.core.scheduling.framework import SCHEDULED, UNSCHEDULABLE, PluginError, PreFilterFailed
from webhook.core.scheduling.plugins.volumebinding import plugin, prebind
from webhook.core.scheduling.plugins.volumebinding.binder import (
    BIND_CONFLICT,
    NODE_CONFLICT,
    NOT_ENOUGH_SPACE,
    PV_NOT_EXIST,
    find_pod_volumes,
)
from webhook.core.scheduling.plugins.volumebinding.claims import UNBOUND_IMMEDIATE, pre_filter
from webhook.core.scheduling.plugins.volumebinding.score import DEFAULT_SHAPE, node_score
from webhook.core.scheduling.scheduler import Scheduler

# -- TestVolumeBinding ----------------------------------------------------------------------------

WAIT_SC = storage_class("wait-sc", WAIT)
WAIT_HDD_SC = storage_class("wait-hdd-sc", WAIT)
IMMEDIATE_SC = storage_class("immediate-sc", IMMEDIATE)
WAIT_SC_CAPACITY = storage_class("wait-sc-with-storage-capacity", WAIT, "driver-with-storage-capacity")
DRIVER_WITH_CAPACITY = csi_driver("driver-with-storage-capacity", storageCapacity=True)
NODE_KEY = "nodeKey"
REGION = "topology.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
FAIL = "fail"


def local_pv(pv_name: str, cls: str, size: str, host: str) -> Obj:
    return pv(pv_name, cls, capacity=size, node_affinity={HOSTNAME: [host]})


def zonal_pv(pv_name: str, size: str, region: str, zone: str) -> Obj:
    return pv(pv_name, "wait-sc", capacity=size, node_affinity={REGION: [region], ZONE: [zone]})


def keyed_node(n: str) -> Obj:
    return node(n, labels={NODE_KEY: n})


def zonal_node(n: str, region: str, zone: str) -> Obj:
    return node(n, labels={REGION: region, ZONE: zone})


def plugin_outcome(st: ClusterState, p: Obj, nodes: list[str]) -> tuple[str | None, list[Any], list[int]]:
    """(PreFilter's failure, the Filter's reasons per node, the scores per node)."""
    try:
        pre = plugin.FILTER.pre_filter(st, p)
    except PreFilterFailed as e:
        return str(e), [], []
    if pre is None:
        return "skip", [], []
    statuses = [plugin.FILTER.filter(pre, n, st.nodes.by_name[n]) for n in nodes]
    assert plugin.SCORE.pre_score_from_filter is not None
    scored = plugin.SCORE.pre_score_from_filter(pre)
    scores = [plugin.SCORE.score(scored, n, st.nodes.by_name[n]) if scored else 0 for n in nodes]
    return None, statuses, scores


def claims_pod(*claims: str) -> Obj:
    return with_volumes(pod("pod-a"), *(claim_volume(c) for c in claims))


CLASSES = [IMMEDIATE_SC, WAIT_SC, WAIT_HDD_SC, WAIT_SC_CAPACITY, DRIVER_WITH_CAPACITY]


def capacities(*sizes: tuple[str, str]) -> list[Obj]:
    return [capacity(n, "wait-sc-with-storage-capacity", {NODE_KEY: n}, size) for n, size in sizes]


# (name, pod claims, nodes, objects, want PreFilter failure, want Filter per node, want scores)
VOLUME_BINDING: list[tuple[str, list[str], list[Obj], list[Obj], str | None, list[Any], list[int]]] = [
    (
        "all bound",
        ["pvc-a"],
        [node("node-a")],
        [pvc("pvc-a", "wait-sc", volume_name="pv-a", bound=True), pv("pv-a", "wait-sc")],
        None,
        [None],
        [0],
    ),
    (
        "PVC does not exist",
        ["pvc-a"],
        [node("node-a")],
        [],
        'persistentvolumeclaim "pvc-a" not found',
        [],
        [],
    ),
    (
        "Part of PVCs do not exist",
        ["pvc-a", "pvc-b"],
        [node("node-a")],
        [pvc("pvc-a", "wait-sc", volume_name="pv-a", bound=True)],
        'persistentvolumeclaim "pvc-b" not found',
        [],
        [],
    ),
    (
        "immediate claims not bound",
        ["pvc-a"],
        [node("node-a")],
        [pvc("pvc-a", "immediate-sc")],
        UNBOUND_IMMEDIATE,
        [],
        [],
    ),
    (
        "unbound claims no matches",
        ["pvc-a"],
        [node("node-a")],
        [pvc("pvc-a", "wait-sc")],
        None,
        [[BIND_CONFLICT]],
        [0],
    ),
    (
        "bound and unbound unsatisfied",
        ["pvc-a", "pvc-b"],
        [node("node-a", labels={"foo": "barbar"})],
        [
            pvc("pvc-a", "wait-sc", volume_name="pv-a", bound=True),
            pvc("pvc-b", "wait-sc"),
            pv("pv-a", "wait-sc", node_affinity={"foo": ["bar"]}),
        ],
        None,
        [[NODE_CONFLICT, BIND_CONFLICT]],
        [0],
    ),
    (
        "pv not found",
        ["pvc-a"],
        [node("node-a")],
        [pvc("pvc-a", "wait-sc", volume_name="pv-a", bound=True)],
        None,
        [[PV_NOT_EXIST]],
        [0],
    ),
    (
        "pv not found claim lost",
        ["pvc-a"],
        [node("node-a")],
        [pvc("pvc-a", "wait-sc", volume_name="pv-a", bound=True, phase="Lost")],
        'persistentvolumeclaim "pvc-a" bound to non-existent persistentvolume "pv-a"',
        [],
        [],
    ),
    (
        "local volumes with close capacity are preferred",
        ["pvc-a"],
        [node("node-a"), node("node-b"), node("node-c")],
        [
            pvc("pvc-a", "wait-sc", request="50Gi"),
            local_pv("pv-a-0", "wait-sc", "200Gi", "node-a"),
            local_pv("pv-a-1", "wait-sc", "200Gi", "node-a"),
            local_pv("pv-b-0", "wait-sc", "100Gi", "node-b"),
            local_pv("pv-b-1", "wait-sc", "100Gi", "node-b"),
        ],
        None,
        [None, None, [BIND_CONFLICT]],
        [75, 50, 0],
    ),
    (
        "local volumes with close capacity are preferred (multiple pvcs)",
        ["pvc-0", "pvc-1"],
        [node("node-a"), node("node-b"), node("node-c")],
        [
            pvc("pvc-0", "wait-sc", request="50Gi"),
            pvc("pvc-1", "wait-hdd-sc", request="100Gi"),
            local_pv("pv-a-0", "wait-sc", "200Gi", "node-a"),
            local_pv("pv-a-1", "wait-sc", "200Gi", "node-a"),
            local_pv("pv-a-2", "wait-hdd-sc", "200Gi", "node-a"),
            local_pv("pv-a-3", "wait-hdd-sc", "200Gi", "node-a"),
            local_pv("pv-b-0", "wait-sc", "100Gi", "node-b"),
            local_pv("pv-b-1", "wait-sc", "100Gi", "node-b"),
            local_pv("pv-b-2", "wait-hdd-sc", "100Gi", "node-b"),
            local_pv("pv-b-3", "wait-hdd-sc", "100Gi", "node-b"),
        ],
        None,
        [None, None, [BIND_CONFLICT]],
        [63, 25, 0],
    ),
    (
        "zonal volumes with close capacity are preferred",
        ["pvc-a"],
        [
            zonal_node("zone-a-node-a", "region-a", "zone-a"),
            zonal_node("zone-a-node-b", "region-a", "zone-a"),
            zonal_node("zone-b-node-a", "region-b", "zone-b"),
            zonal_node("zone-b-node-b", "region-b", "zone-b"),
            zonal_node("zone-c-node-a", "region-c", "zone-c"),
            zonal_node("zone-c-node-b", "region-c", "zone-c"),
        ],
        [
            pvc("pvc-a", "wait-sc", request="50Gi"),
            zonal_pv("pv-a-0", "200Gi", "region-a", "zone-a"),
            zonal_pv("pv-a-1", "200Gi", "region-a", "zone-a"),
            zonal_pv("pv-b-0", "100Gi", "region-b", "zone-b"),
            zonal_pv("pv-b-1", "100Gi", "region-b", "zone-b"),
        ],
        None,
        [None, None, None, None, [BIND_CONFLICT], [BIND_CONFLICT]],
        [75, 75, 50, 50, 0, 0],
    ),
    (
        "storage capacity score",
        ["pvc-dynamic"],
        [keyed_node("node-a"), keyed_node("node-b"), keyed_node("node-c")],
        [
            pvc("pvc-dynamic", "wait-sc-with-storage-capacity", request="10Gi"),
            *capacities(("node-a", "100Gi"), ("node-b", "50Gi"), ("node-c", "10Gi")),
        ],
        None,
        [None, None, None],
        [90, 80, 0],
    ),
    (
        "storage capacity score with static binds",
        ["pvc-dynamic", "pvc-static"],
        [keyed_node("node-a"), keyed_node("node-b"), keyed_node("node-c")],
        [
            pvc("pvc-dynamic", "wait-sc-with-storage-capacity", request="10Gi"),
            pvc("pvc-static", "wait-sc", request="50Gi"),
            local_pv("pv-static-a", "wait-sc", "100Gi", "node-a"),
            local_pv("pv-static-b", "wait-sc", "100Gi", "node-b"),
            local_pv("pv-static-c", "wait-sc", "100Gi", "node-c"),
            *capacities(("node-a", "100Gi"), ("node-b", "50Gi"), ("node-c", "10Gi")),
        ],
        None,
        [None, None, None],
        [50, 50, 50],
    ),
    (
        "dynamic provisioning with multiple PVCs of the same StorageClass",
        ["pvc-dynamic-0", "pvc-dynamic-1"],
        [keyed_node("node-a")],
        [
            pvc("pvc-dynamic-0", "wait-sc-with-storage-capacity", request="50Gi"),
            pvc("pvc-dynamic-1", "wait-sc-with-storage-capacity", request="50Gi"),
            *capacities(("node-a", "100Gi")),
        ],
        None,
        [None],
        [0],
    ),
    (
        "prefer node with maximum allocatable",
        ["pvc-dynamic"],
        [keyed_node("node-a"), keyed_node("node-b"), keyed_node("node-c")],
        [
            pvc("pvc-dynamic", "wait-sc-with-storage-capacity", request="10Gi"),
            *capacities(("node-a", "100Gi"), ("node-b", "20Gi"), ("node-c", "10Gi")),
        ],
        None,
        [None, None, None],
        [90, 50, 0],
    ),
]


@pytest.mark.parametrize(
    ("case", "claims", "nodes", "objects", "want_pre", "want_filter", "want_scores"),
    VOLUME_BINDING,
    ids=[c[0] for c in VOLUME_BINDING],
)
def test_volume_binding(
    case: str,
    claims: list[str],
    nodes: list[Obj],
    objects: list[Obj],
    want_pre: str | None,
    want_filter: list[Any],
    want_scores: list[int],
) -> None:
    """TestVolumeBinding, with 1.37's defaults (StorageCapacityScoring on, the default shape): its
    cases for the gate off and for custom shapes do not apply. A pod whose claims are all bound, or
    that fits no node, scores 0 everywhere (upstream scores it 0; draxr skips it: the same order)."""
    st = state_of(*CLASSES, *nodes, *objects)
    pre, statuses, scores = plugin_outcome(st, claims_pod(*claims), [name(n) for n in nodes])
    assert pre == want_pre, case
    if want_pre is None:
        assert statuses == want_filter, case
        assert scores == want_scores, case


def test_a_pod_without_claims_is_skipped() -> None:
    """TestVolumeBinding, "pod has not pvcs"."""
    st = state_of(*CLASSES, node("node-a"))
    assert plugin_outcome(st, pod("pod-a"), ["node-a"])[0] == "skip"


# -- TestScore (scorer_test.go) ---------------------------------------------------------------------

HDD, SSD = "hdd", "ssd"
CUSTOM_SHAPE = ((50, 0), (80, 30), (100, 50))


@pytest.mark.parametrize(
    ("shape", "classes", "want"),
    [
        (DEFAULT_SHAPE, {HDD: (0, 100)}, 100),
        (DEFAULT_SHAPE, {HDD: (30, 100)}, 70),
        (DEFAULT_SHAPE, {HDD: (50, 100)}, 50),
        (DEFAULT_SHAPE, {HDD: (100, 100)}, 0),
        (DEFAULT_SHAPE, {HDD: (0, 100), SSD: (0, 100)}, 100),
        (DEFAULT_SHAPE, {HDD: (0, 100), SSD: (30, 100)}, 85),
        (DEFAULT_SHAPE, {HDD: (30, 100), SSD: (30, 100)}, 70),
        (DEFAULT_SHAPE, {HDD: (30, 100), SSD: (60, 100)}, 55),
        (DEFAULT_SHAPE, {HDD: (50, 100), SSD: (50, 100)}, 50),
        (DEFAULT_SHAPE, {HDD: (50, 100), SSD: (100, 100)}, 25),
        (DEFAULT_SHAPE, {HDD: (100, 100), SSD: (100, 100)}, 0),
        (CUSTOM_SHAPE, {HDD: (0, 100), SSD: (0, 100)}, 0),
        (CUSTOM_SHAPE, {HDD: (0, 100), SSD: (30, 100)}, 0),
        (CUSTOM_SHAPE, {HDD: (30, 100), SSD: (30, 100)}, 0),
        (CUSTOM_SHAPE, {HDD: (30, 100), SSD: (60, 100)}, 5),
        (CUSTOM_SHAPE, {HDD: (50, 100), SSD: (100, 100)}, 25),
    ],
)
def test_score(shape: tuple[tuple[int, int], ...], classes: dict[str, tuple[int, int]], want: int) -> None:
    assert node_score(classes, shape) == want


def test_an_overfull_class_scores_as_full() -> None:
    assert node_score({HDD: (150, 100)}) == node_score({HDD: (0, 0)}) == 0


# -- binder_test.go ---------------------------------------------------------------------------------

PROVISIONER = "test-provisioner"
BINDER_CLASSES = [
    storage_class(
        "waitClassWithProvisioner",
        WAIT,
        PROVISIONER,
        allowed_topologies={NODE_KEY: ["node1", "reference-value"]},
    ),
    storage_class("immediateClass", IMMEDIATE),
    storage_class("waitClass", WAIT, "kubernetes.io/no-provisioner"),
    storage_class("topoMismatchClass", WAIT, PROVISIONER, allowed_topologies={NODE_KEY: ["reference-value"]}),
]


def make_test_pvc(
    pvc_name: str,
    size: str,
    state: str,
    pv_name: str = "",
    rv: str = "1",
    cls: str = "waitClass",
    node_: str = "",
) -> Obj:
    """``makeTestPVC``: state is unbound, prebound, bound or selected-node."""
    ann = {"pv.kubernetes.io/bind-completed": "yes"} if state == "bound" else {}
    if state == "selected-node":
        ann[ANN_SELECTED_NODE] = node_
    out = pvc(
        pvc_name,
        cls,
        namespace="testns",
        request=size,
        volume_name=pv_name if state in ("prebound", "bound") else "",
        annotations=ann,
        volumeMode="Filesystem",
    )
    out["metadata"].update({"uid": "pvc-uid", "resourceVersion": rv})
    return out


def make_test_pv(pv_name: str, node_: str, size: str, rv: str, bound_to: Obj | None, cls: str) -> Obj:
    """``makeTestPV``."""
    out = pv(pv_name, cls, capacity=size, claim=bound_to, volumeMode="Filesystem")
    out["metadata"]["resourceVersion"] = rv
    if node_:
        out["spec"]["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": NODE_KEY, "operator": "In", "values": [node_]}]}
                ]
            }
        }
    if bound_to is not None:
        out["metadata"]["annotations"] = {ANN_BOUND_BY_CONTROLLER: "yes"}
    return out


UNBOUND = make_test_pvc("unbound-pvc", "1G", "unbound")
UNBOUND_2 = make_test_pvc("unbound-pvc2", "5G", "unbound")
PREBOUND = make_test_pvc("prebound-pvc", "1G", "prebound", "pv-node1a")
BOUND = make_test_pvc("bound-pvc", "1G", "bound", "pv-bound")
BOUND_NODE1A = make_test_pvc("unbound-pvc", "1G", "bound", "pv-node1a")
PREBOUND_NODE1A = make_test_pvc("unbound-pvc", "1G", "prebound", "pv-node1a")
IMMEDIATE_UNBOUND = make_test_pvc("immediate-unbound-pvc", "1G", "unbound", cls="immediateClass")
IMMEDIATE_BOUND = make_test_pvc(
    "immediate-bound-pvc", "1G", "bound", "pv-bound-immediate", cls="immediateClass"
)
PROVISIONED = make_test_pvc("provisioned-pvc", "1Gi", "unbound", cls="waitClassWithProvisioner")
PROVISIONED_2 = make_test_pvc("provisioned-pvc2", "1Gi", "unbound", cls="waitClassWithProvisioner")
PROVISIONED_BOUND = make_test_pvc(
    "provisioned-pvc", "1Gi", "bound", "pv-bound", cls="waitClassWithProvisioner"
)
NO_PROVISIONER = make_test_pvc("no-provisioner-pvc", "1Gi", "unbound")
TOPO_MISMATCH = make_test_pvc("topo-mismatch-pvc", "1Gi", "unbound", cls="topoMismatchClass")
SELECTED_NODE = make_test_pvc(
    "provisioned-pvc", "1Gi", "selected-node", cls="waitClassWithProvisioner", node_="node1"
)

PV_NODE1A = make_test_pv("pv-node1a", "node1", "5G", "1", None, "waitClass")
PV_NODE1B = make_test_pv("pv-node1b", "node1", "10G", "1", None, "waitClass")
PV_NODE1C = make_test_pv("pv-node1b", "node1", "5G", "1", None, "waitClass")
PV_NODE2 = make_test_pv("pv-node2", "node2", "1G", "1", None, "waitClass")
PV_BOUND = make_test_pv("pv-bound", "node1", "1G", "1", BOUND, "waitClass")
PV_NODE1A_BOUND = make_test_pv("pv-node1a", "node1", "5G", "1", UNBOUND, "waitClass")
PV_NODE1B_BOUND = make_test_pv("pv-node1b", "node1", "10G", "1", UNBOUND_2, "waitClass")
PV_BOUND_IMMEDIATE = make_test_pv("pv-bound-immediate", "node1", "1G", "1", IMMEDIATE_BOUND, "immediateClass")
PV_BOUND_IMMEDIATE_NODE2 = make_test_pv(
    "pv-bound-immediate", "node2", "1G", "1", IMMEDIATE_BOUND, "immediateClass"
)


def generic_ephemeral_pvc(owned: bool) -> Obj:
    """``makeGenericEphemeralPVC("test-volume", owned)``: the claim of test-pod's volume."""
    out = make_test_pvc("test-pod-test-volume", "1G", "bound", "pv-bound", cls="immediateClass")
    if owned:
        out["metadata"]["ownerReferences"] = [{"name": "test-pod", "uid": "uid-test-pod", "controller": True}]
    return out


CORRECT_GENERIC = generic_ephemeral_pvc(True)
CONFLICTING_GENERIC = generic_ephemeral_pvc(False)
PV_BOUND_GENERIC = make_test_pv("pv-bound", "node1", "1G", "1", CORRECT_GENERIC, "waitClass")


def binder_state(
    claims: list[Obj], volumes: list[Obj], driver: Obj | None = None, extra: list[Obj] | None = None
) -> ClusterState:
    objs = [*BINDER_CLASSES, keyed_node("node1"), keyed_node("node2"), *claims, *volumes, *(extra or [])]
    if driver is not None:
        objs.append(driver)
    return state_of(*objs)


def find(st: ClusterState, p: Obj) -> tuple[PodVolumes | None, list[str]] | str:
    """``findPodVolumes``: GetPodVolumeClaims then FindPodVolumes on node1 (FAIL: an error)."""
    try:
        pre = pre_filter(st, p)
        if pre is None:
            return PodVolumes(), []
        return find_pod_volumes(pre, "node1", st.nodes.by_name["node1"])
    except (PreFilterFailed, PluginError):
        return FAIL


def make_test_pod(*claims: Obj, volumes: list[Obj] | None = None) -> Obj:
    out = pod("test-pod", namespace="testns", nodeName="node1")
    return with_volumes(
        out, *(claim_volume(name(c), f"vol{i}") for i, c in enumerate(claims)), *(volumes or [])
    )


DRIVERS = {
    "no CSIDriver": None,
    "CSIDriver with capacity tracking": csi_driver(PROVISIONER, storageCapacity=True),
    "CSIDriver without capacity tracking": csi_driver(PROVISIONER, storageCapacity=False),
}


def names(volumes: PodVolumes | None) -> tuple[list[tuple[str, str]], list[str]]:
    if volumes is None:
        return [], []
    return [(name(b.pvc), name(b.pv)) for b in volumes.static], [name(p.pvc) for p in volumes.dynamic]


# (scenario, pod claims, claims in the cache (None: the pod's), volumes, pod's other volumes,
#  want: FAIL or (bindings, reasons))
WITHOUT_PROVISIONING: list[tuple[str, list[Obj], list[Obj] | None, list[Obj], list[Obj], Any]] = [
    ("no-volumes", [], None, [], [], ([], [])),
    ("no-pvcs", [], None, [], [{"name": "e", "emptyDir": {}}], ([], [])),
    ("pvc-not-found", [BOUND], [], [], [], FAIL),
    ("bound-pvc", [BOUND], None, [PV_BOUND], [], ([], [])),
    ("bound-pvc,pv-not-exists", [BOUND], None, [], [], ([], [PV_NOT_EXIST])),
    ("prebound-pvc", [PREBOUND], None, [PV_NODE1A_BOUND], [], FAIL),
    (
        "unbound-pvc,pv-same-node",
        [UNBOUND],
        None,
        [PV_NODE2, PV_NODE1A, PV_NODE1B],
        [],
        ([("unbound-pvc", "pv-node1a")], []),
    ),
    ("unbound-pvc,pv-different-node", [UNBOUND], None, [PV_NODE2], [], ([], [BIND_CONFLICT])),
    (
        "two-unbound-pvcs",
        [UNBOUND, UNBOUND_2],
        None,
        [PV_NODE1A, PV_NODE1B],
        [],
        ([("unbound-pvc", "pv-node1a"), ("unbound-pvc2", "pv-node1b")], []),
    ),
    (
        "two-unbound-pvcs,order-by-size",
        [UNBOUND_2, UNBOUND],
        None,
        [PV_NODE1A, PV_NODE1B],
        [],
        ([("unbound-pvc", "pv-node1a"), ("unbound-pvc2", "pv-node1b")], []),
    ),
    (
        "two-unbound-pvcs,partial-match",
        [UNBOUND, UNBOUND_2],
        None,
        [PV_NODE1A],
        [],
        ([("unbound-pvc", "pv-node1a")], [BIND_CONFLICT]),
    ),
    (
        "one-bound,one-unbound",
        [UNBOUND, BOUND],
        None,
        [PV_BOUND, PV_NODE1A],
        [],
        ([("unbound-pvc", "pv-node1a")], []),
    ),
    (
        "one-bound,one-unbound,no-match",
        [UNBOUND, BOUND],
        None,
        [PV_BOUND, PV_NODE2],
        [],
        ([], [BIND_CONFLICT]),
    ),
    ("one-prebound,one-unbound", [UNBOUND, PREBOUND], None, [PV_NODE1A, PV_NODE1B], [], FAIL),
    ("immediate-bound-pvc", [IMMEDIATE_BOUND], None, [PV_BOUND_IMMEDIATE], [], ([], [])),
    (
        "immediate-bound-pvc-wrong-node",
        [IMMEDIATE_BOUND],
        None,
        [PV_BOUND_IMMEDIATE_NODE2],
        [],
        ([], [NODE_CONFLICT]),
    ),
    ("immediate-unbound-pvc", [IMMEDIATE_UNBOUND], None, [], [], FAIL),
    ("immediate-unbound-pvc,delayed-mode-bound", [IMMEDIATE_UNBOUND, BOUND], None, [PV_BOUND], [], FAIL),
    ("immediate-unbound-pvc,delayed-mode-unbound", [IMMEDIATE_UNBOUND, UNBOUND], None, [], [], FAIL),
    ("generic-ephemeral,no-pvc", [], None, [], [ephemeral_volume("no-such-pvc")], FAIL),
    (
        "generic-ephemeral,with-pvc",
        [],
        [CORRECT_GENERIC],
        [PV_BOUND_GENERIC],
        [ephemeral_volume("test-volume")],
        ([], []),
    ),
    (
        "generic-ephemeral,wrong-pvc",
        [],
        [CONFLICTING_GENERIC],
        [PV_BOUND_GENERIC],
        [ephemeral_volume("test-volume")],
        FAIL,
    ),
]


@pytest.mark.parametrize("driver", list(DRIVERS))
@pytest.mark.parametrize(
    ("scenario", "claims", "cached", "volumes", "other", "want"),
    WITHOUT_PROVISIONING,
    ids=[c[0] for c in WITHOUT_PROVISIONING],
)
def test_find_pod_volumes_without_provisioning(
    driver: str,
    scenario: str,
    claims: list[Obj],
    cached: list[Obj] | None,
    volumes: list[Obj],
    other: list[Obj],
    want: Any,
) -> None:
    st = binder_state(claims if cached is None else cached, volumes, DRIVERS[driver])
    got = find(st, make_test_pod(*claims, volumes=other))
    if want == FAIL:
        assert got == FAIL, scenario
        return
    assert got != FAIL, scenario
    assert isinstance(got, tuple)
    bindings, reasons = want
    assert names(got[0]) == (bindings, []), scenario
    assert got[1] == reasons, scenario


# (scenario, pod claims, volumes, want: FAIL or (bindings, provisions, reasons), needs capacity)
WITH_PROVISIONING: list[tuple[str, list[Obj], list[Obj], Any, bool]] = [
    ("one-provisioned", [PROVISIONED], [], ([], ["provisioned-pvc"], []), True),
    (
        "two-unbound-pvcs,one-matched,one-provisioned",
        [UNBOUND, PROVISIONED],
        [PV_NODE1A],
        ([("unbound-pvc", "pv-node1a")], ["provisioned-pvc"], []),
        True,
    ),
    ("one-bound,one-provisioned", [BOUND, PROVISIONED], [PV_BOUND], ([], ["provisioned-pvc"], []), True),
    (
        "one-binding,one-selected-node",
        [BOUND, SELECTED_NODE],
        [PV_BOUND],
        ([], ["provisioned-pvc"], []),
        True,
    ),
    ("immediate-unbound-pvc", [IMMEDIATE_UNBOUND], [], FAIL, False),
    (
        "one-immediate-bound,one-provisioned",
        [IMMEDIATE_BOUND, PROVISIONED],
        [PV_BOUND_IMMEDIATE],
        ([], ["provisioned-pvc"], []),
        True,
    ),
    ("invalid-provisioner", [NO_PROVISIONER], [], ([], [], [BIND_CONFLICT]), False),
    ("volume-topology-unsatisfied", [TOPO_MISMATCH], [], ([], [], [BIND_CONFLICT]), False),
]


@pytest.mark.parametrize("driver", list(DRIVERS))
@pytest.mark.parametrize(
    ("scenario", "claims", "volumes", "want", "needs_capacity"),
    WITH_PROVISIONING,
    ids=[c[0] for c in WITH_PROVISIONING],
)
def test_find_pod_volumes_with_provisioning(
    driver: str, scenario: str, claims: list[Obj], volumes: list[Obj], want: Any, needs_capacity: bool
) -> None:
    st = binder_state(claims, volumes, DRIVERS[driver])
    got = find(st, make_test_pod(*claims))
    if want == FAIL:
        assert got == FAIL, scenario
        return
    assert isinstance(got, tuple)
    bindings, provisions, reasons = want
    if needs_capacity and driver == "CSIDriver with capacity tracking":
        # Without CSIStorageCapacity objects, provisioning is blocked.
        reasons, provisions = [*reasons, NOT_ENOUGH_SPACE], []
    assert names(got[0]) == (bindings, provisions), scenario
    assert got[1] == reasons, scenario


def binder_capacity(cap_name: str, cls: str, node_: str | None, size: str, maximum: str = "") -> Obj:
    """``makeCapacity``: for one node by its ``nodeKey`` label, or (None) every node."""
    return capacity(cap_name, cls, {NODE_KEY: node_} if node_ else {}, size, maximum)


NETWORK_ATTACHED = binder_capacity("net", "waitClassWithProvisioner", None, "1Gi")
NODE1_CAPACITY = binder_capacity("net", "waitClassWithProvisioner", "node1", "1Gi")
NODE2_CAPACITY = binder_capacity("net", "waitClassWithProvisioner", "node2", "1Gi")


# TestCapacity: (scenario, capacities, want the provisioning's capacity or a reason)
@pytest.mark.parametrize("opt_in", [True, False])
@pytest.mark.parametrize(
    ("scenario", "capacities_", "want"),
    [
        ("network-attached", [NETWORK_ATTACHED], NETWORK_ATTACHED),
        ("local-storage", [NODE1_CAPACITY], NODE1_CAPACITY),
        # the three share a name: the last one stands, as in upstream's informer
        ("multiple", [NETWORK_ATTACHED, NODE2_CAPACITY, NODE1_CAPACITY], NODE1_CAPACITY),
        ("no-storage", [], NOT_ENOUGH_SPACE),
        (
            "wrong-node",
            [binder_capacity("net", "waitClassWithProvisioner", "node2", "1Gi")],
            NOT_ENOUGH_SPACE,
        ),
        ("wrong-storage-class", [binder_capacity("net", "waitClass", "node1", "1Gi")], NOT_ENOUGH_SPACE),
        (
            "insufficient-storage",
            [binder_capacity("net", "waitClassWithProvisioner", "node1", "1Mi")],
            NOT_ENOUGH_SPACE,
        ),
        (
            "insufficient-volume-size",
            [binder_capacity("net", "waitClassWithProvisioner", "node1", "1Gi", "1Mi")],
            NOT_ENOUGH_SPACE,
        ),
        (
            "zero-storage",
            [binder_capacity("net", "waitClassWithProvisioner", "node1", "0Mi")],
            NOT_ENOUGH_SPACE,
        ),
        (
            "zero-volume-size",
            [binder_capacity("net", "waitClassWithProvisioner", "node1", "", "0Mi")],
            NOT_ENOUGH_SPACE,
        ),
        ("nil-storage", [binder_capacity("net", "waitClassWithProvisioner", "node1", "")], NOT_ENOUGH_SPACE),
    ],
)
def test_capacity(opt_in: bool, scenario: str, capacities_: list[Obj], want: Obj | str) -> None:
    st = binder_state([PROVISIONED], [], csi_driver(PROVISIONER, storageCapacity=opt_in), capacities_)
    got = find(st, make_test_pod(PROVISIONED))
    assert isinstance(got, tuple)
    volumes, reasons = got
    if not opt_in:
        assert reasons == [], scenario
        assert volumes is not None
        assert [(name(p.pvc), p.capacity) for p in volumes.dynamic] == [("provisioned-pvc", None)]
    elif want == NOT_ENOUGH_SPACE:
        assert reasons == [NOT_ENOUGH_SPACE], scenario
    else:
        assert reasons == [], scenario
        assert volumes is not None
        assert isinstance(want, dict)
        ((claim, found),) = [(name(p.pvc), p.capacity) for p in volumes.dynamic]
        assert claim == "provisioned-pvc"
        assert found is not None
        assert (found["nodeTopology"], found.get("capacity")) == (want["nodeTopology"], want.get("capacity"))


# -- Reserve: the assume cache (TestAssumePodVolumes, TestRevertAssumedPodVolumes, TestFindAssumeVolumes)


def assume(st: ClusterState, volumes: PodVolumes, token: str = "t") -> None:
    st.reserve(token, [], make_test_pod(), "node1", volumes)


@pytest.mark.parametrize(
    ("scenario", "claims", "pvs", "bindings", "provisions", "want_pvs", "want_claims"),
    [
        ("all-bound", [BOUND], [PV_BOUND], [], [], {"pv-bound": PV_BOUND}, {"bound-pvc": BOUND}),
        (
            "one-binding",
            [UNBOUND],
            [PV_NODE1A],
            [(UNBOUND, PV_NODE1A)],
            [],
            {"pv-node1a": PV_NODE1A_BOUND},
            {"unbound-pvc": UNBOUND},
        ),
        (
            "two-bindings",
            [UNBOUND, UNBOUND_2],
            [PV_NODE1A, PV_NODE1B],
            [(UNBOUND, PV_NODE1A), (UNBOUND_2, PV_NODE1B)],
            [],
            {"pv-node1a": PV_NODE1A_BOUND, "pv-node1b": PV_NODE1B_BOUND},
            {},
        ),
        (
            "pv-already-bound",
            [UNBOUND],
            [PV_NODE1A_BOUND],
            [(UNBOUND, PV_NODE1A_BOUND)],
            [],
            {"pv-node1a": PV_NODE1A_BOUND},
            {},
        ),
        (
            "one-binding, one-pvc-provisioned",
            [UNBOUND, PROVISIONED],
            [PV_NODE1A],
            [(UNBOUND, PV_NODE1A)],
            [PROVISIONED],
            {"pv-node1a": PV_NODE1A_BOUND},
            {"provisioned-pvc": SELECTED_NODE},
        ),
    ],
)
def test_assume_pod_volumes(
    scenario: str,
    claims: list[Obj],
    pvs: list[Obj],
    bindings: list[tuple[Obj, Obj]],
    provisions: list[Obj],
    want_pvs: dict[str, Obj],
    want_claims: dict[str, Obj],
) -> None:
    """What the next decision reads after Reserve: the volumes bound to their claims (claimRef and
    bound-by-controller) and the claims to provision with the selected node."""
    st = binder_state(claims, pvs)
    volumes = PodVolumes(
        [
            StaticBinding(st.volumes.claim("testns", name(c)) or {}, st.volumes.volume(name(v)) or {})
            for c, v in bindings
        ],
        [DynamicProvision(st.volumes.claim("testns", name(c)) or {}) for c in provisions],
    )
    assume(st, volumes)
    for n, want in want_pvs.items():
        got = st.volumes.volume(n)
        assert got is not None
        ref = spec(got).get("claimRef")
        want_ref = spec(want).get("claimRef")
        assert (ref or {}).get("name") == (want_ref or {}).get("name"), scenario
        assert (ref or {}).get("uid") == (want_ref or {}).get("uid"), scenario
        assert annotations_of(got).get(ANN_BOUND_BY_CONTROLLER) == annotations_of(want).get(
            ANN_BOUND_BY_CONTROLLER
        )
    for n, want in want_claims.items():
        got = st.volumes.claim("testns", n)
        assert got is not None
        assert annotations_of(got).get(ANN_SELECTED_NODE) == annotations_of(want).get(ANN_SELECTED_NODE), (
            scenario
        )


def test_revert_assumed_pod_volumes() -> None:
    """Unreserve restores the cache's own objects."""
    st = binder_state([UNBOUND, PROVISIONED], [PV_NODE1A])
    volumes = PodVolumes(
        [
            StaticBinding(
                st.volumes.claim("testns", "unbound-pvc") or {}, st.volumes.volume("pv-node1a") or {}
            )
        ],
        [DynamicProvision(st.volumes.claim("testns", "provisioned-pvc") or {})],
    )
    assume(st, volumes, "t")
    assert spec(st.volumes.volume("pv-node1a")).get("claimRef") is not None
    assert ANN_SELECTED_NODE in annotations_of(st.volumes.claim("testns", "provisioned-pvc"))
    st.unreserve("t")
    assert spec(st.volumes.volume("pv-node1a")).get("claimRef") is None
    assert ANN_SELECTED_NODE not in annotations_of(st.volumes.claim("testns", "provisioned-pvc"))


def test_find_assume_volumes() -> None:
    """After Reserve, the claim finds the volume it was given again, every time."""
    st = binder_state([UNBOUND], [PV_NODE2, PV_NODE1A, PV_NODE1C])
    got = find(st, make_test_pod(UNBOUND))
    assert isinstance(got, tuple)
    volumes, reasons = got
    assert reasons == []
    assert volumes is not None
    chosen = names(volumes)
    assume(st, volumes)
    for _ in range(5):
        again = find(st, make_test_pod(UNBOUND))
        assert isinstance(again, tuple)
        assert names(again[0]) == chosen


def test_a_newer_version_from_the_informer_replaces_the_assumed_object() -> None:
    """``passiveAssumeCache``: an informer update with another resourceVersion wins; the same
    version (a resync) keeps the assumption."""
    st = binder_state([PROVISIONED], [])
    assume(st, PodVolumes([], [DynamicProvision(st.volumes.claim("testns", "provisioned-pvc") or {})]))
    st.apply("PersistentVolumeClaim", PROVISIONED)  # a resync: resourceVersion 1 again
    assert ANN_SELECTED_NODE in annotations_of(st.volumes.claim("testns", "provisioned-pvc"))
    newer = make_test_pvc("provisioned-pvc", "1Gi", "unbound", rv="2", cls="waitClassWithProvisioner")
    st.apply("PersistentVolumeClaim", newer)
    assert ANN_SELECTED_NODE not in annotations_of(st.volumes.claim("testns", "provisioned-pvc"))
    st.unreserve("t")  # nothing left to restore, and the newer object stays
    assert st.volumes.claim("testns", "provisioned-pvc") is not None


# -- PreBind: TestCheckBindings ----------------------------------------------------------------------


def add_provision_ann(claim: Obj) -> Obj:
    """``addProvisionAnn``."""
    out = {**claim, "metadata": {**claim["metadata"]}}
    out["metadata"]["annotations"] = {**annotations_of(claim), ANN_SELECTED_NODE: "node1"}
    return out


def bumped(obj: Obj) -> Obj:
    """``obj`` as the API returns it after an update: the next resourceVersion."""
    out = {**obj, "metadata": {**obj["metadata"]}}
    out["metadata"]["resourceVersion"] = str(int(obj["metadata"].get("resourceVersion") or 0) + 1)
    return out


def without_claim_uid(volume: Obj) -> Obj:
    out = {**volume, "spec": {**volume["spec"], "claimRef": {**volume["spec"]["claimRef"], "uid": ""}}}
    return out


def empty_annotations(claim: Obj) -> Obj:
    return {**claim, "metadata": {**claim["metadata"], "annotations": {}}}


def without_annotations(claim: Obj) -> Obj:
    meta = {k: v for k, v in claim["metadata"].items() if k != "annotations"}
    return {**claim, "metadata": meta}


CHECK_BINDINGS: list[
    tuple[str, list[Obj], list[Obj], list[tuple[Obj, Obj]], list[Obj], list[Obj], list[Obj], str, Any]
] = [
    # (scenario, init PVs, init PVCs, bindings, provisioned, API PVs, API PVCs, delete, want)
    ("nothing-to-bind", [], [], [], [], [], [], "", True),
    ("binding-bound", [PV_NODE1A_BOUND], [BOUND_NODE1A], [(UNBOUND, PV_NODE1A_BOUND)], [], [], [], "", True),
    (
        "binding-prebound",
        [PV_NODE1A_BOUND],
        [PREBOUND_NODE1A],
        [(UNBOUND, PV_NODE1A_BOUND)],
        [],
        [],
        [],
        "",
        False,
    ),
    ("binding-unbound", [PV_NODE1A_BOUND], [UNBOUND], [(UNBOUND, PV_NODE1A_BOUND)], [], [], [], "", False),
    ("binding-pvc-not-exists", [PV_NODE1A_BOUND], [], [(UNBOUND, PV_NODE1A_BOUND)], [], [], [], "", FAIL),
    (
        "binding-pv-not-exists",
        [PV_NODE1A_BOUND],
        [BOUND_NODE1A],
        [(UNBOUND, PV_NODE1A_BOUND)],
        [],
        [],
        [],
        "pvs",
        FAIL,
    ),
    (
        "binding-claimref-nil",
        [PV_NODE1A],
        [BOUND_NODE1A],
        [(UNBOUND, PV_NODE1A_BOUND)],
        [],
        [PV_NODE1A],
        [BOUND_NODE1A],
        "",
        FAIL,
    ),
    (
        "binding-claimref-uid-empty",
        [PV_NODE1A_BOUND],
        [BOUND_NODE1A],
        [(UNBOUND, PV_NODE1A_BOUND)],
        [],
        [without_claim_uid(PV_NODE1A_BOUND)],
        [BOUND_NODE1A],
        "",
        FAIL,
    ),
    (
        "binding-one-bound,one-unbound",
        [PV_NODE1A_BOUND, PV_NODE1B_BOUND],
        [BOUND_NODE1A, UNBOUND_2],
        [(UNBOUND, PV_NODE1A_BOUND), (UNBOUND_2, PV_NODE1B_BOUND)],
        [],
        [],
        [],
        "",
        False,
    ),
    (
        "provisioning-pvc-bound",
        [PV_BOUND],
        [PROVISIONED_BOUND],
        [],
        [add_provision_ann(PROVISIONED)],
        [],
        [add_provision_ann(PROVISIONED_BOUND)],
        "",
        True,
    ),
    (
        "provisioning-pvc-unbound",
        [],
        [add_provision_ann(PROVISIONED)],
        [],
        [add_provision_ann(PROVISIONED)],
        [],
        [],
        "",
        False,
    ),
    (
        "provisioning-pvc-not-exists",
        [],
        [PROVISIONED],
        [],
        [add_provision_ann(PROVISIONED)],
        [],
        [],
        "pvcs",
        FAIL,
    ),
    (
        "provisioning-pvc-annotations-nil",
        [],
        [PROVISIONED],
        [],
        [add_provision_ann(PROVISIONED)],
        [],
        [without_annotations(PROVISIONED)],
        "",
        'binding volumes: selectedNode annotation reset for PVC "provisioned-pvc"',
    ),
    (
        "provisioning-pvc-selected-node-dropped",
        [],
        [PROVISIONED],
        [],
        [add_provision_ann(PROVISIONED)],
        [],
        [empty_annotations(PROVISIONED)],
        "",
        'binding volumes: provisioning failed for PVC "provisioned-pvc"',
    ),
    (
        "provisioning-pvc-selected-node-wrong-node",
        [],
        [PROVISIONED],
        [],
        [add_provision_ann(PROVISIONED)],
        [],
        [
            {
                **PROVISIONED,
                "metadata": {**PROVISIONED["metadata"], "annotations": {ANN_SELECTED_NODE: "wrong-node"}},
            }
        ],
        "",
        'binding volumes: provisioning failed for PVC "provisioned-pvc"',
    ),
    (
        "binding-bound-provisioning-unbound",
        [PV_NODE1A_BOUND],
        [BOUND_NODE1A, add_provision_ann(PROVISIONED)],
        [(UNBOUND, PV_NODE1A_BOUND)],
        [add_provision_ann(PROVISIONED)],
        [],
        [],
        "",
        False,
    ),
    (
        "tolerate-provisioning-pvc-bound-pv-not-found",
        [PV_NODE1A],
        [PROVISIONED],
        [],
        [add_provision_ann(PROVISIONED)],
        [],
        [add_provision_ann(PROVISIONED_BOUND)],
        "pvs",
        False,
    ),
]


@pytest.mark.parametrize(
    ("scenario", "init_pvs", "init_pvcs", "bindings", "provisioned", "api_pvs", "api_pvcs", "delete", "want"),
    CHECK_BINDINGS,
    ids=[c[0] for c in CHECK_BINDINGS],
)
def test_check_bindings(
    scenario: str,
    init_pvs: list[Obj],
    init_pvcs: list[Obj],
    bindings: list[tuple[Obj, Obj]],
    provisioned: list[Obj],
    api_pvs: list[Obj],
    api_pvcs: list[Obj],
    delete: str,
    want: Any,
) -> None:
    """``checkBindings`` on the API's objects: the informers' objects after the updates (each
    update gives the next resourceVersion) or deletions the scenario makes. Upstream's "nil" cases
    (a nil list of bindings) have no Python counterpart."""
    volumes = {name(v): v for v in init_pvs}
    claims = {name(c): c for c in init_pvcs}
    if delete == "pvs":
        volumes = {}
    if delete == "pvcs":
        claims = {}
    volumes.update({name(v): bumped(v) for v in api_pvs})
    claims.update({name(c): bumped(c) for c in api_pvcs})
    node1 = keyed_node("node1")
    try:
        got: Any = prebind.check_bindings(
            make_test_pod(),
            "node1",
            node1,
            True,
            bindings,
            provisioned,
            lambda _ns, n: claims.get(n),
            volumes.get,
        )
    except prebind.BindingFailed as e:
        got = FAIL if want == FAIL else str(e)
    assert got == want, scenario


def test_check_bindings_cancels_for_a_deleted_pod_or_node() -> None:
    args: Any = ([], [], lambda _ns, _n: None, lambda _n: None)
    p = make_test_pod()
    with pytest.raises(
        prebind.BindingFailed,
        match=r'^binding volumes: pod does not exist any more: pod "test-pod" not found$',
    ):
        prebind.check_bindings(p, "node1", keyed_node("node1"), False, *args)
    with pytest.raises(
        prebind.BindingFailed, match=r'^binding volumes: failed to get node "node1": node "node1" not found$'
    ):
        prebind.check_bindings(p, "node1", None, True, *args)
    assert prebind.prebind_error(prebind.TIMED_OUT) == (
        'running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded'
    )
    assert (prebind.BIND_TIMEOUT_SECONDS, prebind.POLL_INTERVAL_SECONDS) == (600, 1)


# -- PreBind's writes ---------------------------------------------------------------------------------


def test_api_writes_bind_volumes_first_then_select_the_node() -> None:
    """``bindAPIUpdate``: every volume's claimRef (and bound-by-controller), then every claim's
    selected node; each guarded by the resourceVersion the decision read."""
    st = binder_state([UNBOUND, PROVISIONED], [PV_NODE1A])
    volumes = PodVolumes(
        [
            StaticBinding(
                st.volumes.claim("testns", "unbound-pvc") or {}, st.volumes.volume("pv-node1a") or {}
            )
        ],
        [DynamicProvision(st.volumes.claim("testns", "provisioned-pvc") or {})],
    )
    writes = prebind.api_writes(volumes, "node1")
    assert [(w.resource, w.namespace, w.name) for w in writes] == [
        ("persistentvolumes", "", "pv-node1a"),
        ("persistentvolumeclaims", "testns", "provisioned-pvc"),
    ]
    assert writes[0].patch == {
        "metadata": {"resourceVersion": "1", "annotations": {ANN_BOUND_BY_CONTROLLER: "yes"}},
        "spec": {
            "claimRef": {
                "kind": "PersistentVolumeClaim",
                "namespace": "testns",
                "name": "unbound-pvc",
                "uid": "pvc-uid",
                "apiVersion": "v1",
                "resourceVersion": "1",
            }
        },
    }
    assert writes[1].patch == {
        "metadata": {"annotations": {ANN_SELECTED_NODE: "node1"}, "resourceVersion": "1"}
    }
    assert [(b.claim, b.text(), b.to_api()) for b in prebind.claim_bindings(volumes, "node1")] == [
        ("testns/unbound-pvc", "volume pv-node1a", {"claim": "testns/unbound-pvc", "volume": "pv-node1a"}),
        (
            "testns/provisioned-pvc",
            "selected-node node1",
            {"claim": "testns/provisioned-pvc", "selectedNode": "node1"},
        ),
    ]


def test_a_volume_the_user_pre_bound_keeps_its_annotations() -> None:
    """``GetBindVolumeToClaim``: no bound-by-controller for a volume already naming the claim."""
    st = binder_state([UNBOUND], [PV_NODE1A_BOUND])
    volumes = PodVolumes(
        [StaticBinding(st.volumes.claim("testns", "unbound-pvc") or {}, st.volumes.volume("pv-node1a") or {})]
    )
    (write,) = prebind.api_writes(volumes, "node1")
    assert write.patch == {"metadata": {"resourceVersion": "1"}}


# -- in decisions ---------------------------------------------------------------------------------------


def test_pods_sharing_a_waiting_claim_go_where_the_first_was_placed() -> None:
    """The first pod's Reserve assumes the claim's selected node: the second pod (same claim, say
    ReadWriteMany) goes to that node only, and after Unreserve anywhere again."""
    st = binder_state([PROVISIONED], [])
    st.apply("Node", keyed_node("node3"))
    s = Scheduler(st)
    first = s.schedule(make_test_pod(PROVISIONED))
    assert first.status == SCHEDULED
    assert first.node == "node1"  # the class's allowedTopologies admit node1 only
    token = s.reserve(first)
    second = with_volumes(pod("second", namespace="testns"), claim_volume("provisioned-pvc"))
    d = s.schedule(second)
    assert (d.status, d.node) == (SCHEDULED, "node1")
    assert d.volumes is not None
    assert [b.text() for b in prebind.claim_bindings(d.volumes, "node1")] == ["selected-node node1"]
    s.unreserve(first, token)
    assert ANN_SELECTED_NODE not in annotations_of(st.volumes.claim("testns", "provisioned-pvc"))


def test_a_selected_node_elsewhere_refuses_the_node() -> None:
    claim = make_test_pvc(
        "provisioned-pvc", "1Gi", "selected-node", cls="waitClassWithProvisioner", node_="node2"
    )
    st = binder_state([claim], [])
    d = Scheduler(st).schedule(make_test_pod(claim))
    assert d.status == UNSCHEDULABLE
    assert d.reasons == {"node1": [BIND_CONFLICT], "node2": [BIND_CONFLICT]}


def test_a_statically_bound_volume_is_taken_for_the_next_decision() -> None:
    """Two pods, each with its own claim, and one matching volume: the first gets it; the second
    finds it taken (its claimRef assumed) and waits."""
    other = make_test_pvc("other-pvc", "1G", "unbound")
    other["metadata"]["uid"] = "other-uid"
    st = binder_state([UNBOUND, other], [PV_NODE1A])
    s = Scheduler(st)
    d = s.schedule(make_test_pod(UNBOUND))
    assert (d.status, d.node) == (SCHEDULED, "node1")
    assert d.volumes is not None
    assert names(d.volumes) == ([("unbound-pvc", "pv-node1a")], [])
    s.reserve(d)
    d2 = s.schedule(with_volumes(pod("second", namespace="testns"), claim_volume("other-pvc")))
    assert d2.status == UNSCHEDULABLE
    assert d2.message == f"0/2 nodes are available: 2 {BIND_CONFLICT}."


def test_a_pod_whose_claims_are_bound_carries_no_volume_data() -> None:
    st = binder_state([BOUND], [PV_BOUND])
    d = Scheduler(st).schedule(make_test_pod(BOUND))
    assert (d.status, d.node, d.volumes) == (SCHEDULED, "node1", None)


def test_volume_binding_errors_abort_the_attempt() -> None:
    """A claim whose selector cannot be read: upstream's Filter error, the plugin named."""
    bad = make_test_pvc("unbound-pvc", "1G", "unbound")
    bad["spec"]["selector"] = {"matchExpressions": [{"key": "k", "operator": "Bogus"}]}
    st = binder_state([bad], [PV_NODE1A])
    d = Scheduler(st).schedule(make_test_pod(bad))
    assert d.status == "Error"
    assert d.message == (
        'running "VolumeBinding" filter plugin: error creating internal label selector for claim: '
        'testns/unbound-pvc: "Bogus" is not a valid label selector operator'
    )
