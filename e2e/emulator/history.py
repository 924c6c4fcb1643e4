"""Watch events and the bounded per-resource event history that lets a watch resume.

The history plays etcd's role: a watch from resourceVersion ``rv`` replays every retained event newer
than ``rv``. Once older events were evicted (or compacted on purpose), a too-old ``rv`` is answered
with 410 Gone, which makes clients relist exactly as against a real apiserver.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from webhook.core.api.objects import Obj

from .codec import encode


@dataclass(slots=True)
class WatchEvent:
    """One committed change. ``obj`` is the new state (for DELETED, the last state at the delete's rv)."""

    type: str
    obj: Obj
    old: Obj | None
    rv: int
    _lines: dict[str, bytes] = field(default_factory=dict)

    def line(self, type_: str | None = None) -> bytes:
        """The JSON line a watch stream sends, encoded once and shared by every watcher."""
        t = type_ or self.type
        cached = self._lines.get(t)
        if cached is None:
            cached = encode({"type": t, "object": self.obj}) + b"\n"
            self._lines[t] = cached
        return cached


class History:
    """The last ``capacity`` events of one resource; ``floor`` is the oldest rv a watch may start at."""

    def __init__(self, capacity: int) -> None:
        self._events: deque[WatchEvent] = deque()
        self._capacity = max(1, capacity)
        self.floor = 0

    def append(self, event: WatchEvent) -> None:
        self._events.append(event)
        if len(self._events) > self._capacity:
            self.floor = self._events.popleft().rv

    def since(self, rv: int) -> list[WatchEvent] | None:
        """Events newer than ``rv``, oldest first; None when some of them were already evicted."""
        if rv < self.floor:
            return None
        out: list[WatchEvent] = []
        for event in reversed(self._events):
            if event.rv <= rv:
                break
            out.append(event)
        out.reverse()
        return out

    def compact(self, upto: int) -> None:
        """Forget everything up to ``upto`` (etcd compaction): older watch starts get 410."""
        while self._events and self._events[0].rv <= upto:
            self._events.popleft()
        self.floor = max(self.floor, upto)
