"""What every phase and plugin of a decision shares (upstream's ``framework`` package): the
decision's outcome (with what PreBind writes for it: the special claim, the user claims, the pod's
volume bindings), how each extended resource is served on the chosen node, kube-scheduler's
``FitError`` text, and the shape of the profile's Filter and Score plugins."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Generic, Literal, TypeVar, cast

from ..allocation.placement import Placement
from ..allocation.results import ClaimAllocation
from ..api.objects import Obj, as_dict, status
from ..cluster.allocated import Share
from ..cluster.nodeinfo import NodeInfo
from ..cluster.podinfo import PodInfo
from ..cluster.slices import DeviceKey
from ..cluster.state import ClusterState
from ..cluster.volumes import PodVolumes

SCHEDULED: Final = "Scheduled"
UNSCHEDULABLE: Final = "Unschedulable"
ERROR: Final = "Error"

#: kube-scheduler's ``ErrNoNodesAvailable`` (the cluster has no nodes at all).
NO_NODES: Final = "no nodes available to schedule pods"

Via = Literal["dra", "device-plugin"]


class PreFilterFailed(Exception):
    """The pod cannot be scheduled anywhere for now (a claim missing or unusable)."""


class PluginError(Exception):
    """A plugin's PreFilter or Filter failed with an error, not a verdict: it aborts the attempt
    (upstream's ``fwk.AsStatus(err)``); ``str()`` is upstream's message, the plugin named."""


@dataclass(slots=True)
class ServedBy:
    """How one extended resource is served on a node: by DRA devices of a DeviceClass, or by the
    node's device plugin (allocatable > 0: upstream's ``ShouldDelegateResourceToDRA`` is false)."""

    via: Via
    device_class: str | None

    def to_api(self) -> dict[str, str | None]:
        return {"deviceClass": self.device_class, "via": self.via}


@dataclass(slots=True)
class UserClaim:
    claim: Obj
    allocation: ClaimAllocation | None = None  # set when this decision allocates it


@dataclass(slots=True)
class Decision:
    pod: Obj
    status: str
    node: str | None = None
    message: str = ""
    served: dict[str, ServedBy] = field(default_factory=dict)
    requests: list[Obj] = field(default_factory=list)  # the special claim's device requests
    mappings: list[Obj] = field(default_factory=list)
    special: ClaimAllocation | None = None
    user_claims: list[UserClaim] = field(default_factory=list)
    stale_claim: Obj | None = None  # PostFilter deletes it
    reasons: dict[str, list[str]] = field(default_factory=dict)
    resumed: Obj | None = None  # an existing, allocated special claim this decision continues
    reuse: Obj | None = None  # an existing, unallocated special claim PreBind may reuse
    placement: Placement | None = None  # how the special claim's devices were placed, and why
    #: VolumeBinding's data for PreBind on the chosen node: the claims to bind to which volumes and
    #: the claims to provision there (None: the pod has no unbound claim to act on).
    volumes: PodVolumes | None = None

    @property
    def constraints(self) -> list[Obj]:
        """The special claim's ``spec.devices.constraints`` (draxr's alignment; none upstream)."""
        return list(self.placement.constraints) if self.placement is not None else []

    def special_allocation(self) -> Obj | None:
        if self.special is not None:
            return self.special.to_api()
        if self.resumed is not None:
            alloc = as_dict(status(self.resumed).get("allocation"))
            return alloc or None
        return None

    def allocations(self) -> list[ClaimAllocation]:
        """What the decision allocates: the special claim's, then the user claims'."""
        out = [self.special] if self.special else []
        out += [uc.allocation for uc in self.user_claims if uc.allocation is not None]
        return out

    def device_keys(self) -> list[DeviceKey]:
        """Every device the decision allocates, taken or shared."""
        return [key for a in self.allocations() for key in a.device_keys]

    def dedicated_keys(self) -> list[DeviceKey]:
        """The devices the decision takes (what Reserve makes taken)."""
        return [key for a in self.allocations() for key in a.dedicated_keys]

    def shares(self) -> list[Share]:
        """The shares of multi-allocatable devices the decision takes (what Reserve holds)."""
        return [share for a in self.allocations() for share in a.shares]


T = TypeVar("T")


class StateKey(Generic[T]):
    """A plugin's typed slot in the cycle state (upstream's ``fwk.StateKey``): the key carries the
    type of what the plugin stores, so ``CycleState.read`` gives it back typed, never ``Any``."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"StateKey({self.name!r})"


class CycleState:
    """One decision's per-plugin state (upstream's ``CycleState``): each plugin writes its own
    keys in PreFilter and reads them back in later phases."""

    __slots__ = ("_data",)

    def __init__(self) -> None:
        self._data: dict[StateKey[Any], object] = {}

    def write(self, key: StateKey[T], value: T) -> None:
        self._data[key] = value

    def read(self, key: StateKey[T]) -> T:
        """Raises ``KeyError`` naming the key when PreFilter did not write it."""
        try:
            return cast(T, self._data[key])
        except KeyError:
            raise KeyError(f"cycle state has no {key.name}") from None


@dataclass(slots=True)
class NodePlan:
    """A node that passed the filters before allocation: which names DRA serves there, and how
    each name is served."""

    node: str
    dra: dict[str, str]  # resource -> class, for names DRA serves on this node
    served: dict[str, ServedBy]


@dataclass(slots=True)
class NodeFit:
    """Filter's answer for one node: ``reasons`` when it does not fit, else the allocation."""

    reasons: list[str]
    plan: NodePlan | None = None
    special: ClaimAllocation | None = None
    requests: list[Obj] = field(default_factory=list)
    mappings: list[Obj] = field(default_factory=list)
    user_claims: list[UserClaim] = field(default_factory=list)
    placement: Placement | None = None


def fit_error(total: int, reasons: dict[str, list[str]], pre_message: str = "") -> str:
    """kube-scheduler's ``FitError`` message: a sorted histogram of node reasons; with no nodes at
    all, its ``ErrNoNodesAvailable``."""
    if total == 0:
        return NO_NODES
    msg = f"0/{total} nodes are available:"
    if pre_message:
        return f"{msg} {pre_message}."
    counts: dict[str, int] = {}
    for node_reasons in reasons.values():
        for r in node_reasons:
            counts[r] = counts.get(r, 0) + 1
    parts = sorted(f"{v} {k}" for k, v in counts.items())
    return f"{msg} {', '.join(parts)}." if parts else msg


#: ``framework.MaxNodeScore``: a score plugin's normalized score is 0..100.
MAX_NODE_SCORE: Final = 100


#: A plugin's state from its PreFilter (or PreScore), and what its Score reads.
S = TypeVar("S")
P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class FilterPlugin(Generic[S]):
    """A Filter plugin of the profile (``profile.FILTERS``), run after NodeResourcesFit and before
    DynamicResources, in upstream's order.

    ``pre_filter(state, pod)`` learns once per decision what the plugin needs (its PreFilter):
    None when it has nothing to check for this pod (upstream's Skip: the plugin then costs nothing
    per node), or raises ``PreFilterFailed`` (the pod fits nowhere for now, for the reason given).
    ``filter(pre, node, info)`` gives the node's reason (or reasons), upstream's text byte for
    byte, or None. Either may raise ``PluginError`` (upstream's error status: the attempt aborts).
    ``reserve(pre, node, decision)``, for a plugin whose PreBind acts later: records on the decision
    what it found for the chosen node (upstream keeps it in the cycle state from Filter to PreBind).
    A pod any such plugin checks is never the usual pod (``usual``).

    ``add_pod(pre, pod, info)`` and ``remove_pod(pre, pod, info)`` (upstream's
    ``PreFilterExtensions``, optional): the PreFilter state as if ``pod`` (its ``PodInfo``) also ran,
    or no longer ran, on the node ``info``; a new state, ``pre`` unchanged. The scheduler adds the
    nominated pods with them (``nominated``); preemption's what-if removes victims with them.
    """

    name: str
    pre_filter: Callable[[ClusterState, Obj], S | None]
    filter: Callable[[S, str, NodeInfo], str | list[str] | None]
    add_pod: Callable[[S, PodInfo, NodeInfo], S] | None = None
    remove_pod: Callable[[S, PodInfo, NodeInfo], S] | None = None
    reserve: Callable[[S, str, Decision], None] | None = None


@dataclass(frozen=True, slots=True)
class ScorePlugin(Generic[P, S]):
    """A Score plugin of the profile (``profile.SCORES``), with upstream's weight.

    ``pre_score(state, pod)``: what scoring needs, or None to skip (upstream's PreScore Skip).
    ``score(pre, node, info)``: the node's raw score. ``normalize(scores)``: the raw scores of the
    feasible nodes to 0..``MAX_NODE_SCORE`` in place (upstream's NormalizeScore), or None when
    the raw scores are already in that range.
    ``pre_score_from_filter(pre)``, for a plugin that is also a Filter plugin of the same name (one
    plugin upstream, one cycle state): its PreScore from what its own PreFilter and Filter found,
    in place of ``pre_score``; it skips when that Filter plugin skipped the pod.
    ``feasible(state, pre, nodes)`` (optional): the part of upstream's PreScore that reads the
    nodes being scored (the feasible ones), called with their names before they are scored, and
    again whenever they change; what it returns is what ``score`` then reads.
    """

    name: str
    weight: int
    pre_score: Callable[[ClusterState, Obj], P | None]
    score: Callable[[S, str, NodeInfo], int]
    normalize: Callable[[dict[str, int]], None] | None = None
    feasible: Callable[[ClusterState, P, list[str]], S] | None = None
    pre_score_from_filter: Callable[[Any], P | None] | None = None


#: A Filter plugin that did not skip the pod, with its PreFilter state (upstream's CycleState entry):
#: the pair agrees, each plugin reading what its own PreFilter made; a list of them holds many
#: plugins' states, as upstream's CycleState does.
Prefiltered = tuple[FilterPlugin[Any], Any]
#: A Score plugin that did not skip the pod, with its PreScore state.
Prescored = tuple[ScorePlugin[Any, Any], Any]


def default_normalize(scores: dict[str, int], reverse: bool = False) -> None:
    """Upstream's ``helper.DefaultNormalizeScore``: scale to 0..100 by the highest score, reversed
    on request (integer arithmetic, as upstream's)."""
    top = max(scores.values(), default=0)
    if top == 0:
        if reverse:
            for n in scores:
                scores[n] = MAX_NODE_SCORE
        return
    for n, s in scores.items():
        scaled = MAX_NODE_SCORE * s // top
        scores[n] = MAX_NODE_SCORE - scaled if reverse else scaled
