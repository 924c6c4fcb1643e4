"""TLS for ``draxr serve``: a server ``SSLContext`` whose key pair follows the files on disk.

cert-manager, ``draxr certs`` or the kubelet (Secret volume updates) replace ``tls.crt``/``tls.key``
while the webhook runs. Restarting would drop in-flight admission requests, so instead:

* the server is handed one *dispatch* context for its whole life; its ``sni_callback`` runs at the
  start of every handshake (with or without SNI) and switches the connection to the newest context;
* ``reload_if_changed`` builds a new context when the files changed and validate as a pair, then
  swaps a single reference. Established connections keep the TLS session they negotiated, so
  keep-alive connections from the apiserver continue; new handshakes present the new certificate.
* A pair caught half-replaced (or otherwise invalid) is ignored with a warning and the previous
  certificate stays in service until the files settle.

uvicorn (>= 0.47): ``uvicorn.Config(ssl_context_factory=...)`` is the public hook through which
``Config.load()`` obtains ``config.ssl`` (the object passed to ``loop.create_server``); we return the
dispatch context from it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
import ssl
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import uvicorn
from cryptography import x509
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ..core.api.objects import format_time
from ..identity.pki import (
    DEFAULT_CA_VALIDITY,
    DEFAULT_CERT_DIR,
    DEFAULT_RENEW_BEFORE,
    DEFAULT_VALIDITY,
    TLS_CERT,
    TLS_KEY,
    CertError,
    parse_key_pair,
)

logger = logging.getLogger(__name__)

#: TLS 1.2 suites: forward secrecy and AEAD only. TLS 1.3 suites are all AEAD and keep OpenSSL's list.
MODERN_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL:!eNULL:!MD5:!DSS"

_SSL_KWARGS = frozenset(
    {
        "ssl_keyfile",
        "ssl_certfile",
        "ssl_keyfile_password",
        "ssl_version",
        "ssl_cert_reqs",
        "ssl_ca_certs",
        "ssl_ciphers",
        "ssl_context_factory",
    }
)


@dataclass(frozen=True)
class TLSSettings:
    """The webhook's serving certificates: the directory they are read from and how often it is
    looked at again; whether the worker's leader renews them (``rotation.py``), and for how long."""

    cert_dir: Path = field(
        default=Path(DEFAULT_CERT_DIR), metadata={"help": "holds ca.crt, tls.crt, tls.key"}
    )
    #: Seconds between looks for a new serving pair in ``cert_dir``.
    reload_interval: float = 2.0
    rotate: bool = field(
        default=False,
        metadata={
            "help": "the worker's leader renews the webhook's self-managed certificates (the Secrets "
            "draxr-webhook-ca and draxr-webhook-tls, the webhook configurations' caBundle) before they expire"
        },
    )
    validity: dt.timedelta = field(
        default=DEFAULT_VALIDITY, metadata={"help": "lifetime of a renewed serving certificate"}
    )
    renew_before: dt.timedelta = field(
        default=DEFAULT_RENEW_BEFORE,
        metadata={"help": "renew a serving certificate this long before it expires"},
    )
    ca_validity: dt.timedelta = field(
        default=DEFAULT_CA_VALIDITY,
        metadata={
            "help": "lifetime of a renewed CA; a CA is renewed once it could not outlive a serving "
            "certificate and its renewal window"
        },
    )


class TLSConfigError(Exception):
    """The serving key pair or the server settings cannot be used; the message is for the user."""


def build_server_context(
    cert_file: str | os.PathLike[str],
    key_file: str | os.PathLike[str],
    *,
    alpn_protocols: Sequence[str] = (),
) -> ssl.SSLContext:
    """A server context with the webhook's TLS policy: TLS 1.2+, ECDHE+AEAD, no compression.

    Raises ``TLSConfigError`` when OpenSSL cannot load the pair.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(MODERN_CIPHERS)
    ctx.options |= (
        ssl.OP_NO_COMPRESSION
        | ssl.OP_CIPHER_SERVER_PREFERENCE
        | ssl.OP_NO_RENEGOTIATION
        | ssl.OP_SINGLE_ECDH_USE
    )
    try:
        ctx.load_cert_chain(os.fspath(cert_file), os.fspath(key_file))
    except (OSError, ssl.SSLError) as exc:
        raise TLSConfigError(f"cannot load key pair {cert_file} / {key_file}: {exc}") from None
    if alpn_protocols:
        ctx.set_alpn_protocols(list(alpn_protocols))
    return ctx


@dataclass(frozen=True)
class _FileState:
    """What a cheap ``stat`` says about one file; a change of any field triggers a content check."""

    device: int
    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: Path) -> _FileState:
        st = os.stat(path)  # follows the ..data symlinks of Secret volumes to the real file
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _digest(cert_pem: bytes, key_pem: bytes) -> bytes:
    h = hashlib.sha256()
    for part in (cert_pem, key_pem):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.digest()


class ReloadingTLS:
    """The serving key pair of ``cert_dir`` as an ``ssl.SSLContext`` that picks up rotations."""

    def __init__(
        self, cert_dir: str | os.PathLike[str], *, cert_name: str = TLS_CERT, key_name: str = TLS_KEY
    ) -> None:
        self.cert_file = Path(cert_dir) / cert_name
        self.key_file = Path(cert_dir) / key_name
        self._lock = threading.Lock()
        self._changed = threading.Condition()
        self._alpn: tuple[str, ...] = ()
        self._generation = 0
        try:
            state = self._stat()
            cert_pem, key_pem = self._read()
            leaf = parse_key_pair(cert_pem, key_pem)[0][0]
            self._dispatch = self._build()
        except (OSError, CertError, TLSConfigError) as exc:
            raise TLSConfigError(f"cannot load {self.cert_file} / {self.key_file}: {exc}") from None
        self._dispatch.sni_callback = self._select_context
        self._current = self._dispatch
        self._certificate = leaf
        self._digest = _digest(cert_pem, key_pem)
        self._seen: tuple[_FileState, _FileState] | None = state
        logger.info("serving certificate %s loaded (serial %x)", self.cert_file, leaf.serial_number)

    # --- what the server and callers see -----------------------------------------------------------

    @property
    def context(self) -> ssl.SSLContext:
        """The context to give the server once; it dispatches each handshake to the current pair."""
        return self._dispatch

    @property
    def current_context(self) -> ssl.SSLContext:
        return self._current

    @property
    def certificate(self) -> x509.Certificate:
        """The leaf certificate new handshakes present."""
        return self._certificate

    def problem(self, now: datetime | None = None) -> str | None:
        """Why the certificate new handshakes present cannot be trusted now (readiness), or None."""
        moment = now if now is not None else datetime.now(UTC)
        cert = self._certificate
        which = f"serving certificate serial {cert.serial_number:x}"
        if moment < cert.not_valid_before_utc:
            return f"{which} is not valid before {format_time(cert.not_valid_before_utc)}"
        if moment >= cert.not_valid_after_utc:
            return f"{which} expired at {format_time(cert.not_valid_after_utc)}"
        return None

    def describe(self) -> str:
        """One line for ``/readyz``: which certificate is served and until when."""
        cert = self._certificate
        until = format_time(cert.not_valid_after_utc)
        return f"serving certificate: serial {cert.serial_number:x}, valid until {until}"

    @property
    def generation(self) -> int:
        """How many times a new pair was put in service (0 = the pair loaded at start)."""
        return self._generation

    def set_alpn_protocols(self, protocols: Sequence[str]) -> None:
        """Advertise ALPN protocols (what the uvicorn protocol class supports) on every context."""
        self._alpn = tuple(protocols)
        if self._alpn:
            for ctx in {self._dispatch, self._current}:
                ctx.set_alpn_protocols(list(self._alpn))

    def _select_context(
        self, conn: ssl.SSLObject | ssl.SSLSocket, _server_name: str | None, _ctx: Any
    ) -> None:
        # Runs inside the handshake on the event loop: one attribute read, one assignment.
        current = self._current
        if conn.context is not current:
            conn.context = current

    # --- reloading ---------------------------------------------------------------------------------

    def _stat(self) -> tuple[_FileState, _FileState]:
        return _FileState.of(self.cert_file), _FileState.of(self.key_file)

    def _read(self) -> tuple[bytes, bytes]:
        return self.cert_file.read_bytes(), self.key_file.read_bytes()

    def _build(self) -> ssl.SSLContext:
        return build_server_context(self.cert_file, self.key_file, alpn_protocols=self._alpn)

    def reload_if_changed(self) -> bool:
        """Put the pair on disk in service if it changed and is valid; True when it did.

        Cheap when nothing changed (two ``stat`` calls). A changed but invalid pair is reported once
        per distinct file state and the previous certificate keeps serving.
        """
        with self._lock:
            try:
                state = self._stat()
            except OSError as exc:
                if self._seen is not None:
                    logger.warning("serving certificate files unreadable, keeping the previous pair: %s", exc)
                self._seen = None
                return False
            if state == self._seen:
                return False
            try:
                cert_pem, key_pem = self._read()
            except OSError as exc:
                logger.warning("serving certificate files unreadable, keeping the previous pair: %s", exc)
                self._seen = state
                return False
            digest = _digest(cert_pem, key_pem)
            if digest == self._digest:  # touched, copied over or re-linked with the same bytes
                self._seen = state
                return False
            try:
                leaf = parse_key_pair(cert_pem, key_pem)[0][0]
                ctx = self._build()
                unchanged = _digest(*self._read()) == digest
            except (OSError, CertError, TLSConfigError) as exc:
                logger.warning(
                    "new serving certificate in %s rejected, keeping serial %x: %s",
                    self.cert_file.parent,
                    self._certificate.serial_number,
                    exc,
                )
                self._seen = state
                return False
            if not unchanged:  # replaced again while we loaded it: look again at the next check
                return False
            self._current = ctx
            self._certificate = leaf
            self._digest = digest
            self._seen = state
        with self._changed:
            self._generation += 1
            self._changed.notify_all()
        logger.info(
            "serving certificate reloaded: serial %x, valid until %s",
            leaf.serial_number,
            leaf.not_valid_after_utc.isoformat(),
        )
        return True

    def wait_for_reload(self, after_generation: int, timeout: float) -> bool:
        """Block until ``generation`` exceeds ``after_generation``; False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: self._generation > after_generation, timeout)

    def start_watcher(self, interval: float = TLSSettings.reload_interval) -> CertWatcher:
        """Check the files every ``interval`` seconds on a daemon thread until ``stop()``."""
        if not interval > 0:
            raise TLSConfigError(f"watch interval must be positive, got {interval}")
        watcher = CertWatcher(self, interval)
        watcher.start()
        return watcher


class CertWatcher:
    """A stoppable background thread calling ``reload_if_changed``; it never dies on an error."""

    def __init__(self, tls: ReloadingTLS, interval: float) -> None:
        self._tls = tls
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="draxr-cert-watcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._tls.reload_if_changed()
            except Exception:  # keep watching: a later rotation must still be picked up
                logger.exception("certificate reload check failed")

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def __enter__(self) -> CertWatcher:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


# --- expiry ----------------------------------------------------------------------------------------


#: ``certificate="serving"``: the pair this webhook presents; ``certificate="ca"``: the CA the worker's
#: leader signs renewed serving certificates with (self-managed certificates only).
EXPIRY_METRIC = "draxr_certificate_expiry_seconds"


class CertificateExpiry(Collector):
    """``draxr_certificate_expiry_seconds{certificate}``: seconds until each tracked certificate's
    ``notAfter`` (negative once expired), read at scrape time. One per registry; webhook and worker
    add their certificates with ``track``."""

    def __init__(self, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._clock = clock
        self._sources: dict[str, Callable[[], x509.Certificate | None]] = {}

    def track(self, which: str, source: Callable[[], x509.Certificate | None]) -> None:
        self._sources[which] = source

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            EXPIRY_METRIC,
            "Seconds until the certificate expires (notAfter minus now; negative once expired).",
            labels=["certificate"],
        )
        now = self._clock()
        for which, source in sorted(self._sources.items()):
            cert = source()
            if cert is not None:
                family.add_metric([which], (cert.not_valid_after_utc - now).total_seconds())
        yield family

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(EXPIRY_METRIC, "", labels=["certificate"])


# --- uvicorn ---------------------------------------------------------------------------------------


def _alpn_of(config: uvicorn.Config) -> list[str]:
    protocols = getattr(getattr(config, "http_protocol_class", None), "alpn_protocols", None)
    return list(protocols or [])


def _make_config(app: Any, tls: ReloadingTLS, kwargs: dict[str, Any]) -> uvicorn.Config:
    def factory(config: uvicorn.Config, _default: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
        tls.set_alpn_protocols(_alpn_of(config))
        return tls.context

    return uvicorn.Config(app, ssl_context_factory=factory, **kwargs)


def uvicorn_config(
    app: Callable[..., Any] | str,
    tls: ReloadingTLS,
    *,
    host: str = "0.0.0.0",
    port: int = 8443,
    **kwargs: Any,
) -> uvicorn.Config:
    """A ``uvicorn.Config`` serving ``app`` over ``tls``; other keyword arguments go to uvicorn.

    TLS settings are ours alone (``ssl_*`` arguments are refused), and so is the process: workers and
    auto-reload would run the server in child processes the certificate watcher does not reach.
    """
    clash = sorted(_SSL_KWARGS & kwargs.keys())
    if clash:
        raise TLSConfigError(f"TLS is configured by ReloadingTLS; do not pass {', '.join(clash)}")
    if kwargs.get("reload") or (kwargs.get("workers") or 1) > 1:
        raise TLSConfigError("the reloading TLS server runs in one process: no reload, no workers")
    return _make_config(app, tls, {"host": host, "port": port, **kwargs})


def uvicorn_server(
    app: Callable[..., Any] | str,
    tls: ReloadingTLS,
    *,
    host: str = "0.0.0.0",
    port: int = 8443,
    **kwargs: Any,
) -> uvicorn.Server:
    """``uvicorn.Server(uvicorn_config(...))``: call ``run()`` (or ``await serve()``) on it."""
    return uvicorn.Server(uvicorn_config(app, tls, host=host, port=port, **kwargs))


__all__ = [
    "EXPIRY_METRIC",
    "MODERN_CIPHERS",
    "CertWatcher",
    "CertificateExpiry",
    "ReloadingTLS",
    "TLSConfigError",
    "build_server_context",
    "uvicorn_config",
    "uvicorn_server",
]
