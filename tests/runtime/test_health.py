"""``webhook.runtime.health``: what every ``draxr serve`` exports on ``/metrics`` whatever it runs
(build info, the process's own metrics, the caches' sizes), read over HTTP from a worker-only process
against the API emulator; and a webhook that is not ready (caches not synced, certificate not valid)
says why on ``/readyz`` and answers every hook HTTP 503, never a verdict, served by real uvicorn."""

from __future__ import annotations

import contextlib
import platform
import socket
import threading
from collections.abc import Iterator

import httpx
import pytest
import uvicorn
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette

from e2e.emulator import Emulator
from tests.worker.harness import Cluster, device_class, gpu_slice, node
from webhook.admission.config import AdmissionConfig
from webhook.core.cel import DEFAULT_ENGINE
from webhook.kube.cache import ClusterCache
from webhook.kube.client import KubeClient
from webhook.runtime.apps import WEBHOOK_READY_KINDS, webhook_app
from webhook.runtime.health import Readiness, version
from webhook.runtime.serve import Process


@pytest.fixture
def worker(kube: Cluster) -> Iterator[tuple[Process, str]]:
    kube.apply(node("n1"), node("n2"), device_class(), gpu_slice("n1", 4))
    proc = kube.worker()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    proc.serve_in_thread(sock)
    try:
        yield proc, f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        proc.stop()
        sock.close()


def _samples(base: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    text = httpx.get(f"{base}/metrics", timeout=10).text
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def test_build_info_names_the_version_python_components_and_cel_engine(worker: tuple[Process, str]) -> None:
    _, base = worker
    info = _samples(base)["draxr_build_info"]
    assert info == [
        (
            {
                "version": version(),
                "python": platform.python_version(),
                "components": "worker",
                "cel_engine": DEFAULT_ENGINE,
            },
            1.0,
        )
    ]
    assert version() not in ("", "unknown")  # the package is installed in tests


def test_process_metrics_are_on_draxrs_registry(worker: tuple[Process, str]) -> None:
    _, base = worker
    samples = _samples(base)
    assert samples["process_resident_memory_bytes"][0][1] > 10 * 2**20
    assert samples["process_cpu_seconds_total"][0][1] > 0
    assert samples["process_open_fds"][0][1] > 0
    assert "python_info" in samples
    assert "python_gc_objects_collected_total" in samples


def test_cache_sizes_follow_the_informers(kube: Cluster, worker: tuple[Process, str]) -> None:
    proc, base = worker
    assert proc.cache.wait_synced(proc.kinds(), 10)

    def counts() -> dict[str, float]:
        return {labels["kind"]: value for labels, value in _samples(base)["draxr_cache_objects"]}

    kube.em.wait_for(lambda: counts().get("Node") == 2, 10, "two nodes cached")
    assert counts()["DeviceClass"] == 1
    assert counts()["ResourceSlice"] == 1
    assert counts()["Pod"] == 0
    kube.apply(node("n3"))
    kube.em.wait_for(lambda: counts().get("Node") == 3, 10, "the new node counted")


TIMEOUT = 10.0


@contextlib.contextmanager
def serving(app: Starlette) -> Iterator[httpx.Client]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=TIMEOUT) as http:
            yield http
    finally:
        server.should_exit = True
        thread.join(TIMEOUT)
        sock.close()


def review(uid: str) -> dict[str, object]:
    gpu = {"example.com/gpu": "1"}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": gpu, "limits": gpu}}]},
    }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "dev"},
            "object": pod,
        },
    }


@pytest.fixture
def em() -> Iterator[Emulator]:
    with Emulator(tokens={"admin": ("admin", ["system:masters"])}) as emulator:
        yield emulator


def test_a_webhook_that_is_not_ready_never_answers_a_review(em: Emulator) -> None:
    cache = ClusterCache()
    certificate: list[str | None] = ["serving certificate serial 1f expired at 2030-01-01T00:00:00Z"]
    readiness = Readiness(
        cache,
        WEBHOOK_READY_KINDS,
        certificate=lambda: certificate[0],
        details=[lambda: ["mode: test"]],
    )
    app = webhook_app(cache, AdmissionConfig(), readiness=readiness)
    try:
        with serving(app) as http:
            ready = http.get("/readyz")
            assert ready.status_code == 503
            assert ready.text.splitlines() == [
                "DeviceClass cache not synced",
                certificate[0],
                "mode: test",
            ]
            for path in ("/mutate/pods", "/validate/pods", "/validate/deviceclasses"):
                answer = http.post(path, json=review("u-1"))
                assert answer.status_code == 503, path
                assert answer.headers["retry-after"] == "1"
                error = answer.json()["error"]
                assert error.startswith("draxr webhook not ready: DeviceClass cache not synced; ")
                assert "response" not in answer.json()
            assert http.get("/healthz").text == "ok"  # alive all along: no restart loop
            assert http.get("/metrics").status_code == 200

            # The caches sync, the certificate is still bad: still 503, for that reason only.
            cache.start(KubeClient(em.api_client("admin")), ["DeviceClass"])
            assert cache.wait_synced(["DeviceClass"], TIMEOUT)
            answer = http.post("/mutate/pods", json=review("u-2"))
            assert answer.status_code == 503
            assert answer.json()["error"] == f"draxr webhook not ready: {certificate[0]}"

            # A valid certificate: ready, and the hooks answer with a review.
            certificate[0] = None
            ready = http.get("/readyz")
            assert (ready.status_code, ready.text.splitlines()) == (200, ["ok", "mode: test"])
            answer = http.post("/mutate/pods", json=review("u-3"))
            assert answer.status_code == 200
            assert answer.json()["response"]["uid"] == "u-3"
    finally:
        cache.stop()


def test_without_a_readiness_the_hooks_are_not_guarded(em: Emulator) -> None:
    """The readiness check of ``draxr serve`` is opt-in: the plain app (tests, the demo's snapshot)
    keeps answering, and its ``/readyz`` still reports the caches."""
    cache = ClusterCache()
    app = webhook_app(cache, AdmissionConfig())
    with serving(app) as http:
        ready = http.get("/readyz")
        assert ready.status_code == 503
        assert ready.text.splitlines() == ["DeviceClass cache not synced"]
        assert http.post("/validate/pods", json=review("u-1")).status_code != 503
