"""``runtime.health``: what every ``draxr serve`` exports on ``/metrics`` whatever it runs (build
info, the process's own metrics, the caches' sizes), read over HTTP from a worker-only process
against the API emulator."""

from __future__ import annotations

import platform
import socket
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.worker.harness import Cluster, device_class, gpu_slice, node
from webhook.core.cel import DEFAULT_ENGINE
from webhook.runtime.health import version
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
