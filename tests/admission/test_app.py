"""The HTTP surface over TLS: bad requests, limits, health, readiness, metrics, certificate reload."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509

from webhook.admission import AdmissionConfig, create_app
from webhook.core.api.objects import Obj
from webhook.identity.pki import TLS_CERT
from webhook.install.certs import ensure_certs
from webhook.kube.cache import ClusterCache
from webhook.kube.client import KubeClient
from webhook.runtime.apps import webhook_app

from .builders import DEVICE_CLASS, RESOURCE_CLAIM, device_class, gpu_cluster, gpu_pod, review
from .conftest import NAMESPACE, SERVICE, Webhook, serving

HOOKS = ["/validate/deviceclasses", "/validate/pods", "/validate/resourceclaims", "/mutate/pods"]


def _good() -> Obj:
    return review(gpu_pod())


def _with(request_changes: Obj, drop: tuple[str, ...] = ()) -> Obj:
    body = _good()
    body["request"].update(request_changes)
    for key in drop:
        del body["request"][key]
    return body


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "empty request body; expected an AdmissionReview"),
        (b"{", "request body is not valid JSON: Expecting property name enclosed in double quotes"),
        (b"\xff\xfe", "request body is not valid JSON"),
        (b"[]", "request body must be a JSON object, not an array"),
        (b'{"a": NaN}', "request body is not valid JSON: NaN is not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "request body "),
        (
            json.dumps({**_good(), "apiVersion": "admission.k8s.io/v1beta1"}).encode(),
            "expected apiVersion 'admission.k8s.io/v1' and kind 'AdmissionReview', got apiVersion "
            '"admission.k8s.io/v1beta1" and kind "AdmissionReview"',
        ),
        (json.dumps({**_good(), "kind": "Pod"}).encode(), "expected apiVersion"),
        (
            json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
            "request is required",
        ),
        (json.dumps(_with({}, drop=("uid",))).encode(), "request.uid is required"),
        (json.dumps(_with({"uid": ""})).encode(), "request.uid is required"),
        (json.dumps(_with({"uid": 7})).encode(), "request.uid must be a string, not a number"),
        (json.dumps(_with({"operation": "PATCH"})).encode(), 'request.operation "PATCH" is not one of'),
        (json.dumps(_with({"object": None})).encode(), "request.object is required for CREATE"),
        (
            json.dumps(_with({"object": []})).encode(),
            "request.object must be an object or null, not an array",
        ),
        (json.dumps(_with({"dryRun": "yes"})).encode(), "request.dryRun must be a boolean, not a string"),
        (
            json.dumps(_with({"userInfo": "root"})).encode(),
            "request.userInfo must be an object, not a string",
        ),
        (json.dumps(_with({"resource": None})).encode(), "request.resource is required"),
        (
            json.dumps(_with({"subResource": "exec"})).encode(),
            'unexpected resource "pods/v1 (subresource exec)"; this endpoint serves pods, pods/status',
        ),
        (
            json.dumps(review(device_class("c"), resource=DEVICE_CLASS)).encode(),
            'unexpected resource "deviceclasses.resource.k8s.io/v1"; this endpoint serves pods, pods/status',
        ),
        (
            json.dumps(_with({"object": {**gpu_pod(), "kind": "Node"}})).encode(),
            'request.object.kind is "Node"; this endpoint serves Pod',
        ),
        (
            json.dumps(review(gpu_pod(), operation="UPDATE", old=None)).encode(),
            "request.oldObject is required for UPDATE",
        ),
        (
            json.dumps(
                review(gpu_pod(), operation="UPDATE", old={**gpu_pod(), "spec": {"containers": 1}})
            ).encode(),
            "request.oldObject is not a valid Pod: spec.containers: Invalid value",
        ),
    ],
)
def test_unusable_requests_get_400_with_a_clear_message(webhook: Webhook, body: bytes, message: str) -> None:
    assert webhook.error("/validate/pods", body).startswith(message)


def test_the_mutating_hook_serves_pods_only(webhook: Webhook) -> None:
    status = review(gpu_pod(), operation="UPDATE", old=gpu_pod(), sub_resource="status")
    assert webhook.error("/mutate/pods", status).startswith(
        'unexpected resource "pods/v1 (subresource status)"'
    )
    claim = review(gpu_pod(), resource=RESOURCE_CLAIM)
    assert webhook.error("/validate/resourceclaims", claim).startswith('request.object.kind is "Pod"')


def test_objects_with_wrong_field_types_are_denied_as_invalid(webhook: Webhook) -> None:
    bad = gpu_pod()
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = {"x": 1}
    response = webhook.respond("/mutate/pods", review(bad))
    assert response["allowed"] is False
    assert response["status"]["code"] == 422
    assert response["status"]["message"] == (
        'Pod "p" is invalid: spec.containers[0].resources.requests[cpu]: Invalid value: {"x":1}: '
        "quantities must be strings or numbers, not dict"
    )


def test_other_methods_get_405(webhook: Webhook) -> None:
    for path in HOOKS:
        resp = webhook.client.get(path)
        assert resp.status_code == 405
        assert resp.json() == {"error": "method GET not allowed; admission reviews are POSTed"}


def test_a_body_over_the_limit_is_refused(webhook: Webhook) -> None:
    webhook.install(gpu_cluster(), config=AdmissionConfig(max_body_bytes=4096))
    padded = _good()
    padded["request"]["object"]["metadata"]["annotations"] = {"pad": "x" * 5000}
    message = webhook.error("/mutate/pods", padded)
    assert message.startswith("request body of ")
    assert message.endswith("exceeds the limit of 4096 bytes")
    # Without Content-Length (chunked), the limit holds while streaming.
    data = json.dumps(padded).encode()
    resp = webhook.client.post("/mutate/pods", content=iter([data[:3000], data[3000:]]))
    assert resp.status_code == 400
    assert resp.json() == {"error": "request body exceeds the limit of 4096 bytes"}
    assert webhook.respond("/mutate/pods", _good())["allowed"] is True


def test_the_default_limit_is_3_mib(webhook: Webhook) -> None:
    limit = 3 * 1024 * 1024
    near = _good()
    near["request"]["object"]["metadata"]["annotations"] = {"pad": ""}
    size = len(json.dumps(near).encode())
    near["request"]["object"]["metadata"]["annotations"]["pad"] = "x" * (limit - size)
    body = json.dumps(near).encode()
    assert len(body) == limit
    assert webhook.respond("/validate/pods", near)["allowed"] is True
    over = webhook.post("/validate/pods", body + b" ")
    assert over.status_code == 400
    assert "exceeds the limit of 3145728 bytes" in over.json()["error"]


def test_every_response_echoes_the_request_uid(webhook: Webhook) -> None:
    webhook.install(gpu_cluster())
    for i, path in enumerate(HOOKS):
        obj: Obj = device_class("c") if "deviceclasses" in path else gpu_pod()
        resource = DEVICE_CLASS if "deviceclasses" in path else ("", "v1", "pods")
        if "resourceclaims" in path:
            continue
        body = review(obj, resource=resource, uid=f"uid-{i}-\u00e9")
        assert webhook.respond(path, body)["uid"] == f"uid-{i}-\u00e9"


def test_health(webhook: Webhook) -> None:
    resp = webhook.client.get("/healthz")
    assert (resp.status_code, resp.text) == (200, "ok")


def test_ready_only_once_device_classes_are_synced(webhook: Webhook) -> None:
    webhook.install(cache=ClusterCache())
    resp = webhook.client.get("/readyz")
    assert (resp.status_code, resp.text) == (503, "DeviceClass cache not synced")
    webhook.install([])  # a snapshot is synced from the start
    assert webhook.client.get("/readyz").status_code == 200


def test_readiness_follows_a_real_informer(webhook: Webhook) -> None:
    from e2e.emulator import Emulator

    cache = ClusterCache()
    webhook.install(cache=cache)
    try:
        with Emulator(tokens={"t": ("system:serviceaccount:draxr-system:draxr-webhook", [])}) as em:
            em.create("deviceclasses", device_class("gpu.example.com", "example.com/gpu"))
            em.inject(verbs="list", resource="deviceclasses", error=500)  # no list can succeed yet
            api = em.api_client("t")
            cache.start(KubeClient(api), ["DeviceClass"], min_backoff=0.05, max_backoff=0.1)
            assert webhook.client.get("/readyz").status_code == 503
            em.clear_faults()
            assert cache.wait_synced(["DeviceClass"], timeout=10)
            assert webhook.client.get("/readyz").status_code == 200
            with cache.lock:
                assert cache.state.classes.class_name("example.com/gpu") == "gpu.example.com"
    finally:  # the emulator is gone first: its watch ends and the informer stops at once
        cache.stop()


def test_metrics(webhook: Webhook) -> None:
    webhook.install(gpu_cluster())
    webhook.respond("/validate/pods", review(gpu_pod("p", "0.5")))
    webhook.respond("/mutate/pods", review(gpu_pod()))
    webhook.respond("/mutate/pods", review(gpu_pod(), operation="UPDATE", old=gpu_pod()))
    webhook.error("/validate/pods", b"nope")
    webhook.error("/validate/pods", _with({"subResource": "exec"}))
    resp = webhook.client.get("/metrics")
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain")
    samples = {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in resp.text.splitlines()
        if line and not line.startswith("#")
    }
    key = 'draxr_admission_requests_total{{endpoint="{}",operation="{}",result="{}"}}'
    assert samples[key.format("/validate/pods", "CREATE", "denied")] == 1
    assert samples[key.format("/mutate/pods", "CREATE", "allowed")] == 1
    assert samples[key.format("/mutate/pods", "UPDATE", "allowed")] == 1
    assert samples[key.format("/validate/pods", "unknown", "invalid_request")] == 1
    assert samples[key.format("/validate/pods", "CREATE", "invalid_request")] == 1
    buckets = [
        k.split('le="')[1].rstrip('"}')
        for k in samples
        if k.startswith('draxr_admission_duration_seconds_bucket{endpoint="/mutate/pods"')
    ]
    assert buckets == ["0.005", "0.025", "0.1", "0.5", "1.0", "2.5", "10.0", "25.0", "+Inf"]
    assert samples['draxr_admission_duration_seconds_count{endpoint="/mutate/pods"}'] == 2


def test_metrics_share_a_registry_with_the_worker(webhook: Webhook) -> None:
    from prometheus_client import CollectorRegistry, Counter

    registry = CollectorRegistry()
    Counter("draxr_worker_things", "worker metric", registry=registry).inc()
    cache = ClusterCache.from_objects([])
    app = webhook_app(cache, AdmissionConfig(), registry)
    webhook_app(cache, AdmissionConfig(), registry)  # same registry again: fine
    webhook.server.switch.app = app
    text = webhook.client.get("/metrics").text
    assert "draxr_worker_things_total 1.0" in text
    assert "# TYPE draxr_admission_requests_total counter" in text


def test_the_hooks_serve_beside_extra_routes(webhook: Webhook) -> None:
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    async def extra(_: Any) -> PlainTextResponse:
        return PlainTextResponse("extra")

    app = create_app(ClusterCache.from_objects([]), AdmissionConfig(), None, [Route("/extra", extra)])
    webhook.server.switch.app = app
    assert webhook.client.get("/extra").text == "extra"
    assert webhook.client.post("/mutate/pods", json=_good()).status_code == 200
    assert webhook.client.get("/healthz").status_code == 404  # health is the runtime's, not the hooks'


# --- certificate rotation while serving ------------------------------------------------------


def _serial(resp: httpx.Response) -> int:
    ssl_object = resp.extensions["network_stream"].get_extra_info("ssl_object")
    der = ssl_object.getpeercert(True)
    return x509.load_der_x509_certificate(der).serial_number


@pytest.fixture
def rotating(tmp_path: Path) -> Iterator[tuple[Any, Path]]:
    cert_dir = tmp_path / "certs"
    ensure_certs(cert_dir, SERVICE, NAMESPACE)
    app = webhook_app(ClusterCache.from_objects(gpu_cluster()), AdmissionConfig())
    with serving(app, cert_dir) as srv:
        yield srv, cert_dir


def test_the_serving_certificate_is_reloaded_without_dropping_connections(rotating: tuple[Any, Path]) -> None:
    srv, cert_dir = rotating
    with srv.client() as kept:
        first = kept.post("/mutate/pods", json=_good())
        assert first.status_code == 200
        old_serial = _serial(first)
        ensure_certs(cert_dir, SERVICE, NAMESPACE, extra_dns=["rotated.example.test"])
        new_serial = x509.load_pem_x509_certificate((cert_dir / TLS_CERT).read_bytes()).serial_number
        assert new_serial != old_serial
        assert srv.tls.reload_if_changed() is True
        # The keep-alive connection goes on with the session it negotiated...
        again = kept.post("/mutate/pods", json=_good())
        assert again.status_code == 200
        assert _serial(again) == old_serial
        assert again.extensions["network_stream"] is first.extensions["network_stream"]
    # ... and new connections are served the new certificate, still trusted through the same CA.
    with srv.client() as fresh:
        resp = fresh.post("/mutate/pods", json=_good())
        assert resp.status_code == 200
        assert _serial(resp) == new_serial


def _review_with(extra: Any) -> bytes:
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "x": extra}).encode()


def _lists(n: int) -> Any:
    value: Any = 0
    for _ in range(n):
        value = [value]
    return value


def test_nesting_is_limited_to_100_levels() -> None:
    from webhook.admission.review import MAX_DEPTH, BadRequest, decode_review

    assert MAX_DEPTH == 100
    assert decode_review(_review_with(_lists(99)))["x"] == _lists(99)  # 1 + 99 containers
    with pytest.raises(BadRequest, match=r"^request body nests deeper than 100 levels$"):
        decode_review(_review_with(_lists(100)))


def test_an_app_without_a_registry_makes_its_own(rotating: tuple[Any, Path]) -> None:
    srv, _ = rotating
    with srv.client() as client:
        assert client.post("/mutate/pods", json=_good()).status_code == 200
        text = client.get("/metrics").text
    assert (
        'draxr_admission_requests_total{endpoint="/mutate/pods",operation="CREATE",result="allowed"} 1.0'
        in text
    )
