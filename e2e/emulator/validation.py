"""The few server-side checks the emulator makes, with the apiserver's field paths and messages.

Not a full validation: names, the pod update rules a scheduler-side component can trip over
(immutable spec, binding only through ``pods/binding``), immutable claim specs, a claim reserved only
once allocated, finalizers on a terminating object, webhooks' ``sideEffects``, and
``status.extendedResourceClaimStatus`` (KEP-5004).
"""

from __future__ import annotations

from typing import Any

from webhook.core.api.names import is_dns1123_label, is_dns1123_subdomain
from webhook.core.api.objects import Obj

from . import errors
from .errors import Cause
from .resources import ResourceType

POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
    "(allow it to be set to 1 if it was previously negative)"
)


def raise_if(rt: ResourceType, name: str, causes: list[Cause]) -> None:
    if causes:
        raise errors.invalid(rt.group, rt.kind, name, causes)


def object_meta(rt: ResourceType, obj: Obj) -> list[Cause]:
    """``ValidateObjectMeta``: a name (or generateName) that is a DNS subdomain (label for namespaces)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return [errors.required("metadata", "")]
    name = meta.get("name")
    if not name:
        if meta.get("generateName"):
            return []
        return [errors.required("metadata.name", "name or generateName is required")]
    if not isinstance(name, str):
        return [errors.invalid_value("metadata.name", name, "must be a string")]
    check = is_dns1123_label if rt.kind == "Namespace" else is_dns1123_subdomain
    causes = [errors.invalid_value("metadata.name", name, p) for p in check(name)]
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is not None and not (
            isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
        ):
            causes.append(errors.invalid_value(f"metadata.{key}", value, "must be a map of strings"))
    finalizers = meta.get("finalizers")
    if finalizers is not None and not (
        isinstance(finalizers, list) and all(isinstance(f, str) for f in finalizers)
    ):
        causes.append(errors.invalid_value("metadata.finalizers", finalizers, "must be a list of strings"))
    refs = meta.get("ownerReferences")
    if refs is not None and not (
        isinstance(refs, list) and all(isinstance(r, dict) and isinstance(r.get("uid"), str) for r in refs)
    ):
        causes.append(errors.invalid_value("metadata.ownerReferences", "", "each reference needs a uid"))
    return causes


def finalizers_on_terminating(old: Obj, new: Obj) -> list[Cause]:
    """No new finalizers may be added once ``deletionTimestamp`` is set."""
    if not old["metadata"].get("deletionTimestamp"):
        return []
    before = set(old["metadata"].get("finalizers") or [])
    added = [f for f in new["metadata"].get("finalizers") or [] if f not in before]
    if not added:
        return []
    shown = ", ".join(f'"{f}"' for f in added)
    return [
        errors.forbidden(
            "metadata.finalizers",
            "no new finalizers can be added if the object is being deleted, "
            f"found new finalizers []string{{{shown}}}",
        )
    ]


def _images_from(old: Any, new: Any) -> Any:
    """``new`` container list with each image taken from ``old`` (images may change)."""
    if not (isinstance(old, list) and isinstance(new, list) and len(old) == len(new)):
        return new
    out = []
    for o, n in zip(old, new, strict=True):
        if isinstance(o, dict) and isinstance(n, dict) and "image" in o:
            n = {**n, "image": o["image"]}
        out.append(n)
    return out


def pod_spec_update(old: Obj, new: Obj) -> list[Cause]:
    """``ValidatePodUpdate``: only images, deadlines, added tolerations and removed gates may change."""
    old_spec, new_spec = old.get("spec"), new.get("spec")
    if not isinstance(old_spec, dict) or not isinstance(new_spec, dict) or old_spec == new_spec:
        return []
    causes: list[Cause] = []
    relaxed = dict(new_spec)
    for field in ("containers", "initContainers"):
        if field in relaxed:
            relaxed[field] = _images_from(old_spec.get(field), relaxed[field])
    for field in ("activeDeadlineSeconds", "terminationGracePeriodSeconds"):
        relaxed.pop(field, None)
    old_tol = old_spec.get("tolerations") or []
    new_tol = relaxed.get("tolerations") or []
    if isinstance(new_tol, list) and all(t in new_tol for t in old_tol):
        relaxed.pop("tolerations", None)
    old_gates = old_spec.get("schedulingGates") or []
    new_gates = relaxed.get("schedulingGates") or []
    if isinstance(new_gates, list):
        added = [g for g in new_gates if g not in old_gates]
        if added:
            name = added[0].get("name") if isinstance(added[0], dict) else added[0]
            causes.append(
                errors.forbidden(
                    "spec.schedulingGates",
                    f"only deletion is allowed, but found new scheduling gate '{name}'",
                )
            )
        relaxed.pop("schedulingGates", None)
    baseline = {
        k: v
        for k, v in old_spec.items()
        if k
        not in ("activeDeadlineSeconds", "terminationGracePeriodSeconds", "tolerations", "schedulingGates")
    }
    if relaxed != baseline:
        causes.append(errors.forbidden("spec", POD_UPDATE_FORBIDDEN))
    return causes


def immutable_spec(old: Obj, new: Obj) -> list[Cause]:
    """``spec`` never changes after create (ResourceClaim)."""
    if old.get("spec") == new.get("spec"):
        return []
    return [errors.Cause("FieldValueInvalid", 'Invalid value: "object": field is immutable', "spec")]


def _requested(spec: Any) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    if not isinstance(spec, dict):
        return out
    for field in ("initContainers", "containers"):
        for c in spec.get(field) or []:
            if isinstance(c, dict) and isinstance(c.get("name"), str):
                resources = c.get("resources")
                requests = resources.get("requests") if isinstance(resources, dict) else None
                out[c["name"]] = set(requests) if isinstance(requests, dict) else set()
    return out


def extended_resource_claim_status(pod: Obj) -> list[Cause]:
    """``validatePodExtendedResourceClaimStatus`` (KEP-5004), checked against the new pod's spec."""
    status = pod.get("status")
    ercs = status.get("extendedResourceClaimStatus") if isinstance(status, dict) else None
    if ercs is None:
        return []
    base = "status.extendedResourceClaimStatus"
    if not isinstance(ercs, dict):
        return [errors.invalid_value(base, ercs, "must be an object")]
    causes: list[Cause] = []
    mappings = ercs.get("requestMappings")
    if not mappings:
        causes.append(errors.required(f"{base}.requestMappings", "at least one request mapping is required"))
    containers = _requested(pod.get("spec"))
    seen: set[tuple[str, str, str]] = set()
    for i, m in enumerate(mappings if isinstance(mappings, list) else []):
        path = f"{base}.requestMappings[{i}]"
        if not isinstance(m, dict):
            causes.append(errors.invalid_value(path, m, "must be an object"))
            continue
        cname, rname, qname = m.get("containerName"), m.get("resourceName"), m.get("requestName")
        if cname not in containers:
            causes.append(
                errors.invalid_value(
                    f"{path}.containerName",
                    cname,
                    "must match the name of an entry in spec.initContainers.name or spec.containers.name",
                )
            )
        elif rname not in containers[cname]:
            causes.append(
                errors.invalid_value(
                    f"{path}.resourceName",
                    rname,
                    "must match the extended resource name of an entry in "
                    "spec.initContainers.resources.requests or spec.containers.resources.requests",
                )
            )
        for problem in is_dns1123_label(qname) if isinstance(qname, str) else ["must be a string"]:
            causes.append(errors.invalid_value(f"{base}.requestName", qname, problem))
        triple = (cname, rname, qname)
        ident = (repr(cname), repr(rname), repr(qname))
        if ident in seen:
            for field, value in zip(("containerName", "resourceName", "requestName"), triple, strict=True):
                causes.append(
                    errors.Cause("FieldValueDuplicate", f'Duplicate value: "{value}"', f"{path}.{field}")
                )
        seen.add(ident)
    claim = ercs.get("resourceClaimName")
    if not claim:
        causes.append(errors.required(f"{base}.resourceClaimName", ""))
    elif isinstance(claim, str):
        causes.extend(
            errors.invalid_value(f"{base}.resourceClaimName", claim, p) for p in is_dns1123_subdomain(claim)
        )
    return causes


SIDE_EFFECTS = ("None", "NoneOnDryRun")


def webhooks(rt: ResourceType, obj: Obj) -> list[Cause]:
    """admissionregistration/v1: every webhook declares side effects none (on dry runs at least)."""
    if rt.kind not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        return []
    causes = []
    for i, hook in enumerate(obj.get("webhooks") or []):
        value = hook.get("sideEffects") if isinstance(hook, dict) else None
        path = f"webhooks[{i}].sideEffects"
        if value is None:
            causes.append(errors.required(path, ""))
        elif value not in SIDE_EFFECTS:
            supported = ", ".join(f'"{v}"' for v in SIDE_EFFECTS)
            causes.append(errors.not_supported(path, value, supported))
    return causes


def claim_status(claim: Obj) -> list[Cause]:
    """``status.reservedFor`` needs ``status.allocation``."""
    status = claim.get("status") if isinstance(claim.get("status"), dict) else {}
    assert isinstance(status, dict)
    if status.get("reservedFor") and not status.get("allocation"):
        return [errors.forbidden("status.reservedFor", "may not be specified when `allocated` is not set")]
    return []
