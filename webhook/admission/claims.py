"""``POST /validate/resourceclaims``: extended resource claims are the scheduler's alone.

ResourceQuota does not charge a claim annotated ``resource.kubernetes.io/extended-resource-claim``
whose controller is a Pod: it charges the pod's extended resource requests instead. Anyone able to
create ResourceClaims could therefore take devices outside quota with hand-made "extended resource
claims", or many of them for one pod (kubernetes/kubernetes#135404). Here only the allowed writers
may create such a claim or change what makes it one (annotation, owners, spec), it must look like
the claim the scheduler writes, and a pod has at most one. Finalizer and label updates by anyone
(the resourceclaim controller, the garbage collector) stay allowed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

from ..core.api.constants import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from ..core.api.fielderrors import FieldError, Path, duplicate, forbidden_status, go_quote, invalid_status
from ..core.api.objects import Obj, annotations_of, as_list, is_terminating, meta, name, namespace, spec, uid
from ..core.api.validation import carries_special_annotation, validate_special_claim
from ..core.cluster.state import ClusterState
from ..kube.client import ApiError
from .context import Context
from .review import AdmissionRequest, Verdict

log = logging.getLogger("draxr.admission")

GROUP: Final = "resource.k8s.io"
KIND: Final = "ResourceClaim"
RESOURCE: Final = "resourceclaims"

_MISSING: Final[Any] = object()


def _marker(claim: Obj | None) -> Any:
    return annotations_of(claim).get(EXTENDED_RESOURCE_CLAIM_ANNOTATION, _MISSING) if claim else _MISSING


def touches_extended_claim(new: Obj, old: Obj | None) -> bool:
    """A CREATE, or an UPDATE of the annotation, the owner references or the spec."""
    if old is None:
        return True
    return (
        _marker(new) != _marker(old)
        or meta(new).get("ownerReferences") != meta(old).get("ownerReferences")
        or spec(new) != spec(old)
    )


ClaimFinder = Callable[[str, str], Obj | None]  # (owner pod name, owner pod uid) -> its claim


def cached_claim_finder(state: ClusterState) -> ClaimFinder:
    def find(owner_name: str, owner_uid: str) -> Obj | None:
        return state.allocated.special_claim_for({"metadata": {"name": owner_name, "uid": owner_uid}})

    return find


def sibling_errors(claim: Obj, ns: str, find: ClaimFinder) -> list[FieldError]:
    """A pod has at most one extended resource claim: name the one ``find`` says it already has."""
    if _marker(claim) != "true":
        return []
    refs = as_list(meta(claim).get("ownerReferences"))
    for i, ref in enumerate(refs):
        if not isinstance(ref, dict) or ref.get("controller") is not True:
            continue
        owner_uid, owner_name = ref.get("uid"), ref.get("name")
        if not isinstance(owner_uid, str) or not isinstance(owner_name, str):
            return []
        other = find(owner_name, owner_uid)
        if other is None or is_terminating(other) or (namespace(other), name(other)) == (ns, name(claim)):
            return []
        path = Path("metadata", "ownerReferences").index(i).child("uid")
        detail = f"Pod {go_quote(owner_name)} already has the extended resource claim {go_quote(name(other))}"
        return [duplicate(path, owner_uid, detail)]
    return []


def _fresh_finder(ctx: Context, ns: str) -> ClaimFinder:
    """The cached sibling, re-read from the API (None when it is gone there)."""

    def find(owner_name: str, owner_uid: str) -> Obj | None:
        with ctx.cache.lock:
            cached = cached_claim_finder(ctx.cache.state)(owner_name, owner_uid)
        if cached is None:
            return None
        try:
            fresh = ctx.claims.fresh(ns, name(cached))
        except ApiError as e:
            log.warning("re-reading ResourceClaim %s/%s failed: %s", ns, name(cached), e)
            return cached  # the cache's answer stands
        return fresh if fresh is not None and uid(fresh) == uid(cached) else None

    return find


def review_claim(req: AdmissionRequest, ctx: Context) -> Verdict:
    claim = req.obj
    if req.operation not in ("CREATE", "UPDATE") or claim is None:
        return Verdict()
    old = req.old if req.operation == "UPDATE" else None
    if not (carries_special_annotation(claim) or (old is not None and carries_special_annotation(old))):
        return Verdict()
    if not touches_extended_claim(claim, old):
        return Verdict()
    claim_name = name(claim) or req.name
    if not ctx.allowed_writer(req.username):
        reason = (
            f"a ResourceClaim annotated {EXTENDED_RESOURCE_CLAIM_ANNOTATION} may only be written by the "
            f"scheduler (draxr --allowed-writers), not by user {go_quote(req.username)}"
        )
        return Verdict.deny(forbidden_status(RESOURCE, GROUP, claim_name, reason))
    errors = validate_special_claim(claim)
    if not errors:
        ns = req.namespace or namespace(claim)
        with ctx.cache.lock:
            errors = sibling_errors(claim, ns, cached_claim_finder(ctx.cache.state))
        if errors and ctx.claims.live():
            # The cache may still hold a claim its writer deleted a moment ago (a failed binding
            # cycle's, say): only the API's answer may refuse the scheduler's new claim.
            errors = sibling_errors(claim, ns, _fresh_finder(ctx, ns))
    if errors:
        return Verdict.deny(invalid_status(KIND, GROUP, claim_name, errors))
    return Verdict()
