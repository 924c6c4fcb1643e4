"""kube-controller-manager's resourceclaim controller, the part that makes claims from templates.

For each entry of a pod's ``spec.resourceClaims`` that names a ``resourceClaimTemplateName`` and has
no ``status.resourceClaimStatuses`` entry yet, it creates a ResourceClaim from the template, as the
real controller does (observed on 1.35 and 1.36, e2e/controlplane/test_controlplane.py):

- ``generateName: <pod>-<podClaimName>-`` (both parts cut proportionally when longer than 57
  characters, as upstream's controller cuts them);
- the template's labels and annotations, plus ``resource.kubernetes.io/pod-claim-name: <podClaimName>``;
- ``ownerReferences: [{apiVersion: v1, kind: Pod, name, uid, controller: true}]``, no
  ``blockOwnerDeletion``;
- the template's ``spec.spec`` as stored;

then records ``{name: <podClaimName>, resourceClaimName: <claim>}`` in the pod's
``status.resourceClaimStatuses``. A claim it made earlier (annotation and controller owner match)
is reused rather than made twice. Pods that are being deleted or are done get nothing; a missing
template is retried when the template appears. The controller acts after the fact, through the
registry (admission included), as ``system:serviceaccount:kube-system:resource-claim-controller``.

Not modelled: the controller's release of ``reservedFor`` entries of pods that are gone, and (1.36,
DRAExtendedResource) its clean-up of special claims; draxr's worker does both itself.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from . import errors
from .auth import authenticated
from .history import WatchEvent
from .objmeta import jsoncopy
from .registry import Registry, Request
from .resources import ResourceIndex

log = logging.getLogger(__name__)

CONTROLLER_USER = authenticated(
    "system:serviceaccount:kube-system:resource-claim-controller", ("system:serviceaccounts",)
)
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
#: Leaves room for the 5 random characters of a generated name in 63 characters (upstream's constant).
MAX_BASE_LEN = 57
_TEMPLATES = "resourceclaimtemplates.resource.k8s.io"
_CLAIMS = "resourceclaims.resource.k8s.io"


def generate_name(pod: str, pod_claim: str) -> str:
    """``<pod>-<podClaimName>-``, or both parts cut in proportion to their length when too long."""
    base = f"{pod}-{pod_claim}-"
    if len(base) <= MAX_BASE_LEN:
        return base
    # Go's integer arithmetic: len(x) * 57 / len(base), truncated.
    keep_pod = len(pod) * MAX_BASE_LEN // len(base)
    keep_claim = len(pod_claim) * MAX_BASE_LEN // len(base)
    return f"{pod[:keep_pod]}-{pod_claim[:keep_claim]}"


def _templated(pod: dict[str, Any]) -> dict[str, str]:
    """podClaimName -> template name, for the entries still without a recorded claim."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    if pod["metadata"].get("deletionTimestamp") or status.get("phase") in ("Succeeded", "Failed"):
        return {}
    recorded = {s.get("name") for s in status.get("resourceClaimStatuses") or [] if isinstance(s, dict)}
    out: dict[str, str] = {}
    for pc in spec.get("resourceClaims") or []:
        if not isinstance(pc, dict):
            continue
        template = pc.get("resourceClaimTemplateName")
        if isinstance(template, str) and template and pc.get("name") not in recorded:
            out[str(pc.get("name"))] = template
    return out


class ResourceClaimController:
    def __init__(self, registry: Registry, index: ResourceIndex, loop: asyncio.AbstractEventLoop) -> None:
        self._registry = registry
        self._store = registry.store
        self._index = index
        self._loop = loop
        self._tasks: set[asyncio.Task[None]] = set()
        self._store.add_listener(self._on_commit)

    def _spawn(self, namespace: str, name: str) -> None:
        def start() -> None:
            task = self._loop.create_task(self._sync(namespace, name))
            self._tasks.add(task)
            task.add_done_callback(self._done)

        self._loop.call_soon_threadsafe(start)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("resourceclaim controller failed", exc_info=task.exception())

    @property
    def busy(self) -> bool:
        return bool(self._tasks)

    def _on_commit(self, key: str, event: WatchEvent) -> None:
        """Store listener (under the store lock): schedule work, never do it here."""
        if event.type == "DELETED":
            return
        meta = event.obj["metadata"]
        if key == "pods" and _templated(event.obj):
            self._spawn(meta.get("namespace", ""), meta["name"])
        elif key == _TEMPLATES and event.type == "ADDED":
            ns = meta.get("namespace", "")
            pods, _ = self._store.select("pods", ns)
            for pod in pods:
                if meta["name"] in _templated(pod).values():
                    self._spawn(ns, pod["metadata"]["name"])

    def _existing(self, namespace: str, pod: dict[str, Any], pod_claim: str) -> dict[str, Any] | None:
        claims, _ = self._store.select(_CLAIMS, namespace)
        for claim in claims:
            meta = claim["metadata"]
            owners = [
                r for r in meta.get("ownerReferences") or [] if isinstance(r, dict) and r.get("controller")
            ]
            if (
                owners
                and owners[0].get("uid") == pod["metadata"].get("uid")
                and (meta.get("annotations") or {}).get(POD_CLAIM_NAME_ANNOTATION) == pod_claim
            ):
                return claim
        return None

    async def _sync(self, namespace: str, name: str) -> None:
        pod = self._store.get("pods", namespace, name)
        if pod is None:
            return
        made: dict[str, str] = {}
        for pod_claim, template_name in _templated(pod).items():
            claim = self._existing(namespace, pod, pod_claim)
            if claim is None:
                template = self._store.get(_TEMPLATES, namespace, template_name)
                if template is None:
                    continue  # retried when the template is created
                claim = await self._create(pod, pod_claim, template)
                if claim is None:
                    continue
            made[pod_claim] = claim["metadata"]["name"]
        if made:
            await self._record(namespace, name, pod["metadata"].get("uid"), made)

    async def _create(
        self, pod: dict[str, Any], pod_claim: str, template: dict[str, Any]
    ) -> dict[str, Any] | None:
        tmpl = template.get("spec") or {}
        tmeta = tmpl.get("metadata") or {}
        meta: dict[str, Any] = {
            "generateName": generate_name(pod["metadata"]["name"], pod_claim),
            "namespace": pod["metadata"].get("namespace", ""),
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod["metadata"]["name"],
                    "uid": pod["metadata"]["uid"],
                    "controller": True,
                }
            ],
            "annotations": {**(tmeta.get("annotations") or {}), POD_CLAIM_NAME_ANNOTATION: pod_claim},
        }
        if tmeta.get("labels"):
            meta["labels"] = dict(tmeta["labels"])
        body = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": meta,
            "spec": jsoncopy(tmpl.get("spec") or {}),
        }
        rt = self._index.by_key(_CLAIMS)
        assert rt is not None
        try:
            return await self._registry.create(Request(rt, meta["namespace"], "", CONTROLLER_USER), body)
        except errors.ApiError as exc:
            log.warning("resourceclaim controller could not create a claim for pod %s: %s", meta["name"], exc)
            return None

    async def _record(self, namespace: str, name: str, pod_uid: Any, made: dict[str, str]) -> None:
        rt = self._index.by_key("pods")
        assert rt is not None
        for _ in range(8):
            pod = self._store.get("pods", namespace, name)
            if pod is None or pod["metadata"].get("uid") != pod_uid:
                return
            status = dict(pod.get("status") or {})
            statuses = [s for s in status.get("resourceClaimStatuses") or [] if isinstance(s, dict)]
            have = {s.get("name") for s in statuses}
            statuses += [{"name": n, "resourceClaimName": c} for n, c in made.items() if n not in have]
            body = {**jsoncopy(pod), "status": {**status, "resourceClaimStatuses": statuses}}
            try:
                await self._registry.update(
                    Request(rt, namespace, name, CONTROLLER_USER, subresource="status"), body
                )
                return
            except errors.ApiError as exc:
                if exc.code == 409:
                    continue
                if exc.code != 404:
                    log.warning(
                        "resourceclaim controller could not update pod %s/%s: %s", namespace, name, exc
                    )
                return

    def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    async def drain(self) -> None:
        """Wait until no work is pending (``Emulator.settle``)."""
        await asyncio.sleep(0)  # let work scheduled by the last commits start
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
            await asyncio.sleep(0)
