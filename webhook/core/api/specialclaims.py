"""How upstream recognises a special claim (KEP-5004's ResourceClaim for a pod's extended resources).

Every consumer reads the same marks: the annotation ``resource.kubernetes.io/extended-resource-claim:
"true"`` and a controller owner reference to the pod. The builders of such claims live in
``allocation/claims.py``; the cluster model and the webhook only need to tell one apart.

Whether a claim *is its pod's* special claim is a stricter question, and the one place draxr answers
it is ``verified_special_claim``: ResourceQuota's claim evaluator (``getVerifiedPodUsage`` in
``pkg/quota/v1/evaluator/core/resource_claims.go``) discounts only such a claim by its pod's own
usage, so that hand-made "extended resource claims" no longer dodge quota
(kubernetes/kubernetes#135404, PR #135434). The forged-claim guard, ``draxr validate`` and the quota
warnings all ask it.
"""

from __future__ import annotations

from collections.abc import Iterable

from .constants import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from .objects import Obj, annotations_of, as_dict, controller_ref, name, namespace, parse_time, status, uid


def is_special_claim(claim: Obj) -> bool:
    """A special claim as upstream reads one: the annotation with its single valid value "true"."""
    return annotations_of(claim).get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true"


def pod_owner(claim: Obj) -> Obj | None:
    """The claim's controller reference when quota may count it as a pod's special claim: the
    annotation "true" and a controller ``v1`` ``Pod`` (``extendedResourceClaimPodUIDOwnerIndex``)."""
    if not is_special_claim(claim):
        return None
    owner = controller_ref(claim)
    if owner is None or owner.get("kind") != "Pod" or owner.get("apiVersion") != "v1":
        return None
    return owner


def owned_by(claim: Obj, pod: Obj) -> bool:
    """The claim is one of ``pod``'s special claims as upstream's owner index files them: the
    pod's namespace and uid (the index does not compare the owner's name)."""
    owner = pod_owner(claim)
    return owner is not None and owner.get("uid") == uid(pod) and namespace(claim) == namespace(pod)


def verified_special_claim(
    claim: Obj, pod: Obj | None, owned: Iterable[Obj], *, earliest_owned: bool = True
) -> bool:
    """``getVerifiedPodUsage``: whether quota discounts ``claim`` by ``pod``'s own usage.

    ``pod``: the pod its controller reference names, looked up by that name in the claim's
    namespace (None: not found). ``owned``: the special claims of that namespace whose controller
    is the pod's uid (the claim itself may be among them). The claim must carry the annotation and
    a controller ``v1`` ``Pod``; the pod must exist with that uid; a pod status that names a claim
    must name this one; with no status (``extendedResourceClaimStatus`` unset), and
    ``earliest_owned`` (1.36 and later), no other owned claim may be older, nor as old with a
    smaller name.
    """
    owner = pod_owner(claim)
    if owner is None or pod is None:
        return False
    if namespace(pod) != namespace(claim) or name(pod) != owner.get("name") or uid(pod) != owner.get("uid"):
        return False
    ercs = status(pod).get("extendedResourceClaimStatus")
    if ercs is not None:
        return bool(as_dict(ercs).get("resourceClaimName", "") == name(claim))
    if not earliest_owned:
        return True
    created = parse_time(claim.get("metadata", {}).get("creationTimestamp"))
    for other in owned:
        other_created = parse_time(as_dict(other.get("metadata")).get("creationTimestamp"))
        if other_created < created or (other_created == created and name(other) < name(claim)):
            return False
    return True


def verified_claims(pod: Obj | None, owned: Iterable[Obj], *, earliest_owned: bool = True) -> list[Obj]:
    """Of ``owned`` (the pod's special claims), those quota discounts by the pod's usage: at most
    one from 1.36 on; every one while the status is unset under 1.35's rules."""
    claims = list(owned)
    return [c for c in claims if verified_special_claim(c, pod, claims, earliest_owned=earliest_owned)]
