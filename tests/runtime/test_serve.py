"""``draxr serve --snapshot ... --no-worker``: the webhook on manifest files, over TLS."""

from __future__ import annotations

import datetime as dt
import socket
import ssl
from pathlib import Path

import httpx
import pytest

from webhook.commands.demo import examples_dir
from webhook.install.certs import ensure_certs, issue_ca, issue_serving, serving_names
from webhook.runtime.serve import Process, ServeOptions


def test_snapshot_webhook_is_ready_and_answers_over_tls(tmp_path: Path) -> None:
    ensure_certs(tmp_path, "draxr-webhook", "draxr-system")
    proc = Process(
        ServeOptions(snapshot=[str(examples_dir())], worker=False, cert_dir=tmp_path, host="127.0.0.1")
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    proc.serve_in_thread(sock)
    try:
        ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
        with httpx.Client(
            base_url=f"https://localhost:{sock.getsockname()[1]}", verify=ctx, timeout=10
        ) as http:
            assert http.get("/readyz").status_code == 200  # a snapshot is synced from the start
            review = {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {
                    "uid": "u-1",
                    "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "resource": {"group": "", "version": "v1", "resource": "pods"},
                    "namespace": "default",
                    "operation": "CREATE",
                    "userInfo": {"username": "dev"},
                    "object": {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {"name": "p", "namespace": "default"},
                        "spec": {
                            "containers": [
                                {
                                    "name": "c",
                                    "resources": {
                                        "requests": {"example.com/gpu": "1"},
                                        "limits": {"example.com/gpu": "1"},
                                    },
                                }
                            ]
                        },
                    },
                },
            }
            answer = http.post("/mutate/pods", json=review).json()["response"]
        assert answer["uid"] == "u-1"
        assert answer["allowed"] is True
        assert answer["patchType"] == "JSONPatch"
    finally:
        proc.stop()
        sock.close()


def test_snapshot_with_the_worker_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="--no-worker"):
        Process(ServeOptions(snapshot=[str(examples_dir())], worker=True))


def test_a_webhook_serving_an_expired_certificate_is_not_ready(tmp_path: Path) -> None:
    """`draxr serve` wires its certificate into readiness: past notAfter, /readyz says so and the
    hooks answer 503 (kube-apiserver applies the failurePolicy) instead of a review."""
    past = dt.datetime.now(dt.UTC) - dt.timedelta(days=10)
    ca = issue_ca(validity=dt.timedelta(days=30), now=past)
    leaf = issue_serving(
        ca, serving_names("draxr-webhook", "draxr-system"), validity=dt.timedelta(days=1), now=past
    )
    (tmp_path / "ca.crt").write_bytes(ca.cert_pem)
    (tmp_path / "tls.crt").write_bytes(leaf.cert_pem)
    (tmp_path / "tls.key").write_bytes(leaf.key_pem)
    proc = Process(
        ServeOptions(snapshot=[str(examples_dir())], worker=False, cert_dir=tmp_path, host="127.0.0.1")
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    proc.serve_in_thread(sock)
    try:
        # The client looks past the expiry to see what the server answers.
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        with httpx.Client(
            base_url=f"https://localhost:{sock.getsockname()[1]}", verify=ctx, timeout=10
        ) as http:
            ready = http.get("/readyz")
            answer = http.post("/validate/pods", json={"apiVersion": "admission.k8s.io/v1", "request": {}})
    finally:
        proc.stop()
        sock.close()
    expired = f"serving certificate serial {leaf.cert.serial_number:x} expired at "
    assert ready.status_code == 503
    assert ready.text.startswith(expired)
    assert answer.status_code == 503
    assert answer.json() == {"error": f"draxr webhook not ready: {ready.text.splitlines()[0]}"}
