"""When a special claim has outlived its pod: the one test of cleanup, orphan repair and the
worker's event handlers.

KEP-5004 makes a special claim for one pod, its controller owner, and it is used while that pod
runs with it. It is an orphan once that pod is gone (deleted, or replaced by a new pod of the same
name, with another uid), finished (``Succeeded`` or ``Failed``), or bound with another special
claim: the one its ``status.extendedResourceClaimStatus`` names (written before the binding) is the
one it uses, and any other it owns was left by a binding cycle that failed half-way. A pending
pod's claims are no orphans: a binding cycle may be using one. Nor are those of a bound pod whose
status names no claim (``unmapped``): which one it runs with, the API no longer says, so that is an
anomaly to report, never a licence to free a device from under a running container.

The test takes the pod as found, not a way to find it: its inputs are two API objects, so it sits
here beside them. Where to look (the cache by the owner's uid, the API by its name) and whether to
believe what was found is the caller's business.
"""

from __future__ import annotations

from typing import Final

from .objects import Obj, as_dict, controller_ref, name, spec, status, uid

TERMINAL_PHASES: Final = ("Succeeded", "Failed")


def pod_is_done(pod: Obj) -> bool:
    return status(pod).get("phase") in TERMINAL_PHASES


def special_claim_name(pod: Obj) -> str | None:
    """The special claim the pod's ``status.extendedResourceClaimStatus`` names, if any."""
    n = as_dict(status(pod).get("extendedResourceClaimStatus")).get("resourceClaimName")
    return n if isinstance(n, str) and n else None


def superseded(pod: Obj, claim: Obj) -> bool:
    """A bound pod uses the claim its ``extendedResourceClaimStatus`` names (written before the
    binding); any other special claim it owns is a leftover of a failed binding cycle. A bound pod
    that names none supersedes nothing (``unmapped``)."""
    named = special_claim_name(pod)
    return bool(spec(pod).get("nodeName")) and named is not None and named != name(claim)


def unmapped(pod: Obj) -> bool:
    """A bound, running pod whose status names no special claim: if it owns any, one of them may be
    what its containers run with."""
    return bool(spec(pod).get("nodeName")) and not pod_is_done(pod) and special_claim_name(pod) is None


def owner_pod_uid(claim: Obj) -> str | None:
    """The uid of the pod the claim's controller reference names; None when no pod controls it."""
    owner = controller_ref(claim)
    if owner is None or owner.get("kind") != "Pod":
        return None
    return str(owner.get("uid", ""))


def orphaned(claim: Obj, pod: Obj | None) -> bool:
    """Whether the special claim has outlived ``pod``: its controller owner as found (None: not
    found), gone, replaced, finished, or bound with another claim."""
    return (
        pod is None
        or uid(pod) != as_dict(controller_ref(claim)).get("uid")
        or pod_is_done(pod)
        or superseded(pod, claim)
    )
