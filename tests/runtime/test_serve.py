"""``draxr serve --snapshot ... --no-worker``: the webhook on manifest files, over TLS."""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import json
import logging
import os
import queue
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from e2e.emulator.sandbox import Sandbox
from tests.worker.harness import WORKER_USER, Cluster, device_class, gpu_slice, node, poll
from tests.worker.harness import cluster as harness_cluster
from webhook.identity.pki import issue_ca, issue_serving, serving_names
from webhook.install.certs import ensure_certs
from webhook.runtime import logs
from webhook.runtime.health import version
from webhook.runtime.serve import Process, ServeOptions

ROOT = Path(__file__).resolve().parents[2]
#: The KEP-5004 example (what ``make demo`` runs).
EXAMPLES = ROOT / "examples" / "kep-5004"


def _snapshot_webhook(cert_dir: Path) -> Process:
    """``draxr serve --snapshot examples --no-worker`` with the pair in ``cert_dir``."""
    return Process(ServeOptions(snapshot=[str(EXAMPLES)], worker=False, cert_dir=cert_dir, host="127.0.0.1"))


@contextlib.contextmanager
def _serving(proc: Process) -> Iterator[int]:
    """``proc`` serving on an ephemeral port of 127.0.0.1 (the port), stopped on the way out."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        proc.serve_in_thread(sock)
        yield sock.getsockname()[1]
    finally:
        proc.stop()
        sock.close()


def test_snapshot_webhook_is_ready_and_answers_over_tls(tmp_path: Path) -> None:
    ensure_certs(tmp_path, "draxr-webhook", "draxr-system")
    with _serving(_snapshot_webhook(tmp_path)) as port:
        ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
        with httpx.Client(base_url=f"https://localhost:{port}", verify=ctx, timeout=10) as http:
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


def test_snapshot_with_the_worker_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="--no-worker"):
        Process(ServeOptions(snapshot=[str(EXAMPLES)], worker=True))


# -- the line at start -------------------------------------------------------------------------------


def _started(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "draxr.serve" and r.getMessage() == "draxr started"]


def test_a_worker_says_once_at_start_what_it_loaded_and_where_it_listens(
    kube: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="draxr")
    kube.apply(node("n1"), device_class(), device_class("other.example.com", ext=None), gpu_slice("n1", 2))
    proc = kube.worker()
    with _serving(proc) as port:
        kube.em.wait_for(lambda: _started(caplog), 15, "the start line")
        proc.announce()  # a second call says nothing more
        [line] = _started(caplog)
        fields = logs.context(line)
        assert fields == {
            "version": version(),
            "mode": "auto",
            "classes": 2,
            "mapped": {"example.com/gpu": "gpu.example.com"},
            "webhook": "off",
            "worker": f"http://127.0.0.1:{port}",
            "synced": True,
            "leader_election": "off",
        }


def test_webhook_and_worker_in_one_process_name_the_mode_and_one_address(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="draxr")
    with Sandbox() as sb:
        sb.em.wait_for(lambda: _started(caplog), 15, "the start line")
        fields = logs.context(_started(caplog)[0])
        address = f"https://127.0.0.1:{sb.port}"
        assert (fields["webhook"], fields["worker"]) == (address, address)
        assert sb.webhook.mode is not None
        assert fields["mode"] == sb.webhook.mode.current() == "native"
        assert fields["leader_election"] == "draxr-system/draxr-worker"


def test_draxr_serve_logs_json_lines_with_log_format_json(kube: Cluster) -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "webhook", "serve", "--no-webhook", "--no-leader-elect"]
    argv += ["--kubeconfig", str(kube.kubeconfig), "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--log-format", "json"]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in proc.stderr or []:
            lines.put(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        seen: list[dict[str, object]] = []
        while not any(s.get("msg") == "draxr started" for s in seen):
            seen.append(json.loads(lines.get(timeout=30)))  # every line is one JSON object
        started = next(s for s in seen if s.get("msg") == "draxr started")
        assert started["logger"] == "draxr.serve"
        assert started["worker"] == f"http://127.0.0.1:{port}"
        assert started["webhook"] == "off"
        assert started["version"] == version()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


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
    with _serving(_snapshot_webhook(tmp_path)) as port:
        # The client looks past the expiry to see what the server answers.
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        with httpx.Client(base_url=f"https://localhost:{port}", verify=ctx, timeout=10) as http:
            ready = http.get("/readyz")
            answer = http.post("/validate/pods", json={"apiVersion": "admission.k8s.io/v1", "request": {}})
    expired = f"serving certificate serial {leaf.cert.serial_number:x} expired at "
    assert ready.status_code == 503
    assert ready.text.startswith(expired)
    assert answer.status_code == 503
    assert answer.json() == {"error": f"draxr webhook not ready: {ready.text.splitlines()[0]}"}


def test_every_replica_reports_the_mode_of_the_workers_leaders_probe(kube: Cluster) -> None:
    """Issue 23: the worker's leader probes the apiserver's gate and publishes it; a webhook replica
    reads it, so both say the same (kube/sharedgate.py)."""
    worker = kube.worker()  # the only worker: it leads

    def published() -> list[str]:
        return [c["metadata"]["name"] for c in kube.em.list("configmaps", "draxr-system")]

    kube.em.wait_for(
        lambda: "draxr-apiserver-gate" in published(),
        10,
        "the published answer",
    )
    webhook = Process(ServeOptions(worker=False, kubeconfig=str(kube.kubeconfig), identity="webhook-0"))
    try:
        webhook.start_background()
        assert webhook.gate.source.startswith("shared by w1, probed ")
        assert webhook.gate.enabled is worker.gate.enabled is True
        assert webhook.mode is not None
        assert webhook.mode.current() == "native"
    finally:
        webhook.stop()


# -- never schedule blind ---------------------------------------------------------------------------

WORKER_WRITES = ("create", "update", "patch", "delete")
#: What a failed claim list says (``/readyz``).
CLAIMS_FAIL = "list /apis/resource.k8s.io/v1/resourceclaims: 503 InjectedFault: etcd is slow"


def _worker_writes(kube: Cluster, identity_user: str = WORKER_USER) -> list[str]:
    return [
        f"{r.verb} {r.resource}"
        for r in kube.em.requests()
        if r.user == identity_user and r.verb in WORKER_WRITES
    ]


def test_a_worker_whose_claim_lists_fail_does_not_schedule_until_they_succeed(kube: Cluster) -> None:
    """kube-scheduler waits for every handler to sync. A worker that scheduled with no claims cached
    would see the device of a running pod as free and give it to another."""
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    first = kube.worker("first")
    kube.pod("holder")
    kube.wait_bound(1)
    first.kill()
    failing = kube.em.inject(verbs="list", resource="resourceclaims", error=503, message="etcd is slow")
    kube.pod("waiter")
    kube.worker("second", wait_started=False)
    poll(lambda: failing.hits >= 3, 90, "the claim list failed a few times")
    kube.em.faults.remove(failing)
    kube.em.wait_for(lambda: kube.condition("waiter") is not None or "waiter" in kube.bound(), 30)
    assert "waiter" not in kube.bound()
    assert sorted(kube.allocated()) == [("gpu.example.com", "n-gpu", "gpu-0")]  # one claim holds it
    assert "cannot allocate all claims" in (kube.condition("waiter") or {}).get("message", "")


def test_what_the_initial_lists_built_is_frozen_before_the_worker_starts(kube: Cluster) -> None:
    """Full collections walk every object the collector tracks: the cluster state the first lists
    build (150 MiB at 5,000 nodes) is left out of them once the caches synced. The freeze at the
    process's start came before those lists, so it froze none of it."""
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    process = kube.worker("w")
    info = process.cache.state.nodes.by_name["n"]
    assert not any(o is info for o in gc.get_objects())  # frozen objects are in no generation


def test_readyz_names_the_cache_that_has_not_synced_and_why_and_nothing_is_written(kube: Cluster) -> None:
    """No scheduling and no Lease campaign until every kind the worker reads has synced; the worker
    keeps waiting (its informers retry with backoff), and /readyz says what it waits for."""
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    kube.pod("waiter")
    failing = kube.em.inject(verbs="list", resource="resourceclaims", error=503, message="etcd is slow")
    kube.em.reset_requests()
    proc = kube.worker("w", leader_elect=True, lease=(1.5, 1.0, 0.2), wait_started=False)
    with _serving(proc) as port:
        poll(lambda: failing.hits >= 6, 30, "the claim list failed a few times")
        ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10)
        assert (ready.status_code, ready.text.splitlines()) == (
            503,
            [f"ResourceClaim cache not synced: {CLAIMS_FAIL}"],
        )
        assert _worker_writes(kube) == []
        assert not [r for r in kube.em.requests() if r.resource == "leases"]  # no campaign
        kube.em.faults.remove(failing)
        kube.em.wait_for(lambda: kube.bound() == {"waiter": "n"}, 30, "scheduled once synced")
        assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10).text == "ok"
        assert kube.em.find("leases", "draxr-worker", "draxr-system") is not None


def test_beside_a_ready_webhook_readyz_says_what_the_worker_waits_for() -> None:
    """The webhook's readiness is its own (it needs only DeviceClasses); its /readyz adds what the
    worker of the same process waits for, until it runs."""
    sandbox = Sandbox()
    failing = sandbox.em.inject(verbs="list", resource="resourceclaims", error=503, message="etcd is slow")
    with sandbox:
        ctx = ssl.create_default_context(cafile=str(sandbox.certs / "ca.crt"))
        with httpx.Client(base_url=f"https://localhost:{sandbox.port}", verify=ctx, timeout=10) as http:
            waits = f"worker not started: ResourceClaim cache not synced: {CLAIMS_FAIL}"

            def ready_lines() -> list[str]:
                ready = http.get("/readyz")
                return ready.text.splitlines() if ready.status_code == 200 else []

            poll(lambda: waits in ready_lines(), 30, "the webhook ready, its worker waiting")
            assert ready_lines()[0] == "ok"
            sandbox.em.faults.remove(failing)
            assert sandbox.webhook.worker_started.wait(30)
            assert "worker not started" not in http.get("/readyz").text


def test_the_lease_never_waits_behind_the_workers_writes(kube: Cluster) -> None:
    """kube-scheduler gives leader election a client of its own (``makeLeaderElectionConfig``):
    with the worker's write budget spent (a burst of bindings at a low --qps), a renewal must still
    leave at once, or the lease lapses and every binding in flight fails NotLeader."""
    process = Process(ServeOptions(webhook=False, kubeconfig=str(kube.kubeconfig), qps=1.0, burst=1))
    assert process.leader is not None
    assert process.client is not None
    process.client.writes.reserve()  # the worker spends its one token
    assert process.client.writes.reserve() > 0  # and its next write would wait
    assert process.leader.client.writes.reserve() == 0  # the renewal does not
    # Nor behind its connections: a burst of writes holding every pooled connection would hold the
    # renewal back just the same (kube-scheduler's leader election has a clientset of its own).
    assert process.client._transport is not None
    assert process.leader.client._transport is not None
    assert process.leader.client._transport is not process.client._transport


def test_a_worker_that_leads_after_it_started_follows_the_release_it_then_reads(tmp_path: Path) -> None:
    """A leader-elected worker reads the apiserver's version only once it leads (its first probe),
    after its worker started: the release's DRADeviceBindingConditions (on from 1.36) must follow
    that read, or a 1.37 cluster's devices with binding conditions are never allocated."""
    with harness_cluster(tmp_path, release="1.37") as kube:
        proc = kube.worker("w", leader_elect=True, lease=(1.5, 1.0, 0.2))
        assert proc.gate is not None
        poll(
            lambda: proc.gate is not None and proc.gate.version.startswith("v1.37."), 30, "the leader's probe"
        )
        poll(lambda: proc.cache.state.devices.binding_conditions, 10, "binding conditions on")


def test_selectors_compile_in_the_environment_of_the_release_the_worker_reads(tmp_path: Path) -> None:
    """Before the first probe the newest release's environment stands in; once the apiserver says
    1.35, selectors compile as 1.35's kube-scheduler compiles them (no ``includes``)."""
    with harness_cluster(tmp_path, release="1.35") as kube:
        proc = kube.worker("w", leader_elect=True, lease=(1.5, 1.0, 0.2))
        assert proc.gate is not None
        poll(
            lambda: proc.gate is not None and proc.gate.version.startswith("v1.35."), 30, "the leader's probe"
        )
        poll(lambda: proc.cache.state.cel.env.release == (1, 35), 10, "the 1.35 environment")
        assert proc.cache.state.cel.env.stored
