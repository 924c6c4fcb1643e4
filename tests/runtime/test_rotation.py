"""Self-managed certificates renewed by the worker's leader (runtime/rotation.py), through the API
emulator with the real client: one pass at chosen moments (an injected clock), then the whole thing
live: certificates that expire in seconds, renewed under a stream of admission reviews that the
emulator's apiserver sends over real TLS, with not one review lost."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from prometheus_client import generate_latest

from e2e.emulator import Emulator
from e2e.emulator.sandbox import Sandbox
from webhook.identity.names import CA_SECRET, DEFAULT_NAMESPACE, TLS_SECRET, WEBHOOK
from webhook.identity.pki import (
    Issued,
    issue_ca,
    issue_serving,
    names_of,
    parse_bundle,
    pem_bundle,
    serving_names,
    signed_by,
)
from webhook.install.webhooks import webhook_configurations
from webhook.kube.client import KubeClient, NotLeader
from webhook.kube.resources import PODS
from webhook.runtime.rotation import CertRotator, RotationConfig, RotationError
from webhook.runtime.serve import Process, ServeOptions

from .secret_volume import SecretVolume

NS = DEFAULT_NAMESPACE
T0 = dt.datetime(2031, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)
CONFIG = RotationConfig(NS, validity=90 * DAY, renew_before=30 * DAY, ca_validity=3650 * DAY)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def seed(em: Emulator, ca: Issued, leaf: Issued, *, bundle: list[x509.Certificate] | None = None) -> None:
    """The objects `draxr manifests` installs for self-managed certificates."""
    trusted = pem_bundle(bundle or [ca.cert])
    em.create("namespaces", {"metadata": {"name": NS}})
    em.create(
        "secrets",
        {
            "metadata": {"name": CA_SECRET, "namespace": NS},
            "type": "kubernetes.io/tls",
            "data": {"tls.crt": b64(ca.cert_pem), "tls.key": b64(ca.key_pem)},
        },
        NS,
    )
    em.create(
        "secrets",
        {
            "metadata": {"name": TLS_SECRET, "namespace": NS},
            "type": "kubernetes.io/tls",
            "data": {"ca.crt": b64(trusted), "tls.crt": b64(leaf.cert_pem), "tls.key": b64(leaf.key_pem)},
        },
        NS,
    )
    for cfg in webhook_configurations(NS, b64(trusted)):
        em.create(cfg["kind"].lower() + "s", cfg)


def live(em: Emulator) -> tuple[Issued, Issued, list[x509.Certificate], list[list[x509.Certificate]]]:
    """(CA, serving pair, the TLS Secret's ca.crt, every hook's caBundle) as stored."""
    ca = em.get("secrets", CA_SECRET, NS)["data"]
    tls = em.get("secrets", TLS_SECRET, NS)["data"]
    bundles = [
        parse_bundle(base64.b64decode(h["clientConfig"]["caBundle"]))
        for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
        for h in em.get(kind, "draxr")["webhooks"]
    ]
    return (
        Issued.parse(base64.b64decode(ca["tls.crt"]), base64.b64decode(ca["tls.key"])),
        Issued.parse(base64.b64decode(tls["tls.crt"]), base64.b64decode(tls["tls.key"])),
        parse_bundle(base64.b64decode(tls["ca.crt"])),
        bundles,
    )


def events(em: Emulator, reason: str) -> list[dict[str, Any]]:
    return [e for e in em.list("events", NS) if e.get("reason") == reason]


class Clock:
    def __init__(self, now: dt.datetime) -> None:
        self.now = now

    def __call__(self) -> dt.datetime:
        return self.now


@pytest.fixture
def em() -> Iterator[Emulator]:
    with Emulator(tokens={"admin": ("admin", ["system:masters"])}) as emulator:
        yield emulator


@pytest.fixture
def client(em: Emulator) -> KubeClient:
    return KubeClient(em.api_client("admin"))


def installed(em: Emulator, ca_validity: dt.timedelta = 3650 * DAY) -> tuple[Issued, Issued]:
    ca = issue_ca(validity=ca_validity, now=T0)
    names = serving_names(WEBHOOK, NS, extra_ips=["10.9.8.7"])  # --webhook-url's host, say
    leaf = issue_serving(ca, names, validity=90 * DAY, now=T0)
    seed(em, ca, leaf)
    return ca, leaf


def test_nothing_is_written_before_anything_is_due(em: Emulator, client: KubeClient) -> None:
    installed(em)
    clock = Clock(T0 + 10 * DAY)
    rotator = CertRotator(client, CONFIG, clock=clock)
    em.reset_requests()
    outcome = rotator.reconcile()
    assert (outcome.renewed_serving, outcome.renewed_ca, outcome.published_bundle) == (False, False, False)
    assert em.writes() == 0
    # Next: when the serving certificate enters its renewal window (day 60), capped at 10 minutes.
    assert outcome.next_check == CONFIG.max_interval
    clock.now = T0 + 60 * DAY - dt.timedelta(seconds=30)
    assert rotator.reconcile().next_check == pytest.approx(30, abs=1)


def test_a_serving_certificate_is_renewed_under_the_same_ca(em: Emulator, client: KubeClient) -> None:
    ca, leaf = installed(em)
    clock = Clock(T0 + 61 * DAY)
    outcome = CertRotator(client, CONFIG, clock=clock).reconcile()
    assert (outcome.renewed_serving, outcome.renewed_ca, outcome.published_bundle) == (True, False, False)
    live_ca, serving, secret_bundle, bundles = live(em)
    assert live_ca.cert == ca.cert
    assert serving.cert != leaf.cert
    assert signed_by(serving.cert, ca.cert)
    assert serving.cert.not_valid_after_utc == clock.now.replace(microsecond=0) + 90 * DAY
    assert names_of(serving.cert) == names_of(leaf.cert)  # the extra IP is kept
    assert secret_bundle == [ca.cert]
    assert all(b == [ca.cert] for b in bundles)
    (event,) = events(em, "CertificateRenewed")
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Secret",
        "name": TLS_SECRET,
        "namespace": NS,
    }
    assert event["type"] == "Normal"
    assert f"serial {serving.cert.serial_number:x}" in event["message"]
    # Renewed: the next pass is a no-op.
    em.reset_requests()
    assert not CertRotator(client, CONFIG, clock=clock).reconcile().renewed_serving
    assert em.writes() == 0


def test_a_shorter_configured_validity_reissues_at_once(em: Emulator, client: KubeClient) -> None:
    """As cert-manager re-issues on a changed duration: a certificate that outlives what it would
    be issued for now (``--cert-validity 3m`` after a 90-day one) is re-issued on the next pass,
    and the re-issued one is then kept until its own renewal window."""
    installed(em)
    short = dataclasses.replace(
        CONFIG, validity=dt.timedelta(minutes=3), renew_before=dt.timedelta(minutes=2)
    )
    clock = Clock(T0 + DAY)
    outcome = CertRotator(client, short, clock=clock).reconcile()
    assert outcome.renewed_serving
    _, serving, _, _ = live(em)
    assert serving.cert.not_valid_after_utc == clock.now.replace(microsecond=0) + dt.timedelta(minutes=3)
    (event,) = events(em, "CertificateRenewed")
    assert "outlives the configured validity" in event["message"]
    assert outcome.next_check == pytest.approx(60, abs=1)
    em.reset_requests()
    assert not CertRotator(client, short, clock=clock).reconcile().renewed_serving
    assert em.writes() == 0


def test_the_ca_is_renewed_with_both_trusted_and_trust_comes_first(em: Emulator, client: KubeClient) -> None:
    old_ca, leaf = installed(em, ca_validity=150 * DAY)
    clock = Clock(T0 + 31 * DAY)  # the CA within validity + renewal window, the serving pair not
    rotator = CertRotator(client, CONFIG, clock=clock)
    em.reset_requests()
    outcome = rotator.reconcile()
    # The new CA is trusted everywhere first; nothing it signed is served yet.
    assert (outcome.renewed_serving, outcome.renewed_ca, outcome.published_bundle) == (False, True, True)
    assert outcome.next_check == CONFIG.propagation == 60
    new_ca, serving, secret_bundle, bundles = live(em)
    assert new_ca.cert != old_ca.cert
    assert serving.cert == leaf.cert
    assert secret_bundle == [old_ca.cert, new_ca.cert]
    assert all(b == [old_ca.cert, new_ca.cert] for b in bundles)
    writes = [(r.resource, r.name) for r in em.requests() if r.verb in ("update", "patch", "create")]
    assert writes == [
        ("mutatingwebhookconfigurations", "draxr"),
        ("validatingwebhookconfigurations", "draxr"),
        ("secrets", CA_SECRET),
        ("events", ""),
        ("secrets", TLS_SECRET),  # ca.crt only
    ]
    assert events(em, "CARenewed")
    # The next pass, once the configurations had time to reach kube-apiserver: a serving
    # certificate under the new CA.
    clock.now += dt.timedelta(seconds=CONFIG.propagation)
    outcome = rotator.reconcile()
    assert (outcome.renewed_serving, outcome.renewed_ca, outcome.published_bundle) == (True, False, False)
    _, serving, _, _ = live(em)
    assert signed_by(serving.cert, new_ca.cert)
    assert "not signed by the current CA" in events(em, "CertificateRenewed")[0]["message"]
    # Once the old CA has expired it leaves every bundle; the new one stays.
    clock.now = old_ca.cert.not_valid_after_utc + dt.timedelta(seconds=1)
    outcome = rotator.reconcile()
    assert (outcome.renewed_ca, outcome.published_bundle) == (False, True)
    _, _, secret_bundle, bundles = live(em)
    assert secret_bundle == [new_ca.cert]
    assert all(b == [new_ca.cert] for b in bundles)


def test_cert_manager_configurations_are_left_to_cert_manager(em: Emulator, client: KubeClient) -> None:
    installed(em, ca_validity=150 * DAY)
    for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        cfg = em.get(kind, "draxr")
        cfg["metadata"]["annotations"] = {"cert-manager.io/inject-ca-from": f"{NS}/{WEBHOOK}"}
        em.update(kind, cfg)
    clock = Clock(T0 + 31 * DAY)
    em.reset_requests()
    assert CertRotator(client, CONFIG, clock=clock).reconcile().renewed_ca
    touched = {r.resource for r in em.requests() if r.verb == "update"}
    assert touched == {"secrets"}


def test_a_missing_ca_secret_is_reported_once_and_nothing_is_written(
    em: Emulator, client: KubeClient
) -> None:
    installed(em)
    em.delete("secrets", CA_SECRET, NS)
    rotator = CertRotator(client, RotationConfig(NS, retry=0.05), clock=Clock(T0 + 61 * DAY))
    with pytest.raises(RotationError, match=f"Secret {NS}/{CA_SECRET} does not exist"):
        rotator.reconcile()
    rotator.start()
    try:
        rotator.on_leadership(True)
        em.wait_for(lambda: rotator.passes >= 3, 10)  # retried every 0.05 s ...
    finally:
        rotator.stop()
    (warning,) = events(em, "CertificateRenewalFailed")  # ... and said once
    assert warning["type"] == "Warning"
    assert "does not exist" in warning["message"]
    assert events(em, "CertificateRenewed") == []


def test_a_replica_that_is_not_the_leader_writes_nothing(em: Emulator, client: KubeClient) -> None:
    _, leaf = installed(em)
    rotator = CertRotator(client, CONFIG, is_leader=lambda: False, clock=Clock(T0 + 61 * DAY))
    with pytest.raises(RotationError, match="no longer the leader"):
        rotator.reconcile()
    assert live(em)[1].cert == leaf.cert


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"renew_before": 90 * DAY}, "renewal window must be shorter"),
        ({"ca_validity": 100 * DAY}, "a CA must outlive"),
    ],
)
def test_rotation_settings_are_checked(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RotationConfig(NS, **{"validity": 90 * DAY, "renew_before": 30 * DAY, **change})


# --- live: seconds-long certificates under load ----------------------------------------------------------

#: A serving certificate lives 3 s and is renewed 2 s before it ends (about every second); the CA
#: lives 12 s and is renewed 5 s (a serving certificate's life and renewal) before its end, then
#: trusted next to its successor until it expires: 5 s with two CAs, then 2 s with one.
LIFE, RENEW, CA_LIFE = dt.timedelta(seconds=3), dt.timedelta(seconds=2), dt.timedelta(seconds=12)


class RotatingSandbox(Sandbox):
    """draxr as installed with self-managed certificates: the webhook (one process) reads its pair
    from a directory the TLS Secret is projected into, as a Secret volume; the worker (another) holds
    the Lease and renews. The webhook configurations trust the CA from the Secrets."""

    volume: SecretVolume
    rotating: Process

    def __enter__(self) -> RotatingSandbox:
        return self.start()

    def start(self) -> RotatingSandbox:
        self.em.start()
        ca = issue_ca(validity=CA_LIFE)
        leaf = issue_serving(ca, serving_names(WEBHOOK, NS), validity=LIFE)
        seed(self.em, ca, leaf)
        self.volume = SecretVolume(self.admin, NS, TLS_SECRET, self.certs).start()
        self.volume.wait_projected()
        self.serve("webhook-0", webhook=True, worker=False)
        self.em.set_service(NS, WEBHOOK, "127.0.0.1", self.port)
        self.rotating = self.serve("worker-0", worker=True)
        return self

    def stop(self) -> None:
        self.volume.stop()
        super().stop()


def pod(i: int) -> dict[str, Any]:
    gpu = {"example.com/gpu": "1"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p-{i}", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": gpu, "limits": gpu}}]},
    }


def review(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": f"u-{i}",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "dev"},
            "object": pod(i),
        },
    }


# Certificates that live seconds, renewed on the wall clock: run alone, not beside the parallel suite.
@pytest.mark.timed
def test_renewal_under_load_loses_no_review() -> None:
    with RotatingSandbox(
        rotate_certificates=True,
        cert_validity=LIFE,
        cert_renew_before=RENEW,
        ca_validity=CA_LIFE,
        cert_reload_interval=0.05,
    ) as box:
        assert box.webhook.cache.wait_synced(["DeviceClass"], 10)
        dev = KubeClient(box.em.api_client("dev"), qps=10_000, burst=10_000, retries=0)
        stop = threading.Event()
        done: list[int] = [0, 0]  # reviews through the apiserver, fresh handshakes
        failures: list[str] = []
        bundles_seen: list[int] = []
        mark: list[int] = []  # len(bundles_seen) once the loop below saw the old CA gone
        read_after_mark = threading.Event()

        def through_the_apiserver(worker: int) -> None:
            i = 0
            while not stop.is_set():
                i += 1
                try:
                    created = dev.request(
                        "create",
                        PODS.path("default"),
                        query=[("dryRun", "All")],
                        body=pod(i),
                        resource="pods",
                        retries=0,
                    )
                    assert created["metadata"]["name"] == f"p-{i}"
                    done[0] += 1
                except Exception as e:  # any failed review is the test's failure
                    failures.append(f"apiserver {worker}/{i}: {e}")

        def fresh_handshakes() -> None:
            # A new connection for every review, trusting what the live configuration says now:
            # each one checks the certificate the webhook presents at that moment.
            i = 0
            while not stop.is_set():
                i += 1
                hook = box.em.get("validatingwebhookconfigurations", "draxr")["webhooks"][1]
                pem = base64.b64decode(hook["clientConfig"]["caBundle"])
                bundles_seen.append(len(parse_bundle(pem)))
                if mark and len(bundles_seen) >= mark[0] + 2:
                    read_after_mark.set()  # this read began after the mark (the one before might not)
                ctx = ssl.create_default_context(cadata=pem.decode())
                try:
                    with httpx.Client(verify=ctx, timeout=5) as http:
                        answer = http.post(
                            f"https://127.0.0.1:{box.port}/validate/pods",
                            json=review(i),
                            extensions={"sni_hostname": f"{WEBHOOK}.{NS}.svc"},
                        )
                    assert answer.status_code == 200, answer.text
                    assert answer.json()["response"]["allowed"] is True
                    done[1] += 1
                except Exception as e:
                    failures.append(f"handshake {i}: {type(e).__name__}: {e}")

        loaders = [threading.Thread(target=through_the_apiserver, args=(n,), daemon=True) for n in range(2)]
        loaders.append(threading.Thread(target=fresh_handshakes, daemon=True))
        for t in loaders:
            t.start()
        rotator = box.rotating.rotator
        assert rotator is not None
        first_ca = box.volume.projections
        try:
            # Every renewal is waited for as an event (the webhook putting a new pair in service),
            # until the CA has been replaced and its predecessor has expired and left the bundle.
            tls = box.webhook.tls
            assert tls is not None
            generation = tls.generation
            while not (rotator.ca_renewals >= 1 and len(live(box.em)[3][0]) == 1 and tls.generation >= 6):
                assert tls.wait_for_reload(generation, timeout=10), "the webhook did not reload a renewal"
                generation = tls.generation
                assert not failures, failures[:5]
            # The bundle holds one CA now: one more read of it, begun after this, before stopping.
            mark.append(len(bundles_seen))
            assert read_after_mark.wait(10), "no review read the configuration after the old CA left"
        finally:
            stop.set()
            for t in loaders:
                t.join(timeout=10)
        assert failures == []
        assert first_ca == 1
        assert rotator.renewals >= 5
        assert done[0] >= 20
        assert done[1] >= 10
        overlap = bundles_seen.index(2)  # the overlap: old and new CA trusted together ...
        assert 1 in bundles_seen[overlap:]  # ... then the old one gone once expired
        metrics = generate_latest(box.webhook.registry).decode()
        assert 'draxr_certificate_expiry_seconds{certificate="serving"}' in metrics
        worker_metrics = generate_latest(box.rotating.registry).decode()
        assert 'draxr_certificate_expiry_seconds{certificate="ca"}' in worker_metrics
        assert len(events(box.em, "CertificateRenewed")) == rotator.renewals
        assert events(box.em, "CARenewed")


def test_the_webhook_reads_a_projected_secret_volume(
    em: Emulator, client: KubeClient, tmp_path: Path
) -> None:
    """The projection the live test relies on: atomic swaps a reader follows through ..data."""
    _, leaf = installed(em)
    volume = SecretVolume(client, NS, TLS_SECRET, tmp_path).start()
    try:
        volume.wait_projected()
        assert (tmp_path / "tls.crt").read_bytes() == leaf.cert_pem
        assert (tmp_path / "tls.crt").is_symlink()
        CertRotator(client, CONFIG, clock=Clock(T0 + 61 * DAY)).reconcile()
        volume.wait_projected(2)
        assert (tmp_path / "tls.crt").read_bytes() == live(em)[1].cert_pem
        assert sorted(p.name for p in tmp_path.iterdir()) == ["..2", "..data", "ca.crt", "tls.crt", "tls.key"]
    finally:
        volume.stop()


def test_without_leader_election_the_worker_renews_as_the_only_replica(em: Emulator, tmp_path: Path) -> None:
    """``draxr serve --leader-elect=false --rotate-certificates``: no Lease, so the process leads at
    once, for the certificates as for the pods."""
    ca = issue_ca(validity=3650 * DAY)
    other = issue_ca(validity=3650 * DAY)
    # A serving pair the Secret's CA did not sign: the first pass as the leader re-issues it.
    seed(em, ca, issue_serving(other, serving_names(WEBHOOK, NS), validity=90 * DAY))
    opts = ServeOptions(
        webhook=False,
        kubeconfig=str(em.kubeconfig(tmp_path / "kubeconfig", token="admin")),
        leader_elect=False,
        rotate_certificates=True,
    )
    proc = Process(opts)
    try:
        proc.start_background()
        em.wait_for(lambda: events(em, "CertificateRenewed"), 30, "a renewal by the only replica")
        assert signed_by(live(em)[1].cert, ca.cert)
        assert proc.rotator is not None
        assert proc.rotator.ca == ca.cert
        assert proc.worker is not None
        assert proc.worker.is_leader()
    finally:
        proc.stop()


def test_a_rotator_that_lost_the_lease_mid_pass_reports_it_and_keeps_running(em: Emulator) -> None:
    """serve fences the rotator's client: a failure's Event, refused by the fence (NotLeader), must
    not end the rotation thread."""
    installed(em)
    leading = [True]
    fenced = KubeClient(em.api_client("admin")).fenced(lambda: leading[0])
    rotator = CertRotator(fenced, CONFIG, clock=Clock(T0 + 61 * DAY))
    leading[0] = False
    with pytest.raises(NotLeader):
        rotator.reconcile()  # its first write is refused
    rotator._failed(NotLeader("not the leader"))  # the loop's report: no Event, no exception
    assert events(em, "CertificateRenewalFailed") == []
