"""Upstream's ``passiveAssumeCache`` (``volumebinding``) for one kind: the informer's objects, and
objects assumed in memory only (Reserve's), each under the token of the reservation that assumed it.

An assumed object is seen only while the stored one has the resourceVersion it was assumed from:
any other version from the informer (the API's answer to PreBind, a deletion) drops the assumption,
as upstream's informer update does; a resync of the same version keeps it. Only the token that
assumed an object restores it, so a later reservation of the same object is not undone by an
earlier one's Unreserve."""

from __future__ import annotations

from typing import Generic, TypeVar

from ..api.objects import Obj, as_str, meta

K = TypeVar("K")


def resource_version(obj: Obj) -> str:
    return as_str(meta(obj).get("resourceVersion"))


class AssumeCache(Generic[K]):
    def __init__(self) -> None:
        #: The informer's objects by key (read it; ``put``/``delete`` keep the assumptions right).
        self.stored: dict[K, Obj] = {}
        self._assumed: dict[K, tuple[Obj, str]] = {}

    def get(self, key: K) -> Obj | None:
        """The assumed object while it is current, else the informer's."""
        stored = self.stored.get(key)
        held = self._assumed.get(key)
        if stored is not None and held is not None and resource_version(held[0]) == resource_version(stored):
            return held[0]
        return stored

    def put(self, key: K, obj: Obj) -> Obj | None:
        """The informer's new version; the old one (or None)."""
        old = self.stored.get(key)
        self.stored[key] = obj
        self._expire(key)
        return old

    def delete(self, key: K) -> Obj | None:
        old = self.stored.pop(key, None)
        self._expire(key)
        return old

    def assume(self, key: K, obj: Obj, token: str) -> bool:
        """``Assume``: refused (False) unless the stored object has ``obj``'s version."""
        stored = self.stored.get(key)
        if stored is None or resource_version(stored) != resource_version(obj):
            return False
        self._assumed[key] = (obj, token)
        return True

    def restore(self, key: K, token: str) -> None:
        """``Restore``: forget what ``token`` assumed for ``key``, if it still holds it."""
        held = self._assumed.get(key)
        if held is not None and held[1] == token:
            del self._assumed[key]

    def _expire(self, key: K) -> None:
        held = self._assumed.get(key)
        stored = self.stored.get(key)
        if held is not None and (stored is None or resource_version(stored) != resource_version(held[0])):
            del self._assumed[key]
