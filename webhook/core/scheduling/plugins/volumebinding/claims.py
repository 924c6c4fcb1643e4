"""VolumeBinding's PreFilter: the pod's claims (``podHasPVCs``, then ``GetPodVolumeClaims``).

A claim of a ``persistentVolumeClaim`` volume, or the claim a generic ephemeral volume makes
(``<pod>-<volume>``, which the pod must own), must exist, not be lost and not be deleting. A fully
bound claim (a volume name and the PV controller's bind-completed annotation) is checked by Filter
against its volume's node affinity; an unbound claim of a ``WaitForFirstConsumer`` class waits for
this pod (Filter binds or provisions it); any other unbound claim, pre-bound ones included, must be
bound by the PV controller first: the pod waits (``pod has unbound immediate
PersistentVolumeClaims``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from ....api.objects import Obj, as_str, is_terminating, name, namespace, status
from ....api.pvhelpers import (
    CLAIM_LOST,
    WAIT_FOR_FIRST_CONSUMER,
    claim_class,
    ephemeral_claim_name,
    ephemeral_owner_error,
    is_fully_bound,
    volume_name,
)
from ....cluster.podvolumes import CLAIMS, volumes_with
from ....cluster.state import ClusterState
from ....cluster.storageobjects import storage_class_mode
from ....cluster.volumes import PodVolumes
from ...framework import PreFilterFailed

#: The PreFilter reason of a pod with an unbound claim that is not waiting for its first consumer.
UNBOUND_IMMEDIATE: Final = "pod has unbound immediate PersistentVolumeClaims"


@dataclass(slots=True)
class BindingState:
    """Upstream's ``stateData``: the pod's claims by kind (``PodVolumeClaims``), and what Filter
    found on each node (``podVolumesByNode``)."""

    state: ClusterState
    pod: Obj
    bound: list[Obj]
    #: ``unboundClaimsDelayBinding``: unbound claims of ``WaitForFirstConsumer`` classes.
    delayed: list[Obj]
    #: ``unboundVolumesDelayBinding``: the volumes of the delayed claims' classes, by class.
    volumes: dict[str, list[Obj]]
    by_node: dict[str, PodVolumes] = field(default_factory=dict)


def pod_claims(pod: Obj) -> list[tuple[str, bool]]:
    """The claim names of the pod's volumes, in order, and whether each is an ephemeral one's."""
    vols = volumes_with(pod, CLAIMS)
    if not vols:
        return []
    out: list[tuple[str, bool]] = []
    for vol in vols:
        source = vol.get("persistentVolumeClaim")
        if isinstance(source, dict):
            out.append((as_str(source.get("claimName")), False))
        elif isinstance(vol.get("ephemeral"), dict):
            out.append((ephemeral_claim_name(pod, vol), True))
    return out


def pre_filter(state: ClusterState, pod: Obj) -> BindingState | None:
    """None (Skip) for a pod without claims; raises ``PreFilterFailed`` with upstream's reason."""
    if not state.volumes.watched:
        return None
    claims = pod_claims(pod)
    if not claims:
        return None
    ns = namespace(pod)
    found: list[Obj] = []
    for claim_name, ephemeral in claims:
        pvc = state.volumes.claim(ns, claim_name)
        if pvc is None:
            if ephemeral:
                raise PreFilterFailed(
                    "waiting for ephemeral volume controller to create the persistentvolumeclaim "
                    f'"{claim_name}"'
                )
            raise PreFilterFailed(f'persistentvolumeclaim "{claim_name}" not found')
        if status(pvc).get("phase") == CLAIM_LOST:
            raise PreFilterFailed(
                f'persistentvolumeclaim "{name(pvc)}" bound to non-existent '
                f'persistentvolume "{volume_name(pvc)}"'
            )
        if is_terminating(pvc):
            raise PreFilterFailed(f'persistentvolumeclaim "{name(pvc)}" is being deleted')
        if ephemeral:
            error = ephemeral_owner_error(pod, pvc)
            if error is not None:
                raise PreFilterFailed(error)
        found.append(pvc)
    bound: list[Obj] = []
    delayed: list[Obj] = []
    immediate = False
    for pvc in found:
        if is_fully_bound(pvc):
            bound.append(pvc)
        elif is_delay_binding_mode(state, pvc) and not volume_name(pvc):
            delayed.append(pvc)
        else:
            immediate = True
    if immediate:
        raise PreFilterFailed(UNBOUND_IMMEDIATE)
    volumes = {claim_class(pvc): state.volumes.volumes_of_class(claim_class(pvc)) for pvc in delayed}
    return BindingState(state, pod, bound, delayed, volumes)


def is_delay_binding_mode(state: ClusterState, pvc: Obj) -> bool:
    """``IsDelayBindingMode``: the claim's class exists and waits for the first consumer."""
    class_name = claim_class(pvc)
    if not class_name:
        return False
    sc = state.volumes.storage_classes.get(class_name)
    return sc is not None and storage_class_mode(sc) == WAIT_FOR_FIRST_CONSUMER
