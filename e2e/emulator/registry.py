"""The REST storage layer: what create, update, patch, delete, binding, get and list do.

Both the HTTP handler and the Python API call these methods, so admission, dry runs, optimistic
concurrency, finalizers and status subresources behave the same whichever way a request comes in.
The order of steps follows the apiserver's handlers: mutating admission, then the strategy
(defaults, system metadata, validation), then validating admission, then storage. All writes run on
the server's event loop; the store is never locked across an await.
"""

from __future__ import annotations

import base64
import binascii
import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from webhook.core.api.objects import Obj

from . import defaults, errors, strategy, validation
from .admission import AdmissionChain, Attributes
from .auth import UserInfo
from .features import FeatureGates
from .objmeta import generate_name, jsoncopy, new_uid, timestamp
from .patching import APPLY_PATCH, apply_patch
from .resources import ResourceType
from .selectors import Predicate
from .store import Store, StoreConflict, StoreExists, StoreMissing

#: What ``propagationPolicy`` Foreground and Orphan add: kube-apiserver leaves the object, marked, to
#: the garbage collector of kube-controller-manager, which the emulator does not run.
FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"
#: GuaranteedUpdate retries a write that lost a race with another writer this many times.
_RETRIES = 8
_GENERATE_NAME_ATTEMPTS = 8


@dataclass(slots=True)
class Request:
    """One API call as the registry sees it."""

    rt: ResourceType
    namespace: str
    name: str
    user: UserInfo
    subresource: str = ""
    dry_run: bool = False
    admission: bool = True
    options: Obj | None = None
    warnings: list[str] = field(default_factory=list)


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise errors.bad_request("metadata must be an object")
    return meta


class Registry:
    def __init__(
        self,
        store: Store,
        gates: FeatureGates,
        admission: AdmissionChain | None,
        rng: random.Random,
    ) -> None:
        self.store = store
        self.gates = gates
        self.admission = admission
        self._rng = rng

    # --- shared steps -----------------------------------------------------------------------------

    def _decode_body(
        self, req: Request, body: Any, kind: str | None = None, api_version: str | None = None
    ) -> Obj:
        """Check the body's apiVersion/kind/namespace against the URL and fill them in."""
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be a JSON object")
        want_kind = kind or req.rt.kind
        want_version = api_version or req.rt.api_version
        got_kind, got_version = body.get("kind"), body.get("apiVersion")
        if got_kind not in (None, "") and got_kind != want_kind:
            raise errors.bad_request(
                f"the kind in the data ({got_kind}) does not match the expected kind ({want_kind})"
            )
        if got_version not in (None, "") and got_version != want_version:
            raise errors.bad_request(
                f"the API version in the data ({got_version}) does not match the expected API version "
                f"({want_version})"
            )
        body["kind"], body["apiVersion"] = want_kind, want_version
        meta = body.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        if req.rt.namespaced:
            ns = meta.get("namespace")
            if ns not in (None, "") and ns != req.namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = req.namespace
        else:
            meta.pop("namespace", None)
        return body

    def _attrs(
        self, req: Request, operation: str, obj: Obj | None, old: Obj | None, options: Obj
    ) -> Attributes:
        return Attributes(
            operation=operation,
            rt=req.rt,
            subresource=req.subresource,
            name=req.name,
            namespace=req.namespace
            if req.rt.namespaced
            else (req.name if req.rt.kind == "Namespace" else ""),
            obj=obj,
            old=old,
            user=req.user,
            dry_run=req.dry_run,
            options=options,
            warnings=req.warnings,
        )

    async def _mutate(self, attrs: Attributes, req: Request) -> None:
        if req.admission and self.admission is not None:
            await self.admission.mutate(attrs)

    async def _validate(self, attrs: Attributes, req: Request) -> None:
        if req.admission and self.admission is not None:
            await self.admission.validate(attrs)

    def _current(self, req: Request) -> Obj:
        obj = self.store.get(req.rt.key, req.namespace, req.name)
        if obj is None:
            raise errors.not_found(req.rt.group, req.rt.plural, req.name)
        return obj

    # --- reads ------------------------------------------------------------------------------------

    def get(self, req: Request) -> Obj:
        return self._current(req)

    def list_objects(
        self, req: Request, predicate: Predicate | None, limit: int = 0, continue_token: str = ""
    ) -> Obj:
        after = _decode_continue(continue_token) if continue_token else None
        namespace = req.namespace if req.rt.namespaced and req.namespace else None
        items, rv, following = self.store.page(req.rt.key, namespace, after, limit, predicate)
        meta: Obj = {"resourceVersion": str(rv)}
        if limit > 0 and following:  # then the page is full: ``limit`` items
            # As the API server: a continue token while keys follow (matching or not), and a count
            # of the objects left only for a list without selectors.
            last = items[-1]["metadata"]
            meta["continue"] = _encode_continue(last.get("namespace", ""), last["name"], rv)
            if predicate is None:
                meta["remainingItemCount"] = following
        return {"kind": req.rt.list_kind, "apiVersion": req.rt.api_version, "metadata": meta, "items": items}

    # --- create -----------------------------------------------------------------------------------

    async def create(self, req: Request, body: Any) -> Obj:
        if req.subresource:
            raise errors.method_not_allowed("create", f"{req.rt.plural}/{req.subresource}")
        obj = self._decode_body(req, body)
        rt = req.rt
        defaults.apply(rt.kind, obj)
        strategy.prepare_create(rt, obj, self.gates)
        meta = _meta(obj)
        given = meta.get("name")
        req.name = given if isinstance(given, str) else ""
        attrs = self._attrs(
            req, "CREATE", obj, None, {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
        )
        await self._mutate(attrs, req)
        obj = attrs.obj if attrs.obj is not None else obj
        self._decode_body(req, obj)
        meta = obj["metadata"]
        validation.raise_if(
            rt, str(meta.get("name") or meta.get("generateName") or ""), validation.object_meta(rt, obj)
        )
        generated = not meta.get("name")
        for attempt in range(_GENERATE_NAME_ATTEMPTS):
            if generated:
                meta["name"] = generate_name(str(meta["generateName"]), self._rng)
            self._system_fields_for_create(rt, obj)
            strategy.finish_meta(rt, obj)
            req.name = meta["name"]
            if attempt == 0:
                causes = validation.object_meta(rt, obj) + validation.webhooks(rt, obj)
                validation.raise_if(rt, meta["name"], causes)
                attrs.obj, attrs.name = obj, meta["name"]
                await self._validate(attrs, req)
            if req.dry_run:
                if self.store.get(rt.key, req.namespace, meta["name"]) is not None:
                    if generated:
                        continue
                    raise errors.already_exists(rt.group, rt.plural, meta["name"])
                return obj
            try:
                return self.store.create(rt.key, obj).obj
            except StoreExists:
                if not generated:
                    raise errors.already_exists(rt.group, rt.plural, meta["name"]) from None
        raise errors.already_exists(rt.group, rt.plural, meta["name"])

    @staticmethod
    def _system_fields_for_create(rt: ResourceType, obj: Obj) -> None:
        meta = obj["metadata"]
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion", "managedFields"):
            meta.pop(key, None)
        meta["uid"] = new_uid()
        meta["creationTimestamp"] = timestamp()
        if rt.generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)

    # --- update and patch -------------------------------------------------------------------------

    async def update(self, req: Request, body: Any) -> Obj:
        """PUT on the main resource or on ``/status``."""
        self._check_subresource(req, "update")
        obj = self._decode_body(req, body)
        name = _meta(obj).get("name")
        if name not in (None, "") and name != req.name:
            raise errors.bad_request(
                f"the name of the object ({name}) does not match the name on the URL ({req.name})"
            )
        obj["metadata"]["name"] = req.name
        current = self.store.get(req.rt.key, req.namespace, req.name)
        if current is None:
            if req.rt.create_on_update and not req.subresource:
                return await self.create(req, obj)
            raise errors.not_found(req.rt.group, req.rt.plural, req.name)
        client_rv = obj["metadata"].get("resourceVersion") or ""
        if not client_rv and not req.rt.unconditional_update:
            # Upstream names the resource here, not the kind.
            cause = errors.invalid_value("metadata.resourceVersion", 0, "must be specified for an update")
            raise errors.invalid(req.rt.group, req.rt.plural, req.name, [cause])
        for _ in range(_RETRIES):
            _check_uid_precondition(req, current, obj)
            try:
                return await self._update_to(req, current, jsoncopy(obj), str(client_rv))
            except StoreConflict:
                if client_rv:
                    raise errors.conflict(req.rt.group, req.rt.plural, req.name) from None
                current = self._current(req)
        raise errors.conflict(req.rt.group, req.rt.plural, req.name)

    async def patch(self, req: Request, patch_type: str, patch: Any) -> Obj:
        self._check_subresource(req, "patch")
        for _ in range(_RETRIES):
            current = self.store.get(req.rt.key, req.namespace, req.name)
            if current is None:
                if patch_type == APPLY_PATCH and not req.subresource:
                    body = jsoncopy(patch)
                    _meta(body).setdefault("name", req.name)
                    return await self.create(req, body)
                raise errors.not_found(req.rt.group, req.rt.plural, req.name)
            patched = apply_patch(patch_type, current, patch)
            meta = patched.get("metadata")
            if not isinstance(meta, dict):
                raise errors.bad_request("metadata must be an object")
            if meta.get("name") != req.name:
                raise errors.bad_request(
                    f"the name of the object ({meta.get('name')}) does not match the name on the URL "
                    f"({req.name})"
                )
            patched = self._decode_body(req, patched)
            _check_uid_unchanged(req, current, patched)
            explicit_rv = str(meta.get("resourceVersion") or "")
            try:
                return await self._update_to(req, current, patched, explicit_rv)
            except StoreConflict:
                if explicit_rv != current["metadata"]["resourceVersion"]:
                    raise errors.conflict(req.rt.group, req.rt.plural, req.name) from None
        raise errors.conflict(req.rt.group, req.rt.plural, req.name)

    def _check_subresource(self, req: Request, verb: str) -> None:
        if (req.subresource and req.subresource not in req.rt.subresources) or req.subresource == "binding":
            raise errors.method_not_allowed(verb, f"{req.rt.plural}/{req.subresource}")

    async def _update_to(self, req: Request, current: Obj, obj: Obj, client_rv: str) -> Obj:
        """Admission, preconditions, strategy, validation and the conditional write of one update."""
        rt = req.rt
        defaults.apply(rt.kind, obj)
        attrs = self._attrs(
            req, "UPDATE", obj, current, {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}
        )
        await self._mutate(attrs, req)
        obj = self._decode_body(req, attrs.obj if attrs.obj is not None else obj)
        obj["metadata"]["name"] = req.name
        if client_rv and client_rv != current["metadata"]["resourceVersion"]:
            raise errors.conflict(rt.group, rt.plural, req.name)
        new = strategy.prepare_update(rt, req.subresource, obj, current, self.gates)
        new["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        validation.raise_if(rt, req.name, self._update_checks(req, current, new))
        attrs.obj = new
        await self._validate(attrs, req)
        if req.dry_run or new == current:
            return new
        meta = new["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            event = self.store.delete(rt.key, req.namespace, req.name, current["metadata"]["resourceVersion"])
            return event.obj
        return self.store.update(rt.key, new, current["metadata"]["resourceVersion"]).obj

    def _update_checks(self, req: Request, old: Obj, new: Obj) -> list[errors.Cause]:
        causes = validation.object_meta(req.rt, new) + validation.finalizers_on_terminating(old, new)
        causes += validation.webhooks(req.rt, new)
        kind = req.rt.kind
        if kind == "Pod":
            if req.subresource == "status":
                causes += validation.extended_resource_claim_status(new)
            else:
                causes += validation.pod_spec_update(old, new)
        elif kind == "ResourceClaim" and not req.subresource:
            causes += validation.immutable_spec(old, new)
        elif kind == "ResourceClaim":
            causes += validation.claim_status(new)
        return causes

    # --- pods/binding -----------------------------------------------------------------------------

    async def bind(self, req: Request, body: Any) -> Obj:
        """POST ``pods/binding``: set ``spec.nodeName`` and PodScheduled=True, once."""
        binding = self._decode_body(req, body, kind="Binding", api_version="v1")
        target = binding.get("target")
        node = target.get("name") if isinstance(target, dict) else None
        if not isinstance(node, str) or not node:
            raise errors.invalid("", "Binding", req.name, [errors.required("target.name", "")])
        bname = binding["metadata"].get("name")
        if bname not in (None, "") and bname != req.name:
            raise errors.bad_request(
                f"the name of the object ({bname}) does not match the name on the URL ({req.name})"
            )
        binding["metadata"]["name"] = req.name
        pod = self._current(req)
        attrs = self._attrs(
            req, "CREATE", binding, None, {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
        )
        attrs.kind = ("", "v1", "Binding")
        await self._mutate(attrs, req)
        await self._validate(attrs, req)
        for _ in range(_RETRIES):
            pod = self._current(req)
            new = self._bound(req, pod, binding, node)
            if req.dry_run:
                break
            try:
                self.store.update(req.rt.key, new, pod["metadata"]["resourceVersion"])
                break
            except StoreConflict:
                continue
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    @staticmethod
    def _bound(req: Request, pod: Obj, binding: Obj, node: str) -> Obj:
        meta = pod["metadata"]
        uid = binding["metadata"].get("uid")
        why = ""
        if uid and uid != meta.get("uid"):
            why = f"Precondition failed: UID in precondition: {uid}, UID in object meta: {meta.get('uid')}"
        elif meta.get("deletionTimestamp"):
            why = f"pod {req.name} is being deleted, cannot be assigned to a host"
        elif (pod.get("spec") or {}).get("nodeName"):
            why = f'pod {req.name} is already assigned to node "{pod["spec"]["nodeName"]}"'
        elif (pod.get("spec") or {}).get("schedulingGates"):
            why = f"pod {req.name} has non-empty .spec.schedulingGates"
        if why:
            raise errors.conflict("", "pods/binding", req.name, why)
        new = dict(pod)
        new["metadata"] = dict(meta)
        extra = binding["metadata"].get("annotations")
        if isinstance(extra, dict) and extra:
            new["metadata"]["annotations"] = {**(meta.get("annotations") or {}), **extra}
        new["spec"] = {**(pod.get("spec") or {}), "nodeName": node}
        status = dict(pod.get("status") or {})
        conditions = [
            c
            for c in status.get("conditions") or []
            if not (isinstance(c, dict) and c.get("type") == "PodScheduled")
        ]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": timestamp(),
            }
        )
        status["conditions"] = conditions
        new["status"] = status
        return new

    # --- delete -----------------------------------------------------------------------------------

    async def delete(self, req: Request, options: Obj) -> Obj:
        if req.subresource:
            raise errors.method_not_allowed("delete", f"{req.rt.plural}/{req.subresource}")
        rt = req.rt
        current = self._current(req)
        _check_preconditions(req, current, options.get("preconditions"))
        attrs = self._attrs(
            req, "DELETE", None, current, {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1", **options}
        )
        await self._mutate(attrs, req)
        await self._validate(attrs, req)
        for _ in range(_RETRIES):
            current = self._current(req)
            _check_preconditions(req, current, options.get("preconditions"))
            meta = current["metadata"]
            try:
                if meta.get("deletionTimestamp"):
                    # Already terminating: only a pod's grace period can shorten.
                    shorter = self._shortened(rt, current, options)
                    if shorter is None or req.dry_run:
                        return current if shorter is None else shorter
                    current = self.store.update(rt.key, shorter, meta["resourceVersion"]).obj
                    if current["metadata"].get("finalizers"):
                        return current
                else:
                    finalizers = _deletion_finalizers(meta, options)
                    if finalizers or (rt.kind == "Pod" and not req.dry_run):
                        # A pod's deletion is graceful: it is marked first (the apiserver's part), then
                        # deleted at once, as if its kubelet had confirmed (the emulator has none).
                        marked = self._marked(rt, current, finalizers, options)
                        if req.dry_run:
                            return marked
                        current = self.store.update(rt.key, marked, meta["resourceVersion"]).obj
                        if finalizers:
                            return current
                        attrs.old = current
                        await self._validate(attrs, req)  # upstream validates each of the two writes
                    elif req.dry_run:
                        return current if rt.kind == "Pod" else _deleted_status(rt, current)
                rv = current["metadata"]["resourceVersion"]
                event = self.store.delete(rt.key, req.namespace, req.name, rv)
            except StoreConflict:
                continue
            except StoreMissing:
                raise errors.not_found(rt.group, rt.plural, req.name) from None
            return event.obj if rt.kind == "Pod" else _deleted_status(rt, event.obj)
        raise errors.conflict(rt.group, rt.plural, req.name)

    @staticmethod
    def _shortened(rt: ResourceType, current: Obj, options: Obj) -> Obj | None:
        """A terminating pod deleted again with a shorter grace period: marked anew with it."""
        requested = options.get("gracePeriodSeconds")
        meta = current["metadata"]
        if rt.kind != "Pod" or not isinstance(requested, int) or requested < 0:
            return None
        if requested >= int(meta.get("deletionGracePeriodSeconds") or 0):
            return None
        new = {**current, "metadata": dict(meta)}
        new["metadata"]["deletionTimestamp"] = timestamp(datetime.now(UTC) + timedelta(seconds=requested))
        new["metadata"]["deletionGracePeriodSeconds"] = requested
        return new

    @staticmethod
    def _marked(rt: ResourceType, current: Obj, finalizers: list[str], options: Obj) -> Obj:
        """The object with ``deletionTimestamp`` set: it stays until its last finalizer is gone."""
        grace = 0
        if rt.kind == "Pod":
            spec = current.get("spec") or {}
            requested = options.get("gracePeriodSeconds")
            if isinstance(requested, int) and requested >= 0:
                grace = requested
            elif spec.get("nodeName"):
                default = spec.get("terminationGracePeriodSeconds")
                grace = default if isinstance(default, int) and default >= 0 else 30
        new = dict(current)
        meta = dict(current["metadata"])
        meta["finalizers"] = finalizers
        meta["deletionTimestamp"] = timestamp(datetime.now(UTC) + timedelta(seconds=grace))
        meta["deletionGracePeriodSeconds"] = grace
        if meta.get("generation"):
            meta["generation"] = int(meta["generation"]) + 1
        new["metadata"] = meta
        return new

    async def delete_collection(self, req: Request, predicate: Predicate | None, options: Obj) -> Obj:
        listed = self.list_objects(req, predicate)
        deleted = []
        for item in listed["items"]:
            one = Request(
                req.rt,
                item["metadata"].get("namespace", ""),
                item["metadata"]["name"],
                req.user,
                dry_run=req.dry_run,
                admission=req.admission,
                warnings=req.warnings,
            )
            try:
                result = await self.delete(one, options)
            except errors.ApiError as exc:
                if exc.code == 404:
                    continue
                raise
            deleted.append(result if result.get("kind") != "Status" else item)
        listed["items"] = deleted
        return listed


def _check_uid_precondition(req: Request, current: Obj, obj: Obj) -> None:
    """PUT: a uid in the body is a precondition (the registry's ``UpdatedObjectInfo``): 409 Conflict
    when the object of that name now has another."""
    wanted = _meta(obj).get("uid")
    actual = current["metadata"].get("uid")
    if wanted and wanted != actual:
        why = f"Precondition failed: UID in precondition: {wanted}, UID in object meta: {actual}"
        raise errors.conflict(req.rt.group, req.rt.plural, req.name, why)


def _check_uid_unchanged(req: Request, current: Obj, patched: Obj) -> None:
    """PATCH: a uid the patch sets that is not the object's fails validation (``metadata.uid`` is
    immutable): how upstream's ``PatchPodStatus`` guards against a pod recreated under its name."""
    uid = _meta(patched).get("uid")
    if uid and uid != current["metadata"].get("uid"):
        causes = [errors.invalid_value("metadata.uid", uid, "field is immutable")]
        raise errors.invalid(req.rt.group, req.rt.kind, req.name, causes)


def _deletion_finalizers(meta: Obj, options: Obj) -> list[str]:
    """The object's finalizers, with the garbage collector's for a Foreground or Orphan deletion
    (upstream ``deletionFinalizersForGarbageCollection``: added whether or not it has dependents)."""
    policy = options.get("propagationPolicy") or ("Orphan" if options.get("orphanDependents") else "")
    finalizers = list(meta.get("finalizers") or [])
    if policy in ("Orphan", "Foreground"):
        finalizers = [f for f in finalizers if f not in (FOREGROUND, ORPHAN)]
        finalizers.append(ORPHAN if policy == "Orphan" else FOREGROUND)
    return finalizers


def _check_preconditions(req: Request, current: Obj, pre: Any) -> None:
    """``rest.BeforeDelete``'s early check, with its message (the kind names the object there)."""
    if not isinstance(pre, dict):
        return
    meta = current["metadata"]
    uid, rv = pre.get("uid"), pre.get("resourceVersion")
    if uid and uid != meta.get("uid"):
        why = (
            f"the UID in the precondition ({uid}) does not match the UID in record ({meta.get('uid')}). "
            "The object might have been deleted and then recreated"
        )
        raise errors.conflict(req.rt.group, req.rt.kind, req.name, why)
    if rv and rv != meta.get("resourceVersion"):
        why = (
            f"the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record "
            f"({meta.get('resourceVersion')}). The object might have been modified"
        )
        raise errors.conflict(req.rt.group, req.rt.kind, req.name, why)


def _deleted_status(rt: ResourceType, obj: Obj) -> Obj:
    meta = obj["metadata"]
    details: Obj = {"name": meta["name"], "kind": rt.plural, "uid": meta.get("uid", "")}
    if rt.group:
        details["group"] = rt.group
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}


def _encode_continue(namespace: str, name: str, rv: int) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": [namespace, name]}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_continue(token: str) -> tuple[str, str]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        ns, name = data["start"]
        return str(ns), str(name)
    except (binascii.Error, ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise errors.bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion"
        ) from None
