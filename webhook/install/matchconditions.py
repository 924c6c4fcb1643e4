"""The CEL ``matchConditions`` that narrow each of draxr's hooks to what draxr is responsible for.

Pod hooks see only pods that request names DRA may back (the mutating hook also pods with claims
of their own, which it routes to draxr when their class is draxr's, unless ``--route=never``), the
claim hook only special claims (and only changes that matter), the DeviceClass hook only classes
with an extended resource name: so a hook that fails closed blocks nothing else. The Helm chart
reads the same expressions (chart.py).
"""

from __future__ import annotations

from ..core.api.capacityrequests import CAPACITY_REQUESTS_ANNOTATION
from ..core.api.constants import (
    EXTENDED_RESOURCE_CLAIM_ANNOTATION,
    EXTENDED_RESOURCE_NAME_ANNOTATION,
    GATE_PROBE_PREFIX,
)

# CEL over a ResourceList's keys: a name DRA may back (extended names and the implicit
# deviceclass.resource.kubernetes.io/<class>; never cpu, memory, hugepages-*, ...).
_IMPLICIT = "k.startsWith('deviceclass.resource.kubernetes.io/')"
_DRA_NAME = f"k.contains('/') && (!k.contains('kubernetes.io/') || {_IMPLICIT})"


def _lists(c: str) -> str:
    requests = f"(has({c}.resources.requests) && {c}.resources.requests.exists(k, {_DRA_NAME}))"
    limits = f"(has({c}.resources.limits) && {c}.resources.limits.exists(k, {_DRA_NAME}))"
    return f"(has({c}.resources) && ({requests} || {limits}))"


REQUESTS_DRA_NAME = (
    f"object.spec.containers.exists(c, {_lists('c')}) || "
    f"(has(object.spec.initContainers) && object.spec.initContainers.exists(c, {_lists('c')}))"
)
# Pods with claims of their own: routed by the classes their claims use (one allocator per pool).
HAS_CLAIMS = "has(object.spec.resourceClaims) && size(object.spec.resourceClaims) > 0"
REQUESTS_DRA_NAME_OR_CLAIMS = f"{HAS_CLAIMS} || {REQUESTS_DRA_NAME}"
# Used for UPDATEs only (oldObject is set). "request.operation" guards oldObject elsewhere: that
# form evaluates the same in cel-go and in cel-python (which cannot compare a map with null).
_ERCS_NEW = "(has(object.status) && has(object.status.extendedResourceClaimStatus))"
_ERCS_OLD = "(has(oldObject.status) && has(oldObject.status.extendedResourceClaimStatus))"
ERCS_CHANGED = (
    f"{_ERCS_NEW} != {_ERCS_OLD} || ({_ERCS_NEW} && {_ERCS_OLD} && "
    "object.status.extendedResourceClaimStatus != oldObject.status.extendedResourceClaimStatus)"
)
SPECIAL_CLAIM = (
    "(has(object.metadata.annotations) && "
    f"'{EXTENDED_RESOURCE_CLAIM_ANNOTATION}' in object.metadata.annotations)"
    " || (request.operation == 'UPDATE' && has(oldObject.metadata.annotations) && "
    f"'{EXTENDED_RESOURCE_CLAIM_ANNOTATION}' in oldObject.metadata.annotations)"
)
# What the claim hook guards: a CREATE, or an UPDATE of the annotation, the owners or the spec.
# Finalizer, label and status changes (the worker's Unreserve, the garbage collector, the
# resourceclaim controller) never depend on the webhook being reachable.
_ANNOTATIONS = "(has({o}.metadata.annotations) ? {o}.metadata.annotations : {{}})"
_OWNERS = "(has({o}.metadata.ownerReferences) ? {o}.metadata.ownerReferences : [])"
CLAIM_GUARDED_CHANGE = (
    "request.operation == 'CREATE' || "
    f"{_ANNOTATIONS.format(o='object')} != {_ANNOTATIONS.format(o='oldObject')} || "
    f"{_OWNERS.format(o='object')} != {_OWNERS.format(o='oldObject')} || "
    "object.spec != oldObject.spec"
)
# Classes that declare (or declared) an explicit name, classes whose name is too long to serve
# as the implicit name deviceclass.resource.kubernetes.io/<class> (the webhook warns about those),
# and classes with draxr.io/capacity-requests (the webhook validates it, implicit names too).
_NAMED = (
    "has({o}.spec.extendedResourceName) || (has({o}.metadata.annotations) && "
    f"'{EXTENDED_RESOURCE_NAME_ANNOTATION}' in {{o}}.metadata.annotations)"
)
HAS_EXTENDED_NAME = (
    f"!object.metadata.name.startsWith('{GATE_PROBE_PREFIX}') && ("
    f"{_NAMED.format(o='object')} || size(object.metadata.name) > 63 || "
    f"(has(object.metadata.annotations) && "
    f"'{CAPACITY_REQUESTS_ANNOTATION}' in object.metadata.annotations) || "
    f"(request.operation == 'UPDATE' && ({_NAMED.format(o='oldObject')})))"
)


#: Each hook's CEL ``matchConditions`` (also read by the Helm chart from files/match-conditions.yaml).
MATCH_CONDITIONS: dict[str, list[tuple[str, str]]] = {
    "pods.mutate.draxr.io": [("dra-backed-names-or-claims", REQUESTS_DRA_NAME_OR_CLAIMS)],
    "deviceclasses.validate.draxr.io": [("extended-resource-names", HAS_EXTENDED_NAME)],
    "pods.validate.draxr.io": [
        (
            "dra-names-or-claim-mapping",
            f"request.operation == 'CREATE' ? ({REQUESTS_DRA_NAME}) : ({ERCS_CHANGED})",
        )
    ],
    "resourceclaims.validate.draxr.io": [
        ("special-claims-only", SPECIAL_CLAIM),
        ("guarded-fields-change", CLAIM_GUARDED_CHANGE),
    ],
}

#: The mutating hook's with ``--route=never``: nothing is routed, so pods with claims of their own
#: (and no DRA-backed name) need not wait for draxr.
MUTATE_NEVER_ROUTES: list[tuple[str, str]] = [("requests-dra-backed-names", REQUESTS_DRA_NAME)]
#: Its key in the chart's files/match-conditions.yaml (not a hook's name).
MUTATE_NEVER_ROUTES_KEY = "pods.mutate.draxr.io/route-never"


def mutate_conditions(route: str) -> list[tuple[str, str]]:
    """The mutating hook's ``matchConditions`` for the webhook's ``--route``."""
    return MUTATE_NEVER_ROUTES if route == "never" else MATCH_CONDITIONS["pods.mutate.draxr.io"]
