"""Where ``DRAExtendedResource`` is on, and which path a pod takes because of it.

The native path needs the gate on kube-apiserver (else it drops ``spec.extendedResourceName`` and
``status.extendedResourceClaimStatus``) and on the kubelet of the node the pod runs on (else that
kubelet rejects a pod asking for an extended resource the node does not advertise, and never hands
it the devices). The gate is alpha and off in 1.34-1.35 and on by default from 1.36.

* kubelets: per node, from ``status.nodeInfo.kubeletVersion`` (>= 1.36: on); the node label
  ``draxr.io/extended-resource-gate: "on"|"off"`` overrides it for clusters that set the gate by
  hand. A node that reports no version (a test fixture, a manifest read offline) counts as on.
* the path per pod (``decide_path``): ``native`` (the worker writes the special claim and the
  mapping), ``rewrite`` (the webhook turns the names into DRA claims: KEP-5004's "Option 1"),
  ``device-plugin`` (left alone: a node's device plugin advertises the name), or ``none``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from .objects import Obj, as_dict, labels, status

GATE_LABEL: Final = "draxr.io/extended-resource-gate"
#: The first release whose kubelets have ``DRAExtendedResource`` on by default.
GATE_DEFAULT_ON: Final = (1, 36)

Mode = Literal["auto", "native", "rewrite", "off"]
Path = Literal["native", "rewrite", "device-plugin", "none"]
MODES: Final = ("auto", "native", "rewrite", "off")

_VERSION = re.compile(r"^v?(\d+)\.(\d+)")


def parse_version(text: object) -> tuple[int, int] | None:
    """``v1.35.4`` (or ``1.36.0-rc.1+abc``) -> (1, 35); None when unreadable."""
    if not isinstance(text, str):
        return None
    m = _VERSION.match(text.strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def kubelet_gate(node: Obj) -> bool:
    """Whether the node's kubelet has ``DRAExtendedResource`` on."""
    override = labels(node).get(GATE_LABEL)
    if override in ("on", "off"):
        return override == "on"
    version = parse_version(as_dict(status(node).get("nodeInfo")).get("kubeletVersion"))
    return version is None or version >= GATE_DEFAULT_ON


def version_gate(version: object) -> bool:
    """Whether a component of this version has the gate on by default (unknown: off)."""
    parsed = parse_version(version)
    return parsed is not None and parsed >= GATE_DEFAULT_ON


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
