"""HTTP/1.1 to one API server on kept-alive sockets: a request written in one piece, its answer read
into one buffer.

Every request goes this way (``KubeClient``; a watch on a connection of its own, read as it comes).
Through urllib3 and ``http.client`` a GET of a pod cost about 300 microseconds of client CPU (their
header objects, per-request timeouts, the response's file and the pool's bookkeeping); on this
module ``KubeClient`` spends about 64 in all, credentials, rate limiter and JSON included
(``bench/transport.py``). At five or six requests per pod that was about a third of the worker's
CPU. Connections are still opened by the official client's urllib3 pool (``connector``), so TLS,
the CA, client certificates, the server name and the socket options (SO_LINGER 0: a connection
given up is reset) stay the official client's.

What an answer may be, as the API server (Go's ``net/http``) sends them: a status line ``HTTP/1.x``,
headers, and a body delimited by ``Content-Length``, by chunks (``Transfer-Encoding: chunked``, with
extensions and trailers), or by the connection's end; ``1xx`` answers before the final one are
skipped. Anything else is a ``ProtocolError`` and the connection is dropped, as after any error or
timeout: a connection is only reused after a whole answer that lets it stay open. A kept
connection the server has closed meanwhile (its idle timeout) is noticed before it is used again.

Not here: proxies (a proxied client takes the official ``call_api``); HTTP/2, which kube-apiserver
offers over TLS: its gain is many requests on few connections, which a worker keeping up to 64
connections does not need (not measured); compression (nothing asks for it, so the API server
sends none).
"""

from __future__ import annotations

import contextlib
import re
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

#: Opens a connected socket to the API server (TLS done) within the given seconds.
Connect = Callable[[float], socket.socket]

#: ``http.client``'s limits: a header block of at most 100 lines of at most 64 KiB each.
MAX_HEADERS: Final = 100
MAX_LINE: Final = 65536
_READ: Final = 65536

#: A request target must be printable ASCII without blanks; anything else is percent-encoded
#: (urllib3 does the same), so a name can never split the request line.
_UNSAFE: Final = re.compile(r"[^\x21-\x7e]")
_TARGET_SAFE: Final = "!#$%&'()*+,/:;=?@[]~"
_HEX: Final = frozenset(b"0123456789abcdefABCDEF")


class ProtocolError(Exception):
    """The answer is not HTTP/1.1 as the API server sends it, or ended early."""


@dataclass(frozen=True, slots=True)
class Answer:
    """One answer: its status, its headers (names in lower case, repeated ones joined by ``, ``)
    and its whole body."""

    status: int
    headers: dict[str, str]
    body: bytes


class Connection:
    """One socket and what has been read from it beyond the last answer."""

    __slots__ = ("buf", "poll", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.poll: Any = None  # registered on the first ``dropped``

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def dropped(self) -> bool:
        """Whether the server closed it (or sent something unasked) while it was idle."""
        pending = getattr(self.sock, "pending", None)  # TLS bytes already decrypted
        if pending is not None and pending():
            return True
        try:
            if self.poll is None:
                self.poll = select.poll()  # not select(): it fails on descriptors above 1023
                self.poll.register(self.sock, select.POLLIN)
            return bool(self.poll.poll(0))
        except (OSError, ValueError):
            return True

    def send(self, data: bytes, deadline: float) -> None:
        self.sock.settimeout(max(deadline - time.monotonic(), 1e-3))
        self.sock.sendall(data)

    # -- reading -----------------------------------------------------------------------------

    def _recv(self, size: int, deadline: float) -> bytes:
        """What arrives next, at most ``size`` bytes; ``b""`` when the connection has ended."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")
        self.sock.settimeout(left)
        return self.sock.recv(size)

    def _fill(self, deadline: float) -> None:
        data = self._recv(_READ, deadline)
        if not data:
            raise ProtocolError("the connection ended before the answer")
        self.buf += data

    def _line(self, deadline: float) -> bytes:
        """The next line without its CRLF (or LF)."""
        while True:
            end = self.buf.find(b"\n")
            if end >= 0:
                break
            if len(self.buf) > MAX_LINE:
                raise ProtocolError("a line longer than 65536 bytes")
            self._fill(deadline)
        if end > MAX_LINE:
            raise ProtocolError("a line longer than 65536 bytes")
        line = bytes(self.buf[:end])
        del self.buf[: end + 1]
        return line[:-1] if line.endswith(b"\r") else line

    def _exactly(self, n: int, deadline: float) -> bytes:
        """The next ``n`` bytes. The buffer grows only as they arrive: a length the server claims
        but never sends costs nothing."""
        while len(self.buf) < n:
            data = self._recv(min(max(n - len(self.buf), _READ), 1 << 20), deadline)
            if not data:
                raise ProtocolError(f"the connection ended {n - len(self.buf)} bytes before the body's end")
            self.buf += data
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data

    def _chunk_size(self, deadline: float) -> int:
        """The next chunk's size; after the last one (0), its trailers are read up to the empty
        line."""
        line = self._line(deadline)
        size = line.split(b";", 1)[0].strip()
        if not size or len(size) > 16 or not _HEX.issuperset(size):
            raise ProtocolError(f"a chunk size that is not hexadecimal: {line[:40]!r}")
        n = int(size, 16)
        if n == 0:
            for _ in range(MAX_HEADERS + 1):  # trailers, up to the empty line
                if not self._line(deadline):
                    return 0
            raise ProtocolError("more than 100 trailer lines")
        return n

    def pieces(self, framing: int | None, deadline: float) -> Iterator[bytes]:
        """The body as it arrives, ``framing`` as ``_framing`` gives it: its chunks, its
        ``Content-Length`` bytes, or everything until the connection ends."""
        if framing is None:
            while (n := self._chunk_size(deadline)) > 0:
                yield self._exactly(n, deadline)
                if self._line(deadline):
                    raise ProtocolError("a chunk longer than its size")
            return
        left = framing
        while left != 0:
            if not self.buf:
                data = self._recv(_READ, deadline)
                if not data:
                    if left < 0:
                        return  # the connection's end is the body's
                    raise ProtocolError(f"the connection ended {left} bytes before the body's end")
                self.buf += data
            piece = bytes(self.buf if left < 0 else self.buf[:left])
            del self.buf[: len(piece)]
            left = left - len(piece) if left > 0 else left
            yield piece

    def _head(self, deadline: float) -> tuple[int, bool, dict[str, str]]:
        """Status, whether it is HTTP/1.0, headers."""
        status_line = self._line(deadline)
        if not status_line.startswith((b"HTTP/1.1 ", b"HTTP/1.0 ")) or len(status_line) < 12:
            raise ProtocolError(f"not an HTTP/1.1 status line: {status_line[:40]!r}")
        code = status_line[9:12]
        if not code.isdigit() or status_line[12:13] not in (b"", b" "):
            raise ProtocolError(f"not an HTTP/1.1 status line: {status_line[:40]!r}")
        headers: dict[str, str] = {}
        for _ in range(MAX_HEADERS + 1):
            line = self._line(deadline)
            if not line:
                return int(code), status_line[7:8] == b"0", headers
            name, colon, value = line.decode("iso-8859-1").partition(":")
            name = name.lower()
            if not colon or not name or name != name.strip() or line[:1] in (b" ", b"\t"):
                raise ProtocolError(f"not a header line: {line[:40]!r}")
            value = value.strip(" \t")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        raise ProtocolError("more than 100 header lines")

    def final_head(self, deadline: float) -> tuple[int, bool, dict[str, str]]:
        """The final answer's status, whether the connection may be kept after its body, and its
        headers; ``1xx`` answers before it skipped."""
        while True:
            status, http10, headers = self._head(deadline)
            if status >= 200:
                break
            if status == 101:
                raise ProtocolError("101 Switching Protocols was not asked for")
        tokens = {t.strip().lower() for t in headers.get("connection", "").split(",")}
        return status, "keep-alive" in tokens if http10 else "close" not in tokens, headers

    def answer(self, method: str, deadline: float) -> tuple[Answer, bool]:
        """The answer to the request just written, and whether the connection may be kept."""
        status, keep, headers = self.final_head(deadline)
        answer, ended = self.answer_body(status, headers, method, deadline)
        return answer, keep and not ended and not self.buf

    def answer_body(
        self, status: int, headers: dict[str, str], method: str, deadline: float
    ) -> tuple[Answer, bool]:
        """The whole answer once its head is read, and whether its body ended the connection."""
        if status in (204, 304) or method == "HEAD":
            return Answer(status, headers, b""), False
        framing = _framing(headers)
        if framing is not None and framing >= 0:
            return Answer(status, headers, self._exactly(framing, deadline)), False  # in one piece
        return Answer(status, headers, b"".join(self.pieces(framing, deadline))), framing == -1

    def lines(self, framing: int | None, deadline: float) -> Iterator[bytes]:
        """The body's lines as they come (a watch: one JSON event per line), without their LF."""
        pending = bytearray()
        for piece in self.pieces(framing, deadline):
            pending += piece
            while (end := pending.find(b"\n")) >= 0:
                yield bytes(pending[:end])
                del pending[: end + 1]
        if pending:
            yield bytes(pending)


def _framing(headers: dict[str, str]) -> int | None:
    """How the body ends: None by chunks, a length, or -1 with the connection."""
    coding = headers.get("transfer-encoding")
    if coding is not None:
        if coding.strip().lower() != "chunked":
            raise ProtocolError(f"a transfer coding this client does not read: {coding!r}")
        return None
    if "content-length" in headers:
        length = headers["content-length"]
        if not length.isdigit() or len(length) > 18:
            raise ProtocolError(f"a content length that is not a number: {length[:40]!r}")
        return int(length)
    return -1


class Stream:
    """A 2xx answer whose body is read line by line as it comes, on a connection of its own;
    ``close`` (from any thread) ends the reading, quietly."""

    def __init__(self, conn: Connection, status: int, headers: dict[str, str], deadline: float) -> None:
        self.status = status
        self.headers = headers
        self._conn = conn
        self._deadline = deadline
        self._closed = False

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._conn.lines(_framing(self.headers), self._deadline)
        except (OSError, ProtocolError):
            if not self._closed:
                raise
        finally:
            self.close()

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._conn.sock.shutdown(socket.SHUT_RDWR)  # a reader blocked in recv returns now
        self._conn.close()


class Transport:
    """Kept-alive connections to one API server, at most ``maxsize`` of them idle; a request takes
    an idle one or opens one, and gives it back after a whole answer that lets it stay open."""

    def __init__(self, connect: Connect, host: str, maxsize: int) -> None:
        self.connect = connect
        self.host = host
        self.maxsize = maxsize
        self._idle: list[Connection] = []
        self._lock = threading.Lock()

    @property
    def idle(self) -> int:
        """Connections kept open now, none in use."""
        return len(self._idle)

    def request(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes | None, timeout: float
    ) -> Answer:
        """One exchange within ``timeout`` seconds; ``OSError`` (``TimeoutError`` included) or
        ``ProtocolError`` when it failed, the connection then closed (reset: see ``connector``)."""
        deadline = time.monotonic() + timeout
        data = self._encode(method, target, headers, body)
        conn = self._take()
        if conn is None:
            conn = Connection(self.connect(timeout))
        try:
            conn.send(data, deadline)
            answer, keep = conn.answer(method, deadline)
        except BaseException:
            conn.close()
            raise
        if keep:
            self._give(conn)
        else:
            conn.close()
        return answer

    def stream(self, method: str, target: str, headers: Mapping[str, str], timeout: float) -> Answer | Stream:
        """A request whose answer's body is read as it comes (a watch), on a new connection never
        given back: a ``Stream`` for a 2xx answer, else the whole ``Answer``."""
        deadline = time.monotonic() + timeout
        data = self._encode(method, target, headers, None)
        conn = Connection(self.connect(timeout))
        try:
            conn.send(data, deadline)
            status, _, head = conn.final_head(deadline)
            if status < 200 or status >= 300:
                answer, _ = conn.answer_body(status, head, method, deadline)
                conn.close()
                return answer
        except BaseException:
            conn.close()
            raise
        return Stream(conn, status, head, deadline)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _take(self) -> Connection | None:
        while True:
            with self._lock:
                if not self._idle:
                    return None
                conn = self._idle.pop()
            if not conn.dropped():
                return conn
            conn.close()

    def _give(self, conn: Connection) -> None:
        with self._lock:
            if len(self._idle) < self.maxsize:
                self._idle.append(conn)
                return
        conn.close()

    def _encode(self, method: str, target: str, headers: Mapping[str, str], body: bytes | None) -> bytes:
        if _UNSAFE.search(target):
            target = quote(target, safe=_TARGET_SAFE)
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.host}"]
        for name, value in headers.items():
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name or ":" in name:
                raise ValueError(f"invalid header {name!r}: a line break or a colon where none may be")
            lines.append(f"{name}: {value}")
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("iso-8859-1")
        return head + body if body else head


def connector(pool: Any) -> Connect:
    """Sockets opened by ``pool`` (a urllib3 connection pool): its scheme, TLS settings (CA, client
    certificate, server name, verification) and socket options, exactly as it would connect."""

    def connect(timeout: float) -> socket.socket:
        conn = pool._new_conn()
        conn.timeout = timeout
        conn.connect()
        sock: socket.socket = conn.sock
        conn.sock = None  # now this module's to close
        return sock

    return connect
