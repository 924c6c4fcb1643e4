"""The controllers the emulator runs itself: ownerReference garbage collection and namespace cleanup.

Like kube-controller-manager's garbage collector they act after the fact, as API clients of the
registry (with their own identity, through admission): when an owner is deleted its dependents are
deleted in the background (dependents with finalizers just get a deletionTimestamp), a dependent
that still has a live owner only loses the dangling reference, a foreground deletion finishes once
the owner has no dependents left, and a deleted namespace takes its objects with it.
"""

from __future__ import annotations

import logging
from typing import Any

from . import errors
from .auth import authenticated
from .controller import Controller
from .history import WatchEvent
from .registry import FOREGROUND, Request
from .store import StoreConflict, StoreMissing

log = logging.getLogger(__name__)

GC_USER = authenticated(
    "system:serviceaccount:kube-system:generic-garbage-collector", ("system:serviceaccounts",)
)
NAMESPACE_USER = authenticated(
    "system:serviceaccount:kube-system:namespace-controller", ("system:serviceaccounts",)
)


class GarbageCollector(Controller):
    what = "garbage collection"

    def _on_commit(self, key: str, event: WatchEvent) -> None:
        """Store listener (under the store lock): schedule work, never do it here."""
        meta = event.obj["metadata"]
        if event.type == "DELETED":
            uid = meta.get("uid")
            if isinstance(uid, str) and self._store.dependents(uid):
                self._spawn(self._collect(uid))
            for ref in meta.get("ownerReferences") or []:
                owner = ref.get("uid") if isinstance(ref, dict) else None
                if isinstance(owner, str) and self._store.key_of_uid(owner) is not None:
                    self._spawn(self._finish_foreground(owner))
            if key == "namespaces":
                self._spawn(self._clean_namespace(meta["name"]))
        elif FOREGROUND in (meta.get("finalizers") or []) and meta.get("deletionTimestamp"):
            old_meta = (event.old or {}).get("metadata", {})
            if not old_meta.get("deletionTimestamp"):
                self._spawn(self._collect(meta.get("uid", "")))
                self._spawn(self._finish_foreground(meta.get("uid", "")))

    async def _delete(self, key: str, namespace: str, name: str, user: Any) -> None:
        rt = self._index.by_key(key)
        if rt is None:
            return
        try:
            await self._registry.delete(
                Request(rt, namespace, name, user), {"propagationPolicy": "Background"}
            )
        except errors.ApiError as exc:
            if exc.code not in (404, 409):
                log.warning("controller could not delete %s %s/%s: %s", key, namespace, name, exc)

    def _owner_alive(self, uid: str) -> bool:
        key = self._store.key_of_uid(uid)
        if key is None:
            return False
        obj = self._store.get(*key)
        return obj is not None and FOREGROUND not in (obj["metadata"].get("finalizers") or [])

    async def _collect(self, owner_uid: str) -> None:
        for key, ns, name in self._store.dependents(owner_uid):
            dep = self._store.get(key, ns, name)
            if dep is None:
                continue
            refs = [r for r in dep["metadata"].get("ownerReferences") or [] if isinstance(r, dict)]
            alive = [r for r in refs if r.get("uid") != owner_uid and self._owner_alive(str(r.get("uid")))]
            if alive:
                self._registry.drop_owner_reference(key, ns, name, owner_uid)
            elif self._store.key_of_uid(owner_uid) is None or not self._owner_alive(owner_uid):
                await self._delete(key, ns, name, GC_USER)

    async def _finish_foreground(self, owner_uid: str) -> None:
        """Remove ``foregroundDeletion`` from an owner once no dependent is left."""
        located = self._store.key_of_uid(owner_uid)
        if located is None or self._store.dependents(owner_uid):
            return
        for _ in range(8):
            owner = self._store.get(*located)
            if owner is None or FOREGROUND not in (owner["metadata"].get("finalizers") or []):
                return
            meta = dict(owner["metadata"])
            meta["finalizers"] = [f for f in meta["finalizers"] if f != FOREGROUND]
            new = {**owner, "metadata": meta}
            try:
                if not meta["finalizers"]:
                    self._store.delete(
                        located[0], located[1], located[2], owner["metadata"]["resourceVersion"]
                    )
                else:
                    self._store.update(located[0], new, owner["metadata"]["resourceVersion"])
                return
            except (StoreConflict, StoreMissing):
                continue

    async def _clean_namespace(self, namespace: str) -> None:
        for key, ns, name in list(self._store.namespaced_keys(namespace)):
            await self._delete(key, ns, name, NAMESPACE_USER)
