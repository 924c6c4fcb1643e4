"""PreBind, Bind and Unreserve: the API writes of one binding cycle, in the upstream order.

1. user claims (store order): ``status.allocation`` (when this cycle allocated them) and the pod in
   ``reservedFor``; a conflict re-reads the claim and retries;
2. the special claim: create it from ``generateName`` (annotation, controller owner, finalizer and
   requests in one POST) or reuse the pod's consistent one, then write ``status.allocation`` and
   ``reservedFor`` (retry on conflict with a fresh read);
3. the pod's ``status.extendedResourceClaimStatus``;
4. the ``pods/binding``.

Every step is idempotent. Unreserve undoes what this cycle wrote: it deletes the special claim it
created (finalizer first, NotFound is success) and takes the pod out of user claims' reservedFor.
A special claim it cannot delete (fenced: the lease lost for a moment) is handed back: the pod's
next attempt waits for the cache to show it (``assumed.LeftClaims``), then reuses it.

A bound pod is never touched: PreBind reads the pod before its first write and stops when the pod
is bound already (a worker with a lagging view, a new leader, decided for it), gone or recreated
under its name; Unreserve reads it too and undoes nothing of a pod that got bound, and clears its
mapping only on the pod it was written to (uid), unbound, still naming this cycle's claim, at the
resourceVersion it checked. Every pod status patch carries the pod's uid, as upstream's
``PatchPodStatus`` does: the apiserver refuses it for a pod recreated under the same name. A copy
of a claim from the cache that says nothing is left to write is confirmed by a fresh read: a
claim an earlier attempt wrote and its Unreserve deleted must not be resumed from the cache.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ..core.allocation.claims import extended_resource_claim_status, special_claim
from ..core.api.constants import DELETE_PROTECTION_FINALIZER, WRITER_ANNOTATION
from ..core.api.objects import (
    Obj,
    as_dict,
    as_list,
    format_time,
    key,
    meta,
    name,
    namespace,
    spec,
    status,
    uid,
)
from ..core.api.orphans import special_claim_name
from ..core.scheduling.framework import Decision
from ..kube.client import MERGE_PATCH, ApiError, KubeClient, NotLeader
from ..kube.resources import PODS
from .claimwriter import BindError, ClaimWriter, give_up_as_bind_error, retry_as_is

__all__ = ["AlreadyBound", "BindError", "Binder", "Written"]

log = logging.getLogger("draxr.binder")


class AlreadyBound(BindError):
    """The pod the cycle is for is bound already (this worker's view lagged): nothing was written,
    and nothing of the pod may be undone."""


@dataclass
class Written:
    """What one binding cycle wrote, so Unreserve knows what to undo."""

    special_claim: Obj | None = None  # created by this cycle
    reused_claim: Obj | None = None
    user_claims: list[tuple[str, str, bool]] = field(default_factory=list)  # (ns, name, allocated here)
    pod_status: bool = False
    #: Each claim's resourceVersion once this cycle had written (or found) it allocated and reserved.
    versions: dict[tuple[str, str], str] = field(default_factory=dict)

    @property
    def claim_keys(self) -> list[tuple[str, str]]:
        keys = [(ns, n) for ns, n, _ in self.user_claims]
        claim = self.special_claim or self.reused_claim
        if claim is not None:
            keys.append((namespace(claim), name(claim)))
        return keys

    @property
    def claim_versions(self) -> dict[tuple[str, str], str]:
        """``claim_keys`` with the resourceVersion each was written at ("": not known)."""
        return {k: self.versions.get(k, "") for k in self.claim_keys}


class Binder:
    #: Called after each completed step ("claim-created", "claim-allocated", "pod-status", "bound"):
    #: a tracing point, and where the crash-recovery tests stop a cycle dead.
    observer: Callable[[str, Obj], None] | None = None

    def __init__(
        self,
        client: KubeClient,
        scheduler_name: str,
        fence: Callable[[], bool] = lambda: True,
        on_claim: Callable[[str, bool], None] | None = None,
        binding_conditions: Callable[[], bool] = lambda: False,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        claims: ClaimWriter | None = None,
    ) -> None:
        """``binding_conditions``: whether ``DRADeviceBindingConditions`` is on (then every allocation
        written carries ``allocationTimestamp``, as upstream's ``bindClaim``); ``wall``: its clock;
        ``claims``: the claim writer shared with cleanup (None: one of its own)."""
        self.claims = claims or ClaimWriter(client, fence, on_claim)
        self.binding_conditions = binding_conditions
        self.wall = wall
        self.client = client
        self.scheduler_name = scheduler_name
        self.fence = fence

    def _observe(self, step: str, pod: Obj) -> None:
        if self.observer is not None:
            self.observer(step, pod)

    def _check(self) -> None:
        if not self.fence():
            raise NotLeader("lost leadership; not writing")

    # -- PreBind ---------------------------------------------------------------------------------

    def pre_bind(self, pod: Obj, decision: Decision, written: Written) -> None:
        special = decision.special_allocation()
        live: Obj = pod
        if decision.user_claims or special is not None:
            live = self._unbound(pod)  # before the first write
        stamp = format_time(self.wall()) if self.binding_conditions() else None
        for uc in decision.user_claims:
            allocation = uc.allocation.to_api() if uc.allocation is not None else None
            if allocation is not None and stamp is not None:
                allocation["allocationTimestamp"] = stamp
            ns, cname = namespace(uc.claim), name(uc.claim)
            known = uc.claim
            if allocation is not None:
                # ``bindClaim``: an allocated claim is protected from deletion while in use.
                known = self.claims.ensure_finalizer(copy.deepcopy(uc.claim))
            written.user_claims.append((ns, cname, allocation is not None))
            written.versions[(ns, cname)] = self.claims.reserve(
                ns, cname, pod, allocation, expected_uid=uid(uc.claim), known=known
            )
        if special is not None and stamp is not None and decision.special is not None:
            special["allocationTimestamp"] = stamp  # a fresh allocation (not a resumed one)
        if special is not None:
            claim = self._special_claim(pod, decision, written, decision.reuse or decision.resumed)
            written.versions[(namespace(claim), name(claim))] = self.claims.reserve(
                namespace(claim), name(claim), pod, special, expected_uid=uid(claim), known=claim
            )
            self._observe("claim-allocated", pod)
            erc_status = extended_resource_claim_status(name(claim), decision.mappings)
            self._patch_pod_status(pod, erc_status, live)
            written.pod_status = True
            self._observe("pod-status", pod)

    def _unbound(self, pod: Obj) -> Obj:
        """The pod as the API holds it now: this one (uid), and unbound; else BindError."""
        live = self.read_pod(pod)
        if live is None:
            raise BindError(f"pod {key(pod)} was deleted in the meantime")
        node = spec(live).get("nodeName")
        if node:
            raise AlreadyBound(f"pod {key(pod)} is already bound to node {node}")
        return live

    def read_pod(self, pod: Obj) -> Obj | None:
        """A fresh copy of the pod; None when it is gone or another pod has its name now."""
        try:
            live = self.client.get(PODS, name(pod), namespace(pod))
        except ApiError as e:
            if e.not_found:
                return None
            raise BindError(f"get pod {key(pod)}: {e.message}") from e
        return live if uid(live) == uid(pod) else None

    def _special_claim(self, pod: Obj, decision: Decision, written: Written, reuse: Obj | None) -> Obj:
        if reuse is not None and _devices(reuse) == (decision.requests, decision.constraints):
            written.reused_claim = reuse
            if DELETE_PROTECTION_FINALIZER not in as_list(reuse.get("metadata", {}).get("finalizers")):
                reuse = self.claims.ensure_finalizer(reuse)
            return reuse
        if reuse is not None:
            self.claims.delete(namespace(reuse), name(reuse), uid(reuse))
        body = special_claim(pod, decision.requests, constraints=decision.constraints)
        body["metadata"]["annotations"][WRITER_ANNOTATION] = self.scheduler_name
        created = self.claims.create(body, namespace(pod), name(pod))
        written.special_claim = created
        self._observe("claim-created", pod)
        return created

    def _patch_pod_status(self, pod: Obj, erc_status: Obj, live: Obj) -> None:
        """Write the mapping unless ``live`` (the pod as read at the start of this PreBind) holds
        it already. Never the queue's copy: it may still show a mapping a failed cycle's
        Unreserve has cleared since, and the pod would be bound naming no claim."""
        if not erc_status.get("requestMappings"):
            raise BindError(
                f"nil or empty request mappings, no update of pod {namespace(pod)}/{name(pod)} "
                "ExtendedResourceClaimStatus"
            )
        if status(live).get("extendedResourceClaimStatus") == erc_status:
            return
        try:
            # A merge patch carries no resourceVersion, so a conflict is safe to retry as is.
            patched = retry_as_is(lambda: self._patch_mapping(pod, erc_status), self._check)
        except ApiError as e:
            raise BindError(
                f"update pod {namespace(pod)}/{name(pod)} ExtendedResourceClaimStatus: {e.message}"
            ) from e
        if status(patched).get("extendedResourceClaimStatus") is None:
            # The apiserver answered 200 and dropped the field: DRAExtendedResource went off after
            # the pod was admitted for the native path. Bound, its containers would get no device.
            raise BindError(
                f"the apiserver dropped pod {namespace(pod)}/{name(pod)} ExtendedResourceClaimStatus "
                "(DRAExtendedResource is off): recreate the pod, draxr's webhook rewrites it into claims"
            )

    def _patch_mapping(self, pod: Obj, erc_status: Obj | None, resource_version: str | None = None) -> Obj:
        """Set (or, with None, clear) the pod's ``status.extendedResourceClaimStatus``; the pod's uid
        is in the patch (a precondition: refused for another pod of the same name) and, when given,
        the resourceVersion (refused with 409 once the pod changed)."""
        metadata: Obj = {"uid": uid(pod)}
        if resource_version is not None:
            metadata["resourceVersion"] = resource_version
        return self.client.patch(
            PODS,
            name(pod),
            {"metadata": metadata, "status": {"extendedResourceClaimStatus": erc_status}},
            namespace=namespace(pod),
            subresource="status",
            patch_type=MERGE_PATCH,
        )

    # -- Bind ------------------------------------------------------------------------------------

    def bind(self, pod: Obj, node: str) -> None:
        def bind(_: None) -> None:
            self._check()
            try:
                self.client.bind(namespace(pod), name(pod), uid(pod), node)
            except ApiError as e:
                if not e.conflict:
                    raise BindError(f"binding rejected: {e.message}") from e
                # Every conflict, the last one too, asks where the pod is.
                current = self._current_node(pod)
                if current == node:
                    return  # an earlier attempt's binding went through
                if current is not None:
                    raise BindError(f"binding rejected: pod is already assigned to node {current}") from e
                raise

        give_up_as_bind_error(bind, None, None, "binding rejected")
        self._observe("bound", pod)

    def _current_node(self, pod: Obj) -> str | None:
        try:
            live = self.client.get(PODS, name(pod), namespace(pod))
        except ApiError:
            return None
        if uid(live) != uid(pod):
            return None
        node = (live.get("spec") or {}).get("nodeName")
        return node if isinstance(node, str) else None

    # -- Unreserve -------------------------------------------------------------------------------

    def roll_back(self, pod: Obj, written: Written) -> Obj | None:
        """The API half of Unreserve: undo this cycle's writes; best effort, every step
        tolerates NotFound. Nothing is undone of a pod that got bound (its binding went through
        although Bind failed): it runs with what this cycle wrote. Returns the special claim this
        cycle created and left in place (its deletion failed, or fenced) for a pod neither bound nor
        gone: the pod's next attempt must find it."""
        claim = written.special_claim
        live: Obj | None = pod
        if written.user_claims or claim is not None or written.pod_status:
            try:
                live = self.read_pod(pod)
            except BindError as e:
                log.warning("unreserve: %s: nothing undone", e, extra={"pod": key(pod)})
                return claim
            if live is not None and spec(live).get("nodeName"):
                log.warning(
                    "unreserve: the pod is bound: nothing undone",
                    extra={"pod": key(pod), "node": spec(live).get("nodeName")},
                )
                return None
        left = None
        if claim is not None:
            try:
                self.claims.delete(namespace(claim), name(claim), uid(claim))
            except (ApiError, BindError, NotLeader) as e:
                log.warning("unreserve: delete claim: %s", e, extra={"pod": key(pod), "claim": name(claim)})
                left = claim if live is not None else None  # a gone pod's claims go with it
        for ns, cname, allocated_here in written.user_claims:
            try:
                self.claims.unreserve(ns, cname, uid(pod), deallocate=allocated_here)
            except (ApiError, BindError, NotLeader) as e:
                log.warning("unreserve: release claim: %s", e, extra={"pod": key(pod), "claim": cname})
        mapped = written.special_claim or written.reused_claim
        if written.pod_status and mapped is not None:
            try:
                self.clear_mapping(pod, name(mapped))
            except (ApiError, BindError, NotLeader) as e:
                log.info("unreserve: clear pod status: %s", e, extra={"pod": key(pod)})
        return left

    def clear_mapping(self, pod: Obj, claim_name: str) -> None:
        """Clear the pod's ``status.extendedResourceClaimStatus`` if it still names ``claim_name``,
        the pod is still this one (uid) and unbound, at the resourceVersion read (a conflict reads
        again): never the mapping of a bound pod, nor one someone else wrote."""

        def clear(live: Obj | None) -> None:
            if live is None or spec(live).get("nodeName") or special_claim_name(live) != claim_name:
                return
            self._check()
            try:
                self._patch_mapping(pod, None, str(meta(live).get("resourceVersion") or ""))
            except ApiError as e:
                if not e.not_found:
                    raise

        give_up_as_bind_error(
            clear, self.read_pod(pod), lambda: self.read_pod(pod), f"clear pod {key(pod)} status"
        )


def _devices(claim: Obj) -> tuple[list[Obj], list[Obj]]:
    """The claim's requests and constraints."""
    devices = as_dict(as_dict(claim.get("spec")).get("devices"))
    return copy.deepcopy(as_list(devices.get("requests"))), copy.deepcopy(as_list(devices.get("constraints")))
