"""``POST /validate/pods``: DRA-backed quantities on CREATE, the extended resource mapping on UPDATE.

``status.extendedResourceClaimStatus`` tells the kubelet which devices of which ResourceClaim each
container gets. Upstream only checks its shape; anyone allowed to write ``pods/status`` could point
a pod at another pod's devices, and a mapping naming a request its claim lacks leaves the container
without devices, silently (the kubelet injects nothing). draxr adds: only the allowed writers may
set, change or clear it, and the claim it names must be this pod's extended resource claim holding
every mapped request, as the API has it (read live when the cache has not seen it: the scheduler
creates the claim before it writes the mapping).
"""

from __future__ import annotations

import logging
from typing import Any, Final

from ..core.api.constants import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from ..core.api.fielderrors import FieldError, Path, forbidden_status, go_quote, invalid, invalid_status
from ..core.api.objects import (
    Obj,
    annotations_of,
    as_dict,
    as_list,
    controller_ref,
    name,
    namespace,
    spec,
    status,
    uid,
)
from ..core.api.validation import (
    validate_extended_resource_claim_status,
    validate_mapped_requests,
)
from ..core.paths.requested import quantity_errors
from ..kube.client import ApiError
from .context import Context
from .review import AdmissionRequest, Verdict

log = logging.getLogger("draxr.admission")

KIND: Final = "Pod"
RESOURCE: Final = "pods"
ERCS_PATH: Final = Path("status", "extendedResourceClaimStatus")
CLAIM_NAME_PATH: Final = ERCS_PATH.child("resourceClaimName")


def mapping_status(pod: Obj | None) -> Any:
    """The pod's ``status.extendedResourceClaimStatus`` (None when unset)."""
    return status(pod).get("extendedResourceClaimStatus") if pod is not None else None


def mapping_errors(pod: Obj) -> list[FieldError]:
    """Upstream's rules for the mapping, then the kubelet contract on the mapped requests."""
    return validate_extended_resource_claim_status(pod) or validate_mapped_requests(pod)


def claim_errors(pod: Obj, claim: Obj | None, ns: str) -> list[FieldError]:
    """The named claim must be this pod's extended resource claim and hold every mapped request."""
    ercs = as_dict(mapping_status(pod))
    claim_name = ercs.get("resourceClaimName")
    if claim is None:
        detail = f"no ResourceClaim of this name in namespace {go_quote(ns)}"
        return [invalid(CLAIM_NAME_PATH, claim_name, detail)]
    errors: list[FieldError] = []
    marker = annotations_of(claim).get(EXTENDED_RESOURCE_CLAIM_ANNOTATION)
    if marker != "true":
        detail = (
            "the ResourceClaim is not an extended resource claim "
            f'({EXTENDED_RESOURCE_CLAIM_ANNOTATION}: "true")'
        )
        errors.append(invalid(CLAIM_NAME_PATH, claim_name, detail))
    owner = controller_ref(claim)  # as quota verifies it (core/api/specialclaims.py): a v1 Pod
    if (
        owner is None
        or (owner.get("apiVersion"), owner.get("kind")) != ("v1", "Pod")
        or owner.get("uid") != uid(pod)
    ):
        detail = f"the ResourceClaim's controller owner is not this Pod (uid {go_quote(uid(pod))})"
        errors.append(invalid(CLAIM_NAME_PATH, claim_name, detail))
    request_names = {
        as_dict(r).get("name") for r in as_list(as_dict(spec(claim).get("devices")).get("requests"))
    }
    mappings_path = ERCS_PATH.child("requestMappings")
    for i, mapping in enumerate(as_list(ercs.get("requestMappings"))):
        request = as_dict(mapping).get("requestName")
        if request not in request_names:
            detail = f"no request of this name in ResourceClaim {go_quote(str(claim_name))}"
            errors.append(invalid(mappings_path.index(i).child("requestName"), request, detail))
    return errors


def _pod_namespace(req: AdmissionRequest, pod: Obj) -> str:
    return req.namespace or namespace(pod)


def _invalid(req: AdmissionRequest, pod: Obj, errors: list[FieldError]) -> Verdict:
    return Verdict.deny(invalid_status(KIND, "", name(pod) or req.name, errors))


def review_pod(req: AdmissionRequest, ctx: Context) -> Verdict:
    pod = req.obj
    if pod is None:
        return Verdict()
    if req.operation == "CREATE":
        with ctx.cache.lock:
            errors = quantity_errors(pod, ctx.cache.state.classes)
        return _invalid(req, pod, errors) if errors else Verdict()
    if req.operation != "UPDATE":
        return Verdict()
    new = mapping_status(pod)
    if new == mapping_status(req.old):
        return Verdict()  # the kubelet's status updates and every other pod update
    if new is not None:
        errors = validate_extended_resource_claim_status(pod)
        if errors:
            return _invalid(req, pod, errors)
    if not ctx.allowed_writer(req.username):
        reason = (
            "status.extendedResourceClaimStatus may only be written by the scheduler "
            f"(draxr --allowed-writers), not by user {go_quote(req.username)}"
        )
        return Verdict.deny(forbidden_status(RESOURCE, "", name(pod) or req.name, reason))
    if new is None:
        return Verdict()  # an allowed writer clearing the mapping (Unreserve)
    ns = _pod_namespace(req, pod)
    claim_name = as_dict(new).get("resourceClaimName")
    claim = ctx.claims.get(ns, claim_name) if isinstance(claim_name, str) else None
    errors = claim_errors(pod, claim, ns)
    if errors and claim is not None and isinstance(claim_name, str) and ctx.claims.live():
        # The cache's copy may be of a claim deleted and made again under the same name: only
        # the API's claim may refuse the mapping.
        try:
            errors = claim_errors(pod, ctx.claims.fresh(ns, claim_name), ns)
        except (ApiError, OSError) as e:
            log.warning("re-reading ResourceClaim %s/%s failed: %s", ns, claim_name, e)
    errors += validate_mapped_requests(pod)
    return _invalid(req, pod, errors) if errors else Verdict()
