"""Discovery, and the answers to paths and methods the API does not have."""

from __future__ import annotations

import json

from .backend import Api
from .support import pod


def test_unknown_resources_of_a_served_version_are_404_statuses(api: Api) -> None:
    for path in ("/api/v1/widgets", f"/api/v1/namespaces/{api.namespace}/nodes"):
        r = api.http("GET", path)
        assert r.status == 404, path
        assert json.loads(r.data) == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "the server could not find the requested resource",
            "reason": "NotFound",
            "details": {},
            "code": 404,
        }


def test_other_paths_are_a_plain_404(api: Api) -> None:
    for path in ("/apis/nope.io/v1/things", "/apis/nope.io", "/nothing/here"):
        r = api.http("GET", path)
        assert r.status == 404, path
        assert r.data == b"404 page not found\n"


def test_discovery_documents(api: Api) -> None:
    version = json.loads(api.http("GET", "/version").data)
    assert version["major"] == "1"
    groups = json.loads(api.http("GET", "/apis").data)
    names = {g["name"] for g in groups["groups"]}
    assert {
        "resource.k8s.io",
        "coordination.k8s.io",
        "admissionregistration.k8s.io",
        "apps",
        "events.k8s.io",
    } <= names
    core = json.loads(api.http("GET", "/api/v1").data)
    pods = {r["name"]: r for r in core["resources"]}
    assert pods["pods"]["namespaced"] is True
    assert {"pods/status", "pods/binding"} <= set(pods)
    res = json.loads(api.http("GET", "/apis/resource.k8s.io/v1").data)
    assert {r["name"]: r["namespaced"] for r in res["resources"] if "/" not in r["name"]} == {
        "deviceclasses": False,
        "resourceslices": False,
        "resourceclaims": True,
        "resourceclaimtemplates": True,
    }


def test_wrong_methods_are_405(api: Api) -> None:
    base = f"/api/v1/namespaces/{api.namespace}/pods"
    for method, path in (("POST", base + "/p"), ("PUT", base), ("PATCH", base)):
        r = api.http(method, path, body=pod("p"), headers={"Content-Type": "application/json"})
        body = json.loads(r.data)
        assert r.status == 405, (method, path)
        assert body["reason"] == "MethodNotAllowed"
