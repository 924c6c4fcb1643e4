"""Which path a pod asking for DRA-backed extended resources takes.

* ``native``: KEP-5004 as upstream defines it: the worker writes the special claim and the pod's
  request mapping (needs ``DRAExtendedResource`` on the apiserver and the node's kubelet);
* ``rewrite``: KEP-5004's "Option 1": the webhook turns the names into ordinary DRA claims;
* ``device-plugin``: left alone, for a node's device plugin that advertises the name (a rewritten
  pod could no longer use such nodes);
* ``none``: draxr does nothing (``--mode=off``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from .objects import Obj
from .state import ClusterState

Mode = Literal["auto", "native", "rewrite", "off"]
Path = Literal["native", "rewrite", "device-plugin", "none"]
MODES: Final = ("auto", "native", "rewrite", "off")


@dataclass(frozen=True, slots=True)
class PathChoice:
    path: Path
    why: str  # for the admission warning: short, no trailing period


def decide_path(
    mode: Mode,
    *,
    apiserver_gate: bool,
    kubelet_gate_on_dra_nodes: bool,
    device_plugin_nodes: bool,
    force_rewrite: bool = False,
) -> PathChoice:
    """The path of a pod asking for DRA-backed extended resources.

    ``kubelet_gate_on_dra_nodes``: some node that could serve the pod with DRA has its kubelet's
    gate on. ``device_plugin_nodes``: some Ready node advertises a name the pod asks for with
    allocatable > 0. A rewritten pod can no longer use device-plugin nodes, so the rewrite leaves
    such a pod to the device plugin unless ``force_rewrite``.
    """
    if mode == "off":
        return PathChoice("none", "draxr --mode=off")
    if mode == "native":
        return PathChoice("native", "draxr --mode=native")
    if mode == "auto" and apiserver_gate and kubelet_gate_on_dra_nodes:
        return PathChoice("native", "DRAExtendedResource is on in the apiserver and kubelets")
    if device_plugin_nodes and not force_rewrite:
        return PathChoice("device-plugin", "a node's device plugin advertises it (--force-rewrite to change)")
    if mode == "rewrite":
        return PathChoice("rewrite", "draxr --mode=rewrite")
    if not apiserver_gate:
        return PathChoice("rewrite", "DRAExtendedResource is off in the apiserver")
    return PathChoice("rewrite", "no DRA node's kubelet has DRAExtendedResource on")


def path_for(
    state: ClusterState,
    classes: dict[str, str],
    mode: Mode,
    *,
    apiserver_gate: bool,
    force_rewrite: bool = False,
) -> PathChoice:
    """``decide_path`` for a pod asking for ``classes`` (resource name -> DeviceClass), on the
    nodes ``state`` knows: DRA nodes are those with devices of the classes (every node when none
    has any yet; with no node at all, nothing speaks against the kubelets); device-plugin nodes
    are Ready nodes advertising a name with allocatable > 0."""
    dra_nodes: set[str] = set()
    for cls in set(classes.values()):
        dra_nodes |= set(state.capacity.total(cls))
    candidates = [n for n in (dra_nodes or set(state.nodes)) if n in state.nodes]
    # No node known yet: nothing says the kubelets lack the gate (the apiserver's answer decides).
    kubelets_on = not candidates or any(state.nodes[n].kubelet_gate for n in candidates)
    plugin_nodes = any(
        _ready(state.nodes[n].hard_taints)
        for r in classes
        for n in state.nodes.serving(r)
        if n in state.nodes
    )
    return decide_path(
        mode,
        apiserver_gate=apiserver_gate,
        kubelet_gate_on_dra_nodes=kubelets_on,
        device_plugin_nodes=plugin_nodes,
        force_rewrite=force_rewrite,
    )


def _ready(taints: list[Obj]) -> bool:
    return not any(
        t.get("key") in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable") for t in taints
    )
