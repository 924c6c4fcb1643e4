"""``POST /mutate/pods``: the path of a new pod asking for DRA-backed extended resources.

The path (core/paths/choice.py) is decided per pod from ``--mode`` and the gates:

* ``native``: the pod gets the annotation ``draxr.io/extended-resources`` (resource name ->
  DeviceClass, as resolved at admission) and, depending on ``--route``, draxr as its
  ``spec.schedulerName`` (core/paths/routing.py);
* ``rewrite`` (KEP-5004's "Option 1"): the names become DRA claims from shared
  ResourceClaimTemplates (core/paths/rewrite.py); the pod keeps its scheduler unless ``--route=always``;
  the worker creates the templates, so this hook stays free of side effects (dry runs are exact);
* ``device-plugin`` and ``none``: the pod is left alone.

What the outcome is, patch and warnings, core decides (core/paths/outcome.py); this hook reads the
cache under its lock, asks the API server for DeviceClasses the cache may not have seen yet, adds the
fit engine's advice, and answers. The mutation is a fixed point: run on its own output it changes
nothing (the apiserver may call a webhook twice, ``reinvocationPolicy``).
"""

from __future__ import annotations

from ..core.api.objects import namespace
from ..core.paths.outcome import cluster_facts, pod_outcome
from ..core.paths.requested import backing_classes, requested_extended
from ..kube.cache import WEBHOOK_KINDS
from .advice import stale_classes_warning
from .context import Context
from .review import AdmissionRequest, Verdict


def mutate_pod(req: AdmissionRequest, ctx: Context) -> Verdict:
    pod = req.obj
    if req.operation != "CREATE" or pod is None:
        return Verdict()
    names = requested_extended(pod)
    if not names:
        return Verdict()
    warnings: list[str] = []
    cache = ctx.cache
    config = ctx.config
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
    ns = req.namespace or namespace(pod)
    # One hold of the lock reads all the cluster says; the patch is built after releasing it.
    with cache.lock:
        facts = cluster_facts(
            cache.state,
            pod,
            names,
            resolved,
            complete=complete,
            mode=config.mode,
            apiserver_gate=ctx.apiserver_gate,
            force_rewrite=config.force_rewrite,
            quotas=cache.quotas,
            namespace=ns,
        )
    outcome = pod_outcome(pod, facts, config.routing)
    warnings += outcome.warnings
    if outcome.fit_check:
        fit = ctx.fit.warning(pod, ns)
        if fit:
            warnings.append(fit)
    return Verdict(patch=outcome.patch or None, warnings=warnings)
