"""The storage side of the cluster state: what is kept of each kind (and what is not), the indexes
(volumes and capacities by class, attachments by node), the API server's default binding mode, the
pods' claims in use, and upstream's assume cache (only the token that assumed an object restores
it; a newer version from the informer replaces it)."""

from __future__ import annotations

from tests.core.harness import state_of
from tests.core.podfactory import node, pod
from tests.core.volumefactory import (
    capacity,
    claim_volume,
    csi_driver,
    csi_node,
    pv,
    pvc,
    storage_class,
    volume_attachment,
    with_volumes,
)
from webhook.core.api.objects import Obj, annotations_of, name, spec
from webhook.core.cluster.state import STORAGE_KINDS, ClusterState
from webhook.core.cluster.storageobjects import KEPT
from webhook.core.cluster.volumes import DynamicProvision, PodVolumes, StaticBinding
from webhook.core.scheduling.framework import SCHEDULED, UNSCHEDULABLE
from webhook.core.scheduling.scheduler import Scheduler


def noisy(obj: Obj) -> Obj:
    """``obj`` with what a live object carries and the engine never reads."""
    out = {**obj, "metadata": {**obj["metadata"]}}
    out["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    out["metadata"]["annotations"] = {
        **annotations_of(obj),
        "kubectl.kubernetes.io/last-applied-configuration": "{}" * 500,
    }
    out["metadata"]["labels"] = {**out["metadata"].get("labels", {}), "app": "x"}
    return out


def test_every_storage_kind_is_kept_and_documented() -> None:
    assert set(KEPT) == STORAGE_KINDS
    st = ClusterState()
    for kind in sorted(STORAGE_KINDS):
        assert st.apply(kind, {"metadata": {"name": "x", "namespace": "ns"}, "spec": {}})


def test_claims_and_volumes_are_kept_trimmed() -> None:
    claim = noisy(pvc("c", "sc", request="1Gi", access_modes=["ReadWriteOnce"], phase="Pending"))
    claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] = "n1"
    claim["spec"]["dataSource"] = {"kind": "VolumeSnapshot", "name": "s"}
    volume = noisy(pv("v", "sc", capacity="2Gi", csi=("d", "h"), node_affinity={"k": ["v"]}))
    volume["spec"]["csi"]["volumeAttributes"] = {"big": "x" * 1000}
    volume["spec"]["mountOptions"] = ["ro"]
    st = state_of(claim, volume)
    kept = st.volumes.claim("default", "c")
    assert kept == {
        "metadata": {
            "name": "c",
            "namespace": "default",
            "uid": "uid-default-c",
            "annotations": {"volume.kubernetes.io/selected-node": "n1"},
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "sc",
            "resources": {"requests": {"storage": "1Gi"}},
        },
        "status": {"phase": "Pending"},
    }
    kept_pv = st.volumes.volume("v")
    assert kept_pv is not None
    assert spec(kept_pv)["csi"] == {"driver": "d", "volumeHandle": "h"}
    assert "mountOptions" not in spec(kept_pv)
    assert kept_pv["metadata"]["labels"] == {"app": "x"}  # a claim's selector may read any label
    assert "managedFields" not in kept_pv["metadata"]


def test_a_storage_class_without_a_binding_mode_is_immediate() -> None:
    """The API server defaults ``volumeBindingMode`` to Immediate; manifests may leave it out."""
    st = state_of(storage_class("plain", None, "p"))
    assert st.volumes.storage_classes["plain"]["volumeBindingMode"] == "Immediate"


def test_indexes_follow_updates_and_deletions() -> None:
    st = state_of(
        pv("v1", "fast"),
        pv("v2", "fast"),
        capacity("c1", "fast", {"k": "a"}, "1Gi"),
        volume_attachment("va1", "n1", "d", "v1"),
        csi_node("n1", {"d": 2}),
        csi_driver("d", storageCapacity=True),
    )
    assert [name(v) for v in st.volumes.volumes_of_class("fast")] == ["v1", "v2"]
    st.apply("PersistentVolume", pv("v2", "slow"))
    assert [name(v) for v in st.volumes.volumes_of_class("fast")] == ["v1"]
    assert [name(v) for v in st.volumes.volumes_of_class("slow")] == ["v2"]
    st.apply("PersistentVolume", pv("v1", "fast"), deleted=True)
    assert st.volumes.volumes_of_class("fast") == []
    assert [name(c) for c in st.volumes.capacities_of_class("fast")] == ["c1"]
    st.apply("CSIStorageCapacity", capacity("c1", "fast", {"k": "a"}, "1Gi"), deleted=True)
    assert list(st.volumes.capacities_of_class("fast")) == []
    assert [name(a) for a in st.volumes.attachments_on("n1")] == ["va1"]
    st.apply("VolumeAttachment", volume_attachment("va1", "n2", "d", "v1"))
    assert list(st.volumes.attachments_on("n1")) == []
    assert [name(a) for a in st.volumes.attachments_on("n2")] == ["va1"]
    st.apply("CSINode", csi_node("n1", {}), deleted=True)
    st.apply("CSIDriver", csi_driver("d"), deleted=True)
    assert (st.volumes.csi_nodes, st.volumes.csi_drivers) == ({}, {})


def bound_pod(pod_name: str, node_name: str, *claims: str) -> Obj:
    return with_volumes(pod(pod_name, nodeName=node_name), *(claim_volume(c) for c in claims))


def test_claims_in_use_count_bound_and_assumed_pods_on_known_nodes() -> None:
    st = state_of(node("n1"), node("n2"), bound_pod("a", "n1", "c1"), bound_pod("b", "n2", "c1", "c2"))
    assert st.nodes.claim_in_use("default", "c1")
    assert st.nodes.claim_in_use("default", "c2")
    assert not st.nodes.claim_in_use("other", "c1")
    st.apply("Pod", bound_pod("b", "n2", "c1", "c2"), deleted=True)
    assert not st.nodes.claim_in_use("default", "c2")
    assert st.nodes.claim_in_use("default", "c1")
    st.apply("Node", node("n1"), deleted=True)  # its pods no longer count
    assert not st.nodes.claim_in_use("default", "c1")
    st.apply("Node", node("n1"))  # and count again once it is back
    assert st.nodes.claim_in_use("default", "c1")
    assumed = with_volumes(pod("c"), claim_volume("c3"))
    st.reserve("t", [], assumed, "n2")
    assert st.nodes.claim_in_use("default", "c3")
    st.unreserve("t", assumed)
    assert not st.nodes.claim_in_use("default", "c3")


def test_pods_without_such_volumes_keep_nothing() -> None:
    projected = {
        "name": "kube-api-access",
        "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]},
    }
    st = state_of(
        node("n1"),
        with_volumes(pod("a", nodeName="n1"), projected, {"name": "c", "configMap": {"name": "x"}}),
    )
    assert st.nodes.by_name["n1"].volumes == {}


def with_rv(obj: Obj, rv: str) -> Obj:
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": rv}}


def test_only_the_token_that_assumed_restores() -> None:
    claim = with_rv(pvc("c", "sc"), "5")
    st = state_of(claim)
    first = PodVolumes([], [DynamicProvision(st.volumes.claim("default", "c") or {})])
    st.reserve("one", [], pod("p1"), "n1", first)
    # a second decision's reservation of the same claim (another node) replaces the first
    second = PodVolumes([], [DynamicProvision(claim)])
    st.reserve("two", [], pod("p2"), "n2", second)
    assert annotations_of(st.volumes.claim("default", "c"))["volume.kubernetes.io/selected-node"] == "n2"
    st.unreserve("one")
    assert annotations_of(st.volumes.claim("default", "c"))["volume.kubernetes.io/selected-node"] == "n2"
    st.unreserve("two")
    assert "volume.kubernetes.io/selected-node" not in annotations_of(st.volumes.claim("default", "c"))


def test_an_object_changed_since_the_decision_is_not_assumed() -> None:
    """``Assume`` refuses an object whose version is not the stored one (upstream's out-of-sync
    error): the newer object stands."""
    st = state_of(with_rv(pv("v", "sc"), "2"), with_rv(pvc("c", "sc"), "1"))
    stale = StaticBinding(with_rv(pvc("c", "sc"), "1"), with_rv(pv("v", "sc"), "1"))
    st.reserve("t", [], pod("p"), "n1", PodVolumes([stale]))
    assert spec(st.volumes.volume("v")).get("claimRef") is None


def test_deleting_an_assumed_object_forgets_the_assumption() -> None:
    st = state_of(pvc("c", "sc"))
    st.reserve(
        "t", [], pod("p"), "n1", PodVolumes([], [DynamicProvision(st.volumes.claim("default", "c") or {})])
    )
    st.apply("PersistentVolumeClaim", pvc("c", "sc"), deleted=True)
    assert st.volumes.claim("default", "c") is None
    st.apply("PersistentVolumeClaim", pvc("c", "sc"))
    assert "volume.kubernetes.io/selected-node" not in annotations_of(st.volumes.claim("default", "c"))


def test_a_state_never_fed_storage_leaves_volumes_to_others() -> None:
    """An admission cache or a worker that does not watch claims places a pod with claims as before
    volumes were known (``watched`` off); the first storage object turns the plugins on, and then a
    claim the state does not hold is missing."""
    st = ClusterState()
    st.apply("Node", node("n1"))
    p = with_volumes(pod("p"), claim_volume("data"))
    assert not st.volumes.watched
    assert Scheduler(st).schedule(p).status == SCHEDULED
    st.apply("StorageClass", storage_class("standard", "WaitForFirstConsumer", "p"))
    d = Scheduler(st).schedule(p)
    assert (d.status, d.message) == (
        UNSCHEDULABLE,
        '0/1 nodes are available: persistentvolumeclaim "data" not found.',
    )
