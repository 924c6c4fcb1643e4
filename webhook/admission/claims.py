"""``POST /validate/resourceclaims``: extended resource claims are the scheduler's alone.

ResourceQuota does not charge a claim annotated ``resource.kubernetes.io/extended-resource-claim``
whose controller is a Pod: it charges the pod's extended resource requests instead. Anyone able to
create ResourceClaims could therefore take devices outside quota with hand-made "extended resource
claims", or many of them for one pod (kubernetes/kubernetes#135404; from 1.36 quota discounts only
the claim it verifies as the pod's own, PR #135434). Here only the allowed writers may create such a
claim or change what makes it one (annotation, owners, spec), it must look like the claim the
scheduler writes, and a pod has one: the one quota verifies, under the served release's rules
(``core/api/specialclaims.py``). Finalizer and label updates by anyone (the resourceclaim
controller, the garbage collector) stay allowed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

from ..core.api.constants import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from ..core.api.fielderrors import FieldError, Path, duplicate, forbidden_status, go_quote, invalid_status
from ..core.api.objects import Obj, annotations_of, as_list, is_terminating, meta, name, namespace, spec, uid
from ..core.api.specialclaims import pod_owner, verified_claims
from ..core.api.validation import carries_special_annotation, validate_special_claim
from ..core.paths.quota import QuotaRules
from ..kube.cache import ClusterCache
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


#: (namespace, owner pod name, owner pod uid) -> (the pod as known, None when unknown; its special claims)
ClaimFinder = Callable[[str, str, str], tuple[Obj | None, list[Obj]]]

#: A claim being created has no creationTimestamp in every review: it is the newest.
_NEWEST: Final = "9999-12-31T23:59:59Z"


def cached_claim_finder(cache: ClusterCache) -> ClaimFinder:
    """The pod's special claims from the cache (upstream quota's owner index), and the pod itself
    when the cache watches pods (a webhook running beside the worker); call under the lock."""

    def find(ns: str, _owner_name: str, owner_uid: str) -> tuple[Obj | None, list[Obj]]:
        pod = cache.pods.get(owner_uid) if "Pod" in cache.informers else None
        return pod, cache.state.allocated.owned_special_claims(ns, owner_uid)

    return find


def _stand_in(ns: str, owner: Obj) -> Obj:
    """The owner pod when the webhook cannot see pods: as its controller reference names it, with
    no status yet (the scheduler writes the claim before the pod's mapping)."""
    return {"metadata": {"name": owner.get("name"), "namespace": ns, "uid": owner.get("uid")}, "status": {}}


def sibling_errors(claim: Obj, ns: str, find: ClaimFinder, rules: QuotaRules) -> list[FieldError]:
    """A pod has one extended resource claim: the one quota verifies as its own
    (``specialclaims.verified_special_claim`` under the served release's ``rules``). Another owned
    claim that is (or, under 1.35's rules, is also) verified refuses this one."""
    owner = pod_owner(claim)
    if owner is None or not isinstance(owner.get("uid"), str) or not isinstance(owner.get("name"), str):
        return []
    pod, owned = find(ns, owner["name"], owner["uid"])
    others = [c for c in owned if not is_terminating(c) and name(c) != name(claim)]
    if not others:
        return []
    this = claim
    if not meta(claim).get("creationTimestamp"):
        this = {**claim, "metadata": {**meta(claim), "creationTimestamp": _NEWEST}}
    verified = verified_claims(
        pod if pod is not None else _stand_in(ns, owner), [*others, this], earliest_owned=rules.earliest_owned
    )
    rivals = [c for c in verified if c is not this]
    if not rivals:
        return []
    refs = as_list(meta(claim).get("ownerReferences"))
    i = next(i for i, r in enumerate(refs) if r is owner)
    path = Path("metadata", "ownerReferences").index(i).child("uid")
    detail = (
        f"Pod {go_quote(owner['name'])} already has the extended resource claim {go_quote(name(rivals[0]))}"
    )
    return [duplicate(path, owner["uid"], detail)]


def _fresh_finder(ctx: Context) -> ClaimFinder:
    """The cached siblings, each re-read from the API (dropped when gone there)."""

    def find(ns: str, owner_name: str, owner_uid: str) -> tuple[Obj | None, list[Obj]]:
        with ctx.cache.lock:
            pod, cached = cached_claim_finder(ctx.cache)(ns, owner_name, owner_uid)
        fresh: list[Obj] = []
        for sibling in cached:
            try:
                found = ctx.claims.fresh(ns, name(sibling))
            except ApiError as e:
                log.warning("re-reading ResourceClaim %s/%s failed: %s", ns, name(sibling), e)
                fresh.append(sibling)  # the cache's answer stands
                continue
            if found is not None and uid(found) == uid(sibling):
                fresh.append(found)
        return pod, fresh

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
        rules = ctx.quota_rules()
        with ctx.cache.lock:
            errors = sibling_errors(claim, ns, cached_claim_finder(ctx.cache), rules)
        if errors and ctx.claims.live():
            # The cache may still hold a claim its writer deleted a moment ago (a failed binding
            # cycle's, say): only the API's answer may refuse the scheduler's new claim.
            errors = sibling_errors(claim, ns, _fresh_finder(ctx), rules)
    if errors:
        return Verdict.deny(invalid_status(KIND, GROUP, claim_name, errors))
    return Verdict()
