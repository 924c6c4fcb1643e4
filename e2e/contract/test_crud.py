"""Create, get, list, update and their errors, through the official client over HTTP."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .backend import Api
from .support import pod, status_of

#: ``generateName``'s random suffix: upstream's ``utilrand.String`` alphabet (no vowels, no 0, 1, 3).
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def test_generate_name_uid_timestamp_and_generation(api: Api, core: Any) -> None:
    base = "x" * 70
    created = core.create_namespaced_pod(api.namespace, pod(generate_name=base))
    name = created.metadata.name
    assert name.startswith("x" * 58)
    assert len(name) == 63
    assert all(c in NAME_ALPHABET for c in name[58:])
    assert created.metadata.uid
    assert created.metadata.creation_timestamp is not None
    assert created.metadata.generation == 1
    assert int(created.metadata.resource_version) > 0
    assert created.status.phase == "Pending"


def test_resource_version_is_one_global_counter(api: Api, core: Any, coordination: Any) -> None:
    ns = api.namespace
    a = core.create_namespaced_pod(ns, pod("a"))
    lease = coordination.create_namespaced_lease(ns, {"metadata": {"name": "l"}, "spec": {}})
    b = core.create_namespaced_pod(ns, pod("b"))
    rvs = [
        int(a.metadata.resource_version),
        int(lease.metadata.resource_version),
        int(b.metadata.resource_version),
    ]
    assert rvs == sorted(rvs)
    assert len(set(rvs)) == 3
    listed = core.list_namespaced_pod(ns)
    assert int(listed.metadata.resource_version) >= rvs[-1]


def test_already_exists(api: Api, core: Any) -> None:
    core.create_namespaced_pod(api.namespace, pod("dup"))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(api.namespace, pod("dup"))
    body = status_of(err.value)
    assert err.value.status == 409
    assert body["reason"] == "AlreadyExists"
    assert body["message"] == 'pods "dup" already exists'
    assert body["details"] == {"name": "dup", "kind": "pods"}


def test_not_found_for_a_grouped_resource(api: Api, resource_api: Any) -> None:
    with pytest.raises(ApiException) as err:
        resource_api.read_namespaced_resource_claim("nope", api.namespace)
    body = status_of(err.value)
    assert body["reason"] == "NotFound"
    assert body["message"] == 'resourceclaims.resource.k8s.io "nope" not found'
    assert body["details"] == {"name": "nope", "group": "resource.k8s.io", "kind": "resourceclaims"}


def test_missing_name_is_invalid(api: Api, core: Any) -> None:
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(api.namespace, {"metadata": {}, "data": {}})
    body = status_of(err.value)
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


def test_malformed_json_is_bad_request(api: Api) -> None:
    r = api.http(
        "POST",
        f"/api/v1/namespaces/{api.namespace}/pods",
        body=b'{"metadata": ',
        headers={"Content-Type": "application/json"},
    )
    body = json.loads(r.data)
    assert r.status == 400
    assert body["kind"] == "Status"
    assert body["reason"] == "BadRequest"
    assert body["code"] == 400


def test_stale_update_conflicts_with_the_apiserver_message(api: Api, core: Any) -> None:
    first = core.create_namespaced_pod(api.namespace, pod("p", labels={"v": "1"}))
    first.metadata.labels = {"v": "2"}
    core.replace_namespaced_pod("p", api.namespace, first)
    first.metadata.labels = {"v": "3"}
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_pod("p", api.namespace, first)
    body = status_of(err.value)
    assert err.value.status == 409
    assert body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on pods "p": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )


def test_update_without_resource_version_is_unconditional(api: Api, core: Any) -> None:
    core.create_namespaced_config_map(api.namespace, {"metadata": {"name": "c"}, "data": {"a": "1"}})
    updated = core.replace_namespaced_config_map(
        "c", api.namespace, {"metadata": {"name": "c"}, "data": {"a": "2"}}
    )
    assert updated.data == {"a": "2"}


def test_noop_update_keeps_the_resource_version(api: Api, core: Any) -> None:
    created = core.create_namespaced_pod(api.namespace, pod("same"))
    again = core.replace_namespaced_pod("same", api.namespace, created)
    assert again.metadata.resource_version == created.metadata.resource_version


def test_generation_follows_spec_not_metadata(api: Api, resource_api: Any, coordination: Any) -> None:
    """On the kinds that keep a generation (DeviceClass here); a Lease has none."""
    name = api.unique("g")
    created = resource_api.create_device_class({"metadata": {"name": name}, "spec": {"selectors": []}})
    assert created.metadata.generation == 1
    relabelled = resource_api.patch_device_class(name, {"metadata": {"labels": {"x": "y"}}})
    assert relabelled.metadata.generation == 1
    respec = resource_api.patch_device_class(name, {"spec": {"extendedResourceName": "example.com/g"}})
    assert respec.metadata.generation == 2
    ns = api.namespace
    coordination.create_namespaced_lease(ns, {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}})
    assert (
        coordination.patch_namespaced_lease("l", ns, {"spec": {"holderIdentity": "b"}}).metadata.generation
        is None
    )


def test_status_subresource_split(api: Api, core: Any) -> None:
    ns = api.namespace
    created = core.create_namespaced_pod(ns, pod("s"))
    # PUT on the main resource ignores status.
    created.status.phase = "Running"
    created.metadata.labels = {"changed": "yes"}
    main = core.replace_namespaced_pod("s", ns, created)
    assert main.status.phase == "Pending"
    assert main.metadata.labels == {"changed": "yes"}
    # PUT on /status changes status and, for a pod, its labels (not its spec).
    main.status.phase = "Running"
    main.metadata.labels = {"through": "status"}
    main.spec.containers[0].image = "other:2"
    st = core.replace_namespaced_pod_status("s", ns, main)
    assert st.status.phase == "Running"
    assert st.metadata.labels == {"through": "status"}
    assert st.spec.containers[0].image == "registry.example/app:1"
    assert int(st.metadata.resource_version) > int(main.metadata.resource_version)
    # PATCH on /status too.
    patched = core.patch_namespaced_pod_status(
        "s", ns, {"status": {"phase": "Succeeded"}, "spec": {"nodeName": "x"}}
    )
    assert patched.status.phase == "Succeeded"
    assert patched.spec.node_name is None


def test_a_claims_status_changes_nothing_but_status(api: Api, resource_api: Any) -> None:
    """ResourceClaim's /status keeps the old metadata (``ResetObjectMetaForStatus``), unlike a pod's;
    ``reservedFor`` needs an allocation."""
    ns = api.namespace
    spec = {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}}
    resource_api.create_namespaced_resource_claim(ns, {"metadata": {"name": "c"}, "spec": spec})
    reserved = {"reservedFor": [{"resource": "pods", "name": "p", "uid": "1"}]}
    with pytest.raises(ApiException) as err:
        resource_api.patch_namespaced_resource_claim_status("c", ns, {"status": reserved})
    assert err.value.status == 422
    assert status_of(err.value)["message"] == (
        'ResourceClaim.resource.k8s.io "c" is invalid: '
        "status.reservedFor: Forbidden: may not be specified when `allocated` is not set"
    )
    results = [{"request": "r", "driver": "d.example.com", "pool": "p", "device": "g"}]
    status = {"allocation": {"devices": {"results": results}}, **reserved}
    out = resource_api.patch_namespaced_resource_claim_status(
        "c", ns, {"metadata": {"labels": {"ignored": "yes"}}, "status": status}
    )
    assert out.metadata.labels is None
    assert [r.uid for r in out.status.reserved_for] == ["1"]


def test_create_resets_claim_status(api: Api, resource_api: Any) -> None:
    claim = {
        "metadata": {"name": "c"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
        "status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "1"}]},
    }
    created = resource_api.create_namespaced_resource_claim(api.namespace, claim)
    assert not created.status or not created.status.reserved_for
    assert created.spec.devices.requests[0].exactly.allocation_mode == "ExactCount"
    assert created.spec.devices.requests[0].exactly.count == 1


def test_claim_spec_is_immutable(api: Api, resource_api: Any) -> None:
    claim = {
        "metadata": {"name": "c"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "a"}}]}},
    }
    resource_api.create_namespaced_resource_claim(api.namespace, claim)
    with pytest.raises(ApiException) as err:
        resource_api.patch_namespaced_resource_claim(
            "c",
            api.namespace,
            [{"op": "replace", "path": "/spec/devices/requests/0/exactly/deviceClassName", "value": "b"}],
        )
    assert err.value.status == 422
    assert "field is immutable" in status_of(err.value)["message"]


def test_pod_spec_is_immutable_except_allowed_fields(api: Api, core: Any) -> None:
    ns = api.namespace
    core.create_namespaced_pod(ns, pod("imm", schedulingGates=[{"name": "wait"}]))
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod("imm", ns, {"spec": {"nodeName": "n1"}})
    assert err.value.status == 422
    assert "pod updates may not change fields" in status_of(err.value)["message"]
    # Removing a scheduling gate and changing an image are allowed.
    ok = core.patch_namespaced_pod(
        "imm", ns, {"spec": {"schedulingGates": None, "containers": [{"name": "main", "image": "new:2"}]}}
    )
    assert ok.spec.scheduling_gates is None
    assert ok.spec.containers[0].image == "new:2"


def test_pod_defaults_are_applied(api: Api, core: Any) -> None:
    limits = {"limits": {"example.com/gpu": "1"}}
    created = core.create_namespaced_pod(
        api.namespace, pod("d", containers=[{"name": "c", "image": "img", "resources": limits}])
    )
    spec = created.spec
    assert spec.scheduler_name == "default-scheduler"
    assert spec.restart_policy == "Always"
    assert spec.containers[0].resources.requests == {"example.com/gpu": "1"}
    assert spec.containers[0].image_pull_policy == "Always"


def test_list_selectors(api: Api, core: Any) -> None:
    other = api.new_namespace("other")
    core.create_namespaced_pod(
        api.namespace, pod("a", labels={"app": "x", "tier": "web"}, schedulerName="draxr")
    )
    core.create_namespaced_pod(api.namespace, pod("b", labels={"app": "y"}, nodeName="n1"))
    core.create_namespaced_pod(other, pod("c", labels={"app": "x"}))

    def names(**kw: Any) -> list[str]:
        return sorted(
            p.metadata.name for ns in (api.namespace, other) for p in core.list_namespaced_pod(ns, **kw).items
        )

    assert names(label_selector="app=x") == ["a", "c"]
    assert names(label_selector="app in (x,y),tier") == ["a"]
    assert names(label_selector="app!=x") == ["b"]
    assert names(label_selector="!tier") == ["b", "c"]
    assert names(field_selector="spec.schedulerName=draxr") == ["a"]
    assert names(field_selector="spec.nodeName=") == ["a", "c"]
    assert names(field_selector="spec.nodeName!=,status.phase=Pending") == ["b"]
    assert names(field_selector=f"metadata.namespace={other}") == ["c"]
    assert names(field_selector="metadata.name=b") == ["b"]
    everywhere = core.list_pod_for_all_namespaces(field_selector=f"metadata.namespace={other}").items
    assert [p.metadata.name for p in everywhere] == ["c"]
    with pytest.raises(ApiException) as err:
        names(field_selector="spec.unknown=1")
    assert err.value.status == 400
    assert status_of(err.value)["message"] == "field label not supported: spec.unknown"


def test_list_pagination(api: Api, core: Any) -> None:
    for i in range(5):
        core.create_namespaced_pod(api.namespace, pod(f"p{i}"))
    first = core.list_namespaced_pod(api.namespace, limit=2)
    assert [p.metadata.name for p in first.items] == ["p0", "p1"]
    assert first.metadata.remaining_item_count == 3
    rest = core.list_namespaced_pod(api.namespace, limit=10, _continue=first.metadata._continue)
    assert [p.metadata.name for p in rest.items] == ["p2", "p3", "p4"]
    assert rest.metadata._continue is None


def test_list_pagination_with_a_selector(api: Api, core: Any) -> None:
    """Pages of a selected list: each at most ``limit`` objects, together every match once, in key
    order; no count of what is left (the server cannot know it without reading it all)."""
    for i in range(9):
        core.create_namespaced_pod(api.namespace, pod(f"p{i}", labels={"app": "x" if i % 3 else "y"}))
    seen: list[str] = []
    token = None
    for _ in range(10):
        page = core.list_namespaced_pod(api.namespace, label_selector="app=x", limit=2, _continue=token)
        assert len(page.items) <= 2
        assert page.metadata.remaining_item_count is None
        seen += [p.metadata.name for p in page.items]
        token = page.metadata._continue
        if token is None:
            break
    assert seen == ["p1", "p2", "p4", "p5", "p7", "p8"]


def test_cluster_scoped_and_namespace_label(api: Api, core: Any, resource_api: Any) -> None:
    team = api.unique("team-a")
    core.create_namespace({"metadata": {"name": team, "labels": {"team": "a"}}})
    ns = core.read_namespace(team)
    assert ns.metadata.labels == {"team": "a", "kubernetes.io/metadata.name": team}
    assert ns.status.phase == "Active"
    gpu = api.unique("gpu")
    dc = resource_api.create_device_class(
        {"metadata": {"name": gpu}, "spec": {"extendedResourceName": "example.com/gpu"}}
    )
    assert dc.metadata.namespace is None
    assert gpu in [d.metadata.name for d in resource_api.list_device_class().items]


def test_lease_put_creates(api: Api, coordination: Any) -> None:
    lease = client.V1Lease(
        metadata=client.V1ObjectMeta(name="leader"), spec=client.V1LeaseSpec(holder_identity="me")
    )
    created = coordination.replace_namespaced_lease("leader", api.namespace, lease)
    assert created.spec.holder_identity == "me"
    assert coordination.read_namespaced_lease("leader", api.namespace).metadata.uid == created.metadata.uid


def test_concurrent_writers_never_lose_updates(api: Api, core: Any) -> None:
    """Read-modify-write with the resourceVersion: a stale write is a 409, so no increment is lost."""
    ns = api.namespace
    core.create_namespaced_config_map(ns, {"metadata": {"name": "counter"}, "data": {"n": "0"}})
    writer: Any = client.CoreV1Api(api.client())

    def bump(times: int) -> None:
        for _ in range(times):
            while True:
                cm = writer.read_namespaced_config_map("counter", ns)
                cm.data["n"] = str(int(cm.data["n"]) + 1)
                try:
                    writer.replace_namespaced_config_map("counter", ns, cm)
                    break
                except client.ApiException as exc:
                    conflicts.append(exc.status)

    conflicts: list[int] = []
    threads = [threading.Thread(target=bump, args=(10,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert core.read_namespaced_config_map("counter", ns).data["n"] == "40"
    assert set(conflicts) <= {409}
