"""``POST /mutate/pods``: the path of a new pod asking for DRA-backed extended resources.

The path (core/paths/choice.py) is decided per pod from ``--mode`` and the gates:

* ``native``: the pod gets the annotation ``draxr.io/extended-resources`` (resource name ->
  DeviceClass, as resolved at admission) and, depending on ``--route``, draxr as its
  ``spec.schedulerName`` (core/paths/routing.py);
* ``rewrite`` (KEP-5004's "Option 1"): the names become DRA claims from shared
  ResourceClaimTemplates (core/paths/rewrite.py); the pod keeps its scheduler unless ``--route=always``;
  the worker creates the templates, so this hook stays free of side effects (dry runs are exact);
* ``device-plugin`` and ``none``: the pod is left alone.

A pod that does not take the native path is told, in a warning, which path it took and why
(core/paths/explain.py). The patches are core's (core/paths/patch.py). The mutation is a fixed
point: run on its own output it changes nothing (the apiserver may call a webhook twice,
``reinvocationPolicy``).
"""

from __future__ import annotations

from ..core.api.objects import Obj, as_dict, as_list, namespace, spec
from ..core.api.validation import validate_dra_quantities
from ..core.paths.choice import path_for
from ..core.paths.explain import contention_warning, path_warning, quota_warning, unserved_warning
from ..core.paths.patch import native_patch, rewrite_patch
from ..core.paths.quota import unguarded
from ..core.paths.requested import backing_classes, requested_extended
from ..core.paths.rewrite import alignment
from ..kube.cache import WEBHOOK_KINDS
from .advice import stale_classes_warning
from .context import Context
from .review import AdmissionRequest, Verdict


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
        if choice.kind == "rewrite":
            quotas = unguarded(cache.quotas(), req.namespace or namespace(pod), resolved)
            align = alignment(pod, state.classes.get, state.capacity.largest_group, resolved.values())
    warnings += unserved
    if choice.kind != "native":  # the native path is KEP-5004's own: nothing to explain
        warnings.append(path_warning(sorted(resolved), choice))
    if choice.kind == "rewrite":
        if validate_dra_quantities(pod, lambda n: n in resolved):
            # A quantity the rewrite would silently drop (500m asks for no device upstream): left
            # as it is, so that the pod validation denies it at its exact path.
            return Verdict(warnings=warnings)
        for name, cls in quotas:
            warnings.append(quota_warning(name, cls))
        patch = rewrite_patch(pod, resolved, ctx.config.routing, align)
        return Verdict(patch=patch or None, warnings=warnings)
    if choice.kind != "native":
        return Verdict(warnings=warnings)
    # An unserved name already says why the pod cannot run; the fit message would only repeat it.
    if complete and not unserved and not spec(pod).get("nodeName") and not _uses_claim_templates(pod):
        fit = ctx.fit.warning(pod, req.namespace or namespace(pod))
        if fit:
            warnings.append(fit)
    return Verdict(patch=native_patch(pod, resolved, ctx.config.routing) or None, warnings=warnings)
