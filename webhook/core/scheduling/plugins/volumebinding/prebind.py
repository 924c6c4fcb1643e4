"""What VolumeBinding's PreBind does with a decision's ``PodVolumes`` (upstream ``BindPodVolumes``), as
pure data and checks for the worker to execute.

1. ``api_writes``: the API writes, in upstream's order (``bindAPIUpdate``): first each statically
   bound volume (``claimRef`` to its claim, ``pv.kubernetes.io/bound-by-controller: "yes"`` unless
   the user pre-bound it), then each claim to provision (``volume.kubernetes.io/selected-node:
   <node>``, which the external provisioner waits for). Each is a JSON merge patch carrying the
   ``resourceVersion`` the decision read: it fails with a Conflict if the object changed since, as
   upstream's Update does. A failed write fails PreBind (the pod is unreserved and retried; writes
   already made are not undone, as upstream).
2. ``check_bindings``, every ``POLL_INTERVAL_SECONDS`` until it answers True or raises, for at most
   ``BIND_TIMEOUT_SECONDS`` (``VolumeBindingArgs.bindTimeoutSeconds``' default): the PV controller
   (and the provisioner) must have bound every claim, on the objects the API returns (not the
   assumed ones). Its errors, and the timeout's, are upstream's text (``prebind_error``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from ....api.objects import Obj, annotations_of, as_dict, as_str, labels, meta, name, namespace, spec
from ....api.pvhelpers import (
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    bind_volume_to_claim,
    is_fully_bound,
    node_affinity_error,
    volume_name,
)
from ....cluster.assumecache import resource_version
from ....cluster.volumes import PodVolumes
from .binder import NAME

#: ``VolumeBindingArgs.bindTimeoutSeconds``' default.
BIND_TIMEOUT_SECONDS: Final = 600
#: ``wait.PollUntilContextTimeout``'s interval in ``BindPodVolumes``.
POLL_INTERVAL_SECONDS: Final = 1
#: ``BindPodVolumes``' error once the timeout passes.
TIMED_OUT: Final = "binding volumes: context deadline exceeded"

Resource = Literal["persistentvolumes", "persistentvolumeclaims"]


@dataclass(frozen=True, slots=True)
class ApiWrite:
    """One write of PreBind: a JSON merge patch (``application/merge-patch+json``) to an object."""

    resource: Resource
    namespace: str  # "" for a PersistentVolume
    name: str
    patch: Obj


def api_writes(volumes: PodVolumes, node: str) -> list[ApiWrite]:
    """PreBind's writes for the decision's volumes on ``node``, in order."""
    writes: list[ApiWrite] = []
    for b in volumes.static:
        bound, _dirty = bind_volume_to_claim(b.pv, b.pvc)
        patch: Obj = {}
        rv = resource_version(b.pv)
        if rv:
            patch["metadata"] = {"resourceVersion": rv}
        if ANN_BOUND_BY_CONTROLLER in annotations_of(bound) and ANN_BOUND_BY_CONTROLLER not in annotations_of(
            b.pv
        ):
            patch.setdefault("metadata", {})["annotations"] = {ANN_BOUND_BY_CONTROLLER: "yes"}
        if spec(bound).get("claimRef") != spec(b.pv).get("claimRef"):
            patch["spec"] = {"claimRef": spec(bound)["claimRef"]}
        writes.append(ApiWrite("persistentvolumes", "", name(b.pv), patch))
    for p in volumes.dynamic:
        claim_patch: Obj = {"metadata": {"annotations": {ANN_SELECTED_NODE: node}}}
        rv = resource_version(p.pvc)
        if rv:
            claim_patch["metadata"]["resourceVersion"] = rv
        writes.append(ApiWrite("persistentvolumeclaims", namespace(p.pvc), name(p.pvc), claim_patch))
    return writes


@dataclass(frozen=True, slots=True)
class ClaimBinding:
    """How the decision binds one claim (``namespace/name``): provisioned on ``node`` (its selected
    node), or bound to the available ``volume``."""

    claim: str
    node: str
    volume: str | None = None

    def text(self) -> str:
        return f"volume {self.volume}" if self.volume else f"selected-node {self.node}"

    def to_api(self) -> dict[str, str]:
        how = {"volume": self.volume} if self.volume else {"selectedNode": self.node}
        return {"claim": self.claim, **how}


def claim_bindings(volumes: PodVolumes | None, node: str) -> list[ClaimBinding]:
    """The claims the decision binds on ``node``, in PreBind's order."""
    if volumes is None:
        return []
    out = [ClaimBinding(f"{namespace(b.pvc)}/{name(b.pvc)}", node, name(b.pv)) for b in volumes.static]
    out += [ClaimBinding(f"{namespace(p.pvc)}/{name(p.pvc)}", node) for p in volumes.dynamic]
    return out


class BindingFailed(Exception):
    """PreBind gives up: the pod is unreserved and retried. ``str()`` is ``BindPodVolumes``' error
    (``prebind_error`` adds the framework's prefix)."""


def prebind_error(message: str) -> str:
    """The framework's text for a failed PreBind of this plugin."""
    return f'running PreBind plugin "{NAME}": {message}'


#: Reads the API's current objects (the worker's informer caches): (namespace, name) -> claim, and
#: name -> volume, None when not there.
ClaimLookup = Callable[[str, str], Obj | None]
VolumeLookup = Callable[[str], Obj | None]


def check_bindings(
    pod: Obj,
    node_name: str,
    node: Obj | None,
    pod_exists: bool,
    written_volumes: list[tuple[Obj, Obj]],
    written_claims: list[Obj],
    get_claim: ClaimLookup,
    get_volume: VolumeLookup,
) -> bool:
    """``checkBindings``: True once every claim PreBind acted on is fully bound; False to poll
    again; raises ``BindingFailed`` when binding must be retried from scheduling.

    ``node``: the chosen node as the cache has it (None: gone); ``pod_exists``: the pod is still in
    the cache (a deleted pod cancels the binding);
    ``written_volumes``: (claim, the volume as the API returned it after PreBind's write);
    ``written_claims``: the claims as the API returned them after PreBind's write.
    """
    if node is None:
        raise BindingFailed(
            f'binding volumes: failed to get node "{node_name}": node "{node_name}" not found'
        )
    if not pod_exists:
        raise BindingFailed(f'binding volumes: pod does not exist any more: pod "{name(pod)}" not found')
    node_labels = labels(node)
    for pvc_written, pv_written in written_volumes:
        pv = get_volume(name(pv_written))
        if pv is None:
            raise BindingFailed(
                f'binding volumes: failed to check binding: persistentvolumes "{name(pv_written)}" not found'
            )
        key = f"{namespace(pvc_written)}/{name(pvc_written)}"
        pvc = get_claim(namespace(pvc_written), name(pvc_written))
        if pvc is None:
            raise BindingFailed(
                f'binding volumes: failed to check binding: persistentvolumeclaims "{key}" not found'
            )
        if _newer(pv_written, pv):
            return False
        _check_affinity(pv, node_name, node_labels)
        ref = spec(pv).get("claimRef")
        if not isinstance(ref, dict) or not as_str(ref.get("uid")):
            raise BindingFailed(f'binding volumes: ClaimRef got reset for pv "{name(pv)}"')
        if not is_fully_bound(pvc):
            return False
    for claim_written in written_claims:
        key = f"{namespace(claim_written)}/{name(claim_written)}"
        pvc = get_claim(namespace(claim_written), name(claim_written))
        if pvc is None:
            raise BindingFailed(
                f'binding volumes: failed to check provisioning pvc: persistentvolumeclaims "{key}" not found'
            )
        if _newer(claim_written, pvc):
            return False
        if not isinstance(meta(pvc).get("annotations"), dict):
            raise BindingFailed(f'binding volumes: selectedNode annotation reset for PVC "{name(pvc)}"')
        if as_dict(meta(pvc).get("annotations")).get(ANN_SELECTED_NODE, "") != node_name:
            raise BindingFailed(f'binding volumes: provisioning failed for PVC "{name(pvc)}"')
        if volume_name(pvc):
            pv = get_volume(volume_name(pvc))
            if pv is None:
                return False  # the volume may not have reached the cache yet
            _check_affinity(pv, node_name, node_labels)
        if not is_fully_bound(pvc):
            return False
    return True


def _newer(written: Obj, current: Obj) -> bool:
    """The object PreBind wrote is newer than the cache's (``CompareResourceVersion > 0``)."""
    try:
        return int(resource_version(written) or 0) > int(resource_version(current) or 0)
    except ValueError:
        return False


def _check_affinity(pv: Obj, node_name: str, node_labels: dict[str, str]) -> None:
    error = node_affinity_error(pv, node_labels)
    if error is not None:
        raise BindingFailed(
            f'binding volumes: pv "{name(pv)}" node affinity doesn\'t match node "{node_name}": {error}'
        )
