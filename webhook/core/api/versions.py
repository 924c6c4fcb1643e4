"""resource.k8s.io objects of every served version in the ``v1`` shape, at one boundary.

Clusters on 1.34-1.35 serve ``resource.k8s.io/v1beta1`` and ``v1beta2`` besides ``v1``, and users
keep manifests in those versions. ``to_v1`` converts one object the way the API server does (the
versioned object to the internal type, which ``v1`` mirrors field for field); the loader, the
informers and the admission review call it, so nothing past them sees a version. The core reads
``v1`` only.

What differs, kind by kind (upstream ``pkg/apis/resource/<version>/conversion.go`` for the manual
rules, ``zz_generated.conversion.go`` for the rest; the JSON names are those of
``staging/src/k8s.io/api/resource/<version>/types.go``):

* **v1beta2**: nothing. Every v1beta2 <-> internal conversion is a generated field copy
  (``v1beta2/conversion.go`` has only a field-label function), and so is every v1 one: the two
  shapes are the same, only ``apiVersion`` changes.
* **v1beta1 ResourceSlice** (``Convert_v1beta1_ResourceSliceSpec_To_resource_ResourceSliceSpec``):
  ``spec.nodeName`` and ``spec.allNodes`` are a plain string and bool in v1beta1, pointers in v1;
  ``""`` and ``false`` become unset. ``pool``, ``nodeSelector``, ``perDeviceNodeSelection`` and
  ``sharedCounters`` are copied as they are.
* **v1beta1 Device** (``Convert_v1beta1_Device_To_resource_Device``): the device is
  ``{name, basic: {...}}``; v1 has the ``BasicDevice`` fields on the device itself. Upstream copies
  ``attributes`` and ``capacity`` only when non-empty, ``consumesCounters`` and ``taints`` only when
  they have entries, and ``nodeName``, ``nodeSelector``, ``allNodes``, ``bindsToNode``,
  ``bindingConditions``, ``bindingFailureConditions`` and ``allowMultipleAllocations`` as they
  are. Values are not reshaped: v1beta1 ``DeviceCapacity`` is already ``{value, requestPolicy}``
  (only v1alpha3 had a bare quantity) and ``DeviceAttribute``, ``DeviceTaint`` and
  ``DeviceCounterConsumption`` are generated copies. A device without ``basic`` keeps only its name.
* **v1beta1 DeviceRequest** (``Convert_v1beta1_DeviceRequest_To_resource_DeviceRequest``): the
  exact-request fields sit on the request itself. When any of them is set
  (``hasAnyMainRequestFieldsSet``: ``deviceClassName`` not empty, ``selectors`` not null,
  ``allocationMode`` not empty, ``count`` not 0, ``adminAccess``, ``tolerations`` or ``capacity``
  not null) they move into ``exactly`` (``tolerations`` only with entries), even beside
  ``firstAvailable``, which validation then rejects. ``name`` and ``firstAvailable`` stay; the
  sub-requests are the same in every version. This applies to ResourceClaim ``spec`` and
  ResourceClaimTemplate ``spec.spec``; ``constraints`` and ``config`` are copies.
* **v1beta1 ResourceClaim status** (allocation results, ``reservedFor``, device statuses) and
  **DeviceClass**: generated copies, only ``apiVersion`` changes.
* **DeviceTaintRule** (v1alpha3 up to 1.35, v1beta2 in 1.36, v1 in 1.37): within a release every
  version has the same fields (``v1alpha3/conversion.go`` and ``v1beta2/conversion.go`` add nothing
  to the generated copies; 1.35 removed ``deviceSelector.deviceClassName`` and ``selectors`` from
  all of them, ``core.taintrules`` reports those), and the cluster may not serve v1 at all: it is
  returned as it is.

Where the shape changes (a v1beta1 device, a v1beta1 request) the result is built from the fields
upstream converts, so anything else there is dropped, as the API server's decoder drops unknown
fields; everything around them is kept as it is. Other versions (a v1alpha3 ResourceSlice), other
kinds and other groups are returned untouched, and so is every v1 object, at the cost of one
comparison. The input is never mutated; the result shares the parts that need no change with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from .objects import Obj

GROUP: Final = "resource.k8s.io"
V1: Final = f"{GROUP}/v1"
V1BETA1: Final = f"{GROUP}/v1beta1"
V1BETA2: Final = f"{GROUP}/v1beta2"

#: ``BasicDevice``'s fields (v1beta1 ``types.go``), each a field of the v1 ``Device`` of that name.
BASIC_DEVICE_FIELDS: Final = (
    "attributes",
    "capacity",
    "consumesCounters",
    "nodeName",
    "nodeSelector",
    "allNodes",
    "taints",
    "bindsToNode",
    "bindingConditions",
    "bindingFailureConditions",
    "allowMultipleAllocations",
)
#: Copied only when they have entries (upstream builds them from a loop or checks ``len > 0``).
_ONLY_WITH_ENTRIES: Final = frozenset({"attributes", "capacity", "consumesCounters", "taints"})
#: v1beta1 ``DeviceRequest`` fields that v1 keeps in ``ExactDeviceRequest``.
EXACT_REQUEST_FIELDS: Final = (
    "deviceClassName",
    "selectors",
    "allocationMode",
    "count",
    "adminAccess",
    "tolerations",
    "capacity",
)


def to_v1(obj: Obj) -> Obj:
    """``obj`` in the ``resource.k8s.io/v1`` shape; anything else (and v1 itself) as it is."""
    api_version = obj.get("apiVersion")
    if api_version == V1 or (api_version != V1BETA1 and api_version != V1BETA2):
        return obj
    kind = obj.get("kind")
    if not isinstance(kind, str) or kind not in _SPEC_CONVERSIONS:
        return obj
    out = {**obj, "apiVersion": V1}
    convert = _SPEC_CONVERSIONS[kind] if api_version == V1BETA1 else None
    spec = obj.get("spec")
    if convert is not None and isinstance(spec, dict):
        out["spec"] = convert(spec)
    return out


# --- v1beta1 ---------------------------------------------------------------------------------


def _slice_spec(spec: Obj) -> Obj:
    """``Convert_v1beta1_ResourceSliceSpec_To_resource_ResourceSliceSpec``."""
    out = dict(spec)
    if out.get("nodeName") == "":
        del out["nodeName"]
    if out.get("allNodes") is False:
        del out["allNodes"]
    devices = spec.get("devices")
    if isinstance(devices, list):
        out["devices"] = [_device(d) for d in devices]
    return out


def _device(device: Any) -> Any:
    """``Convert_v1beta1_Device_To_resource_Device``: ``basic``'s fields onto the device."""
    if not isinstance(device, dict):
        return device  # a wrong type stays for the type checks to name
    out: Obj = {}
    if "name" in device:
        out["name"] = device["name"]
    basic = device.get("basic")
    if isinstance(basic, dict):
        for key in BASIC_DEVICE_FIELDS:
            value = basic.get(key)
            if value is None or (key in _ONLY_WITH_ENTRIES and _empty(value)):
                continue
            out[key] = value
    return out


def _claim_spec(spec: Obj) -> Obj:
    """``ResourceClaimSpec``: its ``devices.requests`` converted."""
    devices = spec.get("devices")
    if not isinstance(devices, dict):
        return spec
    requests = devices.get("requests")
    if not isinstance(requests, list):
        return spec
    return {**spec, "devices": {**devices, "requests": [_request(r) for r in requests]}}


def _template_spec(spec: Obj) -> Obj:
    """``ResourceClaimTemplateSpec``: ``metadata`` and a claim ``spec``."""
    inner = spec.get("spec")
    if not isinstance(inner, dict):
        return spec
    return {**spec, "spec": _claim_spec(inner)}


def _request(request: Any) -> Any:
    """``Convert_v1beta1_DeviceRequest_To_resource_DeviceRequest``."""
    if not isinstance(request, dict):
        return request
    out: Obj = {}
    if "name" in request:
        out["name"] = request["name"]
    if request.get("firstAvailable") is not None:
        out["firstAvailable"] = request["firstAvailable"]
    if _has_exact_fields(request):
        exactly: Obj = {}
        for key in EXACT_REQUEST_FIELDS:
            value = request.get(key)
            if value is None or (key in ("allocationMode", "count") and _zero(value)):
                continue  # omitempty zero values
            if key == "tolerations" and _empty(value):
                continue  # built by a loop: no entries, no field
            exactly[key] = value
        out["exactly"] = exactly
    return out


def _has_exact_fields(request: Obj) -> bool:
    """``hasAnyMainRequestFieldsSet``."""
    return (
        request.get("deviceClassName") not in (None, "")
        or request.get("selectors") is not None
        or request.get("allocationMode") not in (None, "")
        or not _zero(request.get("count"))
        or request.get("adminAccess") is not None
        or request.get("tolerations") is not None
        or request.get("capacity") is not None
    )


def _zero(value: Any) -> bool:
    """Go's zero value of a string or integer field (absent or null counts as zero)."""
    return value is None or value == "" or (type(value) is int and value == 0)


def _empty(value: Any) -> bool:
    return isinstance(value, dict | list) and not value


_SPEC_CONVERSIONS: Final[dict[str, Callable[[Obj], Obj] | None]] = {
    "ResourceSlice": _slice_spec,
    "ResourceClaim": _claim_spec,
    "ResourceClaimTemplate": _template_spec,
    "DeviceClass": None,
}
