"""The patch kinds over HTTP: JSON merge patch, JSON patch, strategic merge patch (what the official
Python client sends for a dict, and draxr's worker for a pod's PodScheduled condition) and apply."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from .backend import Api
from .support import pod, status_of

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"


def _patch(api: Api, path: str, body: Any, content_type: str, query: str = "") -> tuple[int, Any]:
    r = api.http("PATCH", path + query, body=body, headers={"Content-Type": content_type})
    return r.status, json.loads(r.data)


def _pod_path(api: Api, name: str = "p", sub: str = "") -> str:
    return f"/api/v1/namespaces/{api.namespace}/pods/{name}" + (f"/{sub}" if sub else "")


def test_merge_patch_replaces_lists_and_deletes_with_null(api: Api, core: Any) -> None:
    core.create_namespaced_pod(
        api.namespace, pod("p", labels={"a": "1", "b": "2"}, tolerations=[{"key": "x", "operator": "Exists"}])
    )
    code, obj = _patch(
        api, _pod_path(api), {"metadata": {"labels": {"a": None, "c": "3"}, "finalizers": ["f/1"]}}, MERGE
    )
    assert code == 200
    assert obj["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert obj["metadata"]["finalizers"] == ["f/1"]
    code, obj = _patch(api, _pod_path(api), {"metadata": {"finalizers": ["f/2"]}}, MERGE)
    assert obj["metadata"]["finalizers"] == ["f/2"]


def test_json_patch_with_test_operations(api: Api, core: Any) -> None:
    core.create_namespaced_pod(api.namespace, pod("p", labels={"a": "1"}))
    ops = [
        {"op": "test", "path": "/metadata/labels/a", "value": "1"},
        {"op": "replace", "path": "/metadata/labels/a", "value": "2"},
    ]
    code, obj = _patch(api, _pod_path(api), ops, JSON_PATCH)
    assert code == 200
    assert obj["metadata"]["labels"] == {"a": "2"}
    code, obj = _patch(api, _pod_path(api), ops, JSON_PATCH)
    assert code == 422
    assert obj["kind"] == "Status"
    assert obj["reason"] == "Invalid"
    assert core.read_namespaced_pod("p", api.namespace).metadata.labels == {"a": "2"}
    code, obj = _patch(api, _pod_path(api), {"not": "a list"}, JSON_PATCH)
    assert code == 400


def test_json_patch_through_the_official_client(api: Api, core: Any) -> None:
    core.create_namespaced_pod(api.namespace, pod("p", labels={"a": "1"}))
    out = core.patch_namespaced_pod(
        "p", api.namespace, [{"op": "add", "path": "/metadata/labels/b", "value": "2"}]
    )
    assert out.metadata.labels == {"a": "1", "b": "2"}


def test_strategic_merge_patch_over_http(api: Api, core: Any) -> None:
    ns = api.namespace
    created = core.create_namespaced_pod(
        ns,
        pod("p", containers=[{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}])
        | {"metadata": {"name": "p", "finalizers": ["x/1", "x/2"]}},
    )
    created.status.conditions = [{"type": "Ready", "status": "False"}, {"type": "Other", "status": "True"}]
    core.replace_namespaced_pod_status("p", ns, created)
    # Containers merge by name: only b's image changes and a stays.
    out = core.patch_namespaced_pod("p", ns, {"spec": {"containers": [{"name": "b", "image": "b:2"}]}})
    assert [(c.name, c.image) for c in out.spec.containers] == [("a", "a:1"), ("b", "b:2")]
    # Finalizers are a merged set, the patch's own first; $deleteFromPrimitiveList removes.
    out = core.patch_namespaced_pod(
        "p", ns, {"metadata": {"finalizers": ["x/3"], "$deleteFromPrimitiveList/finalizers": ["x/1"]}}
    )
    assert out.metadata.finalizers == ["x/3", "x/2"]
    # Conditions merge by type, on /status.
    out = core.patch_namespaced_pod_status(
        "p", ns, {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    )
    assert [(c.type, c.status) for c in out.status.conditions] == [("Ready", "True"), ("Other", "True")]
    out = core.patch_namespaced_pod_status(
        "p", ns, {"status": {"conditions": [{"type": "Other", "$patch": "delete"}]}}
    )
    assert [c.type for c in out.status.conditions] == ["Ready"]


def test_strategic_directives(api: Api, core: Any) -> None:
    """``$patch: replace`` and ``delete`` on a map, ``$patch: replace`` in a list, lists merged by their
    key (owner references by uid), ``$setElementOrder``, and a list item without its merge key refused."""
    ns = api.namespace
    uids = [
        core.create_namespaced_config_map(ns, {"metadata": {"name": n}}).metadata.uid for n in ("o1", "o2")
    ]
    body = pod("p", labels={"a": "1", "b": "2"})
    body["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": f"o{i + 1}", "uid": uid}
        for i, uid in enumerate(uids)
    ]
    core.create_namespaced_pod(ns, body)
    path = _pod_path(api)
    code, obj = _patch(api, path, {"metadata": {"labels": {"$patch": "replace", "c": "3"}}}, STRATEGIC)
    assert (code, obj["metadata"]["labels"]) == (200, {"c": "3"})
    code, obj = _patch(api, path, {"metadata": {"labels": {"$patch": "delete"}}}, STRATEGIC)
    assert (code, obj["metadata"].get("labels")) == (200, None)
    renamed = {"apiVersion": "v1", "kind": "ConfigMap", "name": "O2", "uid": uids[1]}
    code, obj = _patch(api, path, {"metadata": {"ownerReferences": [renamed]}}, STRATEGIC)
    assert [r["name"] for r in obj["metadata"]["ownerReferences"]] == ["o1", "O2"]
    order = {"metadata": {"$setElementOrder/ownerReferences": [{"uid": uids[1]}, {"uid": uids[0]}]}}
    code, obj = _patch(api, path, order, STRATEGIC)
    assert [r["uid"] for r in obj["metadata"]["ownerReferences"]] == [uids[1], uids[0]]
    code, obj = _patch(api, path, {"metadata": {"ownerReferences": [{"name": "no-uid"}]}}, STRATEGIC)
    assert code >= 400
    assert obj["kind"] == "Status"
    conditions = {
        "status": {"conditions": [{"type": "A", "status": "True"}, {"type": "B", "status": "True"}]}
    }
    _patch(api, _pod_path(api, sub="status"), conditions, STRATEGIC)
    replaced = {"status": {"conditions": [{"$patch": "replace"}, {"type": "C", "status": "False"}]}}
    code, obj = _patch(api, _pod_path(api, sub="status"), replaced, STRATEGIC)
    assert code == 200
    assert [(c["type"], c["status"]) for c in obj["status"]["conditions"]] == [("C", "False")]


def test_strategic_patch_on_claims_reserved_for_and_request_mappings(
    api: Api, core: Any, resource_api: Any
) -> None:
    ns = api.namespace
    resource_api.create_namespaced_resource_claim(
        ns, {"metadata": {"name": "c"}, "spec": {"devices": {"requests": []}}}
    )
    entry = {"resource": "pods", "name": "a", "uid": "u1"}
    allocation: dict[str, Any] = {"devices": {"results": []}}
    resource_api.patch_namespaced_resource_claim_status(
        "c", ns, {"status": {"allocation": allocation, "reservedFor": [entry]}}
    )
    out = resource_api.patch_namespaced_resource_claim_status(
        "c", ns, {"status": {"reservedFor": [{"resource": "pods", "name": "b", "uid": "u2"}]}}
    )
    assert [r.uid for r in out.status.reserved_for] == ["u2", "u1"]  # the patch's own first
    limits = {"example.com/gpu": "1", "example.com/fpga": "1"}
    core.create_namespaced_pod(
        ns, pod("p", containers=[{"name": "c", "image": "i", "resources": {"limits": limits}}])
    )
    first = {"containerName": "c", "resourceName": "example.com/gpu", "requestName": "container-0-request-0"}
    second = {
        "containerName": "c",
        "resourceName": "example.com/fpga",
        "requestName": "container-0-request-1",
    }
    status = {"extendedResourceClaimStatus": {"resourceClaimName": "c", "requestMappings": [first, second]}}
    code, _ = _patch(api, _pod_path(api, sub="status"), {"status": status}, STRATEGIC)
    assert code == 200
    update = {"status": {"extendedResourceClaimStatus": {"requestMappings": [second]}}}
    code, out_pod = _patch(api, _pod_path(api, sub="status"), update, STRATEGIC)
    assert code == 200
    assert out_pod["status"]["extendedResourceClaimStatus"]["requestMappings"] == [second]


def test_empty_request_mappings_are_invalid(api: Api, core: Any) -> None:
    core.create_namespaced_pod(api.namespace, pod("p"))
    status = {"extendedResourceClaimStatus": {"resourceClaimName": "c", "requestMappings": []}}
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod_status("p", api.namespace, {"status": status})
    assert err.value.status == 422
    expected = (
        "status.extendedResourceClaimStatus.requestMappings: Required value: at least one request mapping"
    )
    assert expected in status_of(err.value)["message"]


def test_unknown_patch_type_is_415(api: Api, core: Any) -> None:
    core.create_namespaced_pod(api.namespace, pod("p"))
    code, obj = _patch(api, _pod_path(api), {"a": 1}, "text/plain")
    assert code == 415
    assert obj["reason"] == "UnsupportedMediaType"


def test_patch_with_stale_resource_version_conflicts(api: Api, core: Any) -> None:
    core.create_namespaced_pod(api.namespace, pod("p"))
    code, obj = _patch(
        api, _pod_path(api), {"metadata": {"resourceVersion": "1", "labels": {"a": "b"}}}, MERGE
    )
    assert code == 409
    assert obj["reason"] == "Conflict"


def test_a_patch_naming_another_uid_is_invalid_on_the_object_and_its_status(api: Api, core: Any) -> None:
    """``metadata.uid`` is immutable: upstream's ``PatchPodStatus`` puts the pod's uid in its patch, so
    that a pod recreated under the same name refuses it (422); the object's own uid patches fine."""
    uid = core.create_namespaced_pod(api.namespace, pod("p")).metadata.uid
    for path in (_pod_path(api), _pod_path(api, sub="status")):
        code, obj = _patch(api, path, {"metadata": {"uid": "an-older-pod"}, "status": {}}, MERGE)
        assert (code, obj["reason"]) == (422, "Invalid"), path
        assert 'metadata.uid: Invalid value: "an-older-pod": field is immutable' in obj["message"]
        code, obj = _patch(api, path, {"metadata": {"uid": uid}}, MERGE)
        assert code == 200, path


def test_an_update_naming_another_uid_fails_its_precondition(api: Api, core: Any) -> None:
    created = core.create_namespaced_pod(api.namespace, pod("p"))
    current = json.loads(api.http("GET", _pod_path(api)).data)
    stale = {**current, "metadata": {**current["metadata"], "uid": "an-older-pod"}}
    del stale["metadata"]["resourceVersion"]
    r = api.http(
        "PUT",
        _pod_path(api, sub="status"),
        body=json.dumps(stale).encode(),
        headers={"Content-Type": "application/json"},
    )
    obj = json.loads(r.data)
    assert (r.status, obj["reason"]) == (409, "Conflict")
    assert (
        f"Precondition failed: UID in precondition: an-older-pod, UID in object meta: {created.metadata.uid}"
        in obj["message"]
    )


def test_apply_patch_creates_and_updates(api: Api) -> None:
    body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  a: '1'\n"
    path = f"/api/v1/namespaces/{api.namespace}/configmaps/applied"
    code, obj = _patch(api, path, body, APPLY, "?fieldManager=test")
    assert code == 201
    assert obj["data"] == {"a": "1"}
    code, obj = _patch(api, path, body.replace(b"'1'", b"'2'"), APPLY, "?fieldManager=test")
    assert code == 200
    assert obj["data"] == {"a": "2"}
    code, obj = _patch(api, path, body, APPLY)
    assert code == 422


def test_patch_missing_object_is_404(api: Api, core: Any) -> None:
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod("nope", api.namespace, {"metadata": {"labels": {"a": "b"}}})
    assert err.value.status == 404
