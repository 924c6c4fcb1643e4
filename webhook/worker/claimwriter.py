"""The one writer of ResourceClaims the worker owns: the binding cycle's and cleanup's claim writes.

PreBind creates the special claim, protects a claim it allocates with the delete-protection finalizer
and writes ``status.allocation`` and ``reservedFor``; Unreserve and cleanup take a pod out of
``reservedFor``, deallocate, drop the finalizer and delete. Each write is fenced by leadership and
made again on a fresh read when it meets 409 Conflict (``kube.retry``); one that keeps conflicting
gives up as ``BindError("<what>: too many conflicts")``. ``Binder`` and ``Cleaner`` share this
object, so neither borrows the other's methods. The change PreBind makes to a claim is core's
(``core.allocation.claims.with_reservation``): ``draxr plan`` makes the same one offline.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TypeVar

from ..core.allocation.claims import SpecialClaim, as_obj, same_allocation, settled, with_reservation
from ..core.api.constants import DELETE_PROTECTION_FINALIZER
from ..core.api.objects import Obj, as_dict, as_list, meta, name, namespace, uid
from ..kube.client import ApiError, KubeClient, NotLeader
from ..kube.resources import RESOURCE_CLAIMS
from ..kube.retry import retry_on_conflict

T = TypeVar("T")
R = TypeVar("R")


class BindError(Exception):
    """A PreBind or Bind step failed (a claim write among them); the cycle must be undone."""


def give_up_as_bind_error(
    mutate: Callable[[T], R], current: T, reread: Callable[[], T] | None, what: str
) -> R:
    """``retry_on_conflict``; conflicts that do not stop: ``BindError("<what>: too many conflicts")``."""
    try:
        return retry_on_conflict(mutate, current, reread)
    except ApiError as e:
        if not e.conflict:
            raise
        raise BindError(f"{what}: too many conflicts") from e


def retry_as_is(call: Callable[[], Obj], check: Callable[[], None]) -> Obj:
    """A write made again as is on a conflict (a create from ``generateName``, a merge patch: neither
    carries a resourceVersion); the last conflict is raised."""

    def write(_: None) -> Obj:
        check()
        return call()

    return retry_on_conflict(write, None)


class ClaimWriter:
    def __init__(
        self,
        client: KubeClient,
        fence: Callable[[], bool] = lambda: True,
        on_claim: Callable[[str, bool], None] | None = None,
    ) -> None:
        """``fence``: whether this worker leads (every write asks); ``on_claim(op, ok)``: the
        ``create``/``delete`` metric of special claims."""
        self.client = client
        self.fence = fence
        self.on_claim = on_claim or (lambda op, ok: None)

    def check(self) -> None:
        if not self.fence():
            raise NotLeader("lost leadership; not writing")

    def read(self, ns: str, cname: str) -> Obj | None:
        """A fresh copy, or None when the claim is gone (cleanup treats that as done)."""
        try:
            return self.client.get(RESOURCE_CLAIMS, cname, ns)
        except ApiError as e:
            if e.not_found:
                return None
            raise

    def get(self, ns: str, cname: str) -> Obj:
        """A fresh copy; a claim gone, or any error, is a BindError (PreBind cannot go on)."""
        try:
            return self.client.get(RESOURCE_CLAIMS, cname, ns)
        except ApiError as e:
            if e.not_found:
                raise BindError(f"claim {ns}/{cname} got deleted in the meantime") from e
            raise BindError(f"get claim {ns}/{cname}: {e.message}") from e

    def create(self, body: SpecialClaim, ns: str, pod_name: str) -> Obj:
        """POST the special claim; a 409 means a generated name collided: ask again for another."""
        try:
            created = retry_as_is(lambda: self.client.create(RESOURCE_CLAIMS, as_obj(body), ns), self.check)
        except ApiError as e:
            self.on_claim("create", False)
            raise BindError(
                f"claim creation errors: create claim for extended resources {ns}/{pod_name}: {e.message}"
            ) from e
        self.on_claim("create", True)
        return created

    def ensure_finalizer(self, claim: Obj) -> Obj:
        """``bindClaim``: an allocated claim is protected from deletion while in use."""
        ns, cname = namespace(claim), name(claim)

        def add(claim: Obj) -> Obj:
            self.check()
            metadata = claim.setdefault("metadata", {})
            finalizers = list(as_list(metadata.get("finalizers")))
            if DELETE_PROTECTION_FINALIZER in finalizers:
                return claim
            metadata["finalizers"] = [*finalizers, DELETE_PROTECTION_FINALIZER]
            try:
                return self.client.update(RESOURCE_CLAIMS, claim)
            except ApiError as e:
                if e.conflict:
                    raise
                raise BindError(f"add finalizer to claim {ns}/{cname}: {e.message}") from e

        return give_up_as_bind_error(
            add, claim, lambda: self.get(ns, cname), f"add finalizer to claim {ns}/{cname}"
        )

    def reserve(
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
        if known is not None and not settled(known, uid(pod)):
            claim = copy.deepcopy(known)
        else:
            claim = self.get(ns, cname)

        def write(claim: Obj) -> str:
            if expected_uid and uid(claim) != expected_uid:
                raise BindError(f"claim {ns}/{cname} got deleted in the meantime")
            current = as_dict(claim.get("status")).get("allocation")
            if allocation is not None and current and not same_allocation(current, allocation):
                raise BindError(f"claim {ns}/{cname} got allocated elsewhere in the meantime")
            if allocation is None and not current:
                raise BindError(f"claim {ns}/{cname} lost its allocation in the meantime")
            if not with_reservation(claim, pod, allocation):
                return str(meta(claim).get("resourceVersion") or "")  # nothing to write
            self.check()
            try:
                answer = self.client.update(RESOURCE_CLAIMS, claim, subresource="status")
            except ApiError as e:
                if e.conflict:
                    raise
                if e.not_found:
                    raise BindError(f"claim {ns}/{cname} got deleted in the meantime") from e
                raise BindError(f"update claim {ns}/{cname} status: {e.message}") from e
            return str(meta(answer).get("resourceVersion") or "")

        return give_up_as_bind_error(
            write, claim, lambda: self.get(ns, cname), f"update claim {ns}/{cname} status"
        )

    def unreserve(
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
            self.check()
            try:
                released = self.client.update(RESOURCE_CLAIMS, claim, subresource="status")
            except ApiError as e:
                if e.not_found:
                    return None
                raise
            return self._drop_finalizer(released) if drop_alloc else released

        first = known if known is not None else self.read(ns, cname)
        return give_up_as_bind_error(
            unreserve, first, lambda: self.read(ns, cname), f"release claim {ns}/{cname}"
        )

    def _drop_finalizer(self, claim: Obj) -> Obj | None:
        """A deallocated claim no longer needs its delete protection."""
        ns, cname = namespace(claim), name(claim)

        def drop(claim: Obj | None) -> Obj | None:
            if claim is None or as_dict(claim.get("status")).get("allocation"):
                return claim  # gone, or allocated again meanwhile: the finalizer stays
            metadata = claim.setdefault("metadata", {})
            finalizers = as_list(metadata.get("finalizers"))
            if DELETE_PROTECTION_FINALIZER not in finalizers:
                return claim
            metadata["finalizers"] = [f for f in finalizers if f != DELETE_PROTECTION_FINALIZER]
            self.check()
            try:
                return self.client.update(RESOURCE_CLAIMS, claim)
            except ApiError as e:
                if e.not_found:
                    return None
                raise

        first: Obj | None = claim
        return give_up_as_bind_error(
            drop, first, lambda: self.read(ns, cname), f"remove finalizer of claim {ns}/{cname}"
        )

    def delete(self, ns: str, cname: str, claim_uid: str | None = None, *, known: Obj | None = None) -> bool:
        """``deleteClaim``: remove the finalizer (retry on conflict), then DELETE; NotFound is fine.
        ``known``: a copy the caller just wrote or read, used for the first attempt."""

        def delete(claim: Obj | None) -> bool:
            if claim is None:
                return True
            if claim_uid and uid(claim) != claim_uid:
                return True  # a different claim with the same name: not ours to delete
            metadata = claim.setdefault("metadata", {})
            finalizers = as_list(metadata.get("finalizers"))
            try:
                if DELETE_PROTECTION_FINALIZER in finalizers:
                    metadata["finalizers"] = [f for f in finalizers if f != DELETE_PROTECTION_FINALIZER]
                    self.check()
                    self.client.update(RESOURCE_CLAIMS, claim)
                self.check()
                self.client.delete(RESOURCE_CLAIMS, cname, ns, uid=uid(claim))
            except ApiError as e:
                if e.not_found:
                    return True
                raise
            self.on_claim("delete", True)
            return True

        first = known if known is not None else self.read(ns, cname)
        return give_up_as_bind_error(
            delete, first, lambda: self.read(ns, cname), f"delete claim {ns}/{cname}"
        )
