"""``POST /validate/deviceclasses``: the explicit extended resource name, checked and kept unique.

Upstream validates the syntax only and lets the scheduler resolve duplicate names silently (newest
class wins). draxr denies a second class declaring a name already taken, naming the holder, so the
clash never happens unnoticed; an UPDATE that keeps its name stays allowed. A selector whose
estimated cost passes upstream's limit is denied with the API server's words, so the allocator
never sees a class it would have to give up on.
"""

from __future__ import annotations

from typing import Final

from ..core.api.fielderrors import FieldError, invalid_status
from ..core.api.objects import Obj, name
from ..core.api.validation import validate_device_class
from ..core.cel.selectorcheck import selector_errors
from ..core.cluster.deviceclasses import explicit_name
from .advice import stale_classes_warning
from .context import Context
from .review import AdmissionRequest, Verdict

GROUP: Final = "resource.k8s.io"
KIND: Final = "DeviceClass"


def device_class_findings(new: Obj, old: Obj | None, others: list[Obj]) -> tuple[list[FieldError], list[str]]:
    """Errors and warnings for ``new`` given the other stored classes (``old`` for an UPDATE)."""
    others = [c for c in others if name(c) != name(new)]
    return validate_device_class(new, old, others)


def selector_findings(new: Obj, old: Obj | None) -> list[FieldError]:
    """The cost-limit findings on the class's selectors (none when an UPDATE keeps them)."""
    kinded = {**new, "kind": KIND}
    stored = None if old is None else {**old, "kind": KIND}
    return selector_errors(kinded, old=stored)


def review_device_class(req: AdmissionRequest, ctx: Context) -> Verdict:
    if req.operation not in ("CREATE", "UPDATE") or req.obj is None:
        return Verdict()
    selectors = selector_findings(req.obj, req.old)
    if selectors:
        return Verdict.deny(invalid_status(KIND, GROUP, name(req.obj) or req.name, selectors))
    with ctx.cache.lock:
        others = ctx.cache.state.classes.classes()
    errors, warnings = device_class_findings(req.obj, req.old, others)
    claimed = explicit_name(req.obj)
    newly_claimed = claimed is not None and (req.old is None or explicit_name(req.old) != claimed)
    if not errors and newly_claimed and ctx.classes.live():
        fresh = ctx.classes.classes()
        if isinstance(fresh, str):
            warnings.append(stale_classes_warning("uniqueness check", fresh))
        else:
            errors, warnings = device_class_findings(req.obj, req.old, fresh)
    if errors:
        return Verdict.deny(invalid_status(KIND, GROUP, name(req.obj) or req.name, errors), warnings)
    return Verdict(warnings=warnings)
