"""``Workloads.default_selector`` against upstream's ``helper/spread_test.go`` (1.37.2):
``TestGetPodServices`` and ``TestDefaultSelector`` case by case (the cases share one informer store,
as upstream's do), then what a deletion, a selector-less Service and an uncontrolled owner do."""

from __future__ import annotations

import pytest

from webhook.core.api.labelselector import EVERYTHING, label_selector
from webhook.core.api.objects import Obj
from webhook.core.cluster.state import ClusterState
from webhook.core.cluster.workloads import Workloads


def _pod(
    name: str, labels: dict[str, str], owner: tuple[str, str, str] | None = None, ns: str = "test"
) -> Obj:
    meta: Obj = {"name": name, "namespace": ns, "labels": labels}
    if owner is not None:
        api_version, kind, owner_name = owner
        meta["ownerReferences"] = [
            {"apiVersion": api_version, "kind": kind, "name": owner_name, "uid": "u", "controller": True}
        ]
    return {"kind": "Pod", "metadata": meta, "spec": {}}


def _obj(kind: str, name: str, selector: object, ns: str = "test") -> Obj:
    return {"kind": kind, "metadata": {"name": name, "namespace": ns}, "spec": {"selector": selector}}


def _set(labels: dict[str, str]) -> object:
    return label_selector({"matchLabels": labels}) if labels else EVERYTHING


@pytest.mark.parametrize("i", range(5))
def test_get_pod_services(i: int) -> None:
    """TestGetPodServices: services ``service-0..2`` select ``app: test-<i>``; pods 3 and 4 match none."""
    w = Workloads()
    for s in range(3):
        w.upsert("Service", _obj("Service", f"service-{s}", {"app": f"test-{s}"}))
    pod = _pod(f"test-pod-{i}", {"app": f"test-{i}", "label": f"label-{i}"})
    assert w.default_selector(pod) == _set({"app": f"test-{i}"} if i < 3 else {})


def test_default_selector() -> None:
    """TestDefaultSelector's five cases, in order, on one store."""
    w = Workloads()
    pod = _pod("test-pod", {"podLabelKey": "podLabelVal"})
    # "DefaultSelector for default case"
    assert w.default_selector(pod) == EVERYTHING
    # "DefaultSelector for no OwnerReference pod case"
    w.upsert("Service", _obj("Service", "test-service", {"podLabelKey": "podLabelVal"}))
    assert w.default_selector(pod) == _set({"podLabelKey": "podLabelVal"})
    # "DefaultSelector for ReplicaSet OwnerReference pod case"
    w.upsert(
        "ReplicaSet", _obj("ReplicaSet", "test-replicaset", {"matchLabels": {"replicaSetLabelKey": "v"}})
    )
    owned = _pod("test-pod", {"podLabelKey": "podLabelVal"}, ("apps/v1", "ReplicaSet", "test-replicaset"))
    selector = w.default_selector(owned)
    assert selector.matches({"podLabelKey": "podLabelVal", "replicaSetLabelKey": "v"})
    assert not selector.matches({"podLabelKey": "podLabelVal"})
    assert not selector.matches({"replicaSetLabelKey": "v"})
    # "DefaultSelector for ReplicationController OwnerReference pod case"
    w.upsert("ReplicationController", _obj("ReplicationController", "test-rc", {"replicationLabelKey": "v"}))
    rc = _pod("test-pod", {"podLabelKey": "podLabelVal"}, ("v1", "ReplicationController", "test-rc"))
    assert w.default_selector(rc) == _set({"podLabelKey": "podLabelVal", "replicationLabelKey": "v"})
    # "DefaultSelector for StatefulSet OwnerReference pod case"
    w.upsert("StatefulSet", _obj("StatefulSet", "test-ss", {"matchLabels": {"statefulSetLabelKey": "v"}}))
    ss = _pod("test-pod", {"podLabelKey": "podLabelVal"}, ("apps/v1", "StatefulSet", "test-ss"))
    selector = w.default_selector(ss)
    assert selector.matches({"podLabelKey": "podLabelVal", "statefulSetLabelKey": "v"})
    assert not selector.matches({"podLabelKey": "podLabelVal"})


def test_a_service_without_a_selector_selects_nothing_and_an_empty_one_adds_nothing() -> None:
    w = Workloads()
    w.upsert(
        "Service", {"kind": "Service", "metadata": {"name": "headless", "namespace": "test"}, "spec": {}}
    )
    w.upsert("Service", _obj("Service", "everything", {}))
    assert w.default_selector(_pod("p", {"a": "b"})) == EVERYTHING


def test_other_namespaces_deletions_and_unknown_owners_add_nothing() -> None:
    w = Workloads()
    w.upsert("Service", _obj("Service", "svc", {"a": "b"}, ns="other"))
    w.upsert("ReplicaSet", _obj("ReplicaSet", "rs", {"matchLabels": {"r": "s"}}))
    assert w.default_selector(_pod("p", {"a": "b"})) == EVERYTHING  # the Service is elsewhere
    job = _pod("p", {"a": "b"}, ("batch/v1", "Job", "rs"))
    assert w.default_selector(job) == EVERYTHING  # a Job is no owner DefaultSelector reads
    owned = _pod("p", {"a": "b"}, ("apps/v1", "ReplicaSet", "rs"))
    assert not w.default_selector(owned).empty
    w.remove("ReplicaSet", _obj("ReplicaSet", "rs", None))
    assert w.default_selector(owned) == EVERYTHING


def test_the_cluster_state_keeps_them() -> None:
    st = ClusterState()
    assert st.apply("Service", _obj("Service", "svc", {"a": "b"}))
    assert st.workloads.default_selector(_pod("p", {"a": "b"})) == _set({"a": "b"})
    assert st.apply("Service", _obj("Service", "svc", {"a": "b"}), deleted=True)
    assert st.workloads.default_selector(_pod("p", {"a": "b"})) == EVERYTHING
