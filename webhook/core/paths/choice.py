"""Which path a pod asking for DRA-backed extended resources takes.

* ``native``: KEP-5004 as upstream defines it: the worker writes the special claim and the pod's
  request mapping (needs ``DRAExtendedResource`` on the apiserver and the node's kubelet; while only
  some DRA nodes' kubelets have it, only where one of those has room for the pod now);
* ``rewrite``: KEP-5004's "Option 1": the webhook turns the names into ordinary DRA claims;
* ``device-plugin``: left alone, for a node's device plugin that advertises the name (a rewritten
  pod could no longer use such nodes; ``decide_path`` says when);
* ``none``: draxr does nothing (``--mode=off``, or a pod created with ``spec.nodeName``: no
  scheduler sees it, so neither the native path's special claim nor the rewrite's claims would
  ever be allocated).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from ..api.objects import Obj, spec
from ..cluster.state import ClusterState
from ..scheduling.plugins.dynamicresources.mappings import class_demand, device_demand

Mode = Literal["auto", "native", "rewrite", "off"]
#: The path a pod takes (not a file path, nor a JSON Pointer or field path).
PathKind = Literal["native", "rewrite", "device-plugin", "none"]
MODES: Final = ("auto", "native", "rewrite", "off")
#: Why a pod is rewritten mid-upgrade.
NO_NATIVE_ROOM: Final = "no node whose kubelet has DRAExtendedResource has room for it now"
#: Why a pod created with ``spec.nodeName`` is left alone.
BOUND_AT_CREATION: Final = "spec.nodeName is set: no scheduler allocates its devices"


@dataclass(frozen=True, slots=True)
class PathChoice:
    kind: PathKind
    why: str  # for the admission warning: short, no trailing period


def decide_path(
    mode: Mode,
    *,
    apiserver_gate: bool,
    kubelet_gate_on_dra_nodes: bool,
    device_plugin_nodes: bool,
    force_rewrite: bool = False,
    dra_room: bool = True,
    dra_devices: bool = True,
    plugin_room: bool = True,
    native_room: bool = True,
) -> PathChoice:
    """The path of a pod asking for DRA-backed extended resources.

    ``kubelet_gate_on_dra_nodes``: some node that could serve the pod with DRA has its kubelet's
    gate on. ``native_room``: the native path can serve it: every such node has the gate, or one
    that has it has room for the pod now (mid-upgrade, a native pod can use only upgraded nodes,
    while a rewritten one can use any: native where it runs now, else rewrite).
    ``device_plugin_nodes``: some Ready node advertises every DRA-backed name the pod asks
    for. A rewritten pod can no longer use device-plugin nodes, and a pod left to the device plugin
    can no longer use DRA devices, so where both exist the rewrite goes where the pod fits now:

    1. DRA devices are free for it on some node (``dra_room``): rewrite, DRA first (the
       direction a migration from device plugins goes);
    2. else a device-plugin node has room for it (``plugin_room``): leave it to the device plugin;
    3. else it waits where it can ever run: DRA when some node has enough such devices at all
       (``dra_devices``), the device plugin otherwise.

    ``force_rewrite`` rewrites regardless.
    """
    if mode == "off":
        return PathChoice("none", "draxr --mode=off")
    if mode == "native":
        return PathChoice("native", "draxr --mode=native")
    if mode == "auto" and apiserver_gate and kubelet_gate_on_dra_nodes and native_room:
        return PathChoice("native", "DRAExtendedResource is on in the apiserver and kubelets")
    if mode == "rewrite":
        why = "draxr --mode=rewrite"
    elif not apiserver_gate:
        why = "DRAExtendedResource is off in the apiserver"
    elif not kubelet_gate_on_dra_nodes:
        why = "no DRA node's kubelet has DRAExtendedResource on"
    else:
        why = NO_NATIVE_ROOM
    if not device_plugin_nodes:
        return PathChoice("rewrite", why)
    if force_rewrite:
        return PathChoice("rewrite", "draxr --force-rewrite")
    if dra_room:
        return PathChoice("rewrite", "free DRA devices fit it; device-plugin nodes stay for others")
    if plugin_room:
        return PathChoice("device-plugin", "no free DRA devices fit it; a device-plugin node has room")
    if dra_devices:
        return PathChoice("rewrite", "nothing fits now; it waits for DRA devices")
    return PathChoice("device-plugin", "no node has enough DRA devices; a device plugin serves it")


def path_for(
    state: ClusterState,
    classes: dict[str, str],
    mode: Mode,
    *,
    apiserver_gate: bool,
    force_rewrite: bool = False,
    pod: Obj | None = None,
) -> PathChoice:
    """``decide_path`` for ``pod`` asking for ``classes`` (resource name -> DeviceClass), on the
    nodes ``state`` knows (without the pod, one device per name).

    DRA nodes are those with devices of the classes (every node when none has any yet; with no node
    at all, nothing speaks against the kubelets). Device-plugin nodes are Ready nodes advertising
    every name with allocatable > 0; their room is allocatable minus what the pods ``state`` knows
    on them request (a webhook without the worker knows none). DRA room is a node whose free
    devices of every class cover the pod's demand. Admission reads the cache as it is: a burst of
    pods can all see the same free devices, and the later ones then wait for DRA devices.
    """
    if pod is not None and mode != "off" and spec(pod).get("nodeName"):
        return PathChoice("none", BOUND_AT_CREATION)
    # Only ``auto`` with the apiserver's gate on asks the kubelets; a native answer reads no more.
    kubelets_on, native_room = False, True
    if mode == "auto" and apiserver_gate:
        kubelets_on, native_room = _native_reach(state, classes, pod)
    if mode in ("off", "native") or (kubelets_on and native_room):
        return decide_path(
            mode,
            apiserver_gate=apiserver_gate,
            kubelet_gate_on_dra_nodes=kubelets_on,
            device_plugin_nodes=False,
        )
    plugin_nodes = [
        n
        for n in set.intersection(*(state.nodes.serving(r) for r in classes))
        if n in state.nodes and _ready(state.nodes[n].hard_taints)
    ]
    if not plugin_nodes or force_rewrite:  # the counts below only matter in a mixed cluster
        return decide_path(
            mode,
            apiserver_gate=apiserver_gate,
            kubelet_gate_on_dra_nodes=kubelets_on,
            device_plugin_nodes=bool(plugin_nodes),
            force_rewrite=force_rewrite,
            native_room=native_room,
        )
    demand = device_demand(pod, classes) if pod is not None else {}
    want = {r: demand.get(r, 1) for r in classes}
    per_class = class_demand(classes, want)
    free = {cls: state.capacity.free(cls) for cls in per_class}
    total = {cls: state.capacity.total(cls) for cls in per_class}
    return decide_path(
        mode,
        apiserver_gate=apiserver_gate,
        kubelet_gate_on_dra_nodes=kubelets_on,
        device_plugin_nodes=True,
        native_room=native_room,
        dra_room=_fits_on_a_node(free, per_class),
        dra_devices=_fits_on_a_node(total, per_class),
        plugin_room=any(all(state.nodes[n].free.get(r, 0) >= want[r] for r in classes) for n in plugin_nodes),
    )


def _native_reach(state: ClusterState, classes: dict[str, str], pod: Obj | None) -> tuple[bool, bool]:
    """(some node that could serve the classes with DRA has the gate in its kubelet, the native path
    can serve the pod: no such node lacks the gate, or one that has it has free devices of every
    class for the pod's demand now). The common cases read little: a cluster whose DRA nodes all
    have the gate reads no counts of free devices; one mid-upgrade stops at the first node that fits."""
    class_names = set(classes.values())
    if not _kubelets_on(state, class_names):
        return False, False
    ungated = state.nodes.ungated
    if not any(_meets(ungated, state.capacity.total(cls)) for cls in class_names):
        return True, True
    demand = device_demand(pod, classes) if pod is not None else {}
    per_class = class_demand(classes, {r: demand.get(r, 1) for r in classes})
    free = {cls: state.capacity.free(cls) for cls in per_class}
    first, *rest = per_class
    for node_name, have in free[first].items():
        if have < per_class[first] or node_name in ungated or node_name not in state.nodes:
            continue
        if all(free[cls].get(node_name, 0) >= per_class[cls] for cls in rest):
            return True, True
    return True, False


def _meets(nodes: set[str], counts: Mapping[str, int]) -> bool:
    """Some of ``nodes`` has a count (walking the smaller of the two)."""
    if len(nodes) <= len(counts):
        return any(n in counts for n in nodes)
    return any(n in nodes for n in counts)


def _kubelets_on(state: ClusterState, classes: set[str]) -> bool:
    """Some node that could serve the classes with DRA has the gate in its kubelet. The DRA nodes
    are those with devices of the classes (every node when none has any yet); with no such node
    known, nothing says the kubelets lack the gate (the apiserver's answer decides). Stops at the
    first node with the gate on: the common case reads one node, not the cluster."""
    dra_nodes = False
    for cls in classes:
        for node_name in state.capacity.total(cls):
            dra_nodes = True
            info = state.nodes.get(node_name)
            if info is not None and info.kubelet_gate:
                return True
    if dra_nodes:
        return not any(n in state.nodes for cls in classes for n in state.capacity.total(cls))
    return not state.nodes or any(info.kubelet_gate for info in state.nodes.values())


def _fits_on_a_node(counts: Mapping[str, Mapping[str, int]], per_class: Mapping[str, int]) -> bool:
    """Some node has, for every class, at least the devices the pod asks of it."""
    first, *rest = per_class
    return any(
        all(counts[cls].get(n, 0) >= per_class[cls] for cls in rest) and have >= per_class[first]
        for n, have in counts[first].items()
    )


def _ready(taints: list[Obj]) -> bool:
    return not any(
        t.get("key") in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable") for t in taints
    )
