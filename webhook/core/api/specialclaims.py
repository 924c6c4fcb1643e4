"""How upstream recognises a special claim (KEP-5004's ResourceClaim for a pod's extended resources).

Every consumer reads the same marks: the annotation ``resource.kubernetes.io/extended-resource-claim:
"true"`` and a controller owner reference to the pod. The builders of such claims live in
``allocation/claims.py``; the cluster model and the webhook only need to tell one apart."""

from __future__ import annotations

from .constants import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from .objects import Obj, annotations_of


def is_special_claim(claim: Obj) -> bool:
    """A special claim as upstream reads one: the annotation with its single valid value "true"."""
    return annotations_of(claim).get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true"
