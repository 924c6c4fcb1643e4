"""The versioned object store: one global resourceVersion counter, per-resource tables and watch fan-out.

Stored objects are never mutated after they are committed (writers always commit fresh dicts), so a
reader may serialise a stored object without copying it and one encoded watch line serves all
watchers. Every method is atomic under one lock; the lock is never held across I/O.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable
from dataclasses import dataclass, field

from webhook.core.api.objects import Obj

from .history import History, WatchEvent

Sink = Callable[[WatchEvent], None]
Predicate = Callable[[Obj], bool]


class StoreConflict(Exception):
    """The stored object's resourceVersion is not the one the writer read (optimistic lock)."""


class StoreExists(Exception):
    """An object with this namespace/name is already stored."""


class StoreMissing(Exception):
    """No object with this namespace/name is stored."""


@dataclass(slots=True)
class _Table:
    objects: dict[str, dict[str, Obj]]
    history: History
    watchers: set[Sink] = field(default_factory=set)
    #: Every (namespace, name), sorted: a page of a list starts by bisection, as etcd's range read
    #: starts at its key, instead of sorting the whole table per page.
    keys: list[tuple[str, str]] = field(default_factory=list)


def _ident(obj: Obj) -> tuple[str, str]:
    m = obj["metadata"]
    return m.get("namespace") or "", m["name"]


def _with_rv(obj: Obj, rv: int) -> Obj:
    """A shallow copy with a new resourceVersion (only ``metadata`` is rebuilt)."""
    out = dict(obj)
    meta = dict(obj["metadata"])
    meta["resourceVersion"] = str(rv)
    out["metadata"] = meta
    return out


class Store:
    """All objects of all resources, their history, their watchers and the change condition."""

    def __init__(self, history_size: int = 2000) -> None:
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._tables: dict[str, _Table] = {}
        self._history_size = history_size
        self._rv = 0
        #: Bumped on every commit; :meth:`wait_changed` waits for it to move.
        self.version = 0

    # --- reads ----------------------------------------------------------------------------------

    def _table(self, key: str) -> _Table:
        table = self._tables.get(key)
        if table is None:
            table = _Table({}, History(self._history_size))
            self._tables[key] = table
        return table

    @property
    def resource_version(self) -> int:
        with self._lock:
            return self._rv

    def get(self, key: str, namespace: str, name: str) -> Obj | None:
        with self._lock:
            return self._table(key).objects.get(namespace, {}).get(name)

    def select(self, key: str, namespace: str | None) -> tuple[list[Obj], int]:
        """Objects sorted by namespace and name (the apiserver's key order) and the list's rv."""
        items, rv, _ = self.page(key, namespace, None, 0, None)
        return items, rv

    def page(
        self,
        key: str,
        namespace: str | None,
        after: tuple[str, str] | None,
        limit: int,
        predicate: Predicate | None,
    ) -> tuple[list[Obj], int, int]:
        """Up to ``limit`` objects (0: all) in key order after the key ``after``, those ``predicate``
        accepts; the list's rv; how many keys follow the last one read (as etcd's range read tells
        the API server: some may not match ``predicate``)."""
        with self._lock:
            table = self._table(key)
            keys = table.keys
            lo, hi = 0, len(keys)
            if namespace is not None:
                lo, hi = bisect_left(keys, (namespace, "")), bisect_left(keys, (namespace + "\0", ""))
            if after is not None:
                lo = max(lo, bisect_right(keys, after))
            objects = table.objects
            items: list[Obj] = []
            i = lo
            while i < hi and (limit <= 0 or len(items) < limit):
                ns, name = keys[i]
                obj = objects[ns][name]
                if predicate is None or predicate(obj):
                    items.append(obj)
                i += 1
            return items, self._rv, hi - i

    # --- writes ---------------------------------------------------------------------------------

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def create(self, key: str, obj: Obj) -> WatchEvent:
        """Store a new object, stamping the next resourceVersion into it."""
        with self._lock:
            ns, name = _ident(obj)
            bucket = self._table(key).objects.setdefault(ns, {})
            if name in bucket:
                raise StoreExists(name)
            rv = self._next_rv()
            obj["metadata"]["resourceVersion"] = str(rv)
            bucket[name] = obj
            insort(self._table(key).keys, (ns, name))
            return self._commit(key, WatchEvent("ADDED", obj, None, rv))

    def update(self, key: str, obj: Obj, expect_rv: str) -> WatchEvent:
        """Replace an object if it is still at ``expect_rv``; StoreConflict otherwise."""
        with self._lock:
            ns, name = _ident(obj)
            bucket = self._table(key).objects.get(ns, {})
            current = bucket.get(name)
            if current is None:
                raise StoreMissing(name)
            if current["metadata"]["resourceVersion"] != expect_rv:
                raise StoreConflict(name)
            rv = self._next_rv()
            obj["metadata"]["resourceVersion"] = str(rv)
            bucket[name] = obj
            return self._commit(key, WatchEvent("MODIFIED", obj, current, rv))

    def delete(self, key: str, namespace: str, name: str, expect_rv: str | None = None) -> WatchEvent:
        """Remove an object (if still at ``expect_rv`` when given); the event carries the delete's rv."""
        with self._lock:
            bucket = self._table(key).objects.get(namespace, {})
            current = bucket.get(name)
            if current is None:
                raise StoreMissing(name)
            if expect_rv is not None and current["metadata"]["resourceVersion"] != expect_rv:
                raise StoreConflict(name)
            del bucket[name]
            if not bucket:
                self._table(key).objects.pop(namespace, None)
            keys = self._table(key).keys
            del keys[bisect_left(keys, (namespace, name))]
            rv = self._next_rv()
            return self._commit(key, WatchEvent("DELETED", _with_rv(current, rv), current, rv))

    def _commit(self, key: str, event: WatchEvent) -> WatchEvent:
        table = self._table(key)
        table.history.append(event)
        for sink in tuple(table.watchers):
            sink(event)
        self.version += 1
        self._changed.notify_all()
        return event

    # --- watches and waiting ----------------------------------------------------------------------

    def watch(
        self, key: str, since: int | None, sink: Sink
    ) -> tuple[list[WatchEvent] | None, list[Obj], int]:
        """Register ``sink`` atomically with what precedes it.

        With ``since`` the result is the replayed history (None when too old: the caller answers 410
        and nothing is registered); without it, the current objects (to send as ADDED) and their rv.
        """
        with self._lock:
            table = self._table(key)
            if since is not None:
                replay = table.history.since(since)
                if replay is None:
                    return None, [], self._rv
                table.watchers.add(sink)
                return replay, [], self._rv
            items, rv = self.select(key, None)
            table.watchers.add(sink)
            return [], items, rv

    def unwatch(self, key: str, sink: Sink) -> None:
        with self._lock:
            self._table(key).watchers.discard(sink)

    def compact(self) -> int:
        """Compact every history up to the current rv; returns that rv."""
        with self._lock:
            for table in self._tables.values():
                table.history.compact(self._rv)
            return self._rv

    def touch(self) -> None:
        """Wake :meth:`wait_changed` waiters for a change outside the objects (a watch opened or closed)."""
        with self._changed:
            self.version += 1
            self._changed.notify_all()

    def wait_changed(self, seen: int, timeout: float) -> int:
        """Block until :attr:`version` differs from ``seen`` or ``timeout`` passes; returns the version."""
        with self._changed:
            self._changed.wait_for(lambda: self.version != seen, timeout)
            return self.version

    def count(self) -> int:
        with self._lock:
            return sum(len(b) for t in self._tables.values() for b in t.objects.values())
