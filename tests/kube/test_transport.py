"""``kube.transport``: requests on kept-alive sockets, answers read as ``http.client`` reads them.

A scripted server on a real socket gives each answer its framing (a length, chunks, the
connection's end), its faults (an early end, a bad line, silence) and its idle closes; the property
test holds every answer read from arbitrary fragments to what ``http.client`` reads from the same
bytes."""

from __future__ import annotations

import fcntl
import http.client
import io
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.install.certs import ensure_certs
from webhook.kube.client import KubeClient
from webhook.kube.resources import NODES
from webhook.kube.transport import Answer, Connection, ProtocolError, Stream, Transport, connector


class Closing(bytes):
    """A reply after which the server closes the connection (an API server's idle timeout)."""


#: What the server does with one request: the bytes to send, or None to close without answering.
Reply = bytes | None


def ok(body: bytes = b'{"ok": true}', *headers: str) -> bytes:
    head = "".join(f"{h}\r\n" for h in headers)
    return f"HTTP/1.1 200 OK\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode() + body


class Server:
    """Accepts connections and answers each request with the next scripted reply; keeps every
    request's bytes and counts connections."""

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = list(replies)
        self.requests: list[bytes] = []
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.closing: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        data = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, _, data = data.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.lower() == b"content-length":
                        length = int(value)
                while len(data) < length:
                    data += conn.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + data[:length])
                data = data[length:]
                reply = self.replies.pop(0) if self.replies else None
                if reply is None:
                    return
                conn.sendall(reply)
                if isinstance(reply, Closing):
                    return

    def transport(self, maxsize: int = 4) -> Transport:
        def connect(timeout: float) -> socket.socket:
            return socket.create_connection(("127.0.0.1", self.port), timeout)

        return Transport(connect, f"127.0.0.1:{self.port}", maxsize)

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def serve() -> Iterator[Callable[[list[Reply]], Server]]:
    servers: list[Server] = []

    def make(replies: list[Reply]) -> Server:
        servers.append(Server(replies))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def test_a_request_is_one_request_line_its_headers_and_its_length(serve: Any) -> None:
    server = serve([ok(), ok()])
    t = server.transport()
    answer = t.request("POST", "/api/v1/nodes?fieldManager=x", {"Accept": "application/json"}, b"{}", 5)
    assert answer == Answer(200, {"content-length": "12"}, b'{"ok": true}')
    t.request("GET", "/api/v1/nodes/a b/é", {}, None, 5)
    post, get = server.requests
    assert (
        post
        == (
            f"POST /api/v1/nodes?fieldManager=x HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
            "Accept: application/json\r\nContent-Length: 2\r\n\r\n{}"
        ).encode()
    )
    # A target that is not printable ASCII is percent-encoded; a GET has no body and no length.
    assert get.split(b"\r\n")[0] == b"GET /api/v1/nodes/a%20b/%C3%A9 HTTP/1.1"
    assert b"content-length" not in get.lower()


def test_a_header_with_a_line_break_is_refused_before_anything_is_sent(serve: Any) -> None:
    server = serve([ok()])
    t = server.transport()
    with pytest.raises(ValueError, match="line break"):
        t.request("GET", "/", {"Authorization": "Bearer x\r\nX-Evil: 1"}, None, 5)
    assert server.connections == 0


def test_one_connection_serves_request_after_request(serve: Any) -> None:
    server = serve([ok()] * 5)
    t = server.transport()
    for _ in range(5):
        assert t.request("GET", "/", {}, None, 5).status == 200
    assert server.connections == 1
    assert t.idle == 1


@pytest.mark.parametrize(
    ("reply", "body", "kept"),
    [
        (b"HTTP/1.1 201 Created\r\nContent-Length: 3\r\n\r\nabc", b"abc", True),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3;ext=1\r\nabc\r\nA\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\n",
            b"abc0123456789",
            True,
        ),
        (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", b"ok", True),
        (b"HTTP/1.1 204 No Content\r\n\r\n", b"", True),
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", b"ok", False),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", b"ok", False),
        (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", b"ok", True),
        # Neither a length nor chunks: the body is all until the end, and the connection is done.
        (b"HTTP/1.1 200 OK\r\n\r\nuntil the end", b"until the end", False),
    ],
)
def test_every_framing_the_api_server_may_use(serve: Any, reply: bytes, body: bytes, kept: bool) -> None:
    server = serve([reply if kept or b"Length" in reply else Closing(reply), ok()])
    t = server.transport()
    assert t.request("GET", "/", {}, None, 5).body == body
    assert t.idle == (1 if kept else 0)


def test_repeated_headers_are_joined_and_names_are_lower_case(serve: Any) -> None:
    server = serve([ok(b"", "Warning: 299 - a", "warning: 299 - b", "Retry-After:  3 ")])
    answer = server.transport().request("GET", "/", {}, None, 5)
    assert answer.headers == {"warning": "299 - a, 299 - b", "retry-after": "3", "content-length": "0"}


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (b"HTTP/2 200\r\n\r\n", "status line"),
        (b"HTTP/1.1 2x0 OK\r\n\r\n", "status line"),
        (b"HTTP/1.1 200 OK\r\n folded: x\r\n\r\n", "header line"),
        (b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n", "header line"),
        (b"HTTP/1.1 200 OK\r\nName : x\r\n\r\n", "header line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "content length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "transfer coding"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n", "chunk longer"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "before the body"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 999999999999999999\r\n\r\nshort", "before the body"),
        (b"HTTP/1.1 101 Switching Protocols\r\n\r\n", "101"),
        (b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 101 + b"\r\n", "100 header lines"),
        (b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70000 + b"\r\n\r\n", "longer than 65536"),
    ],
)
def test_an_answer_that_is_not_http_1_1_is_an_error_and_its_connection_is_dropped(
    serve: Any, reply: bytes, why: str
) -> None:
    server = serve([Closing(reply)])  # a short body ends with the connection
    t = server.transport()
    with pytest.raises(ProtocolError, match=why):
        t.request("GET", "/", {}, None, 5)
    assert t.idle == 0


def test_no_answer_before_the_deadline_is_a_timeout_and_the_connection_is_dropped(serve: Any) -> None:
    server = serve([b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab"])  # then silence
    t = server.transport()
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        t.request("GET", "/", {}, None, 0.3)
    assert 0.3 <= time.monotonic() - started < 5
    assert t.idle == 0


def test_a_kept_connection_the_server_closed_is_not_used_again(serve: Any) -> None:
    server = serve([Closing(ok()), ok()])
    t = server.transport()
    t.request("GET", "/", {}, None, 5)
    (kept,) = t._idle
    kept.sock.settimeout(5)
    assert kept.sock.recv(1, socket.MSG_PEEK) == b""  # the server's close has arrived
    assert t.request("GET", "/", {}, None, 5).status == 200
    assert server.connections == 2
    assert len(server.requests) == 2  # nothing was sent on the closed one


def test_a_kept_connection_on_a_descriptor_above_1023_is_still_reused(serve: Any) -> None:
    """A busy process's sockets get high descriptors, where ``select`` fails: every kept connection
    would look dropped and each request would open a new one."""
    server = serve([ok(), ok()])

    def connect(timeout: float) -> socket.socket:
        low = socket.create_connection(("127.0.0.1", server.port), timeout)
        with low:
            high = fcntl.fcntl(low.fileno(), fcntl.F_DUPFD, 1024)  # the lowest free one from 1024
        return socket.socket(fileno=high)

    t = Transport(connect, f"127.0.0.1:{server.port}", 4)
    t.request("GET", "/", {}, None, 5)
    t.request("GET", "/", {}, None, 5)
    assert server.connections == 1
    t.close()


def test_idle_connections_beyond_the_bound_are_closed(serve: Any) -> None:
    server = serve([ok()] * 6)
    t = server.transport(maxsize=2)
    assert t._take() is None
    given = [Connection(socket.create_connection(("127.0.0.1", server.port))) for _ in range(3)]
    for conn in given:
        t._give(conn)
    assert t.idle == 2
    assert [conn.sock.fileno() == -1 for conn in given] == [False, False, True]  # the third closed
    t.close()
    assert t.idle == 0
    assert all(conn.sock.fileno() == -1 for conn in given)


# -- streams (watches) ------------------------------------------------------------------------


CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize(
    "reply",
    [
        Closing(CHUNKED + b'5\r\n{"a":\r\n7\r\n1}\n{"b"\r\n4\r\n:2}\n\r\n0\r\n\r\n'),
        Closing(b'HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\n{"a":1}\n{"b":2}'),
        Closing(b'HTTP/1.1 200 OK\r\n\r\n{"a":1}\n{"b":2}\n'),
    ],
)
def test_a_stream_gives_its_lines_as_they_come_whatever_the_framing(serve: Any, reply: bytes) -> None:
    server = serve([reply])
    stream = server.transport().stream("GET", "/watch", {}, 5)
    assert not isinstance(stream, Answer)
    assert list(stream) == [b'{"a":1}', b'{"b":2}']


def test_a_stream_that_is_refused_is_the_whole_answer(serve: Any) -> None:
    server = serve([b"HTTP/1.1 410 Gone\r\nContent-Length: 4\r\n\r\ngone"])
    t = server.transport()
    assert t.stream("GET", "/watch", {}, 5) == Answer(410, {"content-length": "4"}, b"gone")
    assert t.idle == 0  # a stream's connection is its own, never kept


def test_closing_a_stream_from_another_thread_ends_its_reader_quietly(serve: Any) -> None:
    server = serve([CHUNKED + b"2\r\n1\n\r\n"])  # one line, then nothing: the connection stays
    stream = server.transport().stream("GET", "/watch", {}, 60)
    assert not isinstance(stream, Answer)
    seen: list[bytes] = []
    first, ended = threading.Event(), threading.Event()

    def read() -> None:
        for line in stream:
            seen.append(line)
            first.set()
        ended.set()

    threading.Thread(target=read, daemon=True).start()
    assert first.wait(5)
    stream.close()
    assert ended.wait(5)
    assert seen == [b"1"]


def test_a_stream_cut_by_the_server_is_an_error(serve: Any) -> None:
    server = serve([Closing(CHUNKED + b"2\r\n1\n\r\n")])  # no last chunk: cut
    stream = server.transport().stream("GET", "/watch", {}, 5)
    assert not isinstance(stream, Answer)
    with pytest.raises(ProtocolError, match="ended"):
        list(stream)


# -- the same answers as http.client, from any fragments ---------------------------------------


class Fragments:
    """A socket whose reads return ``data`` in the given pieces: how TCP may cut an answer."""

    def __init__(self, data: bytes, cuts: list[int]) -> None:
        self.pieces: list[bytes] = []
        at = 0
        for cut in sorted(set(cuts)):
            if 0 < cut < len(data):
                self.pieces.append(data[at:cut])
                at = cut
        self.pieces.append(data[at:])

    def settimeout(self, _: float | None) -> None:
        pass

    def shutdown(self, _: int) -> None:
        pass

    def close(self) -> None:
        pass

    def recv(self, n: int) -> bytes:
        if not self.pieces:
            return b""
        piece = self.pieces.pop(0)
        if len(piece) > n:
            self.pieces.insert(0, piece[n:])
        return piece[:n]


token = st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12)
value = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=20)


@st.composite
def answers(draw: Any) -> tuple[bytes, int, dict[str, str], bytes]:
    status = draw(st.sampled_from([200, 201, 400, 404, 409, 429, 500]))
    headers = draw(
        st.dictionaries(
            token.filter(lambda n: n not in ("content-length", "transfer-encoding", "connection")),
            value,
            max_size=6,
        )
    )
    body = draw(st.binary(max_size=300))
    lines = [f"HTTP/1.1 {status} Reason"] + [f"{k}: {v}" for k, v in headers.items()]
    if draw(st.booleans()):
        sizes = draw(st.lists(st.integers(1, 50), max_size=10))
        parts, at = [], 0
        for size in sizes:
            if at < len(body):
                parts.append(body[at : at + size])
                at += size
        if at < len(body):
            parts.append(body[at:])
        lines.append("Transfer-Encoding: chunked")
        framed = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"
    else:
        lines.append(f"Content-Length: {len(body)}")
        framed = body
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + framed, status, headers, body


class _Stdlib:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def makefile(self, *_: Any) -> io.BufferedReader:
        return io.BufferedReader(io.BytesIO(self.data))


@settings(max_examples=300, deadline=None)
@given(answers(), st.lists(st.integers(0, 700), max_size=12))
def test_every_answer_reads_as_http_client_reads_it(
    answer: tuple[bytes, int, dict[str, str], bytes], cuts: list[int]
) -> None:
    data, status, headers, body = answer
    conn = Connection(Fragments(data, cuts))  # type: ignore[arg-type]
    got, kept = conn.answer("GET", time.monotonic() + 5)
    stdlib = http.client.HTTPResponse(_Stdlib(data))  # type: ignore[arg-type]
    stdlib.begin()
    assert (got.status, got.body) == (stdlib.status, stdlib.read()) == (status, body)
    assert got.headers == {k.lower(): v for k, v in stdlib.getheaders()}
    assert {k: v for k, v in got.headers.items() if k in headers} == {
        k: v.strip(" \t") for k, v in headers.items()
    }
    assert kept


@settings(max_examples=200, deadline=None)
@given(answers(), st.lists(st.integers(0, 700), max_size=12))
def test_a_stream_gives_the_lines_of_the_body_from_any_fragments(
    answer: tuple[bytes, int, dict[str, str], bytes], cuts: list[int]
) -> None:
    data, _, _, body = answer
    conn = Connection(Fragments(data, cuts))  # type: ignore[arg-type]
    deadline = time.monotonic() + 5
    status, _, headers = conn.final_head(deadline)
    stream = Stream(conn, status, headers, deadline)
    lines = body.split(b"\n")
    assert list(stream) == (lines if lines[-1] else lines[:-1])


# -- the official client's TLS ----------------------------------------------------------------


def test_connections_are_opened_with_the_official_clients_tls_settings(tmp_path: Path) -> None:
    """The CA, the server name and verification come from the kubeconfig's configuration: a
    server the CA vouches for is reached, the same server under another name is refused."""
    certs = ensure_certs(tmp_path / "certs", "apiserver", "kube-system")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certs.tls_cert, certs.tls_key)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                raw, _ = listener.accept()
            except OSError:
                return
            try:
                with context.wrap_socket(raw, server_side=True) as conn:
                    while b"\r\n\r\n" not in conn.recv(65536):
                        pass
                    conn.sendall(ok(b'{"kind": "Node"}'))
            except (ssl.SSLError, OSError):
                pass

    threading.Thread(target=serve, daemon=True).start()
    try:
        for name, works in (("apiserver.kube-system.svc", True), ("elsewhere.example", False)):
            configuration = kubernetes.client.Configuration(host=f"https://127.0.0.1:{port}")
            configuration.ssl_ca_cert = str(certs.ca_cert)
            configuration.tls_server_name = name
            client = KubeClient(kubernetes.client.ApiClient(configuration), retries=0)
            assert client._transport is not None
            if works:
                assert client.get(NODES, "n") == {"kind": "Node"}
            else:
                with pytest.raises(Exception, match=r"certificate|hostname"):
                    client.get(NODES, "n")
    finally:
        listener.close()


def test_the_connector_leaves_the_socket_to_the_transport(serve: Any) -> None:
    import urllib3

    server = serve([ok()])
    pool = urllib3.HTTPConnectionPool("127.0.0.1", server.port)
    sock = connector(pool)(5)
    sock.sendall(b"GET / HTTP/1.1\r\n\r\n")
    assert Connection(sock).answer("GET", time.monotonic() + 5)[0].status == 200
    sock.close()
