"""A pod's admission outcome: its path, its JSONPatch (or its denial) and what its author is told,
from what the cluster says.

Two steps, so that the webhook holds its cache's lock only to read: ``cluster_facts`` reads all the
cluster state says about the pod's names (which class wins each, what nothing serves, the path,
the quotas and alignment a rewrite needs) in one hold of the lock; ``pod_outcome`` then decides the
rest without the cluster, after the lock is released. Both are pure: the webhook turns the outcome
into its answer (adding what only it can know: a fresh DeviceClass list's failure, the fit engine's
advice where ``fit_check`` says so).

Routing: a pod that consumes devices of a class draxr manages, through a DRA-backed name on the
native or rewrite path or through its own claims (``consumed.py``), goes to draxr's worker per
``--route``, unless it uses a feature the worker does not implement: then ``--unsupported-pods``
denies it or leaves it with its scheduler, saying why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..api.capacityrequests import capacity_by_class
from ..api.objects import Obj, as_dict, as_list, spec
from ..api.podresources import pod_requests
from ..api.validation import validate_dra_quantities
from ..cluster.state import ClusterState
from ..scheduling.podgroupcycle import priority_mismatch
from ..scheduling.unsupported import unsupported_features
from .choice import BOUND_AT_CREATION, Mode, PathChoice, PathKind, path_for
from .consumed import EVERY_CLASS, ClaimClasses, ManagedClasses
from .explain import (
    bound_node_warning,
    contention_warning,
    path_warning,
    quota_warning,
    unserved_warning,
    unsupported_denial,
    unsupported_warning,
)
from .patch import native_patch, rewrite_patch, route_patch
from .quota import QuotaRules, quota_rules, unguarded
from .rewrite import Alignment, alignment, no_alignment
from .routing import Routing, wants_route

#: The paths on which a pod's DRA-backed names consume devices (not a device plugin's, nor with
#: draxr switched off).
_DRA_PATHS = ("native", "rewrite")


# Not frozen: a frozen dataclass's __init__ sets each field through object.__setattr__, and the
# two objects of one admission then cost the webhook's hot path 4 us (of about 70).
@dataclass(slots=True)
class ClusterFacts:
    """What the cluster says about a pod asking for DRA-candidate names (``cluster_facts``)."""

    resolved: dict[str, str]  # resource name -> the class serving it
    contended: list[str]  # warnings: names several classes declare, in the names' order
    unserved: list[str]  # warnings: names nothing serves (only from a complete cache)
    complete: bool  # the cache was whole: advice from it can be trusted
    choice: PathChoice | None = None  # None: no name is DRA-backed
    quotas: Sequence[tuple[str, str]] = ()  # the rewrite's (name, class) unguarded
    align: Alignment = no_alignment  # the rewrite's, settled: it reads nothing later
    tolerations: Mapping[str, list[Obj]] = field(default_factory=dict)  # the rewrite's, per class
    capacity: dict[str, dict[str, str]] | None = None  # the rewrite's: class -> capacity requests
    #: The managed classes the pod consumes devices of (by its names' path and its own claims).
    managed: list[str] = field(default_factory=list)
    #: Some claim or template of the pod could not be resolved: routed as if draxr managed it.
    claims_unknown: bool = False
    #: The pod's PodGroup, when it names one and the webhook knows it.
    pod_group: Obj | None = None


def cluster_facts(
    state: ClusterState,
    pod: Obj,
    names: list[str],
    resolved: dict[str, str],
    *,
    complete: bool,
    mode: Mode,
    apiserver_gate: Callable[[], bool],
    force_rewrite: bool,
    quotas: Callable[[], Iterable[Obj]],
    namespace: str,
    claims: ClaimClasses | None = None,
    managed: ManagedClasses = EVERY_CLASS,
    rules: Callable[[], QuotaRules] | None = None,
) -> ClusterFacts:
    """What ``state`` says about ``pod`` asking for ``names`` (``resolved``: those a class backs)
    and holding ``claims`` (what its own claims consume, as admission could read them).

    ``complete``: the cache is synced and agrees with a fresh class list; otherwise nothing is
    said to be unserved. ``apiserver_gate`` and ``quotas`` are read only where the answer needs
    them (a DRA-backed name; the rewrite path), the quotas of ``namespace`` being the pod's."""
    facts = _name_facts(
        state,
        pod,
        names,
        resolved,
        complete=complete,
        mode=mode,
        apiserver_gate=apiserver_gate,
        force_rewrite=force_rewrite,
        quotas=quotas,
        namespace=namespace,
        rules=rules,
    )
    consumed = list(resolved.values()) if facts.choice is not None and facts.choice.kind in _DRA_PATHS else []
    if claims is not None:
        consumed += claims.classes
        facts.claims_unknown = claims.unknown
    facts.managed = managed.of(dict.fromkeys(consumed), state.classes.get)
    return facts


def _name_facts(
    state: ClusterState,
    pod: Obj,
    names: list[str],
    resolved: dict[str, str],
    *,
    complete: bool,
    mode: Mode,
    apiserver_gate: Callable[[], bool],
    force_rewrite: bool,
    quotas: Callable[[], Iterable[Obj]],
    namespace: str,
    rules: Callable[[], QuotaRules] | None,
) -> ClusterFacts:
    contended: list[str] = []
    unserved: list[str] = []
    for resource in names:
        contention = contention_warning(resource, state.classes.contenders(resource))
        if contention:
            contended.append(contention)
        if complete and resource not in resolved and not state.nodes.serving(resource):
            unserved.append(unserved_warning(resource))
    if not resolved:
        return ClusterFacts(resolved, contended, unserved, complete)
    gate = apiserver_gate()
    choice = path_for(state, resolved, mode, apiserver_gate=gate, force_rewrite=force_rewrite, pod=pod)
    if choice.why == BOUND_AT_CREATION:
        unserved += _unserved_on_its_node(state, pod, sorted(resolved))
    if choice.kind != "rewrite":
        return ClusterFacts(resolved, contended, unserved, complete, choice)
    served = rules() if rules is not None else quota_rules(None, gate)
    return ClusterFacts(
        resolved,
        contended,
        unserved,
        complete,
        choice,
        unguarded(quotas(), namespace, resolved, served, state.classes.field_name),
        alignment(pod, state.classes.get, state.capacity.largest_group, resolved.values()),
        {cls: state.classes.tolerations(cls) for cls in set(resolved.values())},
        capacity_by_class(resolved.values(), state.classes.get),
    )


def _unserved_on_its_node(state: ClusterState, pod: Obj, names: list[str]) -> list[str]:
    """The warning for a pod created on a node (known to ``state``) whose allocatable lacks some of
    the pod's requests of ``names``: nothing else would give it those devices."""
    node_name = str(spec(pod).get("nodeName"))
    info = state.nodes.get(node_name)
    if info is None:
        return []
    wanted = pod_requests(pod)
    short = [r for r in names if info.allocatable.get(r, 0) < wanted.get(r, 0)]
    return [bound_node_warning(short, node_name)] if short else []


@dataclass(slots=True)
class Outcome:
    """A pod's admission: its path (None: no DRA-backed name), its JSONPatch (empty: none) and
    its warnings, in the order they are shown; or, with ``denial``, why it is refused."""

    kind: PathKind | None
    patch: list[Obj]
    warnings: list[str]
    #: Whether the fit engine's advice is worth asking for (the native path, from a complete cache,
    #: no name unserved: that already says why the pod cannot run; not yet bound; no claim from a
    #: template, which is created after the pod, so a check now would always fail).
    fit_check: bool = False
    #: The pod is refused: the reason, for a Forbidden status.
    denial: str | None = None


def pod_outcome(pod: Obj, facts: ClusterFacts, routing: Routing) -> Outcome:
    """The outcome of ``pod``'s admission from ``facts`` (see the module's docstring)."""
    warnings = facts.contended + facts.unserved
    choice = facts.choice
    kind = choice.kind if choice is not None else None
    scheduler, denial = _route(pod, facts, routing, warnings)
    if denial is not None:
        return Outcome(kind, [], warnings, denial=denial)
    if choice is None:
        return Outcome(None, route_patch(pod, scheduler), warnings)
    resolved = facts.resolved
    if choice.kind != "native":  # the native path is KEP-5004's own: nothing to explain
        warnings.append(path_warning(sorted(resolved), choice))
    if choice.kind == "rewrite":
        if validate_dra_quantities(pod, lambda n: n in resolved):
            # A quantity the rewrite would silently drop (500m asks for no device upstream): left
            # as it is, so that the pod validation denies it at its exact path.
            return Outcome(choice.kind, [], warnings)
        warnings += [quota_warning(name, cls) for name, cls in facts.quotas]
        tolerated = facts.tolerations
        patch = rewrite_patch(
            pod, resolved, scheduler, facts.align, lambda cls: tolerated.get(cls, ()), facts.capacity
        )
        return Outcome(choice.kind, patch, warnings)
    if choice.kind != "native":
        return Outcome(choice.kind, route_patch(pod, scheduler), warnings)
    fit_check = (
        facts.complete
        and not facts.unserved
        and not spec(pod).get("nodeName")
        and not _uses_claim_templates(pod)
    )
    return Outcome(choice.kind, native_patch(pod, resolved, scheduler), warnings, fit_check)


def _route(
    pod: Obj, facts: ClusterFacts, routing: Routing, warnings: list[str]
) -> tuple[str | None, str | None]:
    """The scheduler to set (None: leave it) or why the pod is refused (one allocator per pool,
    and what the worker cannot honour never reaches it). Warnings go to ``warnings``."""
    consumes = bool(facts.managed) or facts.claims_unknown
    routed = consumes and wants_route(pod, routing)
    explicit = spec(pod).get("schedulerName") == routing.scheduler_name
    if not routed and not explicit:
        return None, None
    features = unsupported_features(pod, facts.pod_group)
    if not features:
        if facts.pod_group is not None:  # the worker would refuse the whole group: refuse this pod
            wrong = priority_mismatch(pod, facts.pod_group)
            if wrong is not None:
                return None, wrong
        return (routing.scheduler_name if routed else None), None
    if explicit or routing.unsupported == "deny":
        return None, unsupported_denial(features, facts.managed, routing.scheduler_name, explicit=explicit)
    warnings.append(unsupported_warning(features, spec(pod).get("schedulerName")))
    return None, None


def _uses_claim_templates(pod: Obj) -> bool:
    claims = as_list(spec(pod).get("resourceClaims"))
    return any(as_dict(pc).get("resourceClaimTemplateName") for pc in claims)
