"""kube-controller-manager's deployment and replicaset controllers, as much as draxr's scenarios need.

* Deployment: the ReplicaSet of the current pod template is named ``<deployment>-<pod-template-hash>``
  (the hash of the template, as upstream names it; the template is compared with the hash label left
  out) and owned by the Deployment (controller, ``blockOwnerDeletion``); its selector and template
  labels get ``pod-template-hash``. It is created when missing and scaled to ``spec.replicas``; any
  other ReplicaSet of the Deployment is scaled to 0 at once (no surge, no readiness: there is no
  kubelet). ``status`` carries ``observedGeneration``, ``replicas`` and ``updatedReplicas``.
* ReplicaSet: creates or deletes pods until ``spec.replicas`` live pods (not terminating, not
  finished) are owned by it; a new pod is ``generateName: <replicaset>-`` with the template's labels,
  annotations and spec, owned by the ReplicaSet (controller, ``blockOwnerDeletion``), created through
  admission (so mutating webhooks see it, as they see a real controller's pods); unbound pods are
  deleted first. ``status.replicas`` counts the live pods.

Both act after the fact, as API clients of the registry with their own identities. Each object is
synced by one task at a time (a change seen meanwhile syncs it again), so a burst of events never
creates more pods than asked. Deleting a Deployment takes its ReplicaSets and pods with it through
the garbage collector (owner references).
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from typing import Any

from webhook.core.api.objects import Obj, as_dict, controller_ref

from . import errors
from .auth import authenticated
from .controller import Controller
from .history import WatchEvent
from .registry import Registry, Request
from .resources import ResourceIndex

log = logging.getLogger(__name__)

DEPLOYMENT_USER = authenticated(
    "system:serviceaccount:kube-system:deployment-controller", ("system:serviceaccounts",)
)
REPLICASET_USER = authenticated(
    "system:serviceaccount:kube-system:replicaset-controller", ("system:serviceaccounts",)
)
HASH_LABEL = "pod-template-hash"
DEPLOYMENTS = "deployments.apps"
REPLICASETS = "replicasets.apps"
#: ``rand.SafeEncodeString``'s alphabet: no vowels, no 0/1/3 (no words, nothing ambiguous).
_SAFE = "bcdfghjklmnpqrstvwxz2456789"

Key = tuple[str, str, str]  # (resource key, namespace, name)


def template_hash(template: Obj, collision_count: int = 0) -> str:
    """A stable, name-safe hash of a pod template (FNV-1a 32 of its canonical JSON, then
    ``SafeEncodeString`` of the decimal number, as upstream encodes ``ComputeHash``)."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count:
        data += str(collision_count).encode()
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE[ord(c) % len(_SAFE)] for c in str(h))


def _without_hash(template: Obj) -> Obj:
    out = copy.deepcopy(template)
    labels = as_dict(as_dict(out.get("metadata")).get("labels"))
    labels.pop(HASH_LABEL, None)
    return out


def _live(pod: Obj) -> bool:
    phase = as_dict(pod.get("status")).get("phase")
    return not pod["metadata"].get("deletionTimestamp") and phase not in ("Succeeded", "Failed")


def _owner(kind: str, obj: Obj) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


class WorkloadControllers(Controller):
    """The deployment and replicaset controllers, on the emulator's loop."""

    what = "workload controller"

    def __init__(self, registry: Registry, index: ResourceIndex, loop: asyncio.AbstractEventLoop) -> None:
        self._running: set[Key] = set()
        self._dirty: set[Key] = set()
        super().__init__(registry, index, loop)

    # -- plumbing: one sync per object at a time -------------------------------------------------

    def _enqueue(self, key: Key) -> None:
        def start() -> None:
            if key in self._running:
                self._dirty.add(key)
                return
            self._running.add(key)
            self._track(self._loop.create_task(self._run(key)))

        self._loop.call_soon_threadsafe(start)

    async def _run(self, key: Key) -> None:
        try:
            while True:
                self._dirty.discard(key)
                if key[0] == DEPLOYMENTS:
                    await self._sync_deployment(key[1], key[2])
                else:
                    await self._sync_replicaset(key[1], key[2])
                if key not in self._dirty:
                    return
        finally:
            self._running.discard(key)

    def _on_commit(self, key: str, event: WatchEvent) -> None:
        """Store listener (under the store lock): schedule work, never do it here."""
        meta = event.obj["metadata"]
        ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        if key in (DEPLOYMENTS, REPLICASETS) and event.type != "DELETED":
            self._enqueue((key, ns, name))
        if key in (REPLICASETS, "pods"):
            owner = controller_ref(event.obj) or {}
            kind = {REPLICASETS: "Deployment", "pods": "ReplicaSet"}[key]
            if owner.get("kind") == kind and owner.get("name"):
                self._enqueue((DEPLOYMENTS if kind == "Deployment" else REPLICASETS, ns, str(owner["name"])))

    def _owned(self, key: str, owner: Obj) -> list[Obj]:
        uid = owner["metadata"]["uid"]
        out = []
        for k, ns, name in self._store.dependents(uid):
            if k != key:
                continue
            obj = self._store.get(k, ns, name)
            if obj is not None and (controller_ref(obj) or {}).get("uid") == uid:
                out.append(obj)
        return out

    async def _write(self, verb: str, key: str, ns: str, name: str, user: Any, *args: Any) -> Obj | None:
        rt = self._index.by_key(key)
        assert rt is not None
        subresource = "status" if verb == "status" else ""
        req = Request(rt, ns, name, user, subresource=subresource)
        try:
            if verb == "create":
                return await self._registry.create(req, args[0])
            if verb == "delete":
                return await self._registry.delete(req, {"propagationPolicy": "Background"})
            return await self._registry.update(req, args[0])
        except errors.ApiError as exc:
            if exc.code not in (404, 409):
                log.warning("workload controller: %s %s %s/%s: %s", verb, key, ns, name, exc)
            if exc.code == 409 and verb != "create":
                self._dirty.add((key, ns, name))  # stale: sync again with the newer object
            return None

    # -- deployments -----------------------------------------------------------------------------

    async def _sync_deployment(self, ns: str, name: str) -> None:
        d = self._store.get(DEPLOYMENTS, ns, name)
        if d is None or d["metadata"].get("deletionTimestamp"):
            return
        spec = as_dict(d.get("spec"))
        template = as_dict(spec.get("template"))
        replicas = int(spec.get("replicas", 1))
        owned = self._owned(REPLICASETS, d)
        current = [rs for rs in owned if _without_hash(as_dict(rs["spec"].get("template"))) == template]
        if current:
            new = current[0]
            if int(new["spec"].get("replicas", 0)) != replicas:
                await self._write(
                    "update",
                    REPLICASETS,
                    ns,
                    new["metadata"]["name"],
                    DEPLOYMENT_USER,
                    {**new, "spec": {**new["spec"], "replicas": replicas}},
                )
        else:
            new = await self._create_replicaset(d, template, replicas) or {}
        keep = as_dict(new.get("metadata")).get("uid")
        for rs in owned:
            if rs["metadata"]["uid"] != keep and int(rs["spec"].get("replicas", 0)) != 0:
                await self._write(
                    "update",
                    REPLICASETS,
                    ns,
                    rs["metadata"]["name"],
                    DEPLOYMENT_USER,
                    {**rs, "spec": {**rs["spec"], "replicas": 0}},
                )
        await self._deployment_status(ns, name)

    async def _create_replicaset(self, d: Obj, template: Obj, replicas: int) -> Obj | None:
        spec = as_dict(d.get("spec"))
        collisions = int(as_dict(d.get("status")).get("collisionCount") or 0)
        digest = template_hash(template, collisions)
        labeled = copy.deepcopy(template)
        tmeta = labeled.setdefault("metadata", {})
        tmeta["labels"] = {**as_dict(tmeta.get("labels")), HASH_LABEL: digest}
        selector = copy.deepcopy(as_dict(spec.get("selector")))
        selector["matchLabels"] = {**as_dict(selector.get("matchLabels")), HASH_LABEL: digest}
        body: Obj = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{d['metadata']['name']}-{digest}",
                "namespace": d["metadata"].get("namespace", ""),
                "labels": tmeta["labels"],
                "ownerReferences": [_owner("Deployment", d)],
            },
            "spec": {"replicas": replicas, "selector": selector, "template": labeled},
        }
        return await self._write(
            "create", REPLICASETS, body["metadata"]["namespace"], "", DEPLOYMENT_USER, body
        )

    async def _deployment_status(self, ns: str, name: str) -> None:
        d = self._store.get(DEPLOYMENTS, ns, name)
        if d is None:
            return
        template = as_dict(as_dict(d.get("spec")).get("template"))
        owned = self._owned(REPLICASETS, d)
        replicas = sum(int(as_dict(rs.get("status")).get("replicas") or 0) for rs in owned)
        updated = sum(
            int(as_dict(rs.get("status")).get("replicas") or 0)
            for rs in owned
            if _without_hash(as_dict(rs["spec"].get("template"))) == template
        )
        status = {
            **as_dict(d.get("status")),
            "observedGeneration": d["metadata"].get("generation", 1),
            "replicas": replicas,
            "updatedReplicas": updated,
        }
        if status != as_dict(d.get("status")):
            await self._write("status", DEPLOYMENTS, ns, name, DEPLOYMENT_USER, {**d, "status": status})

    # -- replicasets -----------------------------------------------------------------------------

    async def _sync_replicaset(self, ns: str, name: str) -> None:
        rs = self._store.get(REPLICASETS, ns, name)
        if rs is None or rs["metadata"].get("deletionTimestamp"):
            return
        want = int(as_dict(rs.get("spec")).get("replicas", 1))
        pods = [p for p in self._owned("pods", rs) if _live(p)]
        if len(pods) < want:
            template = as_dict(as_dict(rs.get("spec")).get("template"))
            tmeta = as_dict(template.get("metadata"))
            for _ in range(want - len(pods)):
                body: Obj = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "generateName": f"{name}-",
                        "namespace": ns,
                        "labels": dict(as_dict(tmeta.get("labels"))),
                        "ownerReferences": [_owner("ReplicaSet", rs)],
                    },
                    "spec": copy.deepcopy(as_dict(template.get("spec"))),
                }
                if as_dict(tmeta.get("annotations")):
                    body["metadata"]["annotations"] = dict(as_dict(tmeta.get("annotations")))
                if await self._write("create", "pods", ns, "", REPLICASET_USER, body) is None:
                    break  # denied (a webhook, say): the next change of the ReplicaSet retries
        elif len(pods) > want:
            # Unbound pods first, then the newest (names break ties in a second).
            newest_first = sorted(
                pods, key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"]), reverse=True
            )
            doomed = sorted(newest_first, key=lambda p: bool(p["spec"].get("nodeName")))
            for pod in doomed[: len(pods) - want]:
                await self._write("delete", "pods", ns, pod["metadata"]["name"], REPLICASET_USER)
        rs = self._store.get(REPLICASETS, ns, name)
        if rs is None:
            return
        live = [p for p in self._owned("pods", rs) if _live(p)]
        status = {
            **as_dict(rs.get("status")),
            "observedGeneration": rs["metadata"].get("generation", 1),
            "replicas": len(live),
            "fullyLabeledReplicas": len(live),
        }
        if status != as_dict(rs.get("status")):
            await self._write("status", REPLICASETS, ns, name, REPLICASET_USER, {**rs, "status": status})
