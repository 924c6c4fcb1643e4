"""Builders for the objects KEP-5004 writes: the special ResourceClaim and the pod's
``status.extendedResourceClaimStatus``; and PreBind's change to any claim it allocates or reserves
(``with_reservation``), pure, so that the worker's writer and ``draxr plan`` make the same one."""

from __future__ import annotations

import hashlib
from typing import Literal, NotRequired, TypedDict, cast

from ..api.constants import (
    DELETE_PROTECTION_FINALIZER,
    EXTENDED_RESOURCE_CLAIM_ANNOTATION,
    RESOURCE_API_VERSION,
    SPECIAL_CLAIM_GENERATE_SUFFIX,
)
from ..api.objects import Obj, as_dict, as_list, name, namespace, uid
from .results import ClaimAllocation


class OwnerReference(TypedDict):
    """The pod as the special claim's controller (upstream sets no ``blockOwnerDeletion``)."""

    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool


class ReservedFor(TypedDict):
    """A consumer in ``status.reservedFor``: always a pod here."""

    resource: str
    name: str
    uid: str


class SpecialClaimMetadata(TypedDict):
    """``name`` only offline (a server generates it from ``generateName``); ``annotations`` holds
    ``resource.kubernetes.io/extended-resource-claim`` and, once the worker writes it, draxr's own."""

    name: NotRequired[str]
    generateName: str
    namespace: str
    annotations: dict[str, str]
    ownerReferences: list[OwnerReference]
    finalizers: NotRequired[list[str]]
    #: Set by the API server; a claim read back (or one a test stands in for) has them.
    uid: NotRequired[str]
    resourceVersion: NotRequired[str]
    creationTimestamp: NotRequired[str]


class SpecialClaimDevices(TypedDict):
    requests: list[Obj]
    constraints: NotRequired[list[Obj]]


class SpecialClaimSpec(TypedDict):
    devices: SpecialClaimDevices


class SpecialClaimStatus(TypedDict):
    """What PreBind writes: the allocation (``AllocationResult.to_api``) and the pod."""

    allocation: Obj
    reservedFor: list[ReservedFor]


class SpecialClaim(TypedDict):
    """The special ResourceClaim draxr writes for a pod's extended resources (KEP-5004)."""

    apiVersion: str
    kind: Literal["ResourceClaim"]
    metadata: SpecialClaimMetadata
    spec: SpecialClaimSpec
    status: NotRequired[SpecialClaimStatus]


def as_obj(claim: SpecialClaim) -> Obj:
    """The typed claim where any API object is taken (the client, the cluster state): the same
    dict, no copy."""
    return cast(Obj, claim)


#: The API server's generateName alphabet (no vowels, no digits that read like letters).
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
MAX_NAME_LENGTH = 63
SUFFIX_LENGTH = 5


def generate_name(pod: Obj) -> str:
    return name(pod) + SPECIAL_CLAIM_GENERATE_SUFFIX


def truncated_base(generate: str) -> str:
    """``SimpleNameGenerator``: the base is cut so that base + suffix fits 63 characters."""
    return generate[: MAX_NAME_LENGTH - SUFFIX_LENGTH]


def deterministic_name(generate: str, seed: str) -> str:
    """generateName plus a 5-character suffix derived from ``seed`` (offline planning)."""
    digest = int.from_bytes(hashlib.sha256(seed.encode()).digest()[:16], "big")
    suffix = ""
    for _ in range(SUFFIX_LENGTH):
        digest, i = divmod(digest, len(NAME_ALPHABET))
        suffix += NAME_ALPHABET[i]
    return truncated_base(generate) + suffix


def owner_reference(pod: Obj) -> OwnerReference:
    """Controller reference to the pod; upstream does not set blockOwnerDeletion."""
    return {"apiVersion": "v1", "kind": "Pod", "name": name(pod), "uid": uid(pod), "controller": True}


def reserved_for(pod: Obj) -> ReservedFor:
    return {"resource": "pods", "name": name(pod), "uid": uid(pod)}


def special_claim(
    pod: Obj,
    requests: list[Obj],
    *,
    claim_name: str | None = None,
    finalizer: bool = True,
    constraints: list[Obj] | None = None,
) -> SpecialClaim:
    """The special claim as POSTed in PreBind (no name: the server generates it). ``constraints``:
    draxr's alignment (``topology.alignment_constraints``); upstream's special claim has none."""
    metadata: SpecialClaimMetadata = {
        **({"name": claim_name} if claim_name else {}),  # type: ignore[typeddict-item]
        "generateName": generate_name(pod),
        "namespace": namespace(pod),
        "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
        "ownerReferences": [owner_reference(pod)],
    }
    if finalizer:
        metadata["finalizers"] = [DELETE_PROTECTION_FINALIZER]
    devices: SpecialClaimDevices = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {
        "apiVersion": RESOURCE_API_VERSION,
        "kind": "ResourceClaim",
        "metadata": metadata,
        "spec": {"devices": devices},
    }


def special_claim_after_prebind(
    pod: Obj,
    requests: list[Obj],
    allocation: ClaimAllocation,
    claim_name: str,
    constraints: list[Obj] | None = None,
) -> SpecialClaim:
    """The special claim as PreBind leaves it: created, then allocated and reserved for the pod by
    the change the worker writes (``with_reservation``)."""
    claim = special_claim(pod, requests, claim_name=claim_name, constraints=constraints)
    with_reservation(as_obj(claim), pod, allocation.to_api())
    return claim


def reserved_for_pod(claim: Obj, pod_uid: str) -> bool:
    """Whether ``status.reservedFor`` holds the pod (by uid: a pod of the same name is another)."""
    reserved = as_list(as_dict(claim.get("status")).get("reservedFor"))
    return any(as_dict(r).get("uid") == pod_uid for r in reserved)


def with_reservation(claim: Obj, pod: Obj, allocation: Obj | None) -> bool:
    """PreBind's change to a claim, in place: the allocation where it has none yet, the pod in
    ``reservedFor`` where it is not (after the consumers already there); False when there was
    nothing to change, so the caller writes nothing."""
    st = claim.setdefault("status", {})
    current = st.get("allocation")
    already = reserved_for_pod(claim, uid(pod))
    if already and (allocation is None or current):
        return False
    if allocation is not None and not current:
        st["allocation"] = allocation
    if not already:
        st["reservedFor"] = [*as_list(st.get("reservedFor")), reserved_for(pod)]
    return True


def settled(claim: Obj, pod_uid: str) -> bool:
    """Allocated and reserved for the pod already, as this copy says: PreBind has nothing to add."""
    return reserved_for_pod(claim, pod_uid) and bool(as_dict(claim.get("status")).get("allocation"))


def same_allocation(a: Obj, b: Obj) -> bool:
    """Same devices for the same requests (servers may add or drop defaulted fields)."""

    def key(alloc: Obj) -> list[tuple[str, str, str, str]]:
        results = as_list(as_dict(as_dict(alloc).get("devices")).get("results"))
        return sorted(
            (str(r.get("request")), str(r.get("driver")), str(r.get("pool")), str(r.get("device")))
            for r in (as_dict(x) for x in results)
        )

    return key(a) == key(b)


def extended_resource_claim_status(claim_name: str, mappings: list[Obj]) -> Obj:
    return {"requestMappings": [dict(m) for m in mappings], "resourceClaimName": claim_name}
