"""``webhook.runtime.timeouts``: a slow client's connection is closed; a prompt one is served.

Real TLS sockets against real uvicorn servers, ``draxr serve``'s own ``Process`` among them. A
slow client sends one byte each time its ``recv`` times out (every 50 ms) until the server
closes the connection: the socket timeout paces it, nothing sleeps.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from webhook.identity.pki import CA_CERT
from webhook.install.certs import ensure_certs
from webhook.runtime.serve import Process, ServeOptions
from webhook.runtime.timeouts import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DeadlineH11Protocol,
    deadline_protocol,
)
from webhook.runtime.tls import ReloadingTLS, uvicorn_server

#: The KEP-5004 example (what ``make demo`` runs).
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kep-5004"

HEADER_TIMEOUT, BODY_TIMEOUT = 0.3, 0.5
PACE = 0.05  # the slow client's byte interval
#: A slow client gives up after this many bytes (5 s): far more than the deadlines allow.
MAX_DRIPS = 100


async def _echo(request: Request) -> JSONResponse:
    body = await request.body()
    return JSONResponse({"bytes": len(body)})


APP = Starlette(routes=[Route("/", _echo, methods=["GET", "POST"])])


@pytest.fixture(scope="module")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("timeouts-certs")
    ensure_certs(out, "draxr-webhook", "draxr-system")
    return out


def _listening() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    return sock


@pytest.fixture(scope="module")
def port(cert_dir: Path) -> Iterator[int]:
    sock = _listening()
    server = uvicorn_server(
        APP,
        ReloadingTLS(cert_dir),
        host="127.0.0.1",
        port=sock.getsockname()[1],
        log_config=None,
        lifespan="off",
        timeout_keep_alive=30,
        timeout_graceful_shutdown=5,
        http=deadline_protocol(HEADER_TIMEOUT, BODY_TIMEOUT),
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
        assert not thread.is_alive()


@contextlib.contextmanager
def _tls(port: int, cert_dir: Path) -> Iterator[ssl.SSLSocket]:
    ctx = ssl.create_default_context(cafile=str(cert_dir / CA_CERT))
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    with ctx.wrap_socket(raw, server_hostname="localhost") as conn:
        yield conn


@dataclass
class Outcome:
    closed: bool  # the server ended the connection
    sent: int  # bytes the slow client got to send after its first ones
    received: bytes  # anything the server said before closing


def _drip(conn: ssl.SSLSocket, first: bytes, rest: bytes) -> Outcome:
    """Send ``first``, then ``rest`` one byte per ``PACE``, until the server closes the connection
    or ``MAX_DRIPS`` paces have passed."""
    conn.sendall(first)
    conn.settimeout(PACE)
    received = b""
    sent = 0
    for _ in range(MAX_DRIPS):
        try:
            data = conn.recv(4096)
        except TimeoutError:
            if sent < len(rest):
                try:
                    conn.sendall(rest[sent : sent + 1])
                except OSError:  # closed while we wrote
                    return Outcome(True, sent, received)
                sent += 1
            continue
        except (ConnectionResetError, ssl.SSLError):
            return Outcome(True, sent, received)
        if not data:
            return Outcome(True, sent, received)
        received += data
    return Outcome(False, sent, received)


def _request(method: str, body: bytes = b"") -> bytes:
    head = f"{method} / HTTP/1.1\r\nHost: localhost\r\n"
    if method == "POST":
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return (head + "\r\n").encode() + body


def _read_response(conn: ssl.SSLSocket) -> bytes:
    conn.settimeout(5)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        assert chunk, f"closed after {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    while len(body) < length:
        body += conn.recv(4096)
    return head.split(b"\r\n", 1)[0] + b" " + body


ENDLESS_HEADER = b"X-Slow: " + b"a" * 500


def test_a_client_dripping_its_headers_is_cut_off(port: int, cert_dir: Path) -> None:
    with _tls(port, cert_dir) as conn:
        outcome = _drip(conn, b"P", b"OST / HTTP/1.1\r\nHost: localhost\r\n" + ENDLESS_HEADER)
    assert outcome.closed, "the server kept a connection whose headers never came"
    assert outcome.received == b""  # closed, not answered
    assert outcome.sent < MAX_DRIPS // 2


def test_a_client_that_says_nothing_is_cut_off(port: int, cert_dir: Path) -> None:
    with _tls(port, cert_dir) as conn:
        outcome = _drip(conn, b"", b"")
    assert outcome.closed


def test_a_client_dripping_its_body_is_cut_off(port: int, cert_dir: Path) -> None:
    head = b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n"
    with _tls(port, cert_dir) as conn:
        outcome = _drip(conn, head, b"x" * 1000)
    assert outcome.closed, "the server kept a connection whose body never came"
    assert outcome.sent < MAX_DRIPS // 2


def test_a_slow_client_after_a_prompt_request_is_cut_off(port: int, cert_dir: Path) -> None:
    # Any byte cancels uvicorn's keep-alive timer: the next request's header deadline must start.
    with _tls(port, cert_dir) as conn:
        conn.sendall(_request("GET"))
        assert _read_response(conn).startswith(b"HTTP/1.1 200")
        outcome = _drip(conn, b"G", b"ET / HTTP/1.1\r\n" + ENDLESS_HEADER)
    assert outcome.closed
    assert outcome.received == b""


def test_prompt_requests_and_idle_keep_alive_are_not_affected(port: int, cert_dir: Path) -> None:
    with _tls(port, cert_dir) as conn:
        conn.sendall(_request("POST", b'{"a": 1}'))
        assert _read_response(conn) == b'HTTP/1.1 200 OK {"bytes":8}'
        # Idle between requests for longer than both deadlines: the keep-alive timeout (30 s) rules.
        conn.settimeout(3 * BODY_TIMEOUT)
        with pytest.raises(TimeoutError):
            conn.recv(1)
        body = b"y" * 200_000  # a larger body, sent at once
        conn.sendall(_request("POST", body))
        assert _read_response(conn) == b'HTTP/1.1 200 OK {"bytes":200000}'
        conn.sendall(_request("GET"))
        assert _read_response(conn).startswith(b"HTTP/1.1 200")


def test_draxr_serve_closes_a_slow_connection(tmp_path: Path) -> None:
    ensure_certs(tmp_path, "draxr-webhook", "draxr-system")
    opts = ServeOptions(
        snapshot=[str(EXAMPLES)],
        worker=False,
        cert_dir=tmp_path,
        host="127.0.0.1",
        read_header_timeout=HEADER_TIMEOUT,
        read_body_timeout=BODY_TIMEOUT,
    )
    proc = Process(opts)
    sock = _listening()
    proc.serve_in_thread(sock)
    try:
        assert proc.server is not None
        protocol = proc.server.config.http
        assert isinstance(protocol, type)
        assert issubclass(protocol, DeadlineH11Protocol)
        assert (protocol.header_timeout, protocol.body_timeout) == (HEADER_TIMEOUT, BODY_TIMEOUT)
        with _tls(sock.getsockname()[1], tmp_path) as conn:
            outcome = _drip(conn, b"POST /validate/pods HTTP/1.1\r\n", ENDLESS_HEADER)
        assert outcome.closed
        with _tls(sock.getsockname()[1], tmp_path) as conn:  # and it still serves
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            assert _read_response(conn) == b"HTTP/1.1 200 OK ok"
    finally:
        proc.stop()
        sock.close()


def test_defaults_are_well_under_the_webhook_timeout() -> None:
    # draxr's webhook configurations give the apiserver 3 s (timeoutSeconds) for the whole call.
    assert DEFAULT_HEADER_TIMEOUT + DEFAULT_BODY_TIMEOUT <= 3.0
    assert ServeOptions().server.read_header_timeout == DEFAULT_HEADER_TIMEOUT
    assert ServeOptions().server.read_body_timeout == DEFAULT_BODY_TIMEOUT


@pytest.mark.parametrize(("header", "body"), [(0, 1), (1, -1), (float("nan"), 1)])
def test_deadlines_must_be_positive(header: float, body: float) -> None:
    with pytest.raises(ValueError, match="must be a positive number of seconds"):
        deadline_protocol(header, body)
