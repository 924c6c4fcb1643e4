"""Hostile AdmissionReviews at every endpoint, over TLS: never a 5xx, never an internal error, and
the server answers a good request correctly right after each bad one."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, currently_in_test_context, event, given, settings
from hypothesis import strategies as st

from tests.admission.builders import (
    DEVICE_CLASS,
    RESOURCE_CLAIM,
    WORKER,
    device_class,
    gpu_cluster,
    gpu_pod,
    mapping,
    review,
    special_claim,
    with_mapping,
)
from tests.admission.conftest import Webhook
from webhook.core.api.objects import Obj

FUZZ = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _realistic() -> dict[str, Obj]:
    """One realistic review per endpoint, exercising its deepest rules."""
    p = gpu_pod("p", 1)
    p["spec"]["initContainers"] = [
        {"name": "init", "image": "x", "resources": {"limits": {"example.com/gpu": "1"}}}
    ]
    p["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}]}]
            }
        }
    }
    p["spec"]["tolerations"] = [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]
    p["spec"]["resourceClaims"] = [{"name": "shared", "resourceClaimName": "shared-claim"}]
    p["metadata"]["annotations"] = {"a": "b"}
    claim = special_claim("p-extended-resources-abcde", p)
    old_class = device_class("gpu.example.com", "example.com/gpu")
    new_class = copy.deepcopy(old_class)
    new_class["spec"]["extendedResourceName"] = "example.com/gpu2"
    return {
        "/mutate/pods": review(p),
        "/validate/pods": review(
            with_mapping(p, mapping(claim["metadata"]["name"])),
            operation="UPDATE",
            old=p,
            sub_resource="status",
            user=WORKER,
        ),
        "/validate/deviceclasses": review(
            new_class, operation="UPDATE", old=old_class, resource=DEVICE_CLASS
        ),
        "/validate/resourceclaims": review(claim, resource=RESOURCE_CLAIM, user=WORKER),
    }


REVIEWS = _realistic()
ENDPOINTS = sorted(REVIEWS)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


PATHS = {ep: [p for p in _paths(r) if p] for ep, r in REVIEWS.items()}

surrogates = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
strings = st.one_of(
    st.text(max_size=40),
    st.text(st.one_of(st.characters(), surrogates), max_size=20),
    st.sampled_from(["", "CREATE", "UPDATE", "true", "0.5", "-1", "1e308", "9" * 400, "a/b", "status"]),
    st.integers(min_value=0, max_value=70_000).map(lambda n: "x" * n),
)
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False),
    strings,
)
json_values = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(strings, st.just("name")), children, max_size=4),
    ),
    max_leaves=12,
)


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


hostile = st.one_of(json_values, st.integers(min_value=50, max_value=400).map(_nested))


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


def _check_answer(webhook: Webhook, path: str, body: bytes, uid: Any) -> None:
    resp = webhook.post(path, body)
    assert resp.status_code in (200, 400), (resp.status_code, resp.text)
    answer = resp.json()
    if currently_in_test_context():  # --hypothesis-show-statistics: how deep the inputs get
        allowed = answer["response"]["allowed"] if resp.status_code == 200 else None
        event(f"HTTP {resp.status_code}" + ("" if allowed is None else f" allowed={allowed}"))
    if resp.status_code == 400:
        assert set(answer) == {"error"}
        assert not answer["error"].startswith("internal error"), answer["error"]
        return
    response = answer["response"]
    assert response["uid"] == uid
    assert isinstance(response["allowed"], bool)
    assert all(isinstance(w, str) and len(w) <= 120 for w in response.get("warnings", []))
    if not response["allowed"]:
        assert response["status"]["code"] in (403, 422)


def _still_serving(webhook: Webhook, path: str) -> None:
    good = REVIEWS[path]
    response = webhook.respond(path, good)
    assert isinstance(response["allowed"], bool)


@pytest.fixture
def cluster(webhook: Webhook) -> Webhook:
    p = gpu_pod("p", 1)
    webhook.install([*gpu_cluster(), special_claim("p-extended-resources-abcde", p)])
    return webhook


@pytest.mark.parametrize("path", ENDPOINTS)
@FUZZ
@given(data=st.data())
def test_one_hostile_field_in_a_realistic_review(cluster: Webhook, path: str, data: st.DataObject) -> None:
    body = copy.deepcopy(REVIEWS[path])
    where = data.draw(st.sampled_from(PATHS[path]), label="path")
    value = data.draw(hostile, label="value")
    _set(body, where, value)
    uid = body.get("request", {}).get("uid") if isinstance(body.get("request"), dict) else None
    _check_answer(cluster, path, json.dumps(body).encode(), uid)
    _still_serving(cluster, path)


@pytest.mark.parametrize("path", ENDPOINTS)
@FUZZ
@given(value=json_values)
def test_arbitrary_json(cluster: Webhook, path: str, value: Any) -> None:
    resp = cluster.post(path, json.dumps(value).encode())
    assert resp.status_code == 400
    assert not resp.json()["error"].startswith("internal error")
    _still_serving(cluster, path)


@pytest.mark.parametrize("path", ENDPOINTS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.binary(max_size=2000))
def test_arbitrary_bytes(cluster: Webhook, path: str, body: bytes) -> None:
    resp = cluster.post(path, body)
    assert resp.status_code == 400
    _still_serving(cluster, path)


@pytest.mark.parametrize("path", ENDPOINTS)
def test_deep_nesting_and_huge_strings(cluster: Webhook, path: str) -> None:
    for depth in (99, 101, 900, 5000):
        body = copy.deepcopy(REVIEWS[path])
        body["request"]["object"]["metadata"]["annotations"] = {"deep": _nested(depth)}
        data = json.dumps(body).encode() if depth < 900 else _deep_bytes(body, depth)
        _check_answer(cluster, path, data, body["request"]["uid"])
    body = copy.deepcopy(REVIEWS[path])
    body["request"]["object"]["metadata"]["name"] = "n" * 2_000_000
    _check_answer(cluster, path, json.dumps(body).encode(), body["request"]["uid"])
    _still_serving(cluster, path)


def _deep_bytes(body: Obj, depth: int) -> bytes:
    """json.dumps itself cannot write this deep; splice the nesting in as text."""
    marker = "__DEEP__"
    body["request"]["object"]["metadata"]["annotations"] = {"deep": marker}
    return json.dumps(body).replace(f'"{marker}"', "[" * depth + "]" * depth).encode()


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE", "DELETE", "CONNECT"])
@pytest.mark.parametrize("path", ENDPOINTS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(obj=json_values, old=json_values)
def test_any_objects_under_any_operation(
    cluster: Webhook, path: str, operation: str, obj: Any, old: Any
) -> None:
    body = copy.deepcopy(REVIEWS[path])
    body["request"].update(operation=operation, object=obj, oldObject=old)
    _check_answer(cluster, path, json.dumps(body).encode(), body["request"]["uid"])
