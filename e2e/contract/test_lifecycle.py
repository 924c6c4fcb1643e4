"""Binding, deletion with finalizers, preconditions and propagation policies, and dry runs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .backend import Api
from .support import missing, new_watch, pod, status_of


def _binding(name: str, node: str) -> Any:
    return client.V1Binding(
        metadata=client.V1ObjectMeta(name=name), target=client.V1ObjectReference(kind="Node", name=node)
    )


def _bind(core: Any, ns: str, name: str, node: str) -> Any:
    return core.create_namespaced_pod_binding(name, ns, _binding(name, node), _preload_content=False)


def test_binding_sets_node_and_condition(api: Api, core: Any) -> None:
    core.create_namespaced_pod(api.namespace, pod("p"))
    resp = _bind(core, api.namespace, "p", "node-1")
    assert resp.status == 201
    assert json.loads(resp.data)["status"] == "Success"
    bound = core.read_namespaced_pod("p", api.namespace)
    assert bound.spec.node_name == "node-1"
    scheduled = [c for c in bound.status.conditions if c.type == "PodScheduled"]
    assert len(scheduled) == 1
    assert scheduled[0].status == "True"


def test_binding_an_assigned_pod_conflicts(api: Api, core: Any) -> None:
    core.create_namespaced_pod(api.namespace, pod("p"))
    _bind(core, api.namespace, "p", "node-1")
    with pytest.raises(ApiException) as err:
        _bind(core, api.namespace, "p", "node-2")
    body = status_of(err.value)
    assert err.value.status == 409
    assert (
        body["message"]
        == 'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "node-1"'
    )
    assert core.read_namespaced_pod("p", api.namespace).spec.node_name == "node-1"


def test_binding_a_missing_pod_is_404(api: Api, core: Any) -> None:
    with pytest.raises(ApiException) as err:
        _bind(core, api.namespace, "gone", "n")
    assert err.value.status == 404


def test_finalizers_hold_deletion_until_removed(api: Api, core: Any) -> None:
    """A bound pod's deletion keeps it with its grace period (30 s by default); with a finalizer it
    stays after a deletion with grace 0 (a kubelet's) too, until the finalizer goes."""
    ns = api.namespace
    core.create_namespaced_pod(
        ns, pod("f", nodeName="n1") | {"metadata": {"name": "f", "finalizers": ["example.com/hold"]}}
    )
    rv = str(core.list_namespaced_pod(ns).metadata.resource_version)
    deleted = core.delete_namespaced_pod("f", ns)
    assert deleted.metadata.deletion_timestamp is not None
    assert deleted.metadata.deletion_grace_period_seconds == 30
    assert deleted.metadata.generation == 2
    # Deleting an already terminating object again changes nothing.
    again = core.delete_namespaced_pod("f", ns)
    assert again.metadata.resource_version == deleted.metadata.resource_version
    now = core.delete_namespaced_pod("f", ns, grace_period_seconds=0)
    assert now.metadata.deletion_timestamp is not None
    current = core.read_namespaced_pod("f", ns)
    current.metadata.finalizers = []
    core.replace_namespaced_pod("f", ns, current)
    assert missing(core.read_namespaced_pod, "f", ns)
    types = [
        e["type"]
        for e in new_watch().stream(core.list_namespaced_pod, ns, resource_version=rv, timeout_seconds=1)
    ]
    assert types[0] == "MODIFIED"
    assert types[-1] == "DELETED"


def test_no_new_finalizers_on_a_terminating_object(api: Api, core: Any) -> None:
    ns = api.namespace
    core.create_namespaced_config_map(ns, {"metadata": {"name": "c", "finalizers": ["a/b"]}})
    core.delete_namespaced_config_map("c", ns)
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map("c", ns, {"metadata": {"finalizers": ["a/b", "c/d"]}})
    assert err.value.status == 422
    assert "no new finalizers can be added" in status_of(err.value)["message"]


def test_delete_preconditions(api: Api, core: Any) -> None:
    ns = api.namespace
    created = core.create_namespaced_pod(ns, pod("p"))
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_pod(
            "p", ns, body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="wrong"))
        )
    assert err.value.status == 409
    body = status_of(err.value)
    assert body["message"] == (
        f'Operation cannot be fulfilled on Pod "p": the UID in the precondition (wrong) does not match the '
        f"UID in record ({created.metadata.uid}). The object might have been deleted and then recreated"
    )
    assert body["details"] == {"name": "p", "kind": "Pod"}
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_pod(
            "p", ns, body=client.V1DeleteOptions(preconditions=client.V1Preconditions(resource_version="1"))
        )
    assert err.value.status == 409
    assert status_of(err.value)["message"] == (
        'Operation cannot be fulfilled on Pod "p": the ResourceVersion in the precondition (1) does not '
        f"match the ResourceVersion in record ({created.metadata.resource_version}). "
        "The object might have been modified"
    )
    ok = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=created.metadata.uid))
    core.delete_namespaced_pod("p", ns, body=ok)
    assert missing(core.read_namespaced_pod, "p", ns)


def test_delete_of_other_kinds_returns_a_status(api: Api, core: Any) -> None:
    core.create_namespaced_config_map(api.namespace, {"metadata": {"name": "c"}})
    resp = core.delete_namespaced_config_map("c", api.namespace, _preload_content=False)
    status = json.loads(resp.data)
    assert status["kind"] == "Status"
    assert status["status"] == "Success"
    assert status["details"]["name"] == "c"
    assert status["details"]["kind"] == "configmaps"


def test_foreground_and_orphan_deletions_wait_for_a_garbage_collector(api: Api, core: Any) -> None:
    """kube-apiserver marks the object with the garbage collector's finalizer, dependents or not,
    and leaves it to kube-controller-manager, which neither backend runs here
    (e2e/test_controllers.py has what the collector does)."""
    ns = api.namespace
    for name in ("fg", "orphan"):
        core.create_namespaced_config_map(ns, {"metadata": {"name": name}})
    marked = core.delete_namespaced_config_map(
        "fg", ns, propagation_policy="Foreground", _preload_content=False
    )
    meta = json.loads(marked.data)["metadata"]
    assert meta["finalizers"] == ["foregroundDeletion"]
    assert meta["deletionTimestamp"]
    marked = core.delete_namespaced_config_map(
        "orphan", ns, propagation_policy="Orphan", _preload_content=False
    )
    assert json.loads(marked.data)["metadata"]["finalizers"] == ["orphan"]
    assert core.read_namespaced_config_map("fg", ns).metadata.finalizers == ["foregroundDeletion"]


def test_dry_run_persists_nothing(api: Api, core: Any) -> None:
    ns = api.namespace
    created = core.create_namespaced_pod(ns, pod("dry"), dry_run="All")
    assert created.metadata.name == "dry"
    assert created.metadata.uid
    assert missing(core.read_namespaced_pod, "dry", ns)
    real = core.create_namespaced_pod(ns, pod("real"))
    patched = core.patch_namespaced_pod("real", ns, {"metadata": {"labels": {"a": "b"}}}, dry_run="All")
    assert patched.metadata.labels == {"a": "b"}
    replaced = core.replace_namespaced_pod("real", ns, patched, dry_run="All")
    assert replaced.metadata.labels == {"a": "b"}
    core.delete_namespaced_pod("real", ns, dry_run="All")
    stored = core.read_namespaced_pod("real", ns)
    assert stored.metadata.labels is None
    assert stored.metadata.resource_version == real.metadata.resource_version


def test_generate_name_dry_run_returns_a_name(api: Api, core: Any) -> None:
    created = core.create_namespaced_pod(api.namespace, pod(generate_name="gen-"), dry_run="All")
    assert created.metadata.name.startswith("gen-")
    assert len(created.metadata.name) == 9
    assert core.list_namespaced_pod(api.namespace).items == []
