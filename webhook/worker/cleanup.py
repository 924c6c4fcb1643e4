"""Cleanup after finished pods, and repair of orphaned special claims.

Upstream's resourceclaim controller frees a special claim when its pod is done only where
DRAExtendedResource is on in kube-controller-manager; draxr does it itself: the pod leaves
``reservedFor``, the allocation is cleared, the finalizer removed, the claim deleted. Every step
tolerates NotFound and conflicts, so running it twice (or next to the upstream controller) is safe.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..core.api.objects import Obj, as_dict, controller_ref, name, namespace, uid
from ..core.api.orphans import orphaned, owner_pod_uid
from ..core.api.specialclaims import is_special_claim
from ..kube.client import ApiError, KubeClient, NotLeader
from ..kube.resources import PODS
from .claimwriter import BindError, ClaimWriter

log = logging.getLogger("draxr.cleanup")


class Cleaner:
    def __init__(self, client: KubeClient, claims: ClaimWriter) -> None:
        self.client = client
        self.claims = claims
        #: Orphans the last ``repair`` confirmed with the API but could not release.
        self.unrepaired = 0

    def unreserve_and_delete(self, ns: str, claim_name: str, pod_uid: str) -> bool:
        """Take a finished or deleted pod (or a bound one that does not use the claim) out of its
        special claim's ``reservedFor``, deallocate the claim and delete it; True when nothing is
        left (a claim another pod still holds stays, unreserved for this one: False)."""
        try:
            current = self.claims.read(ns, claim_name)
            if current is None or not is_special_claim(current):
                return True  # gone, or not a special claim: never touched here
            owner = controller_ref(current)
            if owner is not None and owner.get("uid") != pod_uid:
                return True  # belongs to a newer pod of the same name
            claim = self.claims.unreserve(ns, claim_name, pod_uid, deallocate=True, known=current)
            if claim is None:
                return True
            if as_dict(claim.get("status")).get("reservedFor"):
                return False  # still in use by someone else
            self.claims.delete(ns, claim_name, uid(claim), known=claim)
            log.info("released special claim", extra={"claim": f"{ns}/{claim_name}", "pod": pod_uid})
            return True
        except (ApiError, BindError, NotLeader) as e:
            log.warning("release special claim: %s", e, extra={"claim": f"{ns}/{claim_name}"})
            return False

    def orphans(self, claims: list[Obj], pod_exists: Callable[[str], Obj | None]) -> list[Obj]:
        """Special claims controlled by a pod that the cache (``pod_exists``, by uid) shows
        ``orphaned``: gone, finished, or bound with another claim."""
        out: list[Obj] = []
        for claim in claims:
            if not is_special_claim(claim):
                continue
            owner_uid = owner_pod_uid(claim)
            if owner_uid is not None and orphaned(claim, pod_exists(owner_uid)):
                out.append(claim)
        return out

    def confirm_gone(self, claim: Obj) -> bool:
        """Ask the API, not the cache, before treating a claim as unused."""
        owner = controller_ref(claim) or {}
        try:
            pod = self.client.get(PODS, str(owner.get("name", "")), namespace(claim))
        except ApiError as e:
            return e.not_found
        return orphaned(claim, pod)

    def repair(self, claims: list[Obj], pod_exists: Callable[[str], Obj | None]) -> int:
        repaired = confirmed = 0
        for claim in self.orphans(claims, pod_exists):
            if not self.confirm_gone(claim):
                continue
            confirmed += 1
            if self.unreserve_and_delete(namespace(claim), name(claim), owner_pod_uid(claim) or ""):
                repaired += 1
        self.unrepaired = confirmed - repaired
        return repaired
