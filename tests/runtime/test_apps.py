"""``draxr serve --no-webhook``: health, readiness and metrics over plain HTTP."""

from __future__ import annotations

import socket

import httpx

from tests.worker.harness import Cluster, device_class, gpu_slice, node


def test_worker_only_process_serves_health_readiness_and_metrics(kube: Cluster) -> None:
    kube.apply(node("n"), device_class(), gpu_slice("n", 2))
    proc = kube.worker()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    proc.serve_in_thread(sock)
    try:
        kube.pod("p")
        kube.wait_bound(1)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            assert http.get("/healthz").text == "ok"
            assert http.get("/readyz").status_code == 200
            metrics = http.get("/metrics").text
        assert 'draxr_scheduling_attempts_total{result="scheduled"} 1.0' in metrics
        assert 'draxr_devices{class="gpu.example.com",node="n",state="allocated"} 1.0' in metrics
        assert 'draxr_queue_pods{queue="active"} 0.0' in metrics
        assert 'draxr_resourceclaim_creates_total{status="success"} 1.0' in metrics
    finally:
        proc.stop()  # the server first: it owns the listening socket until it exits
        sock.close()
