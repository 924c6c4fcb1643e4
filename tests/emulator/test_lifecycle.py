"""Binding, deletion with finalizers and preconditions, propagation policies and dry runs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from e2e.emulator import Emulator

from .conftest import new_watch, pod, status_of


def _binding(name: str, node: str) -> Any:
    return client.V1Binding(
        metadata=client.V1ObjectMeta(name=name), target=client.V1ObjectReference(kind="Node", name=node)
    )


def test_binding_sets_node_and_condition(core: Any, emulator: Emulator) -> None:
    emulator.create("pods", pod("p"))
    resp = core.create_namespaced_pod_binding("p", "default", _binding("p", "node-1"), _preload_content=False)
    assert resp.status == 201
    assert json.loads(resp.data)["status"] == "Success"
    bound = core.read_namespaced_pod("p", "default")
    assert bound.spec.node_name == "node-1"
    scheduled = [c for c in bound.status.conditions if c.type == "PodScheduled"]
    assert len(scheduled) == 1
    assert scheduled[0].status == "True"


def test_binding_an_assigned_pod_conflicts(core: Any, emulator: Emulator) -> None:
    emulator.create("pods", pod("p"))
    emulator.bind("p", "node-1")
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_binding("p", "default", _binding("p", "node-2"), _preload_content=False)
    body = status_of(err.value)
    assert err.value.status == 409
    assert (
        body["message"]
        == 'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "node-1"'
    )
    assert emulator.get("pods", "p")["spec"]["nodeName"] == "node-1"


def test_binding_a_missing_pod_is_404(core: Any) -> None:
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_binding("gone", "default", _binding("gone", "n"), _preload_content=False)
    assert err.value.status == 404


def test_finalizers_hold_deletion_until_removed(core: Any, emulator: Emulator) -> None:
    emulator.create(
        "pods", pod("f", nodeName="n1") | {"metadata": {"name": "f", "finalizers": ["example.com/hold"]}}
    )
    rv = emulator.resource_version
    deleted = core.delete_namespaced_pod("f", "default")
    assert deleted.metadata.deletion_timestamp is not None
    assert deleted.metadata.deletion_grace_period_seconds == 30
    assert deleted.metadata.generation == 2
    # Deleting an already terminating object changes nothing.
    again = core.delete_namespaced_pod("f", "default")
    assert again.metadata.resource_version == deleted.metadata.resource_version
    current = core.read_namespaced_pod("f", "default")
    current.metadata.finalizers = []
    core.replace_namespaced_pod("f", "default", current)
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod("f", "default")
    assert err.value.status == 404
    types = [
        e["type"]
        for e in new_watch().stream(
            core.list_namespaced_pod, "default", resource_version=str(rv), timeout_seconds=1
        )
    ]
    assert types == ["MODIFIED", "DELETED"]


def test_no_new_finalizers_on_a_terminating_object(emulator: Emulator) -> None:
    emulator.create("configmaps", {"metadata": {"name": "c", "finalizers": ["a/b"]}})
    emulator.delete("configmaps", "c")
    with pytest.raises(Exception) as err:
        emulator.patch("configmaps", "c", {"metadata": {"finalizers": ["a/b", "c/d"]}})
    assert getattr(err.value, "code", None) == 422
    assert "no new finalizers can be added" in str(err.value)


def test_delete_preconditions(core: Any, emulator: Emulator) -> None:
    created = emulator.create("pods", pod("p"))
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_pod(
            "p", "default", body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="wrong"))
        )
    assert err.value.status == 409
    assert "Precondition failed: UID in precondition: wrong" in status_of(err.value)["message"]
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_pod(
            "p",
            "default",
            body=client.V1DeleteOptions(preconditions=client.V1Preconditions(resource_version="1")),
        )
    assert err.value.status == 409
    ok = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=created["metadata"]["uid"]))
    core.delete_namespaced_pod("p", "default", body=ok)
    assert emulator.find("pods", "p") is None


def test_delete_of_other_kinds_returns_a_status(core: Any, emulator: Emulator) -> None:
    emulator.create("configmaps", {"metadata": {"name": "c"}})
    resp = core.delete_namespaced_config_map("c", "default", _preload_content=False)
    status = json.loads(resp.data)
    assert status["kind"] == "Status"
    assert status["status"] == "Success"
    assert status["details"]["name"] == "c"
    assert status["details"]["kind"] == "configmaps"


def test_foreground_and_orphan_deletions_wait_for_a_garbage_collector(emulator: Emulator) -> None:
    """kube-apiserver marks the object with the garbage collector's finalizer and leaves it to
    kube-controller-manager, which the emulator does not run (e2e/test_controllers.py has the rest)."""
    emulator.create("configmaps", {"metadata": {"name": "fg"}})
    emulator.create("configmaps", {"metadata": {"name": "orphan"}})
    marked = emulator.delete("configmaps", "fg", propagation_policy="Foreground")
    assert marked["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert marked["metadata"]["deletionTimestamp"]
    marked = emulator.delete("configmaps", "orphan", propagation_policy="Orphan")
    assert marked["metadata"]["finalizers"] == ["orphan"]
    assert emulator.get("configmaps", "fg")["metadata"]["finalizers"] == ["foregroundDeletion"]


def test_dry_run_persists_nothing(core: Any, emulator: Emulator) -> None:
    rv = emulator.resource_version
    created = core.create_namespaced_pod("default", pod("dry"), dry_run="All")
    assert created.metadata.name == "dry"
    assert created.metadata.uid
    assert emulator.find("pods", "dry") is None
    emulator.create("pods", pod("real"))
    rv = emulator.resource_version
    patched = core.patch_namespaced_pod(
        "real", "default", {"metadata": {"labels": {"a": "b"}}}, dry_run="All"
    )
    assert patched.metadata.labels == {"a": "b"}
    replaced = core.replace_namespaced_pod("real", "default", patched, dry_run="All")
    assert replaced.metadata.labels == {"a": "b"}
    core.delete_namespaced_pod("real", "default", dry_run="All")
    assert emulator.get("pods", "real")["metadata"].get("labels") is None
    assert emulator.resource_version == rv


def test_generate_name_dry_run_returns_a_name(core: Any, emulator: Emulator) -> None:
    created = core.create_namespaced_pod("default", pod(generate_name="gen-"), dry_run="All")
    assert created.metadata.name.startswith("gen-")
    assert len(created.metadata.name) == 9
    assert emulator.list("pods", "default") == []
