"""Pods nominated to nodes (upstream's ``nominator`` in the scheduling queue): pending pods whose
``status.nominatedNodeName`` names a node, not bound, not finished.

kube-scheduler nominates the pods of its own queue (after preemption, or with
NominatedNodeNameForExpectation); draxr, one scheduler beside another, takes every pod the API shows
nominated, whoever nominated it, so that neither takes the room the other made for a pod. Only the
pod object is kept (a reference), by node; a decision reads the few of them on the nodes it visits.
A pod assumed by a decision of this process is no longer nominated (upstream deletes the nomination
when it assumes the pod): ``AllocatedState.nominated_for`` leaves it out.
"""

from __future__ import annotations

from ..api.objects import Obj, spec, status, uid

TERMINAL_PHASES = ("Succeeded", "Failed")


def nominated_node(pod: Obj) -> str:
    """The node a pending pod is nominated to, or ""."""
    if spec(pod).get("nodeName") or status(pod).get("phase") in TERMINAL_PHASES:
        return ""
    node = status(pod).get("nominatedNodeName")
    return node if isinstance(node, str) else ""


def priority(pod: Obj) -> int:
    """``corev1.PodPriority``: ``spec.priority``, 0 when unset."""
    p = spec(pod).get("priority")
    return p if isinstance(p, int) and not isinstance(p, bool) else 0


class Nominator:
    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, Obj]] = {}  # node -> pod uid -> pod
        self._node_of: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._node_of)

    def update(self, pod: Obj) -> None:
        """A pod's new version: nominated, or no longer."""
        pod_uid = uid(pod)
        self.remove(pod_uid)
        node = nominated_node(pod)
        if node:
            self._node_of[pod_uid] = node
            self._by_node.setdefault(node, {})[pod_uid] = pod

    def remove(self, pod_uid: str) -> None:
        node = self._node_of.pop(pod_uid, None)
        if node is None:
            return
        pods = self._by_node[node]
        del pods[pod_uid]
        if not pods:
            del self._by_node[node]

    def by_node(self) -> dict[str, dict[str, Obj]]:
        """Node -> the pods nominated to it, by uid (shared: do not change it)."""
        return self._by_node
