"""Cleanup after finished pods, and repair of orphaned special claims.

Upstream's resourceclaim controller frees a special claim when its pod is done only where
DRAExtendedResource is on in kube-controller-manager; draxr does it itself: the pod leaves
``reservedFor``, the allocation is cleared, the finalizer removed, the claim deleted. Every step
tolerates NotFound and conflicts, so running it twice (or next to the upstream controller) is safe.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..core.api.objects import Obj, as_dict, controller_ref, name, namespace, status, uid
from ..core.api.specialclaims import is_special_claim
from ..kube.client import ApiError, KubeClient
from ..kube.resources import PODS
from .binder import Binder, BindError, NotLeader

log = logging.getLogger("draxr.cleanup")

TERMINAL = ("Succeeded", "Failed")


def pod_is_done(pod: Obj) -> bool:
    return status(pod).get("phase") in TERMINAL


def special_claim_name(pod: Obj) -> str | None:
    erc = as_dict(status(pod).get("extendedResourceClaimStatus"))
    n = erc.get("resourceClaimName")
    return n if isinstance(n, str) and n else None


def superseded(pod: Obj, claim: Obj) -> bool:
    """A bound pod uses the claim its ``extendedResourceClaimStatus`` names (written before the
    binding); any other special claim it owns is a leftover of a failed binding cycle."""
    return bool((pod.get("spec") or {}).get("nodeName")) and special_claim_name(pod) != name(claim)


class Cleaner:
    def __init__(self, client: KubeClient, binder: Binder) -> None:
        self.client = client
        self.binder = binder
        #: Orphans the last ``repair`` confirmed with the API but could not release.
        self.unrepaired = 0

    def release(self, ns: str, claim_name: str, pod_uid: str) -> bool:
        """Free one special claim of a finished or deleted pod (or one its bound pod does not use).
        True when nothing is left."""
        try:
            current = self.binder.read_claim(ns, claim_name)
            if current is None or not is_special_claim(current):
                return True  # gone, or not a special claim: never touched here
            owner = controller_ref(current)
            if owner is not None and owner.get("uid") != pod_uid:
                return True  # belongs to a newer pod of the same name
            claim = self.binder.release_claim(ns, claim_name, pod_uid, deallocate=True, known=current)
            if claim is None:
                return True
            if as_dict(claim.get("status")).get("reservedFor"):
                return False  # still in use by someone else
            self.binder.delete_claim(ns, claim_name, uid(claim), known=claim)
            log.info("released special claim", extra={"claim": f"{ns}/{claim_name}", "pod": pod_uid})
            return True
        except (ApiError, BindError, NotLeader) as e:
            log.warning("release special claim: %s", e, extra={"claim": f"{ns}/{claim_name}"})
            return False

    def orphans(self, claims: list[Obj], pod_exists: Callable[[str], Obj | None]) -> list[Obj]:
        """Special claims whose controller pod is gone (by uid) or finished, and claims a bound pod
        does not use (left behind by a binding cycle that failed half-way: the pod's
        ``extendedResourceClaimStatus``, written before the binding, names the one it uses)."""
        out: list[Obj] = []
        for claim in claims:
            if not is_special_claim(claim):
                continue
            owner = controller_ref(claim)
            if owner is None or owner.get("kind") != "Pod":
                continue
            pod = pod_exists(str(owner.get("uid", "")))
            if pod is None or pod_is_done(pod) or superseded(pod, claim):
                out.append(claim)
        return out

    def confirm_gone(self, claim: Obj) -> bool:
        """Ask the API, not the cache, before treating a claim as unused."""
        owner = controller_ref(claim) or {}
        try:
            pod = self.client.get(PODS, str(owner.get("name", "")), namespace(claim))
        except ApiError as e:
            return e.not_found
        return uid(pod) != owner.get("uid") or pod_is_done(pod) or superseded(pod, claim)

    def repair(self, claims: list[Obj], pod_exists: Callable[[str], Obj | None]) -> int:
        repaired = confirmed = 0
        for claim in self.orphans(claims, pod_exists):
            if not self.confirm_gone(claim):
                continue
            confirmed += 1
            owner_uid = str((controller_ref(claim) or {}).get("uid", ""))
            if self.release(namespace(claim), name(claim), owner_uid):
                repaired += 1
        self.unrepaired = confirmed - repaired
        return repaired
