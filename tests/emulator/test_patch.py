"""The three patch types over HTTP, plus properties of the patch functions themselves."""

from __future__ import annotations

import json
from typing import Any

import pytest
import urllib3
from hypothesis import given
from hypothesis import strategies as st
from kubernetes.client.exceptions import ApiException

from webhook.emulator import Emulator
from webhook.emulator.mergepatch import merge_patch
from webhook.emulator.strategicpatch import PatchError, strategic_merge

from .conftest import pod


def _raw_patch(
    emulator: Emulator, path: str, body: Any, content_type: str, query: str = ""
) -> tuple[int, Any]:
    r = urllib3.PoolManager().request(
        "PATCH",
        f"{emulator.url}{path}{query}",
        body=json.dumps(body).encode() if not isinstance(body, bytes) else body,
        headers={"Content-Type": content_type},
    )
    return r.status, json.loads(r.data)


POD = "/api/v1/namespaces/default/pods/p"


def test_merge_patch_replaces_lists_and_deletes_with_null(emulator: Emulator) -> None:
    emulator.create(
        "pods", pod("p", labels={"a": "1", "b": "2"}, tolerations=[{"key": "x", "operator": "Exists"}])
    )
    code, obj = _raw_patch(
        emulator,
        POD,
        {"metadata": {"labels": {"a": None, "c": "3"}, "finalizers": ["f/1"]}},
        "application/merge-patch+json",
    )
    assert code == 200
    assert obj["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert obj["metadata"]["finalizers"] == ["f/1"]
    code, obj = _raw_patch(
        emulator, POD, {"metadata": {"finalizers": ["f/2"]}}, "application/merge-patch+json"
    )
    assert obj["metadata"]["finalizers"] == ["f/2"]


def test_json_patch_with_test_operations(emulator: Emulator) -> None:
    emulator.create("pods", pod("p", labels={"a": "1"}))
    ops = [
        {"op": "test", "path": "/metadata/labels/a", "value": "1"},
        {"op": "replace", "path": "/metadata/labels/a", "value": "2"},
    ]
    code, obj = _raw_patch(emulator, POD, ops, "application/json-patch+json")
    assert code == 200
    assert obj["metadata"]["labels"] == {"a": "2"}
    code, obj = _raw_patch(emulator, POD, ops, "application/json-patch+json")
    assert code == 422
    assert obj["kind"] == "Status"
    assert obj["reason"] == "Invalid"
    assert emulator.get("pods", "p")["metadata"]["labels"] == {"a": "2"}
    code, obj = _raw_patch(emulator, POD, {"not": "a list"}, "application/json-patch+json")
    assert code == 400


def test_json_patch_through_the_official_client(core: Any, emulator: Emulator) -> None:
    emulator.create("pods", pod("p", labels={"a": "1"}))
    out = core.patch_namespaced_pod(
        "p", "default", [{"op": "add", "path": "/metadata/labels/b", "value": "2"}]
    )
    assert out.metadata.labels == {"a": "1", "b": "2"}


def test_strategic_merge_patch_over_http(core: Any, emulator: Emulator) -> None:
    emulator.create(
        "pods",
        pod("p", containers=[{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}])
        | {"metadata": {"name": "p", "finalizers": ["x/1", "x/2"]}},
    )
    emulator.update_status(
        "pods",
        emulator.get("pods", "p")
        | {
            "status": {
                "phase": "Pending",
                "conditions": [{"type": "Ready", "status": "False"}, {"type": "Other", "status": "True"}],
            }
        },
    )
    # Containers merge by name: only b's image changes and a stays.
    out = core.patch_namespaced_pod("p", "default", {"spec": {"containers": [{"name": "b", "image": "b:2"}]}})
    assert [(c.name, c.image) for c in out.spec.containers] == [("a", "a:1"), ("b", "b:2")]
    # Finalizers are a merged set; $deleteFromPrimitiveList removes.
    out = core.patch_namespaced_pod(
        "p", "default", {"metadata": {"finalizers": ["x/3"], "$deleteFromPrimitiveList/finalizers": ["x/1"]}}
    )
    assert out.metadata.finalizers == ["x/2", "x/3"]
    # Conditions merge by type, on /status.
    out = core.patch_namespaced_pod_status(
        "p", "default", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    )
    assert [(c.type, c.status) for c in out.status.conditions] == [("Ready", "True"), ("Other", "True")]
    out = core.patch_namespaced_pod_status(
        "p", "default", {"status": {"conditions": [{"type": "Other", "$patch": "delete"}]}}
    )
    assert [c.type for c in out.status.conditions] == ["Ready"]


def test_strategic_patch_on_claims_reserved_for_and_request_mappings(
    resource_api: Any, emulator: Emulator
) -> None:
    emulator.create("resourceclaims", {"metadata": {"name": "c"}, "spec": {"devices": {"requests": []}}})
    entry = {"resource": "pods", "name": "a", "uid": "u1"}
    resource_api.patch_namespaced_resource_claim_status("c", "default", {"status": {"reservedFor": [entry]}})
    out = resource_api.patch_namespaced_resource_claim_status(
        "c", "default", {"status": {"reservedFor": [{"resource": "pods", "name": "b", "uid": "u2"}]}}
    )
    assert [r.uid for r in out.status.reserved_for] == ["u1", "u2"]
    emulator.create(
        "pods",
        pod(
            "p",
            containers=[
                {
                    "name": "c",
                    "image": "i",
                    "resources": {"requests": {"example.com/gpu": "1", "example.com/fpga": "1"}},
                }
            ],
        ),
    )
    first = {"containerName": "c", "resourceName": "example.com/gpu", "requestName": "container-0-request-0"}
    second = {
        "containerName": "c",
        "resourceName": "example.com/fpga",
        "requestName": "container-0-request-1",
    }
    emulator.patch(
        "pods",
        "p",
        {
            "status": {
                "extendedResourceClaimStatus": {"resourceClaimName": "c", "requestMappings": [first, second]}
            }
        },
        patch_type="strategic",
        subresource="status",
    )
    out = emulator.patch(
        "pods",
        "p",
        {"status": {"extendedResourceClaimStatus": {"requestMappings": [second]}}},
        patch_type="strategic",
        subresource="status",
    )
    assert out["status"]["extendedResourceClaimStatus"]["requestMappings"] == [second]


def test_empty_request_mappings_are_invalid(emulator: Emulator) -> None:
    emulator.create("pods", pod("p"))
    with pytest.raises(Exception) as err:
        emulator.patch(
            "pods",
            "p",
            {"status": {"extendedResourceClaimStatus": {"resourceClaimName": "c", "requestMappings": []}}},
            subresource="status",
        )
    assert getattr(err.value, "code", None) == 422
    expected = (
        "status.extendedResourceClaimStatus.requestMappings: Required value: at least one request mapping"
    )
    assert expected in str(err.value)


def test_unknown_patch_type_is_415(emulator: Emulator) -> None:
    emulator.create("pods", pod("p"))
    code, obj = _raw_patch(emulator, POD, {"a": 1}, "text/plain")
    assert code == 415
    assert obj["reason"] == "UnsupportedMediaType"


def test_patch_with_stale_resource_version_conflicts(emulator: Emulator) -> None:
    emulator.create("pods", pod("p"))
    code, obj = _raw_patch(
        emulator,
        POD,
        {"metadata": {"resourceVersion": "1", "labels": {"a": "b"}}},
        "application/merge-patch+json",
    )
    assert code == 409
    assert obj["reason"] == "Conflict"


def test_a_patch_naming_another_uid_is_invalid_on_the_object_and_its_status(emulator: Emulator) -> None:
    """``metadata.uid`` is immutable: upstream's ``PatchPodStatus`` puts the pod's uid in its patch, so
    that a pod recreated under the same name refuses it (422); the object's own uid patches fine."""
    uid = emulator.create("pods", pod("p"))["metadata"]["uid"]
    for path in (POD, f"{POD}/status"):
        code, obj = _raw_patch(
            emulator,
            path,
            {"metadata": {"uid": "an-older-pod"}, "status": {}},
            "application/merge-patch+json",
        )
        assert (code, obj["reason"]) == (422, "Invalid"), path
        assert (
            obj["message"]
            == 'Pod "p" is invalid: metadata.uid: Invalid value: "an-older-pod": field is immutable'
        )
        code, obj = _raw_patch(emulator, path, {"metadata": {"uid": uid}}, "application/merge-patch+json")
        assert code == 200, path


def test_an_update_naming_another_uid_fails_its_precondition(emulator: Emulator) -> None:
    current = emulator.create("pods", pod("p"))
    stale = {**current, "metadata": {**current["metadata"], "uid": "an-older-pod"}}
    del stale["metadata"]["resourceVersion"]
    r = urllib3.PoolManager().request(
        "PUT",
        f"{emulator.url}{POD}/status",
        body=json.dumps(stale).encode(),
        headers={"Content-Type": "application/json"},
    )
    obj = json.loads(r.data)
    assert (r.status, obj["reason"]) == (409, "Conflict")
    assert obj["message"] == (
        'Operation cannot be fulfilled on pods "p": Precondition failed: UID in precondition: an-older-pod, '
        f"UID in object meta: {current['metadata']['uid']}"
    )


def test_apply_patch_creates_and_updates(emulator: Emulator) -> None:
    body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  a: '1'\n"
    path = "/api/v1/namespaces/default/configmaps/applied"
    code, obj = _raw_patch(emulator, path, body, "application/apply-patch+yaml", "?fieldManager=test")
    assert code == 201
    assert obj["data"] == {"a": "1"}
    code, obj = _raw_patch(
        emulator, path, body.replace(b"'1'", b"'2'"), "application/apply-patch+yaml", "?fieldManager=test"
    )
    assert code == 200
    assert obj["data"] == {"a": "2"}
    code, obj = _raw_patch(emulator, path, body, "application/apply-patch+yaml")
    assert code == 422


def test_patch_missing_object_is_404(core: Any) -> None:
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod("nope", "default", {"metadata": {"labels": {"a": "b"}}})
    assert err.value.status == 404


# --- properties of the patch functions ------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=5)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(max_size=4), json_values, max_size=4)


@given(json_objects)
def test_empty_patches_change_nothing(doc: dict[str, Any]) -> None:
    assert merge_patch(doc, {}) == doc
    assert strategic_merge(doc, {}) == doc


@given(json_objects, json_objects)
def test_merge_patch_is_idempotent_and_pure(doc: dict[str, Any], patch: dict[str, Any]) -> None:
    before = json.dumps(doc, sort_keys=True)
    once = merge_patch(doc, patch)
    assert merge_patch(once, patch) == once
    assert json.dumps(doc, sort_keys=True) == before


@given(
    st.dictionaries(st.sampled_from(["a", "b", "c"]), json_scalars, max_size=3),
    st.dictionaries(st.sampled_from(["a", "b", "c"]), json_scalars, max_size=3),
)
def test_strategic_equals_merge_for_flat_maps(doc: dict[str, Any], patch: dict[str, Any]) -> None:
    assert strategic_merge(doc, patch) == merge_patch(doc, patch)


@given(
    st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True),
    st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True),
)
def test_finalizers_merge_as_an_ordered_union(old: list[str], new: list[str]) -> None:
    out = strategic_merge({"metadata": {"finalizers": old}}, {"metadata": {"finalizers": new}})
    assert out["metadata"]["finalizers"] == old + [f for f in new if f not in old]


def test_strategic_directives() -> None:
    doc = {
        "metadata": {"labels": {"a": "1", "b": "2"}},
        "status": {"conditions": [{"type": "A", "status": "x"}]},
    }
    assert strategic_merge(doc, {"metadata": {"labels": {"$patch": "replace", "c": "3"}}})["metadata"][
        "labels"
    ] == {"c": "3"}
    assert "labels" not in strategic_merge(doc, {"metadata": {"labels": {"$patch": "delete"}}})["metadata"]
    replaced = strategic_merge(
        doc, {"status": {"conditions": [{"$patch": "replace"}, {"type": "B", "status": "y"}]}}
    )
    assert replaced["status"]["conditions"] == [{"type": "B", "status": "y"}]
    refs = {"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}, {"uid": "2", "name": "b"}]}}
    merged = strategic_merge(refs, {"metadata": {"ownerReferences": [{"uid": "2", "name": "B"}]}})
    assert merged["metadata"]["ownerReferences"] == [{"uid": "1", "name": "a"}, {"uid": "2", "name": "B"}]
    ordered = strategic_merge(
        refs, {"metadata": {"$setElementOrder/ownerReferences": [{"uid": "2"}, {"uid": "1"}]}}
    )
    assert [r["uid"] for r in ordered["metadata"]["ownerReferences"]] == ["2", "1"]
    with pytest.raises(PatchError):
        strategic_merge(refs, {"metadata": {"ownerReferences": [{"name": "no-uid"}]}})
