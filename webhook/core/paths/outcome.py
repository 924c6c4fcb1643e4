"""A pod's admission outcome: its path, its JSONPatch and what its author is told, from what the
cluster says.

Two steps, so that the webhook holds its cache's lock only to read: ``cluster_facts`` reads all the
cluster state says about the pod's names (which class wins each, what nothing serves, the path,
the quotas and alignment a rewrite needs) in one hold of the lock; ``pod_outcome`` then decides the
rest without the cluster, after the lock is released. Both are pure: the webhook turns the outcome
into its answer (adding what only it can know: a fresh DeviceClass list's failure, the fit engine's
advice where ``fit_check`` says so).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ..api.capacityrequests import capacity_by_class
from ..api.objects import Obj, as_dict, as_list, spec
from ..api.validation import validate_dra_quantities
from ..cluster.state import ClusterState
from .choice import Mode, PathChoice, PathKind, path_for
from .explain import contention_warning, path_warning, quota_warning, unserved_warning
from .patch import native_patch, rewrite_patch
from .quota import unguarded
from .rewrite import Alignment, alignment, no_alignment
from .routing import Routing


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
    capacity: dict[str, dict[str, str]] | None = None  # the rewrite's: class -> capacity requests


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
) -> ClusterFacts:
    """What ``state`` says about ``pod`` asking for ``names`` (``resolved``: those a class backs).

    ``complete``: the cache is synced and agrees with a fresh class list; otherwise nothing is
    said to be unserved. ``apiserver_gate`` and ``quotas`` are read only where the answer needs
    them (a DRA-backed name; the rewrite path), the quotas of ``namespace`` being the pod's."""
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
    choice = path_for(
        state, resolved, mode, apiserver_gate=apiserver_gate(), force_rewrite=force_rewrite, pod=pod
    )
    if choice.kind != "rewrite":
        return ClusterFacts(resolved, contended, unserved, complete, choice)
    return ClusterFacts(
        resolved,
        contended,
        unserved,
        complete,
        choice,
        unguarded(quotas(), namespace, resolved),
        alignment(pod, state.classes.get, state.capacity.largest_group, resolved.values()),
        capacity_by_class(resolved.values(), state.classes.get),
    )


@dataclass(slots=True)
class Outcome:
    """A pod's admission: its path (None: no DRA-backed name), its JSONPatch (empty: none) and
    its warnings, in the order they are shown."""

    kind: PathKind | None
    patch: list[Obj]
    warnings: list[str]
    #: Whether the fit engine's advice is worth asking for (the native path, from a complete cache,
    #: no name unserved: that already says why the pod cannot run; not yet bound; no claim from a
    #: template, which is created after the pod, so a check now would always fail).
    fit_check: bool = False


def pod_outcome(pod: Obj, facts: ClusterFacts, routing: Routing) -> Outcome:
    """The outcome of ``pod``'s admission from ``facts`` (see the module's docstring)."""
    warnings = facts.contended + facts.unserved
    choice = facts.choice
    if choice is None:
        return Outcome(None, [], warnings)
    resolved = facts.resolved
    if choice.kind != "native":  # the native path is KEP-5004's own: nothing to explain
        warnings.append(path_warning(sorted(resolved), choice))
    if choice.kind == "rewrite":
        if validate_dra_quantities(pod, lambda n: n in resolved):
            # A quantity the rewrite would silently drop (500m asks for no device upstream): left
            # as it is, so that the pod validation denies it at its exact path.
            return Outcome(choice.kind, [], warnings)
        warnings += [quota_warning(name, cls) for name, cls in facts.quotas]
        return Outcome(
            choice.kind, rewrite_patch(pod, resolved, routing, facts.align, facts.capacity), warnings
        )
    if choice.kind != "native":
        return Outcome(choice.kind, [], warnings)
    fit_check = (
        facts.complete
        and not facts.unserved
        and not spec(pod).get("nodeName")
        and not _uses_claim_templates(pod)
    )
    return Outcome(choice.kind, native_patch(pod, resolved, routing), warnings, fit_check)


def _uses_claim_templates(pod: Obj) -> bool:
    claims = as_list(spec(pod).get("resourceClaims"))
    return any(as_dict(pc).get("resourceClaimTemplateName") for pc in claims)
