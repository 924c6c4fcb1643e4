"""PersistentVolume and PersistentVolumeClaim helpers shared by the scheduler's volume plugins and the
PV controller (``k8s.io/component-helpers/storage/volume`` and ``storage/ephemeral``,
``v1helper.MatchTopologySelectorTerms``): a claim's class, its binding state, a volume's node
affinity, the matching of an available volume to a claim, and the binding the PV controller makes.

Every function reads the objects as the API serves them (plain dicts) and changes none of them."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any, Final

from .labelselector import LabelSelectorError, label_selector_matches
from .nodematch import SelectorError, requirement_matches
from .objects import (
    Obj,
    annotations_of,
    as_dict,
    as_list,
    as_str,
    controller_ref,
    labels,
    meta,
    name,
    namespace,
    parse_time,
    spec,
    status,
    uid,
)
from .quantity import try_parse

#: Set by the scheduler on a claim it wants provisioned; its value is the node's name.
ANN_SELECTED_NODE: Final = "volume.kubernetes.io/selected-node"
#: The PV controller's mark on a claim whose binding is complete.
ANN_BIND_COMPLETED: Final = "pv.kubernetes.io/bind-completed"
#: The binding was made by a controller (or the scheduler), not pre-bound by a user.
ANN_BOUND_BY_CONTROLLER: Final = "pv.kubernetes.io/bound-by-controller"
#: ``v1.BetaStorageClassAnnotation``: read before ``storageClassName``.
BETA_STORAGE_CLASS: Final = "volume.beta.kubernetes.io/storage-class"
#: A StorageClass provisioner that means "no dynamic provisioning".
NOT_SUPPORTED_PROVISIONER: Final = "kubernetes.io/no-provisioner"
#: ``storageclass.kubernetes.io/is-default-class`` (and its beta twin): the DefaultStorageClass.
IS_DEFAULT_CLASS: Final = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)

WAIT_FOR_FIRST_CONSUMER: Final = "WaitForFirstConsumer"
IMMEDIATE: Final = "Immediate"
READ_WRITE_ONCE_POD: Final = "ReadWriteOncePod"
CLAIM_LOST: Final = "Lost"
VOLUME_AVAILABLE: Final = "Available"
FILESYSTEM: Final = "Filesystem"

#: ``CheckNodeAffinity``'s error when no term of the volume's node affinity matches.
NO_MATCHING_TERMS: Final = "no matching NodeSelectorTerms"


def claim_class(pvc: Any) -> str:
    """``GetPersistentVolumeClaimClass``: the beta annotation first, then ``storageClassName``
    ("" for none)."""
    ann = annotations_of(pvc)
    if BETA_STORAGE_CLASS in ann:
        return as_str(ann[BETA_STORAGE_CLASS])
    return as_str(spec(pvc).get("storageClassName"))


def volume_class(pv: Any) -> str:
    """``GetPersistentVolumeClass``: the beta annotation first, then ``storageClassName``."""
    ann = annotations_of(pv)
    if BETA_STORAGE_CLASS in ann:
        return as_str(ann[BETA_STORAGE_CLASS])
    return as_str(spec(pv).get("storageClassName"))


def volume_name(pvc: Any) -> str:
    """The PersistentVolume a claim names (``spec.volumeName``), "" for none."""
    return as_str(spec(pvc).get("volumeName"))


def is_fully_bound(pvc: Any) -> bool:
    """``isPVCFullyBound``: a volume name and the PV controller's bind-completed annotation."""
    return bool(volume_name(pvc)) and ANN_BIND_COMPLETED in annotations_of(pvc)


def storage_request(pvc: Any) -> Fraction:
    """``spec.resources.requests.storage`` (zero when missing or unreadable)."""
    q = try_parse(as_dict(as_dict(spec(pvc).get("resources")).get("requests")).get("storage"))
    return q.value if q is not None else Fraction(0)


def volume_capacity(pv: Any) -> Fraction:
    """``spec.capacity.storage`` (zero when missing or unreadable)."""
    q = try_parse(as_dict(spec(pv).get("capacity")).get("storage"))
    return q.value if q is not None else Fraction(0)


def access_modes(obj: Any) -> list[str]:
    return [m for m in as_list(spec(obj).get("accessModes")) if isinstance(m, str)]


def node_affinity_error(pv: Any, node_labels: Mapping[str, str]) -> str | None:
    """``CheckNodeAffinity``: None when the volume's required node affinity admits a node with
    these labels, else why not. As upstream, the node has labels only: a term's ``matchFields``
    never narrows it, a term that cannot be parsed is skipped (its errors are the answer when no
    other term matches), and an empty term matches nothing."""
    required = as_dict(spec(pv).get("nodeAffinity")).get("required")
    if not isinstance(required, dict):
        return None
    errors: list[str] = []
    for raw in as_list(required.get("nodeSelectorTerms")):
        term = as_dict(raw)
        exprs = as_list(term.get("matchExpressions"))
        if not exprs and not as_list(term.get("matchFields")):
            continue  # an empty term selects nothing
        try:
            if all(requirement_matches(as_dict(r), dict(node_labels)) for r in exprs):
                return None
        except SelectorError as e:
            errors.append(str(e))
    return "; ".join(errors) if errors else NO_MATCHING_TERMS


def match_topology_selector_terms(terms: Any, node_labels: Mapping[str, str]) -> bool:
    """``MatchTopologySelectorTerms`` (a StorageClass's ``allowedTopologies``): no terms admit every
    node; otherwise any term whose every expression has the node's value among its values."""
    terms_ = as_list(terms)
    if not terms_:
        return True
    for raw in terms_:
        exprs = as_list(as_dict(raw).get("matchLabelExpressions"))
        if not exprs:
            continue
        ok = True
        for e in exprs:
            ed = as_dict(e)
            values = [v for v in as_list(ed.get("values")) if isinstance(v, str)]
            k = ed.get("key")
            if not values or not isinstance(k, str) or node_labels.get(k) not in values:
                ok = False
                break
        if ok:
            return True
    return False


def check_access_modes(pvc: Any, pv: Any) -> bool:
    """``CheckAccessModes``: the volume offers every access mode the claim asks for."""
    offered = set(access_modes(pv))
    return all(m in offered for m in access_modes(pvc))


def volume_mode_mismatches(pvc: Any, pv: Any) -> bool:
    """``CheckVolumeModeMismatches`` (a missing mode is ``Filesystem``)."""
    return (as_str(spec(pvc).get("volumeMode")) or FILESYSTEM) != (
        as_str(spec(pv).get("volumeMode")) or FILESYSTEM
    )


def is_volume_bound_to_claim(pv: Any, pvc: Any) -> bool:
    """``IsVolumeBoundToClaim``: the volume's ``claimRef`` names the claim (and its uid, if any)."""
    ref = spec(pv).get("claimRef")
    if not isinstance(ref, dict):
        return False
    if ref.get("name") != name(pvc) or ref.get("namespace") != namespace(pvc):
        return False
    return not ref.get("uid") or ref.get("uid") == uid(pvc)


class MatchError(ValueError):
    """``FindMatchingVolume`` cannot read the claim (its selector): an error, not a mismatch."""


def find_matching_volume(
    pvc: Obj, volumes: Iterable[Obj], node_labels: Mapping[str, str], excluded: Iterable[str] = ()
) -> Obj | None:
    """``FindMatchingVolume`` on the scheduler's path (a node given, delayed binding, volume
    attributes classes on): the volume pre-bound to the claim when its node affinity admits the
    node (else none at all), otherwise the smallest available one of the claim's class whose
    capacity, volume mode, attributes class, labels (the claim's selector), node affinity and
    access modes fit. ``excluded``: names already chosen for the pod's other claims."""
    skip = set(excluded)
    requested = storage_request(pvc)
    requested_class = claim_class(pvc)
    selector = spec(pvc).get("selector")
    claim_vac = as_str(spec(pvc).get("volumeAttributesClassName"))
    if selector is not None:
        try:
            label_selector_matches(selector, {})
        except LabelSelectorError as e:
            raise MatchError(
                f"error creating internal label selector for claim: {namespace(pvc)}/{name(pvc)}: {e}"
            ) from None
    smallest: Obj | None = None
    smallest_size = Fraction(0)
    for pv in volumes:
        if name(pv) in skip:
            continue
        bound_here = is_volume_bound_to_claim(pv, pvc)
        if spec(pv).get("claimRef") is not None and not bound_here:
            continue
        size = volume_capacity(pv)
        if size < requested or volume_mode_mismatches(pvc, pv):
            continue
        if claim_vac != as_str(spec(pv).get("volumeAttributesClassName")):
            continue
        if meta(pv).get("deletionTimestamp"):
            continue
        affinity_ok = node_affinity_error(pv, node_labels) is None
        if bound_here:
            return pv if affinity_ok else None
        if status(pv).get("phase") != VOLUME_AVAILABLE:
            continue
        if selector is not None and not label_selector_matches(selector, labels(pv)):
            continue
        if volume_class(pv) != requested_class or not affinity_ok or not check_access_modes(pvc, pv):
            continue
        if smallest is None or smallest_size > size:
            smallest, smallest_size = pv, size
    return smallest


def claim_reference(pvc: Any) -> Obj:
    """``reference.GetReference`` of a claim: what a bound volume's ``claimRef`` holds."""
    ref: Obj = {"kind": "PersistentVolumeClaim", "namespace": namespace(pvc), "name": name(pvc)}
    ref["uid"] = uid(pvc)
    ref["apiVersion"] = "v1"
    rv = as_str(meta(pvc).get("resourceVersion"))
    if rv:
        ref["resourceVersion"] = rv
    return ref


def bind_volume_to_claim(pv: Obj, pvc: Obj) -> tuple[Obj, bool]:
    """``GetBindVolumeToClaim``: a copy of the volume bound to the claim (``claimRef``, and the
    bound-by-controller annotation unless the user pre-bound it), and whether anything changed."""
    was_bound = is_volume_bound_to_claim(pv, pvc)
    out = copy.deepcopy(pv)
    dirty = False
    ref = as_dict(spec(pv).get("claimRef"))
    if (
        not ref
        or ref.get("name") != name(pvc)
        or ref.get("namespace") != namespace(pvc)
        or as_str(ref.get("uid")) != uid(pvc)
    ):
        out.setdefault("spec", {})["claimRef"] = claim_reference(pvc)
        dirty = True
    if not was_bound and ANN_BOUND_BY_CONTROLLER not in annotations_of(out):
        out.setdefault("metadata", {}).setdefault("annotations", {})[ANN_BOUND_BY_CONTROLLER] = "yes"
        dirty = True
    return out, dirty


def with_selected_node(pvc: Obj, node: str) -> Obj:
    """A copy of the claim with ``volume.kubernetes.io/selected-node: <node>`` (what the scheduler
    assumes at Reserve and writes at PreBind for a claim to provision)."""
    out = copy.deepcopy(pvc)
    out.setdefault("metadata", {}).setdefault("annotations", {})[ANN_SELECTED_NODE] = node
    return out


def ephemeral_claim_name(pod: Any, volume: Any) -> str:
    """``ephemeral.VolumeClaimName``: ``<pod name>-<volume name>``."""
    return f"{name(pod)}-{as_str(as_dict(volume).get('name'))}"


def ephemeral_owner_error(pod: Any, pvc: Any) -> str | None:
    """``ephemeral.VolumeIsForPod``: None when the pod controls the claim, else upstream's error."""
    owner = controller_ref(pvc)
    if namespace(pvc) != namespace(pod) or owner is None or owner.get("uid") != uid(pod):
        return (
            f"PVC {namespace(pvc)}/{name(pvc)} was not created for pod "
            f"{namespace(pod)}/{name(pod)} (pod is not owner)"
        )
    return None


def is_default_class(storage_class: Any) -> bool:
    """``IsDefaultAnnotation``: the class is marked as the cluster's default."""
    ann = annotations_of(storage_class)
    return any(ann.get(k) == "true" for k in IS_DEFAULT_CLASS)


def default_class_name(classes: Iterable[Obj]) -> str | None:
    """``GetDefaultClass`` (the DefaultStorageClass admission plugin, and the PV controller's
    retroactive assignment): of the classes marked default, the newest, then by name."""
    defaults = [c for c in classes if is_default_class(c)]
    if not defaults:
        return None
    newest = max(parse_time(meta(c).get("creationTimestamp")) for c in defaults)
    return min(name(c) for c in defaults if parse_time(meta(c).get("creationTimestamp")) == newest)


def with_default_class(pvc: Obj, default: str | None) -> Obj:
    """The claim as the DefaultStorageClass admission plugin leaves it: a claim that names no class
    at all (not even ``""``) gets the default one, when there is one."""
    if default is None or "storageClassName" in spec(pvc) or BETA_STORAGE_CLASS in annotations_of(pvc):
        return pvc
    out = copy.deepcopy(pvc)
    out.setdefault("spec", {})["storageClassName"] = default
    return out
