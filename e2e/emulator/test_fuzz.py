"""Fuzzing the HTTP boundary: malformed paths, bodies and headers never produce a 5xx, and every
failure is a Status (but the apiserver's plain-text 404 outside its APIs)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
import urllib3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ..contract.support import pod
from . import Emulator

SEGMENTS = [
    "api",
    "apis",
    "v1",
    "v2",
    "namespaces",
    "default",
    "kube-system",
    "pods",
    "p",
    "status",
    "binding",
    "resource.k8s.io",
    "resourceclaims",
    "deviceclasses",
    "nodes",
    "leases",
    "coordination.k8s.io",
    "events.k8s.io",
    "events",
    "finalize",
    "openapi",
    "v3",
    "version",
    "",
    "..",
    "%00",
    "x" * 300,
]
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
CONTENT_TYPES = [
    "application/json",
    "application/merge-patch+json",
    "application/json-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "text/plain",
    "",
    "application/json; charset=utf-8",
]
QUERY_KEYS = [
    "labelSelector",
    "fieldSelector",
    "resourceVersion",
    "limit",
    "continue",
    "dryRun",
    "gracePeriodSeconds",
    "propagationPolicy",
    "fieldManager",
    "timeoutSeconds",
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=12), kids, max_size=4),
    max_leaves=20,
)
object_like = st.fixed_dictionaries(
    {},
    optional={
        "apiVersion": st.sampled_from(["v1", "resource.k8s.io/v1", "bogus/v9", ""]) | st.integers(),
        "kind": st.sampled_from(["Pod", "Binding", "ResourceClaim", "Namespace", ""]) | json_values,
        "metadata": st.fixed_dictionaries(
            {},
            optional={
                "name": st.sampled_from(["p", "q", "", "Bad_Name", "a" * 300]) | json_values,
                "generateName": st.sampled_from(["g-", ""]) | json_values,
                "namespace": st.sampled_from(["default", "other"]) | json_values,
                "labels": json_values,
                "finalizers": json_values,
                "ownerReferences": json_values,
                "resourceVersion": st.sampled_from(["1", "x", ""]) | json_values,
            },
        )
        | json_values,
        "spec": json_values,
        "status": json_values,
        "target": json_values,
    },
)
yaml_bodies = st.sampled_from(
    [
        b"metadata:\n  name: y\n  creationTimestamp: 2024-01-01T00:00:00Z\n",
        b"? [a, b]\n: c\n",
        b"metadata: {name: z, labels: {a: !!binary aGVsbG8=}}\n",
        b"metadata:\n  name: s\ndata: !!set {a, b}\n",
        b"- a\n- b\n",
        b"{a: .nan}",
        b"&a [*a]",
    ]
)
bodies = st.one_of(
    st.binary(max_size=200),
    yaml_bodies,
    json_values.map(lambda v: json.dumps(v).encode()),
    object_like.map(lambda v: json.dumps(v).encode()),
    st.lists(
        st.fixed_dictionaries(
            {"op": st.sampled_from(["add", "remove", "test", "move", "bogus"]), "path": st.text(max_size=10)},
            optional={"value": json_values, "from": st.text(max_size=6)},
        ),
        max_size=3,
    ).map(lambda v: json.dumps(v).encode()),
)


@pytest.fixture(scope="module")
def fuzz_emulator() -> Iterator[Emulator]:
    with Emulator() as em:
        em.create("pods", pod("p", labels={"a": "b"}))
        yield em


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    method=st.sampled_from(METHODS),
    segments=st.lists(st.sampled_from(SEGMENTS) | st.text(max_size=6), min_size=0, max_size=7),
    query=st.dictionaries(st.sampled_from(QUERY_KEYS), st.text(max_size=12), max_size=3),
    body=bodies,
    content_type=st.sampled_from(CONTENT_TYPES),
)
def test_no_server_errors(
    fuzz_emulator: Emulator,
    method: str,
    segments: list[str],
    query: dict[str, str],
    body: bytes,
    content_type: str,
) -> None:
    path = "/" + "/".join(quote(s, safe="%") for s in segments if s != "watch")
    qs = "&".join(f"{quote(k)}={quote(v)}" for k, v in query.items())
    http = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(total=10))
    headers = {"Content-Type": content_type} if content_type else {}
    r = http.request(method, fuzz_emulator.url + path + ("?" + qs if qs else ""), body=body, headers=headers)
    assert r.status < 500, (method, path, qs, r.status, r.data[:300])
    if r.status >= 400 and method != "HEAD" and r.data != b"404 page not found\n":
        status: Any = json.loads(r.data)
        assert status["kind"] == "Status"
        assert status["code"] == r.status
        assert status["status"] == "Failure"


def test_server_keeps_serving_after_fuzzing(fuzz_emulator: Emulator) -> None:
    r = urllib3.PoolManager().request("GET", fuzz_emulator.url + "/version")
    assert r.status == 200
    assert fuzz_emulator.open_watches() == 0


REAL_PATHS = [
    "/api/v1/namespaces/default/pods",
    "/api/v1/namespaces/default/pods/p",
    "/api/v1/namespaces/default/pods/p/status",
    "/api/v1/namespaces/default/pods/p/binding",
    "/api/v1/namespaces/default/pods/q",
    "/api/v1/namespaces/default",
    "/api/v1/namespaces",
    "/api/v1/nodes/n1",
    "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims",
    "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c/status",
    "/apis/resource.k8s.io/v1/deviceclasses/gpu",
    "/apis/coordination.k8s.io/v1/namespaces/default/leases/l",
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/v",
]


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    method=st.sampled_from(["POST", "PUT", "PATCH", "DELETE", "GET"]),
    path=st.sampled_from(REAL_PATHS),
    query=st.dictionaries(
        st.sampled_from(QUERY_KEYS),
        st.sampled_from(["All", "1", "-1", "x", "a=b", "", "Orphan", "m"]),
        max_size=2,
    ),
    body=bodies,
    content_type=st.sampled_from(CONTENT_TYPES),
)
def test_no_server_errors_on_real_endpoints(
    fuzz_emulator: Emulator, method: str, path: str, query: dict[str, str], body: bytes, content_type: str
) -> None:
    qs = "&".join(f"{quote(k)}={quote(v)}" for k, v in query.items() if k != "timeoutSeconds")
    http = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(total=10))
    headers = {"Content-Type": content_type} if content_type else {}
    r = http.request(method, fuzz_emulator.url + path + ("?" + qs if qs else ""), body=body, headers=headers)
    assert r.status < 500, (method, path, qs, body[:200], r.status, r.data[:300])
    if r.status >= 400:
        status: Any = json.loads(r.data)
        assert status["kind"] == "Status"
        assert status["code"] == r.status
