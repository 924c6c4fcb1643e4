"""kube-controller-manager's resourceclaim controller, as much of it as draxr's paths need.

* Claims from templates (``handleClaim``): for each ``pod.spec.resourceClaims[]`` naming a
  ResourceClaimTemplate and not yet in ``pod.status.resourceClaimStatuses``, the claim owned by the
  pod with the annotation ``resource.kubernetes.io/pod-claim-name`` is found or created
  (``generateName: <pod>-<pod claim>-``, shortened as upstream shortens it; the template's labels,
  annotations and spec; the pod as controller owner, without ``blockOwnerDeletion``, as the real
  apiserver shows it), then recorded in the pod's status. A missing template is retried when it
  appears.
* Cleanup (``syncClaim``) when a pod goes or finishes, of every claim reserved for it or generated
  for it, except special claims (upstream syncs those too; here draxr's worker must clean its own,
  so its tests prove it does): pods that are gone or finished leave ``reservedFor``; a claim
  nobody reserves loses its allocation and the delete-protection finalizer; a claim whose owner
  pod is gone or finished is deleted.

It acts after the fact, as an API client of the registry with its own identity, like the garbage
collector beside it.
"""

from __future__ import annotations

import asyncio
import logging

from webhook.core.api.objects import Obj, as_dict, as_list, controller_ref

from . import errors
from .auth import authenticated
from .controller import Controller
from .history import WatchEvent
from .registry import Registry, Request
from .resources import ResourceIndex
from .store import move_in_index

log = logging.getLogger(__name__)

CONTROLLER_USER = authenticated(
    "system:serviceaccount:kube-system:resource-claim-controller", ("system:serviceaccounts",)
)
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
SPECIAL_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
FINALIZER = "resource.kubernetes.io/delete-protection"
_MAX_BASE = 57  # 63 minus a hyphen and five random characters


def generate_name(pod_name: str, claim_name: str) -> str:
    """``<pod>-<pod claim>-``; both parts cut in proportion when the base would pass 57 characters
    (resourceclaim controller ``handleClaim``)."""
    base = f"{pod_name}-{claim_name}-"
    if len(base) <= _MAX_BASE:
        return base
    return (
        pod_name[: len(pod_name) * _MAX_BASE // len(base)]
        + "-"
        + claim_name[: len(claim_name) * _MAX_BASE // len(base)]
    )


def _terminal(pod: Obj) -> bool:
    return as_dict(pod.get("status")).get("phase") in ("Succeeded", "Failed")


_CLAIMS = "resourceclaims.resource.k8s.io"


def _reserving_pods(claim: Obj | None) -> set[str]:
    """The uids in a claim's ``status.reservedFor`` (pods, in practice)."""
    if claim is None:
        return set()
    return {
        str(r["uid"])
        for r in as_list(as_dict(claim.get("status")).get("reservedFor"))
        if isinstance(r, dict) and isinstance(r.get("uid"), str)
    }


class ResourceClaimController(Controller):
    what = "resourceclaim controller"

    def __init__(self, registry: Registry, index: ResourceIndex, loop: asyncio.AbstractEventLoop) -> None:
        #: Pod uid -> (namespace, name) of the claims whose ``reservedFor`` names it, kept by the
        #: store listener so that a pod's departure does not scan every object of its namespace.
        self._reserved_by: dict[str, set[tuple[str, str]]] = {}
        super().__init__(registry, index, loop)
        for claim in self._store.select(_CLAIMS, None)[0]:
            self._reindex(None, claim)

    def _reindex(self, old: Obj | None, new: Obj | None) -> None:
        ref = old if new is None else new
        assert ref is not None
        meta = ref["metadata"]
        ident = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        move_in_index(self._reserved_by, ident, _reserving_pods(old), _reserving_pods(new))

    # -- events ----------------------------------------------------------------------------------

    def _on_commit(self, key: str, event: WatchEvent) -> None:
        """Store listener (under the store lock): schedule work, never do it here."""
        meta = event.obj["metadata"]
        ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        if key == _CLAIMS:
            self._reindex(event.old, None if event.type == "DELETED" else event.obj)
        if key == "pods":
            if event.type == "DELETED" or _terminal(event.obj):
                self._spawn(self._sync_claims_of(str(meta.get("uid", "")), ns))
            elif _wants_claims(event.obj):
                self._spawn(self._sync_pod(ns, name))
        elif key == "resourceclaimtemplates.resource.k8s.io" and event.type == "ADDED":
            self._spawn(self._sync_namespace(ns))
        elif (
            key == "resourceclaims.resource.k8s.io"
            and event.type != "DELETED"
            and POD_CLAIM_NAME_ANNOTATION in as_dict(meta.get("annotations"))
        ):
            self._spawn(self._sync_claim(ns, name))

    # -- claims from templates -------------------------------------------------------------------

    async def _sync_namespace(self, ns: str) -> None:
        for key, pns, pname in list(self._store.namespaced_keys(ns)):
            if key == "pods":
                pod = self._store.get(key, pns, pname)
                if pod is not None and _wants_claims(pod):
                    await self._sync_pod(pns, pname)

    async def _sync_pod(self, ns: str, name: str) -> None:
        pod = self._store.get("pods", ns, name)
        if pod is None or _terminal(pod) or pod["metadata"].get("deletionTimestamp"):
            return
        recorded = {
            as_dict(s).get("name") for s in as_list(as_dict(pod.get("status")).get("resourceClaimStatuses"))
        }
        for pc in as_list(as_dict(pod.get("spec")).get("resourceClaims")):
            entry = as_dict(pc)
            template_name = entry.get("resourceClaimTemplateName")
            claim_name = str(entry.get("name", ""))
            if not isinstance(template_name, str) or claim_name in recorded:
                continue
            claim = self._owned_claim(pod, claim_name) or await self._create_claim(
                pod, claim_name, template_name
            )
            if claim is None:
                continue  # the template does not exist yet: its ADDED event brings us back
            await self._record(pod, claim_name, str(claim["metadata"]["name"]))

    def _owned_claim(self, pod: Obj, claim_name: str) -> Obj | None:
        for key, ns, name in self._store.dependents(str(pod["metadata"]["uid"])):
            if key != "resourceclaims.resource.k8s.io":
                continue
            claim = self._store.get(key, ns, name)
            if (
                claim is not None
                and as_dict(claim["metadata"].get("annotations")).get(POD_CLAIM_NAME_ANNOTATION) == claim_name
            ):
                return claim
        return None

    async def _create_claim(self, pod: Obj, claim_name: str, template_name: str) -> Obj | None:
        ns = str(pod["metadata"].get("namespace", ""))
        template = self._store.get("resourceclaimtemplates.resource.k8s.io", ns, template_name)
        if template is None:
            return None
        tmeta = as_dict(as_dict(template.get("spec")).get("metadata"))
        body: Obj = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "generateName": generate_name(str(pod["metadata"]["name"]), claim_name),
                "namespace": ns,
                "annotations": {**as_dict(tmeta.get("annotations")), POD_CLAIM_NAME_ANNOTATION: claim_name},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": pod["metadata"]["name"],
                        "uid": pod["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": as_dict(as_dict(template.get("spec")).get("spec")),
        }
        if as_dict(tmeta.get("labels")):
            body["metadata"]["labels"] = as_dict(tmeta.get("labels"))
        rt = self._index.by_key("resourceclaims.resource.k8s.io")
        assert rt is not None
        try:
            return await self._registry.create(Request(rt, ns, "", CONTROLLER_USER), body)
        except errors.ApiError as exc:
            log.warning(
                "resourceclaim controller: create claim for pod %s/%s: %s", ns, pod["metadata"]["name"], exc
            )
            return None

    async def _record(self, pod: Obj, claim_name: str, generated: str) -> None:
        rt = self._index.by_key("pods")
        assert rt is not None
        ns, name = str(pod["metadata"].get("namespace", "")), str(pod["metadata"]["name"])
        for _ in range(8):
            current = self._store.get("pods", ns, name)
            if current is None or current["metadata"]["uid"] != pod["metadata"]["uid"]:
                return
            st = dict(as_dict(current.get("status")))
            statuses = [as_dict(s) for s in as_list(st.get("resourceClaimStatuses"))]
            if any(s.get("name") == claim_name for s in statuses):
                return
            st["resourceClaimStatuses"] = [*statuses, {"name": claim_name, "resourceClaimName": generated}]
            try:
                await self._registry.update(
                    Request(rt, ns, name, CONTROLLER_USER, subresource="status"), {**current, "status": st}
                )
                return
            except errors.ApiError as exc:
                if exc.code != 409:
                    log.warning("resourceclaim controller: record claim of pod %s/%s: %s", ns, name, exc)
                    return

    # -- cleanup ---------------------------------------------------------------------------------

    async def _sync_claims_of(self, pod_uid: str, ns: str) -> None:
        """Every claim in ``ns`` reserved for or owned by the pod (from the indexes, not a scan)."""
        candidates = {(cns, cname) for cns, cname in self._reserved_by.get(pod_uid, ()) if cns == ns}
        candidates.update(
            (cns, cname)
            for key, cns, cname in self._store.dependents(pod_uid)
            if key == _CLAIMS and cns == ns
        )
        for cns, cname in sorted(candidates):
            claim = self._store.get(_CLAIMS, cns, cname)
            if claim is None:
                continue
            if SPECIAL_CLAIM_ANNOTATION in as_dict(claim["metadata"].get("annotations")):
                continue  # draxr's worker cleans its own special claims
            reserved = {
                as_dict(r).get("uid") for r in as_list(as_dict(claim.get("status")).get("reservedFor"))
            }
            owner = controller_ref(claim) or {}
            if pod_uid in reserved or owner.get("uid") == pod_uid:  # still so when it runs
                await self._sync_claim(cns, cname)

    def _pod_done(self, uid: str) -> bool:
        located = self._store.key_of_uid(uid)
        pod = self._store.get(*located) if located is not None else None
        return pod is None or _terminal(pod)

    async def _sync_claim(self, ns: str, name: str) -> None:
        rt = self._index.by_key("resourceclaims.resource.k8s.io")
        assert rt is not None
        for _ in range(8):
            claim = self._store.get(rt.key, ns, name)
            if claim is None:
                return
            st = dict(as_dict(claim.get("status")))
            reserved = [as_dict(r) for r in as_list(st.get("reservedFor"))]
            kept = [
                r for r in reserved if not (r.get("resource") == "pods" and self._pod_done(str(r.get("uid"))))
            ]
            try:
                if kept != reserved or (not kept and st.get("allocation")):
                    st["reservedFor"] = kept or None
                    if not kept:
                        st.pop("allocation", None)
                    req = Request(rt, ns, name, CONTROLLER_USER, subresource="status")
                    claim = await self._registry.update(req, {**claim, "status": st})
                finalizers = as_list(claim["metadata"].get("finalizers"))
                if not kept and FINALIZER in finalizers:
                    meta = {**claim["metadata"], "finalizers": [f for f in finalizers if f != FINALIZER]}
                    claim = await self._registry.update(
                        Request(rt, ns, name, CONTROLLER_USER), {**claim, "metadata": meta}
                    )
                owner = controller_ref(claim) or {}
                if not kept and owner.get("kind") == "Pod" and self._pod_done(str(owner.get("uid"))):
                    await self._registry.delete(
                        Request(rt, ns, name, CONTROLLER_USER), {"propagationPolicy": "Background"}
                    )
                return
            except errors.ApiError as exc:
                if exc.code == 404:
                    return
                if exc.code != 409:
                    log.warning("resourceclaim controller: sync claim %s/%s: %s", ns, name, exc)
                    return


def _wants_claims(pod: Obj) -> bool:
    recorded = {
        as_dict(s).get("name") for s in as_list(as_dict(pod.get("status")).get("resourceClaimStatuses"))
    }
    return any(
        isinstance(as_dict(pc).get("resourceClaimTemplateName"), str)
        and as_dict(pc).get("name") not in recorded
        for pc in as_list(as_dict(pod.get("spec")).get("resourceClaims"))
    )
