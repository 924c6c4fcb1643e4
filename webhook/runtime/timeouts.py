"""Read deadlines for uvicorn's HTTP/1.1 protocol: a slow client cannot hold a connection.

uvicorn (h11) only times out idle keep-alive connections, and any byte received cancels that
timer; a client sending a request one byte a second (slowloris) holds its connection, and a task
of the server, for as long as it likes. ``deadline_protocol`` makes a subclass of uvicorn's
``H11Protocol`` that closes the connection when

* the request line and headers of a request have not all arrived ``header_timeout`` seconds after
  it began (the connection was made, or the first byte after the previous response), or
* its body has not all arrived ``body_timeout`` seconds after the headers did,

as Go's ``http.Server`` does with ``ReadHeaderTimeout`` and ``ReadTimeout``. Time spent answering
(ours) does not count; an idle keep-alive connection is uvicorn's business (``timeout_keep_alive``).

Pass the class as ``uvicorn.Config(http=...)``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("draxr.serve")

#: Defaults, well under the apiserver's 3 s webhook timeout (draxr's webhook configurations): the
#: apiserver writes a request at once, and a 3 MiB body takes milliseconds on a cluster network.
DEFAULT_HEADER_TIMEOUT: Final = 1.0
DEFAULT_BODY_TIMEOUT: Final = 2.0

HEADERS: Final = "request line and headers"
BODY: Final = "body"


class DeadlineH11Protocol(H11Protocol):
    """``H11Protocol`` with read deadlines; make one with ``deadline_protocol``."""

    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT

    _deadline: asyncio.TimerHandle | None = None
    _phase: str = ""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(HEADERS, self.header_timeout)  # the first request begins with the connection

    def data_received(self, data: bytes) -> None:
        if not self._phase and self.conn.their_state is h11.IDLE:
            self._arm(HEADERS, self.header_timeout)  # the first byte of the next request
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()  # pipelined bytes may have begun the next request

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _follow(self) -> None:
        """Arm or disarm the deadline for the state of the client's side of the connection."""
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            if self._phase != BODY:
                self._arm(BODY, self.body_timeout)
        elif state is h11.IDLE:
            if self._phase != HEADERS:
                if self.conn.trailing_data[0]:
                    self._arm(HEADERS, self.header_timeout)
                else:
                    self._disarm()  # between requests: the keep-alive timeout applies
        else:  # DONE, MUST_CLOSE, CLOSED, ERROR: nothing more to read for this request
            self._disarm()

    def _arm(self, phase: str, timeout: float) -> None:
        self._disarm()
        self._phase = phase
        self._deadline = self.loop.call_later(timeout, self._expired, phase, timeout)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._phase = ""

    def _expired(self, phase: str, timeout: float) -> None:
        self._deadline = None
        self._phase = ""
        if self.transport.is_closing():
            return
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        log.info("closing the connection of %s: its %s took longer than %gs", client, phase, timeout)
        self.transport.close()


def deadline_protocol(
    header_timeout: float = DEFAULT_HEADER_TIMEOUT, body_timeout: float = DEFAULT_BODY_TIMEOUT
) -> type[DeadlineH11Protocol]:
    """An ``H11Protocol`` class closing connections whose headers or body arrive too slowly."""
    for name, value in (("header", header_timeout), ("body", body_timeout)):
        if not value > 0:
            raise ValueError(f"the {name} timeout must be a positive number of seconds, not {value}")
    return type(
        "DeadlineH11Protocol",
        (DeadlineH11Protocol,),
        {"header_timeout": float(header_timeout), "body_timeout": float(body_timeout)},
    )


__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_HEADER_TIMEOUT",
    "DeadlineH11Protocol",
    "deadline_protocol",
]
