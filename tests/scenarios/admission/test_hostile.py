"""Huge, deep and many-error AdmissionReviews against the real server over TLS.

Every answer comes within the apiserver's webhook timeout (draxr's configurations give it 3 s),
none is a 5xx, answers stay small, and the process (the server runs in it) does not grow without
bound. Large reviews are answered off the event loop, a bounded number at a time.
"""

from __future__ import annotations

import json
import resource
import socket
import ssl
import threading
import time

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.admission.builders import (
    GPU,
    WORKER,
    container,
    gpu_cluster,
    gpu_pod,
    mapping,
    pod,
    review,
    with_mapping,
)
from tests.admission.conftest import Webhook
from webhook.admission import AdmissionConfig
from webhook.admission.app import ReviewThreads
from webhook.admission.config import MAX_BODY_BYTES
from webhook.core.api.fielderrors import MAX_STATUS_ERRORS
from webhook.core.api.objects import Obj

# Latency budgets measured on the wall clock: run alone, not beside the parallel suite (Makefile).
pytestmark = pytest.mark.timed

WEBHOOK_TIMEOUT = 3.0  # timeoutSeconds of draxr's webhook configurations
#: The test process hosts the server; a few dozen 3 MiB requests must not grow it by more.
RSS_GROWTH_LIMIT_MB = 400


def _max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


# --- shapes ----------------------------------------------------------------------------------------


def _many_containers(n: int, quantity: str) -> Obj:
    half = {GPU: quantity}
    cs = [{"name": f"c{i}", "image": "x", "resources": {"requests": half, "limits": half}} for i in range(n)]
    return review(pod("p", cs))


def _many_mappings(n: int) -> Obj:
    old = gpu_pod("p", 1)
    new = with_mapping(old, mapping("p-extended-resources-abcde"))
    new["status"]["extendedResourceClaimStatus"]["requestMappings"] = [
        {"containerName": f"c{i}", "resourceName": GPU, "requestName": "r"} for i in range(n)
    ]
    return review(new, operation="UPDATE", old=old, sub_resource="status", user=WORKER)


DEEP = "@deep@"


def _deep(depth: int) -> Obj:
    """A pod whose affinity nests ``depth`` levels; the JSON text is spliced in (neither deepcopy
    nor json.dumps would go that deep)."""
    p = gpu_pod("p", 1)
    p["spec"]["affinity"] = DEEP
    return review(p)


def _nested_json(depth: int) -> str:
    opens = "".join("[" if i % 2 else '{"k":' for i in reversed(range(depth)))
    closes = "".join("]" if i % 2 else "}" for i in range(depth))
    return opens + '"leaf"' + closes


def _many_names(n: int) -> Obj:
    return review(pod("p", [container("c", {f"example.com/r{i}": "1" for i in range(n)})]))


def _long_strings(size: int) -> Obj:
    p = gpu_pod("p", "0.5")
    p["spec"]["containers"][0]["name"] = "n" * size
    p["metadata"]["annotations"] = {"pad": "x" * size}
    return review(p)


SHAPES = {
    "containers": lambda n: _many_containers(n, "0.5"),
    "mappings": _many_mappings,
    "deep": _deep,
    "names": _many_names,
    "long": _long_strings,
}
SIZES = {
    "containers": st.integers(1, 24_000),
    "mappings": st.integers(1, 34_000),
    "deep": st.integers(50, 3_000),
    "names": st.integers(1, 30_000),
    "long": st.integers(1, 1_500_000),
}
ENDPOINT = {"mappings": "/validate/pods", "names": "/mutate/pods"}


@st.composite
def hostile(draw: st.DrawFn) -> tuple[str, str, bytes]:
    shape = draw(st.sampled_from(sorted(SHAPES)))
    size = draw(SIZES[shape])
    path = ENDPOINT.get(shape) or draw(st.sampled_from(["/validate/pods", "/mutate/pods"]))
    text = json.dumps(SHAPES[shape](size))
    if shape == "deep":
        text = text.replace(json.dumps(DEEP), _nested_json(size))
    return shape, path, text.encode()


@pytest.fixture
def hooked(webhook: Webhook) -> Webhook:
    webhook.install(gpu_cluster())
    return webhook


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=hostile())
def test_hostile_reviews_are_answered_in_time_and_small(
    hooked: Webhook, case: tuple[str, str, bytes]
) -> None:
    shape, path, body = case
    before = _max_rss_mb()
    started = time.monotonic()
    resp = hooked.post(path, body)
    elapsed = time.monotonic() - started
    assert resp.status_code < 500
    assert elapsed < WEBHOOK_TIMEOUT, f"{shape} ({len(body)} bytes) took {elapsed:.2f}s"
    if len(body) > MAX_BODY_BYTES:
        assert resp.status_code == 400
        assert "exceeds the limit of 3145728 bytes" in resp.json()["error"]
        return
    assert resp.status_code in (200, 400), resp.text[:300]
    if resp.status_code == 200:
        answer = resp.json()["response"]
        causes = (answer.get("status") or {}).get("details", {}).get("causes", [])
        assert len(causes) <= MAX_STATUS_ERRORS + 1
        assert sum(map(len, answer.get("warnings", []))) <= 4096 + 256
    # An answer never dwarfs its question: bounded lists, bad values echoed at most a few times.
    assert len(resp.content) <= 4 * len(body) + 64 * 1024
    assert _max_rss_mb() - before < RSS_GROWTH_LIMIT_MB
    assert hooked.respond("/validate/pods", review(gpu_pod("ok", 1)))["allowed"] is True


def test_a_process_answering_many_huge_reviews_stays_bounded(hooked: Webhook) -> None:
    # The shapes that cost seconds and answers of 11-13 MB before error lists were capped.
    bodies = [
        ("/validate/pods", json.dumps(_many_containers(19_000, "0.5")).encode()),
        ("/validate/pods", json.dumps(_many_mappings(28_000)).encode()),
    ]
    before = _max_rss_mb()
    for _ in range(3):
        for path, body in bodies:
            started = time.monotonic()
            resp = hooked.post(path, body)
            assert time.monotonic() - started < WEBHOOK_TIMEOUT
            assert resp.status_code == 200
            status = resp.json()["response"]["status"]
            assert status["details"]["causes"][-1]["reason"] == "FieldValueTooMany"
            assert status["message"].endswith("more errors not shown]")
            assert len(resp.content) < 100_000
    assert _max_rss_mb() - before < RSS_GROWTH_LIMIT_MB


# --- large reviews: off the loop, a bounded number at a time ------------------------------------


class _GatedLock:
    """Stands in for the cache lock: the first thread to take it reports, then waits for the gate."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.gate = threading.Event()
        self._lock = threading.RLock()

    def __enter__(self) -> _GatedLock:
        self._lock.acquire()
        self.entered.set()
        assert self.gate.wait(10), "the test never opened the gate"
        return self

    def __exit__(self, *_: object) -> None:
        self._lock.release()


def _large_pod(size: int = 200_000) -> bytes:
    p = gpu_pod("big", 1)
    p["metadata"]["annotations"] = {"pad": "x" * size}
    return json.dumps(review(p)).encode()


def test_a_large_review_is_answered_off_the_event_loop(hooked: Webhook) -> None:
    # The large review's hook blocks inside the cache lock; the loop must still answer probes.
    # On the loop (as before), /healthz would wait for the lock: the gate would never open.
    lock = _GatedLock()
    hooked.cache.lock = lock  # type: ignore[assignment]
    result: dict[str, httpx.Response] = {}

    def send() -> None:
        with hooked.server.client() as client:
            result["large"] = client.post("/validate/pods", content=_large_pod())

    sender = threading.Thread(target=send)
    sender.start()
    try:
        assert lock.entered.wait(10), "the large review never reached its hook"
        health = hooked.client.get("/healthz", timeout=WEBHOOK_TIMEOUT)
        assert (health.status_code, health.text) == (200, "ok")
    finally:
        lock.gate.set()
        sender.join(10)
    assert result["large"].status_code == 200
    assert result["large"].json()["response"]["allowed"] is True


def _raw_tls(hooked: Webhook) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", hooked.server.port), timeout=10)
    return hooked.server.client_context().wrap_socket(raw, server_hostname="localhost")


def test_large_reviews_beyond_the_limit_are_refused_unread(hooked: Webhook) -> None:
    hooked.install(gpu_cluster(), config=AdmissionConfig(max_large_reviews=1))
    threads: ReviewThreads = hooked.server.switch.app.state.review_threads  # type: ignore[union-attr]
    body = _large_pod()
    head = (
        f"POST /validate/pods HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    with _raw_tls(hooked) as first:
        first.sendall(head + body[:1000])  # announces a large body: takes the only slot, then stalls
        deadline = time.monotonic() + 10
        while threads.in_flight == 0:  # the slot is taken on the server's loop
            assert time.monotonic() < deadline
            first.settimeout(0.01)
            with pytest.raises(TimeoutError):
                first.recv(1)
        refused = hooked.post("/validate/pods", body)
        assert refused.status_code == 429
        assert refused.json() == {
            "error": "too many large admission reviews in flight (at most 1); the request was not read"
        }
        labels = {"endpoint": "/validate/pods", "operation": "unknown", "result": "too_many_requests"}
        assert hooked.registry.get_sample_value("draxr_admission_requests_total", labels) == 1
        assert (
            hooked.respond("/validate/pods", review(gpu_pod("small", 1)))["allowed"] is True
        )  # small: inline
        first.sendall(body[1000:])
        first.settimeout(10)
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += first.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200")
    assert threads.in_flight == 0
    assert hooked.post("/validate/pods", body).status_code == 200  # the slot is free again


def test_the_body_limit_is_the_apiservers() -> None:
    # MaxRequestBodyBytes: int64(3 * 1024 * 1024) in NewConfig,
    # staging/src/k8s.io/apiserver/pkg/server/config.go: no object the apiserver stores is larger.
    assert MAX_BODY_BYTES == 3 * 1024 * 1024
    assert AdmissionConfig().max_body_bytes == MAX_BODY_BYTES
