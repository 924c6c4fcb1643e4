"""``POST /mutate/pods``: the path of a new pod asking for DRA-backed extended resources.

The path (core/paths/choice.py) is decided per pod from ``--mode`` and the gates:

* ``native``: the pod gets the annotation ``draxr.io/extended-resources`` (resource name ->
  DeviceClass, as resolved at admission) and, depending on ``--route``, draxr as its
  ``spec.schedulerName`` (core/paths/routing.py);
* ``rewrite`` (KEP-5004's "Option 1"): the names become DRA claims from shared
  ResourceClaimTemplates (core/paths/rewrite.py); the pod keeps its scheduler unless ``--route=always``;
  the worker creates the templates, so this hook stays free of side effects (dry runs are exact);
* ``device-plugin`` and ``none``: the pod is left alone.

Whatever the path, a pod that consumes devices of a class draxr manages (a DRA-backed name on the
native or rewrite path, or its own ``spec.resourceClaims``: the classes its claims and templates
name, read by ``claimreads.py``) is routed to draxr per ``--route``: one allocator per device pool.
One that uses a feature draxr's worker does not implement is denied or left with its scheduler
(``--unsupported-pods``).

What the outcome is, patch and warnings, core decides (core/paths/outcome.py); this hook reads the
cache under its lock, asks the API server for DeviceClasses the cache may not have seen yet, adds the
fit engine's advice, and answers. The mutation is a fixed point: run on its own output it changes
nothing (the apiserver may call a webhook twice, ``reinvocationPolicy``).
"""

from __future__ import annotations

from ..core.api.fielderrors import forbidden_status
from ..core.api.messages import clip
from ..core.api.objects import name, namespace, spec
from ..core.api.podgroups import group_of
from ..core.paths.consumed import ClaimClasses, claim_sources
from ..core.paths.outcome import cluster_facts, pod_outcome
from ..core.paths.requested import backing_classes, requested_extended
from ..core.paths.routing import wants_route
from ..kube.cache import WEBHOOK_KINDS
from .advice import stale_classes_warning
from .context import Context
from .review import AdmissionRequest, Verdict


def mutate_pod(req: AdmissionRequest, ctx: Context) -> Verdict:
    pod = req.obj
    if req.operation != "CREATE" or pod is None:
        return Verdict()
    config = ctx.config
    names = requested_extended(pod)
    # Claims matter only to a pod that may be routed (or names draxr): they never change its path.
    routing = config.routing
    mine = spec(pod).get("schedulerName") == routing.scheduler_name
    sources = claim_sources(pod) if wants_route(pod, routing) or mine else []
    if not names and not sources:
        return Verdict()
    warnings: list[str] = []
    cache = ctx.cache
    ns = req.namespace or namespace(pod)
    claims: ClaimClasses | None = None
    if sources and ctx.pod_claims is not None:
        claims = ctx.pod_claims.classes(ns, sources)
        warnings += [
            clip(f"routing treats {source} as draxr's: it could not be read: {why}")
            for source, why in claims.unreadable
        ]
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
            rules=ctx.quota_rules,
            claims=claims,
            managed=routing.managed,
        )
    group = group_of(pod)
    if group is not None:
        facts.pod_group = cache.pod_group(group)
    outcome = pod_outcome(pod, facts, routing)
    warnings += outcome.warnings
    if outcome.denial is not None:
        return Verdict.deny(forbidden_status("pods", "", name(pod) or req.name, outcome.denial), warnings)
    if outcome.fit_check:
        fit = ctx.fit.warning(pod, ns)
        if fit:
            warnings.append(fit)
    return Verdict(patch=outcome.patch or None, warnings=warnings)
