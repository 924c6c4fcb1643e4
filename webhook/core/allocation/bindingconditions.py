"""Whether an allocated claim lets its pod bind: KEP-5007's binding conditions, read from the claim.

Upstream's ``isClaimReadyForBinding`` (DynamicResources' PreBind): for every device result that
carries ``bindingConditions``, the claim's ``status.devices`` entry of that device (same driver,
pool and device: ``getAllocatedDeviceStatus`` compares no ``shareID``) must show each of them
``True``; any of the result's ``bindingFailureConditions`` ``True`` there means the binding failed.
A claim without an allocation is not ready. Pure: the worker calls it on the informers' copy of
the claim at each claim event.
"""

from __future__ import annotations

import json
from typing import Final

from ..api.objects import Obj, as_dict, as_list, name, status

#: Upstream's PreBind error once ``bindingTimeout`` passed without every condition True.
BINDING_TIMEOUT: Final = "device binding timeout"


class BindingFailed(Exception):
    """A binding failure condition is ``True``: the allocation must be released and retried."""


def has_binding_conditions(allocation: Obj | None) -> bool:
    """Whether any device result of ``status.allocation`` waits for binding conditions."""
    results = as_list(as_dict(as_dict(allocation).get("devices")).get("results"))
    return any(as_list(as_dict(r).get("bindingConditions")) for r in results)


def _device_status(claim: Obj, result: Obj) -> Obj | None:
    """``getAllocatedDeviceStatus``: the claim's first ``status.devices`` entry of this device."""
    wanted = (result.get("driver"), result.get("pool"), result.get("device"))
    for raw in as_list(status(claim).get("devices")):
        entry = as_dict(raw)
        if (entry.get("driver"), entry.get("pool"), entry.get("device")) == wanted:
            return entry
    return None


def _condition(conditions: list[Obj], kind: str) -> Obj | None:
    return next((c for c in conditions if c.get("type") == kind), None)


def ready_for_binding(claim: Obj) -> bool:
    """True when every binding condition of every device result is ``True``; False while any is
    not yet; ``BindingFailed`` (upstream's message) when a failure condition is ``True``."""
    allocation = status(claim).get("allocation")
    if not allocation:
        return False
    for raw in as_list(as_dict(as_dict(allocation).get("devices")).get("results")):
        result = as_dict(raw)
        wanted = [str(c) for c in as_list(result.get("bindingConditions"))]
        if not wanted:
            continue
        entry = _device_status(claim, result)
        if entry is None:
            return False
        conditions = [as_dict(c) for c in as_list(entry.get("conditions"))]
        for kind in as_list(result.get("bindingFailureConditions")):
            failed = _condition(conditions, str(kind))
            if failed is not None and failed.get("status") == "True":
                raise BindingFailed(
                    f"claim {name(claim)} binding failed: reason={failed.get('reason', '')}, "
                    f"message={json.dumps(str(failed.get('message', '')))}"
                )
        for kind in wanted:
            met = _condition(conditions, kind)
            if met is None or met.get("status") != "True":
                return False
    return True
