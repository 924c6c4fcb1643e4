"""Bound pods that run without the devices they asked for (issue 23): the kubelet admits a pod whose
DRA-backed name is missing from its node's allocatable even without a mapping, and then injects
nothing (kubernetes/kubernetes#135725, #135668). A pod placed by a scheduler without the
DRAExtendedResource gate, or with a mapping that names a claim or request that is not there, runs
without its GPU and nobody is told.

A bound, non-terminal pod is reported when a container asks for a name some DeviceClass backs, the
node's allocatable does not have that name (no device plugin serves it there), and the pod's
``status.extendedResourceClaimStatus`` has no mapping of that container and name to a request of an
allocated claim: the claim it names must exist, be allocated, and have the request. Whoever
scheduled the pod: the check reads only the cluster's state.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..api.objects import Obj, as_dict, as_list, name, namespace, spec, status, uid
from ..api.orphans import TERMINAL_PHASES
from ..api.quantity import try_parse
from ..cluster.state import ClusterState
from .requested import requested_extended


@dataclass(frozen=True, slots=True)
class NoDevices:
    """A bound pod's containers that asked for a DRA-backed name and have no device, and why."""

    namespace: str
    pod: str
    uid: str
    node: str
    missing: tuple[tuple[str, str], ...]  # (container, resource name)
    why: str

    def message(self) -> str:
        wanted = ", ".join(f"{c}: {r}" for c, r in self.missing)
        return (
            f"pod {self.namespace}/{self.pod} runs on {self.node} without the devices it asked for "
            f"({wanted}): {self.why}; its node's allocatable does not have the name, so the kubelet "
            "gives it no device. Delete the pod so that a scheduler with DRAExtendedResource (or "
            "draxr) places it again"
        )


def _asked(pod: Obj, backed: set[str]) -> list[tuple[str, str]]:
    """(container, name) for every container's non-zero request or limit of a name in ``backed``."""
    out: dict[tuple[str, str], None] = {}
    for group in ("initContainers", "containers"):
        for c in map(as_dict, as_list(spec(pod).get(group))):
            res = as_dict(c.get("resources"))
            for section in ("requests", "limits"):
                for key, value in as_dict(res.get(section)).items():
                    q = try_parse(value)
                    if key in backed and q is not None and q.value != 0:
                        out[(str(c.get("name")), key)] = None
    return list(out)


def _mapped(pod: Obj, state: ClusterState) -> tuple[set[tuple[str, str]], str]:
    """The (container, name) pairs a valid mapping covers, and what is wrong when some are not."""
    ercs = as_dict(status(pod).get("extendedResourceClaimStatus"))
    claim_name = ercs.get("resourceClaimName")
    if not ercs or not isinstance(claim_name, str) or not claim_name:
        return set(), "its status has no extendedResourceClaimStatus (its scheduler did not allocate them)"
    claim = state.allocated.claims.get((namespace(pod), claim_name))
    if claim is None:
        return set(), f'its mapping names ResourceClaim "{claim_name}", which does not exist'
    if not as_dict(status(claim).get("allocation")):
        return set(), f'its mapping names ResourceClaim "{claim_name}", which is not allocated'
    requests = {as_dict(r).get("name") for r in as_list(as_dict(spec(claim).get("devices")).get("requests"))}
    covered: set[tuple[str, str]] = set()
    for m in map(as_dict, as_list(ercs.get("requestMappings"))):
        if m.get("requestName") in requests:
            covered.add((str(m.get("containerName")), str(m.get("resourceName"))))
    return covered, f'its mapping to ResourceClaim "{claim_name}" has no request for them'


def pod_without_devices(pod: Obj, state: ClusterState) -> NoDevices | None:
    """The report for ``pod`` (None: nothing is missing, or it is not bound and running)."""
    node_name = spec(pod).get("nodeName")
    if not node_name or status(pod).get("phase") in TERMINAL_PHASES:
        return None
    names = requested_extended(pod)
    if not names:
        return None
    info = state.nodes.get(str(node_name))
    served = info.allocatable_names if info is not None else frozenset()
    backed = {n for n in names if n not in served and state.classes.class_name(n) is not None}
    if not backed:
        return None
    asked = _asked(pod, backed)
    covered, why = _mapped(pod, state)
    missing = tuple(a for a in asked if a not in covered)
    if not missing:
        return None
    return NoDevices(namespace(pod), name(pod), uid(pod), str(node_name), missing, why)


def pods_without_devices(pods: list[Obj], state: ClusterState) -> list[NoDevices]:
    """Every report among ``pods``, in their order."""
    return [r for p in pods if (r := pod_without_devices(p, state)) is not None]
