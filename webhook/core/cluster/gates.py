"""Where ``DRAExtendedResource`` is on, and which path a pod takes because of it.

The native path needs the gate on kube-apiserver (else it drops ``spec.extendedResourceName`` and
``status.extendedResourceClaimStatus``) and on the kubelet of the node the pod runs on (else that
kubelet rejects a pod asking for an extended resource the node does not advertise, and never hands
it the devices). The gate is alpha and off in 1.34-1.35 and on by default from 1.36.

* kubelets: per node, from ``status.nodeInfo.kubeletVersion`` (>= 1.36: on); the node label
  ``draxr.io/extended-resource-gate: "on"|"off"`` overrides it for clusters that set the gate by
  hand. A node that reports no version (a test fixture, a manifest read offline) counts as on.

Which path a pod takes because of it is ``core/paths/choice.py``'s business.
"""

from __future__ import annotations

import re
from typing import Final

from ..api.objects import Obj, as_dict, labels, status

GATE_LABEL: Final = "draxr.io/extended-resource-gate"
#: The first release whose kubelets have ``DRAExtendedResource`` on by default.
GATE_DEFAULT_ON: Final = (1, 36)


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


#: The first release with ``DRADeviceBindingConditions`` (and ``DRAResourceClaimDeviceStatus``) on by
#: default: KEP-5007 is alpha and off in 1.34 and 1.35, beta and on from 1.36.
BINDING_CONDITIONS_DEFAULT_ON: Final = (1, 36)


def binding_conditions_gate(version: object) -> bool:
    """Whether kube-scheduler of this release honours devices' binding conditions (unknown: off)."""
    parsed = parse_version(version)
    return parsed is not None and parsed >= BINDING_CONDITIONS_DEFAULT_ON


def version_gate(version: object) -> bool:
    """Whether a component of this version has the gate on by default (unknown: off)."""
    parsed = parse_version(version)
    return parsed is not None and parsed >= GATE_DEFAULT_ON
