"""Create, get, list, update and their errors, through the official client over HTTP."""

from __future__ import annotations

import json
from typing import Any

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from e2e.emulator import Emulator
from e2e.emulator.objmeta import NAME_ALPHABET

from .conftest import pod, status_of


def _status(exc: ApiException) -> dict[str, Any]:
    return status_of(exc)


def test_generate_name_uid_timestamp_and_generation(core: Any) -> None:
    base = "x" * 70
    created = core.create_namespaced_pod("default", pod(generate_name=base))
    name = created.metadata.name
    assert name.startswith("x" * 58)
    assert len(name) == 63
    assert all(c in NAME_ALPHABET for c in name[58:])
    assert created.metadata.uid
    assert created.metadata.creation_timestamp is not None
    assert created.metadata.generation == 1
    assert int(created.metadata.resource_version) > 0
    assert created.status.phase == "Pending"


def test_resource_version_is_one_global_counter(core: Any, coordination: Any) -> None:
    a = core.create_namespaced_pod("default", pod("a"))
    lease = coordination.create_namespaced_lease("default", {"metadata": {"name": "l"}, "spec": {}})
    b = core.create_namespaced_pod("default", pod("b"))
    rvs = [
        int(a.metadata.resource_version),
        int(lease.metadata.resource_version),
        int(b.metadata.resource_version),
    ]
    assert rvs == sorted(rvs)
    assert len(set(rvs)) == 3
    listed = core.list_namespaced_pod("default")
    assert int(listed.metadata.resource_version) >= rvs[-1]


def test_already_exists(core: Any) -> None:
    core.create_namespaced_pod("default", pod("dup"))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("default", pod("dup"))
    body = _status(err.value)
    assert err.value.status == 409
    assert body["reason"] == "AlreadyExists"
    assert body["message"] == 'pods "dup" already exists'
    assert body["details"] == {"name": "dup", "kind": "pods"}


def test_not_found_for_a_grouped_resource(resource_api: Any) -> None:
    with pytest.raises(ApiException) as err:
        resource_api.read_namespaced_resource_claim("nope", "default")
    body = _status(err.value)
    assert body["reason"] == "NotFound"
    assert body["message"] == 'resourceclaims.resource.k8s.io "nope" not found'
    assert body["details"] == {"name": "nope", "group": "resource.k8s.io", "kind": "resourceclaims"}


def test_missing_name_is_invalid(core: Any) -> None:
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map("default", {"metadata": {}, "data": {}})
    body = _status(err.value)
    assert err.value.status == 422
    assert body["reason"] == "Invalid"
    assert (
        body["message"]
        == 'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required'
    )
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueRequired",
            "message": "Required value: name or generateName is required",
            "field": "metadata.name",
        }
    ]


def test_malformed_json_is_bad_request(emulator: Emulator) -> None:
    http = urllib3.PoolManager()
    r = http.request(
        "POST",
        emulator.url + "/api/v1/namespaces/default/pods",
        body=b'{"metadata": ',
        headers={"Content-Type": "application/json"},
    )
    body = json.loads(r.data)
    assert r.status == 400
    assert body["kind"] == "Status"
    assert body["reason"] == "BadRequest"
    assert body["code"] == 400


def test_stale_update_conflicts_with_the_apiserver_message(core: Any) -> None:
    first = core.create_namespaced_pod("default", pod("p", labels={"v": "1"}))
    first.metadata.labels = {"v": "2"}
    core.replace_namespaced_pod("p", "default", first)
    first.metadata.labels = {"v": "3"}
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_pod("p", "default", first)
    body = _status(err.value)
    assert err.value.status == 409
    assert body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on pods "p": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )


def test_update_without_resource_version_is_unconditional(emulator: Emulator) -> None:
    emulator.create("configmaps", {"metadata": {"name": "c"}, "data": {"a": "1"}})
    updated = emulator.update(
        "configmaps", {"metadata": {"name": "c", "namespace": "default"}, "data": {"a": "2"}}
    )
    assert updated["data"] == {"a": "2"}


def test_noop_update_keeps_the_resource_version(core: Any) -> None:
    created = core.create_namespaced_pod("default", pod("same"))
    again = core.replace_namespaced_pod("same", "default", created)
    assert again.metadata.resource_version == created.metadata.resource_version


def test_generation_follows_spec_not_metadata(emulator: Emulator) -> None:
    emulator.create("leases", {"metadata": {"name": "g"}, "spec": {"holderIdentity": "a"}})
    relabelled = emulator.patch("leases", "g", {"metadata": {"labels": {"x": "y"}}})
    assert relabelled["metadata"]["generation"] == 1
    respec = emulator.patch("leases", "g", {"spec": {"holderIdentity": "b"}})
    assert respec["metadata"]["generation"] == 2


def test_status_subresource_split(core: Any) -> None:
    created = core.create_namespaced_pod("default", pod("s"))
    # PUT on the main resource ignores status.
    created.status.phase = "Running"
    created.metadata.labels = {"changed": "yes"}
    main = core.replace_namespaced_pod("s", "default", created)
    assert main.status.phase == "Pending"
    assert main.metadata.labels == {"changed": "yes"}
    # PUT on /status changes only status.
    main.status.phase = "Running"
    main.metadata.labels = {"ignored": "yes"}
    main.spec.containers[0].image = "other:2"
    st = core.replace_namespaced_pod_status("s", "default", main)
    assert st.status.phase == "Running"
    assert st.metadata.labels == {"changed": "yes"}
    assert st.spec.containers[0].image == "registry.example/app:1"
    assert int(st.metadata.resource_version) > int(main.metadata.resource_version)
    # PATCH on /status too.
    patched = core.patch_namespaced_pod_status(
        "s", "default", {"status": {"phase": "Succeeded"}, "spec": {"nodeName": "x"}}
    )
    assert patched.status.phase == "Succeeded"
    assert patched.spec.node_name is None


def test_create_resets_claim_status(resource_api: Any) -> None:
    claim = {
        "metadata": {"name": "c"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
        "status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "1"}]},
    }
    created = resource_api.create_namespaced_resource_claim("default", claim)
    assert not created.status or not created.status.reserved_for
    assert created.spec.devices.requests[0].exactly.allocation_mode == "ExactCount"
    assert created.spec.devices.requests[0].exactly.count == 1


def test_claim_spec_is_immutable(resource_api: Any) -> None:
    claim = {
        "metadata": {"name": "c"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "a"}}]}},
    }
    resource_api.create_namespaced_resource_claim("default", claim)
    with pytest.raises(ApiException) as err:
        resource_api.patch_namespaced_resource_claim(
            "c",
            "default",
            [{"op": "replace", "path": "/spec/devices/requests/0/exactly/deviceClassName", "value": "b"}],
        )
    assert err.value.status == 422
    assert "field is immutable" in _status(err.value)["message"]


def test_pod_spec_is_immutable_except_allowed_fields(core: Any) -> None:
    core.create_namespaced_pod("default", pod("imm", schedulingGates=[{"name": "wait"}]))
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod("imm", "default", {"spec": {"nodeName": "n1"}})
    assert err.value.status == 422
    assert "pod updates may not change fields" in _status(err.value)["message"]
    # Removing a scheduling gate and changing an image are allowed.
    ok = core.patch_namespaced_pod(
        "imm",
        "default",
        {"spec": {"schedulingGates": None, "containers": [{"name": "main", "image": "new:2"}]}},
    )
    assert ok.spec.scheduling_gates is None
    assert ok.spec.containers[0].image == "new:2"


def test_pod_defaults_are_applied(emulator: Emulator) -> None:
    created = emulator.create(
        "pods",
        pod(
            "d", containers=[{"name": "c", "image": "img", "resources": {"limits": {"example.com/gpu": "1"}}}]
        ),
    )
    spec = created["spec"]
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["restartPolicy"] == "Always"
    assert spec["containers"][0]["resources"]["requests"] == {"example.com/gpu": "1"}
    assert spec["containers"][0]["imagePullPolicy"] == "Always"


def test_list_selectors(core: Any, emulator: Emulator) -> None:
    emulator.create("pods", pod("a", labels={"app": "x", "tier": "web"}, schedulerName="draxr"))
    emulator.create("pods", pod("b", labels={"app": "y"}, nodeName="n1"))
    emulator.create("pods", pod("c", labels={"app": "x"}), namespace="other")

    def names(**kw: Any) -> list[str]:
        return [p.metadata.name for p in core.list_pod_for_all_namespaces(**kw).items]

    assert names(label_selector="app=x") == ["a", "c"]
    assert names(label_selector="app in (x,y),tier") == ["a"]
    assert names(label_selector="app!=x") == ["b"]
    assert names(label_selector="!tier") == ["b", "c"]
    assert names(field_selector="spec.schedulerName=draxr") == ["a"]
    assert names(field_selector="spec.nodeName=") == ["a", "c"]
    assert names(field_selector="spec.nodeName!=,status.phase=Pending") == ["b"]
    assert names(field_selector="metadata.namespace=other") == ["c"]
    assert names(field_selector="metadata.name=b") == ["b"]
    with pytest.raises(ApiException) as err:
        names(field_selector="spec.unknown=1")
    assert err.value.status == 400
    assert _status(err.value)["message"] == "field label not supported: spec.unknown"


def test_list_pagination(core: Any, emulator: Emulator) -> None:
    for i in range(5):
        emulator.create("pods", pod(f"p{i}"))
    first = core.list_namespaced_pod("default", limit=2)
    assert [p.metadata.name for p in first.items] == ["p0", "p1"]
    assert first.metadata.remaining_item_count == 3
    rest = core.list_namespaced_pod("default", limit=10, _continue=first.metadata._continue)
    assert [p.metadata.name for p in rest.items] == ["p2", "p3", "p4"]
    assert rest.metadata._continue is None


def test_cluster_scoped_and_namespace_label(core: Any, resource_api: Any) -> None:
    core.create_namespace({"metadata": {"name": "team-a", "labels": {"team": "a"}}})
    ns = core.read_namespace("team-a")
    assert ns.metadata.labels == {"team": "a", "kubernetes.io/metadata.name": "team-a"}
    assert ns.status.phase == "Active"
    dc = resource_api.create_device_class(
        {"metadata": {"name": "gpu"}, "spec": {"extendedResourceName": "example.com/gpu"}}
    )
    assert dc.metadata.namespace is None
    assert [d.metadata.name for d in resource_api.list_device_class().items] == ["gpu"]


def test_lease_put_creates(coordination: Any) -> None:
    lease = client.V1Lease(
        metadata=client.V1ObjectMeta(name="leader"), spec=client.V1LeaseSpec(holder_identity="me")
    )
    created = coordination.replace_namespaced_lease("leader", "default", lease)
    assert created.spec.holder_identity == "me"
    assert coordination.read_namespaced_lease("leader", "default").metadata.uid == created.metadata.uid


def test_unknown_paths_and_resources_are_404_statuses(emulator: Emulator) -> None:
    http = urllib3.PoolManager()
    for path in (
        "/api/v1/widgets",
        "/apis/nope.io/v1/things",
        "/nothing/here",
        "/api/v1/namespaces/default/nodes",
    ):
        r = http.request("GET", emulator.url + path)
        assert r.status == 404, path
        assert json.loads(r.data)["kind"] == "Status"


def test_discovery_documents(emulator: Emulator) -> None:
    http = urllib3.PoolManager()
    version = json.loads(http.request("GET", emulator.url + "/version").data)
    assert version["major"] == "1"
    groups = json.loads(http.request("GET", emulator.url + "/apis").data)
    names = {g["name"] for g in groups["groups"]}
    assert {
        "resource.k8s.io",
        "coordination.k8s.io",
        "admissionregistration.k8s.io",
        "apps",
        "events.k8s.io",
    } <= names
    core = json.loads(http.request("GET", emulator.url + "/api/v1").data)
    pods = {r["name"]: r for r in core["resources"]}
    assert pods["pods"]["namespaced"] is True
    assert {"pods/status", "pods/binding"} <= set(pods)
    res = json.loads(http.request("GET", emulator.url + "/apis/resource.k8s.io/v1").data)
    assert {r["name"]: r["namespaced"] for r in res["resources"] if "/" not in r["name"]} == {
        "deviceclasses": False,
        "resourceslices": False,
        "resourceclaims": True,
        "resourceclaimtemplates": True,
    }


def test_wrong_methods_are_405(emulator: Emulator) -> None:
    http = urllib3.PoolManager()
    base = emulator.url + "/api/v1/namespaces/default/pods"
    for method, path in (("POST", base + "/p"), ("PUT", base), ("PATCH", base)):
        r = http.request(
            method, path, body=json.dumps(pod("p")).encode(), headers={"Content-Type": "application/json"}
        )
        body = json.loads(r.data)
        assert r.status == 405, (method, path)
        assert body["reason"] == "MethodNotAllowed"
