"""Self-managed webhook certificates, renewed in the cluster by the worker's leader.

``draxr manifests`` (and the Helm chart in ``certs.mode: self``) installs two Secrets in draxr's
namespace: ``draxr-webhook-ca`` (``tls.crt``/``tls.key``: the CA) and ``draxr-webhook-tls``
(``ca.crt``: the CAs kube-apiserver trusts, ``tls.crt``/``tls.key``: the serving pair the webhook
mounts), and puts the trusted CAs into every hook's ``caBundle``. ``draxr serve
--rotate-certificates`` runs ``CertRotator`` in the worker; while its replica holds the Lease, one
pass (``reconcile``) does, in this order:

1. the trusted CAs: every unexpired CA of the hooks' ``caBundle``, the TLS Secret's ``ca.crt`` and
   the CA Secret (an expired CA drops out; nothing else does);
2. a CA within ``validity + renew_before`` of its end is replaced by a new one, which joins the
   trusted CAs: old and new are both trusted until the old one expires;
3. the trusted CAs are written to both webhook configurations' ``caBundle`` (and the TLS Secret's
   ``ca.crt``) *before* a certificate signed by a new CA is served: a pass that made a CA trusted
   issues nothing under it; the next pass, ``propagation`` seconds later, does. Then the new CA
   goes into its Secret;
4. a serving certificate within ``renew_before`` of its end (or not signed by the CA, or missing a
   name, or outliving ``validity`` from now: the validity was shortened) is re-issued under the CA
   with the names it had, and written with the trusted CAs to the TLS Secret; an Event on that
   Secret says so. The webhook picks the new pair up from its Secret volume without a restart
   (runtime/tls.py).

The next pass runs when the next of these is due (at most ``max_interval`` later), at once on
becoming leader, and ``retry`` seconds after a failure. Writes are optimistic (``resourceVersion``):
a conflict means someone else changed the object, and the next pass starts from what it is now.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes

from ..core.api.objects import Obj, format_time
from ..identity.names import CA_SECRET, TLS_SECRET, WEBHOOK, WEBHOOK_CONFIGURATION
from ..identity.pki import (
    CLOCK_SKEW,
    DEFAULT_CA_VALIDITY,
    DEFAULT_RENEW_BEFORE,
    DEFAULT_VALIDITY,
    CertError,
    Issued,
    ServingNames,
    issue_ca,
    issue_serving,
    merge_names,
    names_of,
    parse_bundle,
    pem_bundle,
    serving_names,
    signed_by,
    trust_bundle,
)
from ..kube.client import ApiError, KubeClient, NotLeader
from ..kube.resources import MUTATING_WEBHOOKS, SECRETS, VALIDATING_WEBHOOKS, Resource
from ..worker.events import create_event

log = logging.getLogger("draxr.certificates")

#: cert-manager's CA injector owns a configuration carrying this annotation.
INJECT_CA_ANNOTATION = "cert-manager.io/inject-ca-from"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True)
class RotationConfig:
    namespace: str
    validity: dt.timedelta = DEFAULT_VALIDITY
    renew_before: dt.timedelta = DEFAULT_RENEW_BEFORE
    ca_validity: dt.timedelta = DEFAULT_CA_VALIDITY
    service: str = WEBHOOK
    tls_secret: str = TLS_SECRET
    ca_secret: str = CA_SECRET
    configuration: str = WEBHOOK_CONFIGURATION
    #: Seconds between passes when nothing is due sooner, and after a failed pass.
    max_interval: float = 600.0
    retry: float = 5.0
    #: Seconds between trusting a new CA (``caBundle``) and serving a certificate it signed: what
    #: kube-apiserver takes to see the updated webhook configurations. None: a quarter of
    #: ``renew_before``, at most a minute.
    trust_delay: float | None = None

    def __post_init__(self) -> None:
        if not dt.timedelta(0) < self.renew_before < self.validity:
            raise ValueError("the renewal window must be shorter than the certificate's validity")
        if not self.ca_validity > self.validity + self.renew_before:
            raise ValueError("a CA must outlive a serving certificate and its renewal window")

    @property
    def propagation(self) -> float:
        if self.trust_delay is not None:
            return self.trust_delay
        return min(self.renew_before.total_seconds() / 4, 60.0)

    @property
    def ca_renew_before(self) -> dt.timedelta:
        """A CA is replaced while it can still sign a whole serving certificate's life and renewal."""
        return self.validity + self.renew_before


@dataclass(frozen=True)
class Outcome:
    """What one pass did, and when the next one is due."""

    renewed_serving: bool
    renewed_ca: bool
    published_bundle: bool
    next_check: float  # seconds


class RotationError(Exception):
    """A pass could not finish; the message is for the log and the Event."""


def _decode(data: Any, what: str) -> bytes:
    if not isinstance(data, str) or not data:
        raise RotationError(f"{what} is missing")
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise RotationError(f"{what} is not base64") from None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _bundle_of(data: Any) -> list[x509.Certificate]:
    """The certificates of a base64 PEM bundle; none when it is missing or unreadable."""
    if not isinstance(data, str) or not data:
        return []
    try:
        return parse_bundle(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError, CertError):
        return []


def _fingerprint(cert: x509.Certificate) -> bytes:
    return cert.fingerprint(hashes.SHA256())


class CertRotator:
    """Renews the webhook's self-managed certificates while this replica leads (see the module)."""

    def __init__(
        self,
        client: KubeClient,
        config: RotationConfig,
        *,
        is_leader: Callable[[], bool] = lambda: True,
        clock: Callable[[], dt.datetime] = _now,
    ) -> None:
        self.client = client
        self.config = config
        self._is_leader = is_leader
        self._clock = clock
        self._leading = False
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._ca: x509.Certificate | None = None
        self._last_error: str | None = None
        self.passes = 0
        self.renewals = 0
        self.ca_renewals = 0

    # -- what the process sees -----------------------------------------------------------------

    @property
    def ca(self) -> x509.Certificate | None:
        """The signing CA the last pass saw (``draxr_certificate_expiry_seconds{certificate="ca"}``)."""
        return self._ca if self._leading else None

    def on_leadership(self, leading: bool) -> None:
        self._leading = leading
        if leading:
            self._wake.set()

    def start(self) -> CertRotator:
        self._thread = threading.Thread(target=self._run, name="draxr-cert-rotation", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            wait: float | None = None
            if self._leading:
                try:
                    wait = self.reconcile().next_check
                    self._last_error = None
                except Exception as e:  # the API may be down or an object damaged: report, retry
                    wait = self.config.retry
                    self._failed(e)
            self._wake.wait(wait)  # None: until leadership comes (or stop)
            self._wake.clear()

    def _failed(self, error: Exception) -> None:
        text = f"{type(error).__name__}: {error}" if not isinstance(error, RotationError) else str(error)
        if text != self._last_error:
            log.warning("certificate renewal failed, retrying in %gs: %s", self.config.retry, text)
            self._event(
                "CertificateRenewalFailed", f"cannot renew the webhook's certificate: {text}", "Warning"
            )
        self._last_error = text

    # -- one pass ------------------------------------------------------------------------------

    def _secret(self, name: str) -> Obj:
        try:
            return self.client.get(SECRETS, name, self.config.namespace)
        except ApiError as e:
            if e.not_found:
                raise RotationError(f"Secret {self.config.namespace}/{name} does not exist") from None
            raise

    def _configurations(self) -> list[tuple[Resource, Obj]]:
        out: list[tuple[Resource, Obj]] = []
        for res in (MUTATING_WEBHOOKS, VALIDATING_WEBHOOKS):
            try:
                out.append((res, self.client.get(res, self.config.configuration)))
            except ApiError as e:
                if not e.not_found:
                    raise
        return out

    def _write(self, res: Resource, obj: Obj) -> Obj:
        if not self._is_leader():
            raise RotationError("no longer the leader; the next leader renews")
        return self.client.update(res, obj)

    def reconcile(self) -> Outcome:
        """One pass (see the module); raises on a failure, the next pass starts over."""
        with self._lock:
            self.passes += 1
            return self._reconcile()

    def _reconcile(self) -> Outcome:
        cfg = self.config
        now = self._clock()
        ca_secret = self._secret(cfg.ca_secret)
        tls_secret = self._secret(cfg.tls_secret)
        ca_data = ca_secret.get("data") or {}
        try:
            ca = Issued.parse(
                _decode(ca_data.get("tls.crt"), "tls.crt"), _decode(ca_data.get("tls.key"), "tls.key")
            )
        except CertError as e:
            raise RotationError(f"Secret {cfg.namespace}/{cfg.ca_secret} holds no usable CA: {e}") from None
        configurations = [(r, c) for r, c in self._configurations() if not _injected(c)]
        tls_data = tls_secret.get("data") or {}
        seen: list[x509.Certificate] = [ca.cert, *_bundle_of(tls_data.get("ca.crt"))]
        published_before: list[set[bytes]] = []
        for _, conf in configurations:
            for hook in conf.get("webhooks") or []:
                hook_bundle = _bundle_of((hook.get("clientConfig") or {}).get("caBundle"))
                seen += hook_bundle
                published_before.append({_fingerprint(c) for c in hook_bundle})

        renewed_ca = False
        if ca.cert.not_valid_after_utc - now <= cfg.ca_renew_before:
            old = ca.cert
            ca = issue_ca(validity=cfg.ca_validity, now=now)
            seen.append(ca.cert)
            renewed_ca = True
            log.info(
                "renewing the webhook CA (serial %x until %s): new CA serial %x until %s; both trusted",
                old.serial_number,
                format_time(old.not_valid_after_utc),
                ca.cert.serial_number,
                format_time(ca.cert.not_valid_after_utc),
            )
        trusted = trust_bundle(seen, now)
        bundle = pem_bundle(trusted)
        # Trust first: no certificate of a new CA is served before kube-apiserver trusts that CA.
        published = self._publish(configurations, _b64(bundle), len(trusted))
        # A CA some hook did not trust before this pass: give kube-apiserver time to see it before a
        # certificate it signed is served (the serving pair in use stays trusted meanwhile).
        newly_trusted = any(_fingerprint(c) not in before for c in trusted for before in published_before)
        if renewed_ca:
            ca_secret["data"] = {**ca_data, "tls.crt": _b64(ca.cert_pem), "tls.key": _b64(ca.key_pem)}
            self._write(SECRETS, ca_secret)
            self.ca_renewals += 1
            self._event(
                "CARenewed",
                f"renewed the webhook CA: serial {ca.cert.serial_number:x}, valid until "
                f"{format_time(ca.cert.not_valid_after_utc)}; the previous CA stays trusted until it expires",
            )
        self._ca = ca.cert

        serving, why = self._serving(tls_data, ca, now)
        renewed = False
        if why is not None and newly_trusted:
            log.info(
                "serving certificate renewal (%s) waits %gs for the new CA to be trusted",
                why,
                cfg.propagation,
            )
            if tls_data.get("ca.crt") != _b64(bundle):
                tls_secret["data"] = {**tls_data, "ca.crt": _b64(bundle)}
                self._write(SECRETS, tls_secret)
            return Outcome(False, renewed_ca, published, cfg.propagation)
        if why is not None:
            names = merge_names(
                serving_names(cfg.service, cfg.namespace), *([names_of(serving)] if serving else [])
            )
            new = self._issue(ca, names, now)
            tls_secret["data"] = {
                **tls_data,
                "ca.crt": _b64(bundle),
                "tls.crt": _b64(new.cert_pem),
                "tls.key": _b64(new.key_pem),
            }
            self._write(SECRETS, tls_secret)
            renewed = True
            self.renewals += 1
            message = (
                f"renewed the webhook's serving certificate ({why}): serial {new.cert.serial_number:x}, "
                f"valid until {format_time(new.cert.not_valid_after_utc)}"
            )
            log.info("%s", message)
            self._event("CertificateRenewed", message)
            serving = new.cert
        elif tls_data.get("ca.crt") != _b64(bundle):
            tls_secret["data"] = {**tls_data, "ca.crt": _b64(bundle)}
            self._write(SECRETS, tls_secret)
        assert serving is not None
        due = [
            serving.not_valid_after_utc - cfg.renew_before,
            ca.cert.not_valid_after_utc - cfg.ca_renew_before,
            *(c.not_valid_after_utc for c in trusted),  # an expiring CA leaves the bundle
        ]
        wait = (min(due) - self._clock()).total_seconds()
        return Outcome(renewed, renewed_ca, published, min(max(wait, 0.05), cfg.max_interval))

    def _issue(self, ca: Issued, names: ServingNames, now: dt.datetime) -> Issued:
        try:
            return issue_serving(ca, names, validity=self.config.validity, now=now)
        except CertError as e:
            raise RotationError(f"cannot issue a serving certificate: {e}") from None

    def _serving(self, data: Obj, ca: Issued, now: dt.datetime) -> tuple[x509.Certificate | None, str | None]:
        """The serving certificate in the TLS Secret and why it must be renewed (None: it need not)."""
        try:
            current = Issued.parse(
                _decode(data.get("tls.crt"), "tls.crt"), _decode(data.get("tls.key"), "tls.key")
            )
        except (CertError, RotationError) as e:
            return None, f"the Secret's pair is unusable: {e}"
        cert = current.cert
        left = cert.not_valid_after_utc - now
        if left <= self.config.renew_before:
            return cert, "expired" if left <= dt.timedelta(
                0
            ) else f"expires at {format_time(cert.not_valid_after_utc)}"
        if left > self.config.validity + CLOCK_SKEW:
            # Issued for longer than draxr issues now (the validity was shortened): re-issue, as
            # cert-manager does when a Certificate's duration changes. The skew keeps a certificate
            # a replica with a clock ahead just issued.
            return cert, f"it outlives the configured validity ({self.config.validity.total_seconds():g}s)"
        if not signed_by(cert, ca.cert):
            return cert, "not signed by the current CA"
        if not serving_names(self.config.service, self.config.namespace).covered_by(cert):
            return cert, "it does not name the Service"
        return cert, None

    def _publish(self, configurations: list[tuple[Resource, Obj]], bundle: str, count: int) -> bool:
        """Every hook's ``caBundle`` becomes ``bundle``; True when something was written."""
        wrote = False
        for res, conf in configurations:
            hooks = conf.get("webhooks") or []
            if all((h.get("clientConfig") or {}).get("caBundle") == bundle for h in hooks):
                continue
            for hook in hooks:
                hook.setdefault("clientConfig", {})["caBundle"] = bundle
            self._write(res, conf)
            wrote = True
        if wrote:
            log.info("published %d trusted CA(s) to the webhook configurations' caBundle", count)
        return wrote

    def _event(self, reason: str, message: str, kind: str = "Normal") -> None:
        cfg = self.config
        involved = {"apiVersion": "v1", "kind": "Secret", "name": cfg.tls_secret, "namespace": cfg.namespace}
        try:
            create_event(self.client, involved, kind, reason, message, now=format_time(self._clock()))
        except (ApiError, OSError, NotLeader) as e:  # NotLeader: the client is fenced (serve)
            log.info("could not record the %s Event: %s", reason, e)


def _injected(configuration: Obj) -> bool:
    annotations = (configuration.get("metadata") or {}).get("annotations") or {}
    return INJECT_CA_ANNOTATION in annotations
