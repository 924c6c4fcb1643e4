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
from typing import TypeVar

from ..core.allocation.claims import extended_resource_claim_status, reserved_for, special_claim
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
from ..kube.resources import PODS, RESOURCE_CLAIMS
from ..kube.retry import retry_on_conflict

log = logging.getLogger("draxr.binder")

T = TypeVar("T")
R = TypeVar("R")


class BindError(Exception):
    """A PreBind or Bind step failed; the cycle must be undone."""


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
    ) -> None:
        """``binding_conditions``: whether ``DRADeviceBindingConditions`` is on (then every allocation
        written carries ``allocationTimestamp``, as upstream's ``bindClaim``); ``wall``: its clock."""
        self.binding_conditions = binding_conditions
        self.wall = wall
        self.client = client
        self.scheduler_name = scheduler_name
        self.fence = fence
        self.on_claim = on_claim or (lambda op, ok: None)

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
                known = self._ensure_finalizer(copy.deepcopy(uc.claim))
            written.user_claims.append((ns, cname, allocation is not None))
            written.versions[(ns, cname)] = self._update_claim_status(
                ns, cname, pod, allocation, expected_uid=uid(uc.claim), known=known
            )
        if special is not None and stamp is not None and decision.special is not None:
            special["allocationTimestamp"] = stamp  # a fresh allocation (not a resumed one)
        if special is not None:
            claim = self._special_claim(pod, decision, written, decision.reuse or decision.resumed)
            written.versions[(namespace(claim), name(claim))] = self._update_claim_status(
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
                reuse = self._ensure_finalizer(reuse)
            return reuse
        if reuse is not None:
            self.delete_claim(namespace(reuse), name(reuse), uid(reuse))
        body = special_claim(pod, decision.requests, constraints=decision.constraints)
        body["metadata"]["annotations"][WRITER_ANNOTATION] = self.scheduler_name
        try:
            # A 409 on create means a generated name collided: ask again for another one.
            created = self._retry_conflicts(lambda: self.client.create(RESOURCE_CLAIMS, body, namespace(pod)))
        except ApiError as e:
            self.on_claim("create", False)
            raise BindError(
                f"claim creation errors: create claim for extended resources "
                f"{namespace(pod)}/{name(pod)}: {e.message}"
            ) from e
        self.on_claim("create", True)
        written.special_claim = created
        self._observe("claim-created", pod)
        return created

    def _retry_conflicts(self, call: Callable[[], Obj]) -> Obj:
        """A write made again as is on a conflict (a create from ``generateName``, a merge patch);
        the last conflict is raised."""

        def write(_: None) -> Obj:
            self._check()
            return call()

        return retry_on_conflict(write, None)

    def _on_conflict(
        self, mutate: Callable[[T], R], current: T, reread: Callable[[], T] | None, what: str
    ) -> R:
        """``retry_on_conflict``; conflicts that do not stop: ``BindError("<what>: too many conflicts")``."""
        try:
            return retry_on_conflict(mutate, current, reread)
        except ApiError as e:
            if not e.conflict:
                raise
            raise BindError(f"{what}: too many conflicts") from e

    def _ensure_finalizer(self, claim: Obj) -> Obj:
        ns, cname = namespace(claim), name(claim)

        def add(claim: Obj) -> Obj:
            self._check()
            meta = claim.setdefault("metadata", {})
            finalizers = list(as_list(meta.get("finalizers")))
            if DELETE_PROTECTION_FINALIZER in finalizers:
                return claim
            meta["finalizers"] = [*finalizers, DELETE_PROTECTION_FINALIZER]
            try:
                return self.client.update(RESOURCE_CLAIMS, claim)
            except ApiError as e:
                if e.conflict:
                    raise
                raise BindError(f"add finalizer to claim {ns}/{cname}: {e.message}") from e

        return self._on_conflict(
            add, claim, lambda: self._get_claim(ns, cname), f"add finalizer to claim {ns}/{cname}"
        )

    def _get_claim(self, ns: str, cname: str) -> Obj:
        try:
            return self.client.get(RESOURCE_CLAIMS, cname, ns)
        except ApiError as e:
            if e.not_found:
                raise BindError(f"claim {ns}/{cname} got deleted in the meantime") from e
            raise BindError(f"get claim {ns}/{cname}: {e.message}") from e

    def _update_claim_status(
        self,
        ns: str,
        cname: str,
        pod: Obj,
        allocation: Obj | None,
        expected_uid: str,
        known: Obj | None = None,
    ) -> str:
        """Write the allocation (if any) and reserve the claim for the pod; retry on conflict. The
        claim's resourceVersion once written (or found settled) is returned.

        ``known`` is the newest copy we hold (the POST answer, or the cache's): an up-to-date one
        saves a read, a stale one costs a 409 and a fresh read. A copy that says there is nothing
        to write is not taken at its word: the API is read (the claim may be gone, or deallocated).
        """

        def settled(claim: Obj) -> bool:
            st = as_dict(claim.get("status"))
            reserved = any(as_dict(r).get("uid") == uid(pod) for r in as_list(st.get("reservedFor")))
            return reserved and bool(st.get("allocation"))

        if known is not None and not settled(known):
            claim = copy.deepcopy(known)
        else:
            claim = self._get_claim(ns, cname)

        def reserve(claim: Obj) -> str:
            if expected_uid and uid(claim) != expected_uid:
                raise BindError(f"claim {ns}/{cname} got deleted in the meantime")
            st = claim.setdefault("status", {})
            current = st.get("allocation")
            if allocation is not None and current and not same_allocation(current, allocation):
                raise BindError(f"claim {ns}/{cname} got allocated elsewhere in the meantime")
            if allocation is None and not current:
                raise BindError(f"claim {ns}/{cname} lost its allocation in the meantime")
            reserved = as_list(st.get("reservedFor"))
            already = any(as_dict(r).get("uid") == uid(pod) for r in reserved)
            if already and (allocation is None or current):
                return str(meta(claim).get("resourceVersion") or "")  # nothing to write
            if allocation is not None and not current:
                st["allocation"] = allocation
            if not already:
                st["reservedFor"] = [*reserved, reserved_for(pod)]
            self._check()
            try:
                answer = self.client.update(RESOURCE_CLAIMS, claim, subresource="status")
            except ApiError as e:
                if e.conflict:
                    raise
                if e.not_found:
                    raise BindError(f"claim {ns}/{cname} got deleted in the meantime") from e
                raise BindError(f"update claim {ns}/{cname} status: {e.message}") from e
            return str(meta(answer).get("resourceVersion") or "")

        return self._on_conflict(
            reserve, claim, lambda: self._get_claim(ns, cname), f"update claim {ns}/{cname} status"
        )

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
            patched = self._retry_conflicts(lambda: self._patch_mapping(pod, erc_status))
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

        self._on_conflict(bind, None, None, "binding rejected")
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

    def roll_back(self, pod: Obj, written: Written) -> None:
        """The API half of Unreserve: undo this cycle's writes; best effort, every step
        tolerates NotFound. Nothing is undone of a pod that got bound (its binding went through
        although Bind failed): it runs with what this cycle wrote."""
        if written.user_claims or written.special_claim is not None or written.pod_status:
            try:
                live = self.read_pod(pod)
            except BindError as e:
                log.warning("unreserve: %s: nothing undone", e, extra={"pod": key(pod)})
                return
            if live is not None and spec(live).get("nodeName"):
                log.warning(
                    "unreserve: the pod is bound: nothing undone",
                    extra={"pod": key(pod), "node": spec(live).get("nodeName")},
                )
                return
        claim = written.special_claim
        if claim is not None:
            try:
                self.delete_claim(namespace(claim), name(claim), uid(claim))
            except (ApiError, BindError, NotLeader) as e:
                log.warning("unreserve: delete claim: %s", e, extra={"pod": key(pod), "claim": name(claim)})
        for ns, cname, allocated_here in written.user_claims:
            try:
                self.unreserve_claim(ns, cname, uid(pod), deallocate=allocated_here)
            except (ApiError, BindError, NotLeader) as e:
                log.warning("unreserve: release claim: %s", e, extra={"pod": key(pod), "claim": cname})
        mapped = written.special_claim or written.reused_claim
        if written.pod_status and mapped is not None:
            try:
                self.clear_mapping(pod, name(mapped))
            except (ApiError, BindError, NotLeader) as e:
                log.info("unreserve: clear pod status: %s", e, extra={"pod": key(pod)})

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

        self._on_conflict(
            clear, self.read_pod(pod), lambda: self.read_pod(pod), f"clear pod {key(pod)} status"
        )

    def read_claim(self, ns: str, cname: str) -> Obj | None:
        """A fresh copy, or None when the claim is gone (cleanup treats that as done)."""
        try:
            return self.client.get(RESOURCE_CLAIMS, cname, ns)
        except ApiError as e:
            if e.not_found:
                return None
            raise

    def unreserve_claim(
        self, ns: str, cname: str, pod_uid: str, *, deallocate: bool, known: Obj | None = None
    ) -> Obj | None:
        """Take the pod out of ``reservedFor``; clear the allocation when nobody is left.
        ``known``: a copy the caller just read, used for the first attempt (a conflict reads again)."""

        def unreserve(claim: Obj | None) -> Obj | None:
            if claim is None:
                return None
            st = claim.setdefault("status", {})
            before = as_list(st.get("reservedFor"))
            after = [r for r in before if as_dict(r).get("uid") != pod_uid]
            drop_alloc = deallocate and not after and st.get("allocation")
            if len(after) == len(before) and not drop_alloc:
                return claim
            st["reservedFor"] = after or None
            if drop_alloc:
                st.pop("allocation", None)
            self._check()
            try:
                released = self.client.update(RESOURCE_CLAIMS, claim, subresource="status")
            except ApiError as e:
                if e.not_found:
                    return None
                raise
            return self._drop_finalizer(released) if drop_alloc else released

        first = known if known is not None else self.read_claim(ns, cname)
        return self._on_conflict(
            unreserve, first, lambda: self.read_claim(ns, cname), f"release claim {ns}/{cname}"
        )

    def _drop_finalizer(self, claim: Obj) -> Obj | None:
        """A deallocated claim no longer needs its delete protection."""
        ns, cname = namespace(claim), name(claim)

        def drop(claim: Obj | None) -> Obj | None:
            if claim is None or as_dict(claim.get("status")).get("allocation"):
                return claim  # gone, or allocated again meanwhile: the finalizer stays
            meta = claim.setdefault("metadata", {})
            finalizers = as_list(meta.get("finalizers"))
            if DELETE_PROTECTION_FINALIZER not in finalizers:
                return claim
            meta["finalizers"] = [f for f in finalizers if f != DELETE_PROTECTION_FINALIZER]
            self._check()
            try:
                return self.client.update(RESOURCE_CLAIMS, claim)
            except ApiError as e:
                if e.not_found:
                    return None
                raise

        first: Obj | None = claim
        return self._on_conflict(
            drop, first, lambda: self.read_claim(ns, cname), f"remove finalizer of claim {ns}/{cname}"
        )

    def delete_claim(
        self, ns: str, cname: str, claim_uid: str | None = None, *, known: Obj | None = None
    ) -> bool:
        """``deleteClaim``: remove the finalizer (retry on conflict), then DELETE; NotFound is fine.
        ``known``: a copy the caller just wrote or read, used for the first attempt."""

        def delete(claim: Obj | None) -> bool:
            if claim is None:
                return True
            if claim_uid and uid(claim) != claim_uid:
                return True  # a different claim with the same name: not ours to delete
            meta = claim.setdefault("metadata", {})
            finalizers = as_list(meta.get("finalizers"))
            try:
                if DELETE_PROTECTION_FINALIZER in finalizers:
                    meta["finalizers"] = [f for f in finalizers if f != DELETE_PROTECTION_FINALIZER]
                    self._check()
                    self.client.update(RESOURCE_CLAIMS, claim)
                self._check()
                self.client.delete(RESOURCE_CLAIMS, cname, ns, uid=uid(claim))
            except ApiError as e:
                if e.not_found:
                    return True
                raise
            self.on_claim("delete", True)
            return True

        first = known if known is not None else self.read_claim(ns, cname)
        return self._on_conflict(
            delete, first, lambda: self.read_claim(ns, cname), f"delete claim {ns}/{cname}"
        )


def same_allocation(a: Obj, b: Obj) -> bool:
    """Same devices for the same requests (servers may add or drop defaulted fields)."""

    def key(alloc: Obj) -> list[tuple[str, str, str, str]]:
        results = as_list(as_dict(as_dict(alloc).get("devices")).get("results"))
        return sorted(
            (str(r.get("request")), str(r.get("driver")), str(r.get("pool")), str(r.get("device")))
            for r in (as_dict(x) for x in results)
        )

    return key(a) == key(b)


def _devices(claim: Obj) -> tuple[list[Obj], list[Obj]]:
    """The claim's requests and constraints."""
    devices = as_dict(as_dict(claim.get("spec")).get("devices"))
    return copy.deepcopy(as_list(devices.get("requests"))), copy.deepcopy(as_list(devices.get("constraints")))
