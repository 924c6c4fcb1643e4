"""The JSONPatch a pod is answered with: the native path's and the rewrite's.

* native: draxr's annotation ``draxr.io/extended-resources`` (resource name -> DeviceClass, as
  resolved at admission);
* rewrite: the rewrite's own operations (``rewrite.rewrite_ops``: the names out of requests and
  limits, DRA claims in) and both annotations (``draxr.io/rewritten`` names the templates);
* either, and a pod with only claims of its own: draxr as the scheduler, when the caller routes the
  pod (``outcome.py`` decides, per ``--route``; ``draxr convert`` never does).

``draxr convert`` applies the very patch the webhook answers with, so a converted pod passes through
the webhook unchanged. Every patch is built as operations on the pod as the apiserver decoded it, not
by copying the pod and diffing it (that was ten times the cost of the native answer), and is a fixed
point: applied, and asked again, it is empty (the apiserver may call a webhook twice).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence

from ..api.constants import DRAXR_RESOURCES_ANNOTATION
from ..api.objects import Obj, meta, spec
from .rewrite import (
    REWRITTEN_ANNOTATION,
    Alignment,
    Rewrite,
    no_alignment,
    plan_rewrite,
    pointer_token,
    rewrite_ops,
    rewritten_annotation,
)


def annotation_value(resolved: dict[str, str]) -> str:
    """The value of ``draxr.io/extended-resources``: resource name -> class, as compact JSON."""
    return json.dumps(resolved, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def native_patch(pod: Obj, resolved: dict[str, str], scheduler: str | None = None) -> list[Obj]:
    """The JSONPatch of the native path (empty when there is nothing to do): draxr's annotation and,
    given one, the scheduler name."""
    if not resolved:
        return route_patch(pod, scheduler)
    ops = annotation_ops(pod, {DRAXR_RESOURCES_ANNOTATION: annotation_value(resolved)})
    return ops + route_patch(pod, scheduler)


def rewrite_patch(
    pod: Obj,
    resolved: dict[str, str],
    scheduler: str | None = None,
    align: Alignment = no_alignment,
    tolerations: Callable[[str], Sequence[Obj]] | None = None,
    capacity: Mapping[str, Mapping[str, str]] | None = None,
) -> list[Obj]:
    """The JSONPatch of the rewrite: the names out of requests and limits, DRA claims in (with the
    classes' ``tolerations`` and ``capacity`` requests, ``draxr.io/capacity-requests``), the
    annotations, and, given one, the scheduler name."""
    return plan_patch(pod, plan_rewrite(pod, resolved, align, tolerations, capacity), scheduler)


def route_patch(pod: Obj, scheduler: str | None) -> list[Obj]:
    """The operation setting ``spec.schedulerName`` to ``scheduler`` (none for None, or when set)."""
    if scheduler is None or spec(pod).get("schedulerName") == scheduler:
        return []
    return [scheduler_op(pod, scheduler)]


def plan_patch(pod: Obj, plan: Rewrite, scheduler: str | None = None) -> list[Obj]:
    """``rewrite_patch`` for a rewrite already planned (``draxr convert`` also needs its templates)."""
    ops = rewrite_ops(pod, plan)
    added = {
        DRAXR_RESOURCES_ANNOTATION: annotation_value(plan.resources),
        REWRITTEN_ANNOTATION: rewritten_annotation(plan),
    }
    ops += annotation_ops(pod, added)
    return ops + route_patch(pod, scheduler)


def annotation_ops(pod: Obj, added: dict[str, str]) -> list[Obj]:
    """JSONPatch operations setting ``added`` among the pod's annotations, whatever is there."""
    if "metadata" not in pod:
        return [{"op": "add", "path": "/metadata", "value": {"annotations": added}}]
    current = meta(pod).get("annotations")
    if not isinstance(current, dict):
        op = "replace" if "annotations" in meta(pod) else "add"
        return [{"op": op, "path": "/metadata/annotations", "value": added}]
    return [
        {
            "op": "replace" if key in current else "add",
            "path": f"/metadata/annotations/{pointer_token(key)}",
            "value": v,
        }
        for key, v in added.items()
        if current.get(key) != v
    ]


def scheduler_op(pod: Obj, scheduler: str) -> Obj:
    """The JSONPatch operation setting ``spec.schedulerName``, whatever is there."""
    if not isinstance(pod.get("spec"), dict):
        return {
            "op": "replace" if "spec" in pod else "add",
            "path": "/spec",
            "value": {"schedulerName": scheduler},
        }
    op = "replace" if "schedulerName" in spec(pod) else "add"
    return {"op": op, "path": "/spec/schedulerName", "value": scheduler}
