"""``webhook.runtime.tls``: a real uvicorn server over TLS whose certificate rotates without a restart."""

from __future__ import annotations

import contextlib
import datetime as dt
import http.client
import json
import logging
import os
import shutil
import socket
import ssl
import tempfile
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from webhook.identity.pki import CA_CERT, TLS_CERT, TLS_KEY, CertError, parse_key_pair
from webhook.install.certs import ensure_certs
from webhook.runtime.tls import (
    CertificateExpiry,
    CertWatcher,
    ReloadingTLS,
    TLSConfigError,
    _make_config,
    build_server_context,
    uvicorn_config,
    uvicorn_server,
)

SVC, NS = "draxr-webhook", "draxr-system"
TIMEOUT = 10.0


async def _hello(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True, "scheme": request.url.scheme})


APP = Starlette(routes=[Route("/", _hello)])


@pytest.fixture
def cert_dir(tmp_path: Path) -> Path:
    out = tmp_path / "certs"
    ensure_certs(out, SVC, NS)
    return out


@pytest.fixture
def tls(cert_dir: Path) -> ReloadingTLS:
    return ReloadingTLS(cert_dir)


@contextlib.contextmanager
def _serving(tls: ReloadingTLS) -> Iterator[int]:
    """Run uvicorn on a pre-bound socket: clients may connect at once, the backlog holds them."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port: int = sock.getsockname()[1]
    kwargs: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": port,
        "log_config": None,
        "lifespan": "off",
        "timeout_keep_alive": 120,
        "timeout_graceful_shutdown": 5,
    }
    server = uvicorn_server(APP, tls, **kwargs)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(TIMEOUT)
        sock.close()
        assert not thread.is_alive(), "uvicorn did not shut down"


@pytest.fixture
def port(tls: ReloadingTLS) -> Iterator[int]:
    with _serving(tls) as p:
        yield p


def _client_ctx(cert_dir: Path, version: ssl.TLSVersion | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=cert_dir / CA_CERT)  # verifies chain and hostname
    if version is not None:
        ctx.minimum_version = ctx.maximum_version = version
    return ctx


def _connect(port: int, ctx: ssl.SSLContext) -> http.client.HTTPSConnection:
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=TIMEOUT)
    conn.connect()
    return conn


def _get(conn: http.client.HTTPSConnection) -> dict[str, object]:
    conn.request("GET", "/")
    resp = conn.getresponse()
    body = resp.read()
    assert resp.status == 200
    data: dict[str, object] = json.loads(body)
    return data


def _peer_serial(sock: ssl.SSLSocket | ssl.SSLObject | None) -> int:
    assert sock is not None
    der = sock.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def _fresh_serial(port: int, cert_dir: Path) -> int:
    conn = _connect(port, _client_ctx(cert_dir))
    try:
        assert _get(conn) == {"ok": True, "scheme": "https"}
        return _peer_serial(conn.sock)
    finally:
        conn.close()


def _serial_on_disk(cert_dir: Path) -> int:
    return x509.load_pem_x509_certificate((cert_dir / TLS_CERT).read_bytes()).serial_number


def _rotate(cert_dir: Path, tag: str) -> int:
    """Re-issue the serving pair under the same CA (a new SAN forces it), as a rotation would."""
    paths = ensure_certs(cert_dir, SVC, NS, extra_dns=[f"{tag}.rotation.test"])
    assert [p.name for p in paths.written] == [TLS_KEY, TLS_CERT]
    return _serial_on_disk(cert_dir)


def _memory_handshake(client_ctx: ssl.SSLContext, server_ctx: ssl.SSLContext) -> ssl.SSLObject:
    """A full handshake through memory BIOs; server-side refusals raise from the server object."""
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname=f"{SVC}.{NS}.svc")
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    client_done = server_done = False
    for _ in range(10):
        if not client_done:
            with contextlib.suppress(ssl.SSLWantReadError):
                client.do_handshake()
                client_done = True
        s_in.write(c_out.read())
        if not server_done:
            with contextlib.suppress(ssl.SSLWantReadError):
                server.do_handshake()
                server_done = True
        c_in.write(s_out.read())
        if client_done and server_done:
            return client
    raise AssertionError("handshake did not complete")


def _legacy_client(cert_dir: Path) -> ssl.SSLContext:
    """A client that can only speak TLS 1.0/1.1 (OpenSSL 3 needs security level 0 for that)."""
    ctx = _client_ctx(cert_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ctx.minimum_version = ssl.TLSVersion.TLSv1
        ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    return ctx


# --- serving ---------------------------------------------------------------------------------------


def test_https_request_verified_against_the_ca(cert_dir: Path, tls: ReloadingTLS) -> None:
    with _serving(tls) as p:
        assert _fresh_serial(p, cert_dir) == _serial_on_disk(cert_dir)


def test_service_dns_name_verifies_over_sni(cert_dir: Path, port: int) -> None:
    ctx = _client_ctx(cert_dir)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as raw,
        ctx.wrap_socket(raw, server_hostname=f"{SVC}.{NS}.svc") as tls_sock,
    ):
        assert _peer_serial(tls_sock) == _serial_on_disk(cert_dir)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as raw,
        pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"),
    ):
        ctx.wrap_socket(raw, server_hostname="other.example.com")


@pytest.mark.parametrize(
    ("version", "name"), [(ssl.TLSVersion.TLSv1_2, "TLSv1.2"), (ssl.TLSVersion.TLSv1_3, "TLSv1.3")]
)
def test_tls_12_and_13_accepted(cert_dir: Path, port: int, version: ssl.TLSVersion, name: str) -> None:
    conn = _connect(port, _client_ctx(cert_dir, version))
    try:
        assert _get(conn)["ok"] is True
        assert conn.sock.version() == name
    finally:
        conn.close()


def test_tls_11_and_below_refused(cert_dir: Path, tls: ReloadingTLS, port: int) -> None:
    client = _legacy_client(cert_dir)
    # Control: this client does complete a TLS 1.1 handshake with a server that allows it ...
    permissive = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        permissive.minimum_version = ssl.TLSVersion.TLSv1
    permissive.set_ciphers("DEFAULT:@SECLEVEL=0")
    permissive.load_cert_chain(cert_dir / TLS_CERT, cert_dir / TLS_KEY)
    assert _memory_handshake(client, permissive).version() == "TLSv1.1"
    # ... and our context refuses it on the protocol version ...
    with pytest.raises(ssl.SSLError, match="UNSUPPORTED_PROTOCOL"):
        _memory_handshake(client, tls.context)
    # ... which the running server does too.
    with pytest.raises(ssl.SSLError):
        _connect(port, client)


def test_server_context_policy(cert_dir: Path) -> None:
    ctx = build_server_context(cert_dir / TLS_CERT, cert_dir / TLS_KEY)
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    assert ctx.options & ssl.OP_NO_COMPRESSION
    assert ctx.options & ssl.OP_NO_RENEGOTIATION
    tls12 = [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12
    assert all(n.startswith("ECDHE-") and ("GCM" in n or "CHACHA20" in n) for n in tls12), tls12


# --- rotation --------------------------------------------------------------------------------------


def test_rotation_reaches_new_connections_and_keeps_existing_ones(
    cert_dir: Path, tls: ReloadingTLS, port: int
) -> None:
    old = _serial_on_disk(cert_dir)
    keepalive = _connect(port, _client_ctx(cert_dir))
    try:
        _get(keepalive)
        sock_before = keepalive.sock
        assert _peer_serial(keepalive.sock) == old

        new = _rotate(cert_dir, "a")
        assert new != old
        assert tls.reload_if_changed() is True
        assert tls.generation == 1
        assert tls.certificate.serial_number == new

        assert _fresh_serial(port, cert_dir) == new
        for _ in range(3):  # the established connection carries on with its session
            assert _get(keepalive)["ok"] is True
        assert keepalive.sock is sock_before, "http.client did not reconnect"
        assert _peer_serial(keepalive.sock) == old
        assert tls.reload_if_changed() is False, "nothing changed since"
    finally:
        keepalive.close()


def test_watcher_picks_up_a_rotation(cert_dir: Path, tls: ReloadingTLS, port: int) -> None:
    with tls.start_watcher(interval=0.02) as watcher:
        assert isinstance(watcher, CertWatcher)
        assert watcher.running
        seen = tls.generation
        new = _rotate(cert_dir, "w1")
        assert tls.wait_for_reload(seen, timeout=TIMEOUT), "watcher never reloaded"
        assert _fresh_serial(port, cert_dir) == new
        # A second rotation is picked up as well: the watcher keeps going.
        seen = tls.generation
        newer = _rotate(cert_dir, "w2")
        assert tls.wait_for_reload(seen, timeout=TIMEOUT)
        assert _fresh_serial(port, cert_dir) == newer
    assert not watcher.running


def test_wait_for_reload_times_out_without_a_change(tls: ReloadingTLS) -> None:
    assert tls.wait_for_reload(tls.generation, timeout=0.01) is False


def _replace(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".new")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def test_invalid_new_files_keep_the_old_certificate(
    cert_dir: Path, tls: ReloadingTLS, port: int, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old = _serial_on_disk(cert_dir)
    good_cert, good_key = (cert_dir / TLS_CERT).read_bytes(), (cert_dir / TLS_KEY).read_bytes()
    caplog.set_level(logging.WARNING, logger="webhook.runtime.tls")

    _replace(cert_dir / TLS_CERT, good_cert[: len(good_cert) // 2])  # half-written
    assert tls.reload_if_changed() is False
    assert tls.reload_if_changed() is False
    assert len([r for r in caplog.records if "rejected" in r.getMessage()]) == 1, "warned once per state"
    assert _fresh_serial(port, cert_dir) == old

    other = tmp_path / "other"
    ensure_certs(other, SVC, NS)
    _replace(cert_dir / TLS_CERT, good_cert)
    _replace(cert_dir / TLS_KEY, (other / TLS_KEY).read_bytes())  # key of another pair
    assert tls.reload_if_changed() is False
    assert "does not match" in caplog.text
    assert _fresh_serial(port, cert_dir) == old

    (cert_dir / TLS_KEY).unlink()  # gone
    assert tls.reload_if_changed() is False
    assert _fresh_serial(port, cert_dir) == old

    _replace(cert_dir / TLS_KEY, good_key)  # the same pair again: nothing to reload
    assert tls.reload_if_changed() is False
    assert tls.generation == 0

    # The pair the rotation lands second half of: key first, then certificate.
    shutil.copy(other / TLS_KEY, cert_dir / TLS_KEY)
    assert tls.reload_if_changed() is False
    shutil.copy(other / TLS_CERT, cert_dir / TLS_CERT)
    assert tls.reload_if_changed() is True
    assert tls.certificate.serial_number == _serial_on_disk(other)


def test_touching_the_files_is_not_a_reload(cert_dir: Path, tls: ReloadingTLS) -> None:
    os.utime(cert_dir / TLS_CERT, ns=(1, 1))
    before = tls.current_context
    assert tls.reload_if_changed() is False
    assert tls.current_context is before
    assert tls.generation == 0


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    target=st.sampled_from([TLS_CERT, TLS_KEY]),
    keep=st.integers(0, 1000),
    junk=st.binary(max_size=300),
)
def test_fuzzed_replacement_never_displaces_the_served_pair(
    cert_dir: Path, target: str, keep: int, junk: bytes
) -> None:
    """Cut-short or garbage files are ignored; whatever is served is always the known-good pair."""
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        for name in (TLS_CERT, TLS_KEY):
            shutil.copy(cert_dir / name, work / name)
        tls = ReloadingTLS(work)
        served = _serial_on_disk(work)
        original = (work / target).read_bytes()
        data = original[:keep] + junk
        _replace(work / target, data)
        # Valid means both readers take it: e.g. only the trailing newline was cut (the same pair in
        # other bytes). Junk after the PEM end line is fine for cryptography but not for OpenSSL.
        try:
            parse_key_pair((work / TLS_CERT).read_bytes(), (work / TLS_KEY).read_bytes())
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(work / TLS_CERT, work / TLS_KEY)
        except (CertError, ssl.SSLError):
            still_valid = False
        else:
            still_valid = True
        assert tls.reload_if_changed() is (still_valid and data != original)
        client = _memory_handshake(_client_ctx(cert_dir), tls.context)
        assert _peer_serial(client) == served


# --- construction and uvicorn wiring ---------------------------------------------------------------


def test_unusable_directory_is_a_tls_config_error(tmp_path: Path) -> None:
    with pytest.raises(TLSConfigError, match="cannot load"):
        ReloadingTLS(tmp_path / "missing")
    (tmp_path / TLS_CERT).write_bytes(b"not a certificate")
    (tmp_path / TLS_KEY).write_bytes(b"not a key")
    with pytest.raises(TLSConfigError, match="no valid PEM certificate"):
        ReloadingTLS(tmp_path)


def test_watch_interval_must_be_positive(tls: ReloadingTLS) -> None:
    with pytest.raises(TLSConfigError, match="must be positive"):
        tls.start_watcher(interval=0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ssl_certfile": "x.crt"}, "do not pass ssl_certfile"),
        ({"ssl_context_factory": None, "ssl_ciphers": "ALL"}, "do not pass ssl_ciphers, ssl_context_factory"),
        ({"workers": 2}, "one process"),
        ({"reload": True}, "one process"),
    ],
)
def test_uvicorn_config_refuses_conflicting_settings(
    tls: ReloadingTLS, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(TLSConfigError, match=message):
        uvicorn_config(APP, tls, **kwargs)


def test_loaded_config_serves_the_dispatch_context(tls: ReloadingTLS) -> None:
    config = _make_config(APP, tls, {"log_config": None})
    config.load()
    assert config.ssl is tls.context
    assert tls.context.sni_callback is not None


def test_problem_says_when_the_served_certificate_cannot_be_trusted(tls: ReloadingTLS) -> None:
    cert = tls.certificate
    serial = f"{cert.serial_number:x}"
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    assert tls.problem() is None
    assert tls.problem(start) is None
    assert tls.problem(end - dt.timedelta(seconds=1)) is None
    before = tls.problem(start - dt.timedelta(seconds=1))
    assert before == f"serving certificate serial {serial} is not valid before {start:%Y-%m-%dT%H:%M:%SZ}"
    assert tls.problem(end) == f"serving certificate serial {serial} expired at {end:%Y-%m-%dT%H:%M:%SZ}"
    assert tls.describe() == f"serving certificate: serial {serial}, valid until {end:%Y-%m-%dT%H:%M:%SZ}"


def test_certificate_expiry_is_read_at_scrape_time(tls: ReloadingTLS) -> None:
    end = tls.certificate.not_valid_after_utc
    now = [end - dt.timedelta(days=14)]
    expiry = CertificateExpiry(clock=lambda: now[0])
    registry = CollectorRegistry()
    registry.register(expiry)
    ca: list[x509.Certificate | None] = [None]
    expiry.track("serving", lambda: tls.certificate)
    expiry.track("ca", lambda: ca[0])  # not the leader: no sample
    text = generate_latest(registry).decode()
    assert 'draxr_certificate_expiry_seconds{certificate="serving"} 1.2096e+06' in text
    assert 'certificate="ca"' not in text
    now[0] = end + dt.timedelta(seconds=30)
    ca[0] = tls.certificate
    text = generate_latest(registry).decode()
    assert 'draxr_certificate_expiry_seconds{certificate="serving"} -30.0' in text
    assert 'draxr_certificate_expiry_seconds{certificate="ca"} -30.0' in text
