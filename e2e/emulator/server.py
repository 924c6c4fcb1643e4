"""Runs an aiohttp low-level server on its own event loop in a background thread.

The listening socket is bound before the thread starts, so the port is known at once and an
ephemeral port (0) never races. Code from other threads reaches the loop through :meth:`call`.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from aiohttp import web

T = TypeVar("T")
Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]

MAX_BODY = 3 * 1024 * 1024


class ServerThread:
    def __init__(
        self,
        build: Callable[[asyncio.AbstractEventLoop], Handler],
        on_stop: Callable[[], Awaitable[None]] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self._build = build
        self._on_stop = on_stop
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self._sock.listen(512)
        self._sock.setblocking(False)
        self.host, self.port = self._sock.getsockname()[:2]
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stopping: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"k8s-emulator-{self.port}", daemon=True)

    def start(self, timeout: float = 10.0) -> None:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError("the emulator server did not start in time")
        if self._error is not None:
            raise RuntimeError(f"the emulator server failed to start: {self._error}") from self._error

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._serve())
        except BaseException as exc:  # reported to start() or lost at shutdown; never re-raised in a thread
            self._error = exc
            self._ready.set()
        finally:
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        handler = self._build(loop)

        def factory(message: Any, payload: Any, protocol: Any, writer: Any, task: Any) -> web.BaseRequest:
            return web.BaseRequest(message, payload, protocol, writer, task, loop, client_max_size=MAX_BODY)

        server = web.Server(handler, request_factory=factory, handler_cancellation=True, access_log=None)
        runner = web.ServerRunner(server, shutdown_timeout=1.0, handle_signals=False)
        await runner.setup()
        site = web.SockSite(runner, self._sock)
        await site.start()
        self._ready.set()
        try:
            await self._stopping.wait()
        finally:
            if self._on_stop is not None:
                await self._on_stop()
            await runner.cleanup()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = 30.0) -> T:
        """Run ``coro`` on the server loop and wait for its result (not from the loop thread itself)."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("Emulator methods must not be called from the server thread")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        if not self._thread.is_alive():
            return
        stopping = self._stopping
        if stopping is not None:
            self.loop.call_soon_threadsafe(stopping.set)
        self._thread.join(timeout)
