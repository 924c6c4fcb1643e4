"""VolumeBinding's Filter on one node (``FindPodVolumes``): what binding the pod's claims there takes,
or why the node cannot take them.

* A bound claim's volume must exist (else ``node(s) unavailable due to one or more pvc(s) bound to
  non-existent pv(s)``) and admit the node (``node(s) didn't match PersistentVolume's node
  affinity``).
* A waiting claim already given a node (``volume.kubernetes.io/selected-node``: another pod of it
  was placed, or a provisioning is in flight) admits that node only.
* The others, smallest request first, each take the smallest available volume that fits them on this
  node (``FindMatchingVolume``), none taken twice; a claim that finds none is provisioned, if its
  class has a provisioner that can and its ``allowedTopologies`` admit the node (else ``node(s)
  didn't find available persistent volumes to bind``), and, for a CSI driver that tracks storage
  capacity (``CSIDriver.spec.storageCapacity``), a CSIStorageCapacity of the class that the node
  reaches has room for it (else ``node(s) did not have enough free storage``).

The node's reasons come in upstream's order; errors (a class missing under a waiting claim, a claim
selector that cannot be read) raise ``PluginError``. Where upstream takes whichever comes first of
equals (volumes of the same size, capacities that all have room), draxr takes the first by name, so
a decision depends on the state alone. A bound in-tree volume's node affinity is checked as written:
upstream first translates it to its CSI driver's topology keys when the node's CSINode lists the
plugin as migrated, which only renames keys the node carries both of."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

from ....api.labelselector import LabelSelectorError, label_selector_matches
from ....api.objects import Obj, annotations_of, as_dict, as_str, labels, name, namespace, spec
from ....api.pvhelpers import (
    ANN_SELECTED_NODE,
    NOT_SUPPORTED_PROVISIONER,
    MatchError,
    claim_class,
    find_matching_volume,
    match_topology_selector_terms,
    node_affinity_error,
    storage_request,
    volume_name,
)
from ....api.quantity import try_parse
from ....cluster.nodeinfo import NodeInfo
from ....cluster.volumes import DynamicProvision, PodVolumes, StaticBinding
from ...framework import PluginError
from .claims import BindingState

NAME: Final = "VolumeBinding"
#: ``ErrReasonBindConflict``.
BIND_CONFLICT: Final = "node(s) didn't find available persistent volumes to bind"
#: ``ErrReasonNodeConflict``.
NODE_CONFLICT: Final = "node(s) didn't match PersistentVolume's node affinity"
#: ``ErrReasonNotEnoughSpace``.
NOT_ENOUGH_SPACE: Final = "node(s) did not have enough free storage"
#: ``ErrReasonPVNotExist``.
PV_NOT_EXIST: Final = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"


def _error(message: str) -> PluginError:
    return PluginError(f'running "{NAME}" filter plugin: {message}')


def find_pod_volumes(pre: BindingState, node: str, info: NodeInfo) -> tuple[PodVolumes, list[str]]:
    """The pod's volumes on the node and the node's reasons (none: it fits)."""
    volumes = PodVolumes()
    node_labels = labels(info.node)
    bound_ok = found = unbound_ok = storage_ok = True
    if pre.bound:
        bound_ok, found = _check_bound_claims(pre, node_labels)
    if pre.delayed:
        unbound_ok, storage_ok = _bind_or_provision(pre, node, node_labels, volumes)
    reasons: list[str] = []
    if not bound_ok:
        reasons.append(NODE_CONFLICT)
    if not unbound_ok:
        reasons.append(BIND_CONFLICT)
    if not storage_ok:
        reasons.append(NOT_ENOUGH_SPACE)
    if not found:
        reasons.append(PV_NOT_EXIST)
    return volumes, reasons


def _check_bound_claims(pre: BindingState, node_labels: Mapping[str, str]) -> tuple[bool, bool]:
    """``checkBoundClaims``: (node affinity satisfied, every volume found)."""
    for pvc in pre.bound:
        pv = pre.state.volumes.volume(volume_name(pvc))
        if pv is None:
            return True, False
        if node_affinity_error(pv, node_labels) is not None:
            return False, True
    return True, True


def _bind_or_provision(
    pre: BindingState, node: str, node_labels: Mapping[str, str], volumes: PodVolumes
) -> tuple[bool, bool]:
    """(every waiting claim satisfied, enough storage), filling ``volumes``."""
    to_match: list[Obj] = []
    to_provision: list[Obj] = []
    for pvc in pre.delayed:
        ann = annotations_of(pvc)
        if ANN_SELECTED_NODE in ann:
            if ann[ANN_SELECTED_NODE] != node:
                return False, True  # upstream's fast path: skip a node the claim was not given
            to_provision.append(pvc)
        else:
            to_match.append(pvc)
    satisfied = True
    if to_match:
        satisfied, unmatched = _find_matching_volumes(pre, to_match, node_labels, volumes)
        to_provision += unmatched
    if to_provision:
        return _check_volume_provisions(pre, to_provision, node_labels, volumes)
    return satisfied, True


def _find_matching_volumes(
    pre: BindingState, claims: list[Obj], node_labels: Mapping[str, str], volumes: PodVolumes
) -> tuple[bool, list[Obj]]:
    """``findMatchingVolumes``: (every claim matched, the claims left to provision)."""
    chosen: list[str] = []
    unmatched: list[Obj] = []
    for pvc in sorted(claims, key=storage_request):  # smallest request first (a stable sort)
        try:
            pv = find_matching_volume(pvc, pre.volumes.get(claim_class(pvc), []), node_labels, chosen)
        except (MatchError, LabelSelectorError) as e:
            raise _error(str(e)) from None
        if pv is None:
            unmatched.append(pvc)
            continue
        chosen.append(name(pv))
        volumes.static.append(StaticBinding(pvc, pv))
    return not unmatched, unmatched


def _check_volume_provisions(
    pre: BindingState, claims: list[Obj], node_labels: Mapping[str, str], volumes: PodVolumes
) -> tuple[bool, bool]:
    """``checkVolumeProvisions``: (provisioning possible here, enough storage)."""
    found: list[DynamicProvision] = []
    for pvc in claims:
        class_name = claim_class(pvc)
        if not class_name:
            raise _error(f'no class for claim "{namespace(pvc)}/{name(pvc)}"')
        sc = pre.state.volumes.storage_classes.get(class_name)
        if sc is None:
            raise _error(f'failed to find storage class "{class_name}"')
        provisioner = as_str(sc.get("provisioner"))
        if not provisioner or provisioner == NOT_SUPPORTED_PROVISIONER:
            return False, True
        if not match_topology_selector_terms(sc.get("allowedTopologies"), node_labels):
            return False, True
        sufficient, capacity = has_enough_capacity(pre, provisioner, pvc, class_name, node_labels)
        if not sufficient:
            return True, False
        found.append(DynamicProvision(pvc, capacity))
    volumes.dynamic.extend(found)
    return True, True


def has_enough_capacity(
    pre: BindingState, provisioner: str, pvc: Obj, class_name: str, node_labels: Mapping[str, str]
) -> tuple[bool, Obj | None]:
    """``hasEnoughCapacity``: (room for the claim, the CSIStorageCapacity that has it). Only for a
    CSI driver that opts in; a claim without a storage request always fits."""
    requests = as_dict(as_dict(spec(pvc).get("resources")).get("requests"))
    if "storage" not in requests:
        return True, None
    driver = pre.state.volumes.csi_drivers.get(provisioner)
    if driver is None or as_dict(driver.get("spec")).get("storageCapacity") is not True:
        return True, None
    size = math.ceil(storage_request(pvc))
    for capacity in pre.state.volumes.capacities_of_class(class_name):
        limit = volume_limit(capacity)
        if limit is not None and limit >= size and node_has_access(capacity, node_labels):
            return True, capacity
    return False, None


def volume_limit(capacity: Obj) -> int | None:
    """``volumeLimit``: ``maximumVolumeSize`` when set (more precise), else ``capacity``."""
    for key in ("maximumVolumeSize", "capacity"):
        q = try_parse(capacity.get(key))
        if q is not None:
            return q.ceil()
    return None


def node_has_access(capacity: Obj, node_labels: Mapping[str, str]) -> bool:
    """``nodeHasAccess``: the capacity's ``nodeTopology`` selects the node (none: unavailable)."""
    topology = capacity.get("nodeTopology")
    if not isinstance(topology, dict):
        return False
    try:
        return label_selector_matches(topology, node_labels)
    except LabelSelectorError:
        return False
