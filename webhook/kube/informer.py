"""List + watch with resume from resourceVersion and relist on 410 Gone (client-go's Reflector).

Each informer keeps its own store of plain dicts and calls a handler with ``(type, obj)`` for every
change: on (re)list it emits the difference against what it knew, so handlers never miss a
deletion that happened while the watch was down. The store is keyed by namespace/name, its users
often by uid: a key whose object now has another uid (a StatefulSet pod recreated under its name
while the watch was down) is told as DELETED (the old object) then ADDED (the new one), where
client-go hands ``UpdateFunc(old, new)`` and leaves the comparison of uids to its users.

Whatever version it lists, resource.k8s.io objects are stored and handed on in the v1 shape
(``core.versions``), then through the informer's ``transform`` (``kube.trim``: only the fields
draxr reads are kept).

Lists are paged (``kube.pager``: ``limit``/``continue``, ``page_size`` objects a page, an expired
continue token starts the list over), each page transformed before the next is read, so a relist
of 10,000 pods never holds them all as the server sent them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace

from ..core.api.objects import Obj
from ..core.api.objects import key as object_key
from ..core.api.objects import uid as object_uid
from ..core.api.versions import to_v1
from . import pager
from .client import ApiError, KubeClient, WatchStream
from .resources import Resource
from .trim import Transform

__all__ = ["PAGE_SIZE", "Informer", "changes"]

Handler = Callable[[str, Obj], None]  # ("ADDED" | "MODIFIED" | "DELETED", object)

#: Objects per page of a list. client-go's pager asks for 500; here a page of raw objects is
#: transient garbage that fragments Python's heap, and 100 keeps the worker's resident memory near
#: its cache's size (bench/memory.py: 4.7 MiB per 1,000 pods against 6.3 with 500).
PAGE_SIZE = 100

log = logging.getLogger("draxr.informer")


class Informer:
    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        handler: Handler,
        *,
        field_selector: str | None = None,
        watch_timeout: int = 300,
        min_backoff: float = 0.2,
        max_backoff: float = 30.0,
        versions: tuple[str, ...] | None = None,
        transform: Transform | None = None,
        page_size: int = PAGE_SIZE,
    ) -> None:
        """``versions``: the resource may be served in any of these (newest first) or not at all;
        discovery decides before the first list. Not served: synced, empty, and nothing watched.
        ``transform``: what is stored and handed on of each object (None: all of it).
        ``page_size``: objects per list page (0: one unpaged list)."""
        self.client = client
        self.resource = resource
        self.versions = versions
        self.handler = handler
        self.field_selector = field_selector
        self.watch_timeout = watch_timeout
        self.min_backoff = min_backoff
        self.max_backoff = max_backoff
        self.transform = transform
        self.page_size = page_size
        self.synced = threading.Event()
        #: Why the last list (or discovery before it) failed; None once a list succeeds. What a
        #: readiness check says of a cache that has not synced.
        self.list_error: str | None = None
        self.resource_version = ""
        self.relists = 0
        self.pages = 0  # list pages read, in all
        self.expired_lists = 0  # paged lists restarted because a continue token expired
        self._store: dict[str, Obj] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stream: WatchStream | None = None
        self._thread: threading.Thread | None = None

    # -- store ------------------------------------------------------------------------------

    def get(self, key: str) -> Obj | None:
        with self._lock:
            return self._store.get(key)

    def items(self) -> list[Obj]:
        with self._lock:
            return list(self._store.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._store)

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> Informer:
        self._thread = threading.Thread(target=self.run, name=f"informer-{self.resource.plural}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def run(self) -> None:
        backoff = self.min_backoff
        need_list = True
        while not self._stop.is_set():
            listing = need_list
            try:
                if self.versions is not None and not self._discover():
                    return
                if need_list:
                    self._relist()
                    need_list = False
                    listing = False
                need_list = self._watch()
                backoff = self.min_backoff
            except ApiError as e:
                need_list = need_list or e.gone
                if listing:
                    self.list_error = str(e)
                log.warning("informer %s: %s", self.resource.plural, e)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, self.max_backoff)
            except Exception as e:  # connection errors: keep the resourceVersion, watch again
                if self._stop.is_set():
                    break
                if listing:
                    self.list_error = f"{type(e).__name__}: {e}"
                log.warning("informer %s: %s: %s", self.resource.plural, type(e).__name__, e)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, self.max_backoff)

    def _discover(self) -> bool:
        """Settle the served version (once); False when the API server serves none of them."""
        res = self.resource
        version = self.client.served(res.group, res.plural, self.versions or ())
        if version is None:
            log.info("informer %s: %s is not served; nothing to watch", res.plural, res.group)
            self.synced.set()
            return False
        self.resource = replace(res, version=version)
        self.versions = None
        return True

    def _prepare(self, obj: Obj) -> Obj:
        """A listed or watched object as stored: typed, in the v1 shape, transformed."""
        obj.setdefault("apiVersion", self.resource.api_version)
        obj.setdefault("kind", self.resource.kind)
        obj = to_v1(obj)
        return self.transform(obj) if self.transform is not None else obj

    def list_all(self) -> tuple[dict[str, Obj], str]:
        """Every object by key, and the resourceVersion to watch from (``pager.list_all``: an
        expired continue token starts the list over)."""
        listing = pager.list_all(
            self.client,
            self.resource,
            page_size=self.page_size,
            field_selector=self.field_selector,
            transform=self._prepare,
        )
        self.pages += listing.pages
        self.expired_lists += listing.restarts
        return {object_key(item): item for item in listing.items}, listing.resource_version

    def _relist(self) -> None:
        fresh, resource_version = self.list_all()
        with self._lock:
            old = self._store
            self._store = fresh
        for key, obj in old.items():
            if key not in fresh:
                self.handler("DELETED", obj)
        for key, obj in fresh.items():
            for etype, changed in changes(old.get(key), obj):
                self.handler(etype, changed)
        self.resource_version = resource_version
        self.relists += 1
        self.list_error = None
        self.synced.set()

    def _watch(self) -> bool:
        """Consume one watch stream; returns True when a relist is needed (410 Gone)."""
        stream = self.client.watch(
            self.resource,
            self.resource_version,
            timeout_seconds=self.watch_timeout,
            field_selector=self.field_selector,
        )
        self._stream = stream
        if self._stop.is_set():
            stream.close()
            return False
        for event in stream:
            if self._stop.is_set():
                return False
            etype = event.get("type")
            obj = event.get("object")
            if not isinstance(obj, dict):
                continue
            if etype == "ERROR":
                if obj.get("code") == 410:
                    return True
                raise ApiError(int(obj.get("code") or 500), obj, "watch", self.resource.plural)
            rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
            if etype == "BOOKMARK":
                self.resource_version = rv or self.resource_version
                continue
            if etype not in ("ADDED", "MODIFIED", "DELETED"):
                continue
            obj = self._prepare(obj)
            key = object_key(obj)
            with self._lock:
                if etype == "DELETED":
                    prev = self._store.pop(key, None)
                else:
                    prev = self._store.get(key)
                    self._store[key] = obj
            for told, changed in changes(prev, obj, deleted=etype == "DELETED"):
                self.handler(told, changed)
            if rv:
                self.resource_version = rv
        return False


def changes(prev: Obj | None, obj: Obj | None, *, deleted: bool = False) -> list[tuple[str, Obj]]:
    """What handlers are told when the object stored at one key goes from ``prev`` to ``obj``
    (None: not there). ``deleted``: ``obj`` is a watch's DELETED, the object's last state.

    An object under the same key with another uid is another object: the old one is DELETED, the
    new one ADDED. An unchanged resourceVersion tells nothing (a relist of what the watch showed).
    """
    if deleted:
        assert obj is not None
        if prev is not None and object_uid(prev) != object_uid(obj):
            return [("DELETED", prev), ("DELETED", obj)]
        return [("DELETED", obj)]
    if obj is None:
        return [] if prev is None else [("DELETED", prev)]
    if prev is None:
        return [("ADDED", obj)]
    if object_uid(prev) != object_uid(obj):
        return [("DELETED", prev), ("ADDED", obj)]
    if _rv(prev) == _rv(obj):
        return []
    return [("MODIFIED", obj)]


def _rv(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))
