"""HTTP/1.1 response headers read by a split at the colon, not by the email package.

``http.client`` hands every response's header block to ``email.parser``, a feed parser built for
MIME messages: about a sixth of the CPU of one API request, measured on a GET and a PATCH against
the emulator (a quarter of the client's own work once the wait is set aside). ``Response`` is
``http.client``'s response with the block read line by line and each line split at its first colon,
which is exactly what the email parser makes of a well-formed header line (name as sent; value with
leading blanks and the line end stripped; the message's payload empty). A block with anything else
(a folded line, a line without a name, a bare CR, a ``From `` line) goes to the stdlib parser whole,
so the headers are the stdlib's in every case: ``tests/kube/test_headers.py`` holds the two equal.

``install`` puts it under the connections of one urllib3 pool (the API server's, ``KubeClient``);
nothing else in the process changes.
"""

from __future__ import annotations

import email.parser
import http.client
import re
from typing import Any, BinaryIO, Final

#: A header line the email parser splits as a split at the first colon does: a non-empty name of
#: printable characters but the colon (its ``headerRE`` without the folded and ``From `` forms),
#: and no CR but the one that ends the line.
_PLAIN: Final = re.compile(r"[\041-\071\073-\176]+:[^\r\n]*\r?\n\Z")


def read_header_lines(fp: BinaryIO) -> list[bytes]:
    """The header block's lines up to and including the empty one, with ``http.client``'s limits
    and errors (its own reader: ``parse_headers`` reads them so too)."""
    lines: list[bytes] = http.client._read_headers(fp)  # type: ignore[attr-defined]
    return lines


def parse_header_lines(lines: list[bytes]) -> http.client.HTTPMessage:
    """What ``http.client.parse_headers`` makes of these lines."""
    message = http.client.HTTPMessage()
    for raw in lines[:-1]:
        line = raw.decode("iso-8859-1")
        if _PLAIN.match(line) is None:
            stdlib = email.parser.Parser(_class=http.client.HTTPMessage)
            parsed: http.client.HTTPMessage = stdlib.parsestr(b"".join(lines).decode("iso-8859-1"))
            return parsed
        name, _, value = line.partition(":")
        message.set_raw(name, value.lstrip(" \t").rstrip("\r\n"))
    message.set_payload("")
    return message


class Response(http.client.HTTPResponse):
    """``http.client.HTTPResponse`` whose ``begin`` reads the headers with ``parse_header_lines``;
    the rest of ``begin`` is the stdlib's (CPython 3.11 to 3.13), line for line."""

    def begin(self) -> None:
        started: object = self.headers  # None until begun (typeshed says HTTPMessage)
        if started is not None:
            return
        while True:  # read until a response that is not 100 Continue
            version, status, reason = self._read_status()  # type: ignore[attr-defined]
            if status != http.client.CONTINUE:
                break
            read_header_lines(self.fp)  # the 100 response's headers, skipped
        self.code = self.status = status
        self.reason = reason.strip()
        if version in ("HTTP/1.0", "HTTP/0.9"):
            self.version = 10
        elif version.startswith("HTTP/1."):
            self.version = 11
        else:
            raise http.client.UnknownProtocol(version)
        self.headers = self.msg = parse_header_lines(read_header_lines(self.fp))
        transfer_encoding = self.headers.get("transfer-encoding")
        self.chunked = bool(transfer_encoding and transfer_encoding.lower() == "chunked")
        if self.chunked:
            self.chunk_left = None
        self.will_close = self._check_close()  # type: ignore[attr-defined]
        self.length = None
        length = self.headers.get("content-length")
        if length and not self.chunked:
            try:
                self.length = int(length)
            except ValueError:
                self.length = None
            else:
                if self.length < 0:  # a negative length is ignored
                    self.length = None
        if status in (http.client.NO_CONTENT, http.client.NOT_MODIFIED) or 100 <= status < 200:
            self.length = 0
        if self._method == "HEAD":  # type: ignore[attr-defined]
            self.length = 0
        if not self.will_close and not self.chunked and self.length is None:
            self.will_close = True  # no length and no chunks: the connection ends the body


def supported() -> bool:
    """Whether this Python's ``http.client`` has what ``Response.begin`` calls."""
    base = http.client.HTTPResponse
    return callable(getattr(http.client, "_read_headers", None)) and all(
        callable(getattr(base, m, None)) for m in ("_read_status", "_check_close")
    )


def install(pool: Any) -> bool:
    """Connections ``pool`` (a urllib3 connection pool) opens from now on read headers with
    ``Response``; False (nothing changed) where this Python does not have what it needs."""
    base = pool.ConnectionCls
    if getattr(base, "response_class", None) is Response:
        return True  # installed already (another client of the same pool)
    if not supported():
        return False
    pool.ConnectionCls = type(f"Fast{base.__name__}", (base,), {"response_class": Response})
    return True
