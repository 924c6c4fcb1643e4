"""``kube.headers``: the header block read by a split gives what ``http.client`` gives, for every
block (well-formed ones on the fast path, any other through the stdlib parser), and ``Response``
begins a response exactly as ``http.client.HTTPResponse`` does."""

from __future__ import annotations

import http.client
import io
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.kube.headers import (
    Response,
    install,
    parse_header_lines,
    read_header_lines,
    supported,
)

NAME_CHARS = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != ":")
names = st.text(NAME_CHARS, min_size=1, max_size=12)
values = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\r\n\x7f"), max_size=20
)
blanks = st.sampled_from(["", " ", "  ", "\t", " \t"])
endings = st.sampled_from(["\r\n", "\n"])

#: Lines the fast path leaves to the stdlib: folded, nameless, unnamed, bare CR, From, no colon.
odd_lines = st.sampled_from(
    [
        " folded continuation\r\n",
        "\tfolded\r\n",
        ": no name\r\n",
        "no colon at all\r\n",
        "X-Cr: a\rb\r\n",
        "From someone\r\n",
        "Bad Name: value\r\n",
        "X-Del\x7f: v\r\n",
        "\xe9: latin name\r\n",
    ]
)


@st.composite
def header_blocks(draw: Any) -> bytes:
    lines = []
    for _ in range(draw(st.integers(0, 8))):
        if draw(st.integers(0, 9)) == 0:
            lines.append(draw(odd_lines))
        else:
            lines.append(f"{draw(names)}:{draw(blanks)}{draw(values)}{draw(endings)}")
    end = draw(st.sampled_from(["\r\n", "\n", ""]))
    return "".join([*lines, end]).encode("iso-8859-1")


def stdlib(block: bytes) -> http.client.HTTPMessage:
    return http.client.parse_headers(io.BytesIO(block))


def ours(block: bytes) -> http.client.HTTPMessage:
    return parse_header_lines(read_header_lines(io.BytesIO(block)))


def same(a: http.client.HTTPMessage, b: http.client.HTTPMessage) -> None:
    assert type(a) is type(b) is http.client.HTTPMessage
    assert a.items() == b.items()
    assert a.get_payload() == b.get_payload()
    assert [type(d) for d in a.defects] == [type(d) for d in b.defects]


@settings(max_examples=400, deadline=None)
@given(header_blocks())
def test_any_header_block_reads_as_the_stdlib_reads_it(block: bytes) -> None:
    same(ours(block), stdlib(block))


@pytest.mark.parametrize(
    "block",
    [
        b"Content-Type: application/json\r\nContent-Length: 12\r\n\r\n",
        b"X-A:  padded \r\nX-A: twice\r\nx-a: lower\r\n\r\n",
        b"Empty:\r\nAlso-Empty: \r\n\r\n",
        b"Audit-Id: 1\r\n folded\r\n\r\n",
        b"no colon\r\nX: 1\r\n\r\n",
        b"X: a\rb\r\n\r\n",
        b"From x\r\n\r\n",
        b"\r\n",
        b"",
    ],
)
def test_the_usual_and_the_odd_blocks(block: bytes) -> None:
    same(ours(block), stdlib(block))


# -- Response.begin ------------------------------------------------------------------------------


class FakeSocket:
    """The bytes a server sent (``HTTPResponse`` reads a socket through ``makefile``)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def makefile(self, mode: str) -> io.BytesIO:
        return io.BytesIO(self.data)


def began(cls: type[http.client.HTTPResponse], raw: bytes, method: str) -> dict[str, Any]:
    resp = cls(FakeSocket(raw), method=method)  # type: ignore[arg-type]
    try:
        resp.begin()
    except http.client.HTTPException as e:
        return {"error": type(e)}
    out = {k: getattr(resp, k) for k in ("status", "reason", "version", "chunked", "length", "will_close")}
    out["headers"] = resp.headers.items()
    out["chunk_left"] = getattr(resp, "chunk_left", None)
    out["body"] = resp.read()
    return out


status_lines = st.sampled_from(
    [
        "HTTP/1.1 200 OK",
        "HTTP/1.1 201 Created ",
        "HTTP/1.0 200 OK",
        "HTTP/1.1 204 No Content",
        "HTTP/1.1 304 Not Modified",
        "HTTP/1.1 409 Conflict",
        "HTTP/1.1 101 Switching",
        "HTTP/2.0 200 OK",
        "HTTP/1.1 500",
    ]
)
framing = st.lists(
    st.sampled_from(
        [
            "Transfer-Encoding: chunked",
            "Transfer-Encoding: CHUNKED",
            "Transfer-Encoding: gzip",
            "Content-Length: 5",
            "Content-Length: -1",
            "Content-Length: x",
            "Content-Length: 0",
            "Connection: close",
            "Connection: keep-alive",
            "Keep-Alive: timeout=5",
            "Content-Type: application/json",
        ]
    ),
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(status_lines, framing, st.booleans(), st.sampled_from(["GET", "HEAD", "POST"]))
def test_a_response_begins_as_the_stdlibs_does(
    status: str, headers: list[str], cont: bool, method: str
) -> None:
    chunked = any(h.lower() == "transfer-encoding: chunked" for h in headers)
    body = b"5\r\nhello\r\n0\r\n\r\n" if chunked else b"hello"
    preamble = b"HTTP/1.1 100 Continue\r\nX-Skip: 1\r\n\r\n" if cont else b""
    raw = preamble + (status + "\r\n" + "".join(h + "\r\n" for h in headers) + "\r\n").encode() + body
    assert began(Response, raw, method) == began(http.client.HTTPResponse, raw, method)


@pytest.mark.parametrize(
    ("headers", "error"),
    [
        (b"X: " + b"a" * 65537 + b"\r\n", "LineTooLong"),
        (b"".join(b"X-%d: v\r\n" % i for i in range(101)), "HTTPException"),
    ],
)
def test_a_header_line_too_long_or_too_many_lines_fail_as_in_the_stdlib(headers: bytes, error: str) -> None:
    raw = b"HTTP/1.1 200 OK\r\n" + headers + b"\r\nbody"
    assert began(Response, raw, "GET") == began(http.client.HTTPResponse, raw, "GET")
    assert began(Response, raw, "GET")["error"].__name__ == error


def test_this_python_has_what_begin_needs() -> None:
    assert supported()


def test_install_gives_a_pools_connections_the_response_once() -> None:
    import urllib3

    pool = urllib3.HTTPConnectionPool("127.0.0.1", 1)
    base = pool.ConnectionCls
    assert install(pool)
    installed = pool.ConnectionCls
    assert installed is not base
    assert issubclass(installed, base)
    assert installed.response_class is Response  # type: ignore[attr-defined]
    assert install(pool)
    assert pool.ConnectionCls is installed
    assert urllib3.HTTPConnectionPool("127.0.0.1", 1).ConnectionCls is base  # other pools untouched
