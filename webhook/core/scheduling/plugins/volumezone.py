"""VolumeZone: the zone and region labels of the PersistentVolumes bound to the pod's claims must
match the node's (upstream ``volumezone``). A volume's label may list several zones
(``zone-a__zone-b``); a beta label on the volume also matches the GA label on the node. A node with
no topology label at all takes any pod (a single-zone cluster whose nodes carry none).

PreFilter reads the pod's ``persistentVolumeClaim`` volumes: a claim still unbound in a
``WaitForFirstConsumer`` class is skipped (VolumeBinding provisions it where the pod goes); any other
unbound claim, or a missing claim, class or volume, fails the pod with upstream's message. A pod
with no bound volume carrying such a label is skipped."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ...api.objects import Obj, as_dict, as_str, labels, namespace
from ...api.pvhelpers import WAIT_FOR_FIRST_CONSUMER, claim_class, volume_name
from ...cluster.nodeinfo import NodeInfo
from ...cluster.podvolumes import CLAIM, volumes_with
from ...cluster.state import ClusterState
from ...cluster.storageobjects import storage_class_mode
from ..framework import FilterPlugin, PreFilterFailed

NAME: Final = "VolumeZone"
#: ``ErrReasonConflict``.
CONFLICT: Final = "node(s) had no available volume zone"

BETA_ZONE: Final = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION: Final = "failure-domain.beta.kubernetes.io/region"
ZONE: Final = "topology.kubernetes.io/zone"
REGION: Final = "topology.kubernetes.io/region"
#: ``topologyLabels``, in upstream's order.
TOPOLOGY_LABELS: Final = (BETA_ZONE, BETA_REGION, ZONE, REGION)
_GA: Final = {BETA_REGION: REGION, BETA_ZONE: ZONE}


@dataclass(frozen=True, slots=True)
class PVTopology:
    """``pvTopology``: one topology label of a bound volume, and the values it allows."""

    pv_name: str
    key: str
    values: frozenset[str]


def label_zones(value: str) -> frozenset[str] | None:
    """``volumehelpers.LabelZonesToSet``: ``a__b`` to {a, b}; None (the label is ignored) when a
    zone is empty."""
    zones = value.split("__")
    if any(not z.strip() for z in zones):
        return None
    return frozenset(z.strip() for z in zones)


def pv_topologies(pv: Obj) -> list[PVTopology]:
    """``getPVTopologies``: the volume's topology labels."""
    out: list[PVTopology] = []
    pv_labels = labels(pv)
    for key in TOPOLOGY_LABELS:
        value = pv_labels.get(key)
        if value is None:
            continue
        zones = label_zones(value)
        if zones is not None:
            out.append(PVTopology(as_str(as_dict(pv.get("metadata")).get("name")), key, zones))
    return out


def pre_filter(state: ClusterState, pod: Obj) -> list[PVTopology] | None:
    """``getPVbyPod``; None (Skip) when no bound volume of the pod has a topology label."""
    if not state.volumes.watched:
        return None
    vols = volumes_with(pod, CLAIM)
    if not vols:
        return None
    topologies: list[PVTopology] = []
    ns = namespace(pod)
    for vol in vols:
        source = vol.get("persistentVolumeClaim")
        if not isinstance(source, dict):
            continue
        claim_name = as_str(source.get("claimName"))
        if not claim_name:
            raise PreFilterFailed("PersistentVolumeClaim had no name")
        pvc = state.volumes.claim(ns, claim_name)
        if pvc is None:
            raise PreFilterFailed(f'persistentvolumeclaim "{claim_name}" not found')
        pv_name = volume_name(pvc)
        if not pv_name:
            class_name = claim_class(pvc)
            if not class_name:
                raise PreFilterFailed("PersistentVolumeClaim had no pv name and storageClass name")
            sc = state.volumes.storage_classes.get(class_name)
            if sc is None:
                raise PreFilterFailed(f'storageclass.storage.k8s.io "{class_name}" not found')
            if storage_class_mode(sc) == WAIT_FOR_FIRST_CONSUMER:
                continue
            raise PreFilterFailed("PersistentVolume had no name")
        pv = state.volumes.volume(pv_name)
        if pv is None:
            raise PreFilterFailed(f'persistentvolume "{pv_name}" not found')
        topologies.extend(pv_topologies(pv))
    return topologies or None


def filter_node(topologies: list[PVTopology], _node: str, info: NodeInfo) -> str | None:
    node_labels = labels(info.node)
    if not any(k in node_labels for k in TOPOLOGY_LABELS):
        return None
    for t in topologies:
        value = node_labels.get(t.key)
        if value is None:
            value = node_labels.get(_GA.get(t.key, t.key))
        if value is None or value not in t.values:
            return CONFLICT
    return None


FILTER: Final = FilterPlugin(NAME, pre_filter, filter_node)
