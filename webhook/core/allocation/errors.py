"""The allocator's error contract: an error aborts the scheduling attempt, an unsatisfiable node is a
Filter reason (kept apart from the search so callers import it without the allocator)."""

from __future__ import annotations

from ..api.objects import Obj, meta

#: Upstream's Filter reason when allocation failed and some pool was invalid.
INVALID_POOLS = "invalid resource pools were encountered"


class AllocationError(Exception):
    """Aborts the scheduling attempt (upstream returns these from ``Allocate`` as errors)."""


class Unsatisfiable(Exception):
    """The claims cannot be allocated on this node; ``str()`` is the Filter reason."""


def claim_ref(claim: Obj) -> str:
    """``<namespace>/<name>``, as upstream's errors name a claim."""
    m = meta(claim)
    return f"{m.get('namespace', '')}/{m.get('name', '')}"
