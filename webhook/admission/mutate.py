"""``POST /mutate/pods``: the path of a new pod asking for DRA-backed extended resources.

The path (core/paths/choice.py) is decided per pod from ``--mode`` and the gates:

* ``native``: the pod gets the annotation ``draxr.io/extended-resources`` (resource name ->
  DeviceClass, as resolved at admission) and, depending on ``--route``, draxr as its
  ``spec.schedulerName``: ``default-only`` takes pods meant for the default scheduler, ``always``
  every such pod, ``never`` leaves the field alone;
* ``rewrite`` (KEP-5004's "Option 1"): the names become DRA claims from shared
  ResourceClaimTemplates (core/paths/rewrite.py); the pod keeps its scheduler unless ``--route=always``;
  the worker creates the templates, so this hook stays free of side effects (dry runs are exact);
* ``device-plugin`` and ``none``: the pod is left alone.

A pod that does not take the native path is told, in a warning, which path it took and why. The
mutation is a fixed point: run on its own output it changes nothing (the apiserver may call a
webhook twice, ``reinvocationPolicy``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from ..core.api.capacityrequests import capacity_by_class
from ..core.api.constants import DRAXR_RESOURCES_ANNOTATION
from ..core.api.messages import clip
from ..core.api.objects import Obj, as_dict, as_list, meta, namespace, spec
from ..core.api.validation import validate_dra_quantities
from ..core.paths.choice import PathChoice, path_for
from ..core.paths.quota import unguarded
from ..core.paths.rewrite import (
    REWRITTEN_ANNOTATION,
    Alignment,
    Rewrite,
    alignment,
    no_alignment,
    plan_rewrite,
    pointer_token,
    rewrite_ops,
    rewritten_annotation,
)
from ..kube.cache import WEBHOOK_KINDS
from .advice import contention_warning, quota_warning, stale_classes_warning, unserved_warning
from .config import AdmissionConfig
from .context import Context
from .extended import backing_classes, requested_extended
from .review import AdmissionRequest, Verdict

DEFAULT_SCHEDULER: Final = "default-scheduler"


def annotation_value(resolved: dict[str, str]) -> str:
    return json.dumps(resolved, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def wants_route(pod: Obj, config: AdmissionConfig) -> bool:
    current = spec(pod).get("schedulerName")
    if config.route == "always":
        return current != config.scheduler_name
    if config.route == "default-only":
        return current in (None, "", DEFAULT_SCHEDULER)
    return False


def mutation_patch(pod: Obj, resolved: dict[str, str], config: AdmissionConfig) -> list[Obj]:
    """The JSONPatch of the native path (empty when there is nothing to do): draxr's annotation and,
    per ``--route``, the scheduler name."""
    if not resolved:
        return []
    ops = annotation_ops(pod, {DRAXR_RESOURCES_ANNOTATION: annotation_value(resolved)})
    if wants_route(pod, config):
        ops.append(_set_scheduler(pod, config.scheduler_name))
    return ops


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


def _set_scheduler(pod: Obj, scheduler: str) -> Obj:
    if not isinstance(pod.get("spec"), dict):
        return {
            "op": "replace" if "spec" in pod else "add",
            "path": "/spec",
            "value": {"schedulerName": scheduler},
        }
    op = "replace" if "schedulerName" in spec(pod) else "add"
    return {"op": op, "path": "/spec/schedulerName", "value": scheduler}


def rewrite_patch(
    pod: Obj,
    resolved: dict[str, str],
    config: AdmissionConfig,
    align: Alignment = no_alignment,
    capacity: Mapping[str, Mapping[str, str]] | None = None,
) -> list[Obj]:
    """The JSONPatch of the rewrite: the names out of requests and limits, DRA claims in, the
    annotations, and the route. Built as operations (``rewrite_ops``), not by copying the pod and
    diffing it: that was ten times the cost of the native path's answer. ``capacity``: each class's
    capacity requests (``draxr.io/capacity-requests``)."""
    return plan_patch(pod, plan_rewrite(pod, resolved, align, capacity), config)


def plan_patch(pod: Obj, plan: Rewrite, config: AdmissionConfig) -> list[Obj]:
    """``rewrite_patch`` for a rewrite already planned (``draxr convert`` also needs its templates)."""
    ops = rewrite_ops(pod, plan)
    added = {
        DRAXR_RESOURCES_ANNOTATION: annotation_value(plan.resources),
        REWRITTEN_ANNOTATION: rewritten_annotation(plan),
    }
    ops += annotation_ops(pod, added)
    if config.route == "always" and spec(pod).get("schedulerName") != config.scheduler_name:
        ops.append(_set_scheduler(pod, config.scheduler_name))
    return ops


def path_warning(names: list[str], choice: PathChoice) -> str:
    what = {
        "native": "extended resources from DRA devices",
        "rewrite": "rewritten into DRA claims",
        "device-plugin": "left to the device plugin",
        "none": "left alone",
    }[choice.path]
    return clip(f"{', '.join(names)}: {what} ({choice.why})")


def _uses_claim_templates(pod: Obj) -> bool:
    """Claims from templates are created after the pod: a fit check now would always fail."""
    claims = as_list(spec(pod).get("resourceClaims"))
    return any(as_dict(pc).get("resourceClaimTemplateName") for pc in claims)


def mutate_pod(req: AdmissionRequest, ctx: Context) -> Verdict:
    pod = req.obj
    if req.operation != "CREATE" or pod is None:
        return Verdict()
    names = requested_extended(pod)
    if not names:
        return Verdict()
    warnings: list[str] = []
    cache = ctx.cache
    with cache.lock:
        resolved = backing_classes(names, cache.state.classes)
    # The cache may not have seen a class created a moment ago, and routing cannot be redone.
    fresh = ctx.classes.resolve([n for n in names if n not in resolved])
    if fresh.error is not None:
        warnings.append(stale_classes_warning("routing", fresh.error))
    resolved.update(fresh.resolved)
    # Advice from a half-filled cache, or one the fresh list found behind (or could not check),
    # would mislead.
    complete = cache.synced(WEBHOOK_KINDS) and not fresh.resolved and fresh.error is None
    unserved: list[str] = []
    # One hold of the lock reads all the cluster says; the patch is built after releasing it.
    with cache.lock:
        state = cache.state
        for resource in names:
            contended = contention_warning(resource, state.classes.contenders(resource))
            if contended:
                warnings.append(contended)
            if complete and resource not in resolved and not state.nodes.serving(resource):
                unserved.append(unserved_warning(resource))
        if not resolved:
            return Verdict(warnings=warnings + unserved)
        choice = path_for(
            state,
            resolved,
            ctx.config.mode,
            apiserver_gate=ctx.apiserver_gate(),
            force_rewrite=ctx.config.force_rewrite,
            pod=pod,
        )
        if choice.path == "rewrite":
            quotas = unguarded(cache.quotas(), req.namespace or namespace(pod), resolved)
            align = alignment(pod, state.classes.get, state.capacity.largest_group, resolved.values())
            capacity = capacity_by_class(resolved.values(), state.classes.get)
    warnings += unserved
    if choice.path != "native":  # the native path is KEP-5004's own: nothing to explain
        warnings.append(path_warning(sorted(resolved), choice))
    if choice.path == "rewrite":
        if validate_dra_quantities(pod, lambda n: n in resolved):
            # A quantity the rewrite would silently drop (500m asks for no device upstream): left
            # as it is, so that the pod validation denies it at its exact path.
            return Verdict(warnings=warnings)
        for name, cls in quotas:
            warnings.append(quota_warning(name, cls))
        patch = rewrite_patch(pod, resolved, ctx.config, align, capacity)
        return Verdict(patch=patch or None, warnings=warnings)
    if choice.path != "native":
        return Verdict(warnings=warnings)
    # An unserved name already says why the pod cannot run; the fit message would only repeat it.
    if complete and not unserved and not spec(pod).get("nodeName") and not _uses_claim_templates(pod):
        fit = ctx.fit.warning(pod, req.namespace or namespace(pod))
        if fit:
            warnings.append(fit)
    return Verdict(patch=mutation_patch(pod, resolved, ctx.config) or None, warnings=warnings)
