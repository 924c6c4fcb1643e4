"""PodTopologySpread's constraints (``common.go``): a pod's ``topologySpreadConstraints`` of one
``whenUnsatisfiable`` read (``filterTopologySpreadConstraints``: the selector with
``matchLabelKeys`` merged in, ``minDomains`` 1 and the node inclusion policies Honor (affinity) and
Ignore (taints) when unset), the system default constraints, the node inclusion policies, and which
nodes are eligible: they have every constraint's topology key and pass the constraint's policies.

**System defaults.** kube-scheduler's default profile (``defaultingType: System``) gives a pod
without constraints two ScheduleAnyway ones (``systemDefaultConstraints``: hostname, maxSkew 3;
zone, maxSkew 5) whose selector is ``helper.DefaultSelector``: the selectors of the Services,
ReplicationControllers, ReplicaSets and StatefulSets that match or own the pod
(``cluster.workloads``, fed by the worker's informers and by ``draxr plan``'s input). An empty
selector means no default constraint. They only weigh in Score.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Final

from ....api.labelselector import LabelSelector, LabelSelectorError, label_selector, with_labels
from ....api.nodematch import pod_node_affinity_matches, untolerated
from ....api.objects import Obj, as_dict, as_list, labels, spec
from ....cluster.state import ClusterState
from ...framework import PreFilterFailed
from .. import nodeaffinity, tainttoleration

DO_NOT_SCHEDULE: Final = "DoNotSchedule"
SCHEDULE_ANYWAY: Final = "ScheduleAnyway"
HONOR: Final = "Honor"
IGNORE: Final = "Ignore"
LABEL_HOSTNAME: Final = "kubernetes.io/hostname"
LABEL_TOPOLOGY_ZONE: Final = "topology.kubernetes.io/zone"

#: (the cluster, a pod) -> the selector ``DefaultSelector`` builds for it (empty: no default constraint).
DefaultSelector = Callable[[ClusterState, Obj], LabelSelector]


def cluster_default_selector(state: ClusterState, pod: Obj) -> LabelSelector:
    """The profile's ``DefaultSelector``: the cluster's Services and workload controllers."""
    return state.workloads.default_selector(pod)


@dataclass(frozen=True, slots=True)
class Constraint:
    """``topologySpreadConstraint``: one constraint, its selector read."""

    max_skew: int
    topology_key: str
    selector: LabelSelector
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE


#: ``systemDefaultConstraints`` (their selector comes from ``DefaultSelector``).
SYSTEM_DEFAULT_CONSTRAINTS: Final = (
    (LABEL_HOSTNAME, SCHEDULE_ANYWAY, 3),
    (LABEL_TOPOLOGY_ZONE, SCHEDULE_ANYWAY, 5),
)


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def filter_constraints(pod: Obj, action: str) -> list[Constraint]:
    """The pod's own constraints with ``whenUnsatisfiable: action``; a selector that cannot be read
    fails PreFilter (upstream: an error status)."""
    pod_labels = labels(pod)
    out: list[Constraint] = []
    for raw in as_list(spec(pod).get("topologySpreadConstraints")):
        c = as_dict(raw)
        if c.get("whenUnsatisfiable") != action:
            continue
        try:
            selector = label_selector(c.get("labelSelector"))
        except LabelSelectorError as e:
            raise PreFilterFailed(f"obtaining pod's topology spread constraints: {e}") from e
        keys = [k for k in as_list(c.get("matchLabelKeys")) if isinstance(k, str)]
        merged = {k: pod_labels[k] for k in keys if k in pod_labels}
        if merged:
            selector = with_labels(selector, merged)
        out.append(
            Constraint(
                _int(c.get("maxSkew"), 0),
                str(c.get("topologyKey") or ""),
                selector,
                _int(c.get("minDomains"), 1),
                str(c.get("nodeAffinityPolicy") or HONOR),
                str(c.get("nodeTaintsPolicy") or IGNORE),
            )
        )
    return out


def constraints_of(
    state: ClusterState, pod: Obj, action: str, default_selector: DefaultSelector | None
) -> list[Constraint]:
    """``getConstraints``: the pod's own, or else the system defaults (``buildDefaultConstraints``)."""
    if as_list(spec(pod).get("topologySpreadConstraints")):
        return filter_constraints(pod, action)
    defaults = [(key, skew) for key, when, skew in SYSTEM_DEFAULT_CONSTRAINTS if when == action]
    if not defaults or default_selector is None:
        return []
    selector = default_selector(state, pod)
    if selector.empty:
        return []
    return [Constraint(skew, key, selector) for key, skew in defaults]


def has_all_keys(node_labels: Mapping[str, str], constraints: list[Constraint]) -> bool:
    """``nodeLabelsMatchSpreadConstraints``."""
    return all(c.topology_key in node_labels for c in constraints)


@dataclass(frozen=True, slots=True)
class Inclusion:
    """What the node inclusion policies need of the pod: ``matchNodeInclusionPolicies``."""

    pod: Obj
    constrained: bool  # a nodeSelector or required node affinity
    tolerations: list[Obj]

    @classmethod
    def of(cls, pod: Obj) -> Inclusion:
        return cls(pod, nodeaffinity.pre_filter(pod), tainttoleration.pre_filter(pod))

    def vacuous(self, constraints: list[Constraint]) -> bool:
        """Every node passes every constraint's policies (nothing to check per node)."""
        return all(
            (c.node_affinity_policy != HONOR or not self.constrained) and c.node_taints_policy != HONOR
            for c in constraints
        )

    def admits(self, c: Constraint, node: Obj) -> bool:
        if (
            c.node_affinity_policy == HONOR
            and self.constrained
            and not pod_node_affinity_matches(self.pod, node)
        ):
            return False
        return not (
            c.node_taints_policy == HONOR and untolerated(as_list(spec(node).get("taints")), self.tolerations)
        )


def eligible_nodes(
    state: ClusterState, constraints: list[Constraint], inclusion: Inclusion, require_all: bool = True
) -> list[Collection[str]]:
    """Per constraint, the nodes it counts pods on: with every constraint's key (``require_all``),
    passing its policies. The usual case (no policy to check) reads the nodes' topology index."""
    nodes = state.nodes
    keys = list(dict.fromkeys(c.topology_key for c in constraints))
    if require_all:
        holders = [nodes.with_label(k) for k in keys]
        base: Collection[str] = holders[0] if len(holders) == 1 else set.intersection(*holders)
    else:
        base = nodes.by_name.keys()
    if inclusion.vacuous(constraints):
        return [base] * len(constraints)
    by_name = nodes.by_name
    return [{n for n in base if inclusion.admits(c, by_name[n].node)} for c in constraints]


def domains(state: ClusterState, c: Constraint, eligible: Collection[str]) -> int:
    """How many topology values the eligible nodes (each with the key) have; read from the index
    when they are every node with the key."""
    nodes = state.nodes
    if len(eligible) == len(nodes.with_label(c.topology_key)):
        return len(nodes.topology(c.topology_key))
    by_name = nodes.by_name
    return len({by_name[n].labels[c.topology_key] for n in eligible})
