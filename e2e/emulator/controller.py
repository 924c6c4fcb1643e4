"""What the emulated controllers (garbage collector, resourceclaim, deployment and replicaset) share:
they listen to the store's commits and do their work as tasks on the emulator's loop, which tests
and shutdown can wait for (``drain``) or abandon (``cancel``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from .history import WatchEvent
from .registry import Registry
from .resources import ResourceIndex

log = logging.getLogger(__name__)


class Controller:
    """A store listener whose work runs as tasks on ``loop``; ``what`` names it in error logs."""

    what = "controller"

    def __init__(self, registry: Registry, index: ResourceIndex, loop: asyncio.AbstractEventLoop) -> None:
        self._registry = registry
        self._store = registry.store
        self._index = index
        self._loop = loop
        self._tasks: set[asyncio.Task[None]] = set()
        self._store.add_listener(self._on_commit)

    def _on_commit(self, key: str, event: WatchEvent) -> None:
        """Store listener (under the store lock): schedule work, never do it here."""
        raise NotImplementedError

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` on the loop (from any thread)."""

        def start() -> None:
            self._track(self._loop.create_task(coro))

        self._loop.call_soon_threadsafe(start)

    def _track(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s failed", self.what, exc_info=task.exception())

    @property
    def busy(self) -> bool:
        return bool(self._tasks)

    def cancel(self) -> None:
        """Abandon pending work (server shutdown)."""
        for task in list(self._tasks):
            task.cancel()

    async def drain(self) -> None:
        """Wait until no work is pending (tests and shutdown)."""
        await asyncio.sleep(0)  # let work scheduled by the last commits start
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
            await asyncio.sleep(0)
