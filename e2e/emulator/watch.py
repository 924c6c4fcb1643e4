"""One watch stream: replay or initial state, live events, bookmarks, timeout and forced drops.

Events reach the stream synchronously from the store's commit (under its lock, on the server loop),
so the stream sees a gap-free sequence and knows that an empty queue means it is caught up with the
store; that is what makes its BOOKMARK resourceVersions safe resume points. Label/field filtering
follows the apiserver: an object that stops matching is reported DELETED, one that starts matching
ADDED.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from webhook.core.api.objects import Obj

from . import errors
from .codec import encode
from .history import WatchEvent
from .resources import ResourceType
from .store import Store

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
_TICK, _END, _ABORT = "tick", "end", "abort"


@dataclass(frozen=True, slots=True)
class WatchOptions:
    since: int | None  # None: start with the current state as ADDED events
    bookmarks: bool
    timeout: float
    bookmark_interval: float
    initial_events_end: bool = False  # sendInitialEvents=true: bookmark after the initial state


class WatchStream:
    """Created and iterated on the server loop; :meth:`drop` may be called from any thread."""

    def __init__(
        self,
        store: Store,
        rt: ResourceType,
        namespace: str | None,
        predicate: Callable[[Obj], bool] | None,
        options: WatchOptions,
    ) -> None:
        self._store = store
        self._rt = rt
        self._namespace = namespace
        self._predicate = predicate
        self._options = options
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._queue: asyncio.Queue[WatchEvent | str] = asyncio.Queue()
        self._initial: list[bytes] = []
        self._timers: list[asyncio.TimerHandle] = []
        self.ended_by: str = ""

    # --- filtering --------------------------------------------------------------------------------

    def _matches(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        if self._namespace is not None and obj["metadata"].get("namespace", "") != self._namespace:
            return False
        return self._predicate is None or self._predicate(obj)

    def _line(self, event: WatchEvent) -> bytes | None:
        if self._namespace is None and self._predicate is None:
            return event.line()
        now = self._matches(event.obj)
        if event.type == "ADDED":
            return event.line() if now else None
        if event.type == "DELETED":
            return event.line() if self._matches(event.old) else None
        before = self._matches(event.old)
        if now and before:
            return event.line()
        if now:
            return event.line("ADDED")
        if before:
            return event.line("DELETED")
        return None

    # --- lifecycle --------------------------------------------------------------------------------

    def _deliver(self, event: WatchEvent) -> None:
        if threading.get_ident() == self._thread:
            self._queue.put_nowait(event)
        else:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, event)

    def _bookmark(self, rv: int, initial_end: bool = False) -> bytes:
        meta: Obj = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        obj = {"kind": self._rt.kind, "apiVersion": self._rt.api_version, "metadata": meta}
        return encode({"type": "BOOKMARK", "object": obj}) + b"\n"

    def open(self) -> None:
        """Register with the store; 410 Gone (nothing registered) when ``since`` was compacted."""
        since = self._options.since
        replay, items, rv = self._store.watch(self._rt.key, since, self._deliver)
        if replay is None:
            raise errors.gone(f"too old resource version: {since} ({rv})")
        for obj in items:
            if self._matches(obj):
                self._initial.append(WatchEvent("ADDED", obj, None, 0).line())
        for event in replay:
            line = self._line(event)
            if line is not None:
                self._initial.append(line)
        if self._options.initial_events_end and self._options.bookmarks:
            self._initial.append(self._bookmark(rv, initial_end=True))
        self._timers.append(self._loop.call_later(self._options.timeout, self._queue.put_nowait, _END))
        if self._options.bookmarks and self._options.bookmark_interval > 0:
            self._schedule_tick()

    def _schedule_tick(self) -> None:
        self._timers.append(
            self._loop.call_later(self._options.bookmark_interval, self._queue.put_nowait, _TICK)
        )

    def close(self) -> None:
        self._store.unwatch(self._rt.key, self._deliver)
        for timer in self._timers:
            timer.cancel()

    def drop(self, abort: bool = True) -> None:
        """End the stream: ``abort`` cuts the connection, otherwise it ends like a server timeout."""
        self._loop.call_soon_threadsafe(self._queue.put_nowait, _ABORT if abort else _END)

    async def chunks(self) -> AsyncIterator[bytes]:
        """Encoded JSON lines, batched when several events are already waiting."""
        if self._initial:
            yield b"".join(self._initial)
            self._initial = []
        while True:
            item = await self._queue.get()
            out: list[bytes] = []
            while True:
                if isinstance(item, str):
                    if item == _TICK:
                        if self._queue.empty():
                            out.append(self._bookmark(self._store.resource_version))
                        self._schedule_tick()
                    else:
                        if item == _END and self._options.bookmarks and self._queue.empty():
                            out.append(self._bookmark(self._store.resource_version))
                        self.ended_by = item
                        break
                else:
                    line = self._line(item)
                    if line is not None:
                        out.append(line)
                if self._queue.empty():
                    break
                item = self._queue.get_nowait()
            if out:
                yield b"".join(out)
            if self.ended_by:
                return
