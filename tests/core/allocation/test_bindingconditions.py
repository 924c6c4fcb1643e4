"""Reading KEP-5007's binding conditions off a claim: upstream's ``isClaimReadyForBinding``."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core.allocation.bindingconditions import BindingFailed, has_binding_conditions, ready_for_binding
from webhook.core.api.objects import Obj

RESULT: Obj = {
    "request": "r",
    "driver": "d.example.com",
    "pool": "p",
    "device": "gpu-0",
    "bindingConditions": ["Attached", "Powered"],
    "bindingFailureConditions": ["AttachFailed"],
}
PLAIN: Obj = {"request": "r", "driver": "d.example.com", "pool": "p", "device": "gpu-1"}


def claim(results: list[Obj] | None, *conditions: tuple[str, str], **entry: Any) -> Obj:
    st: Obj = {}
    if results is not None:
        st["allocation"] = {"devices": {"results": results}}
    if conditions or entry:
        device = {"driver": "d.example.com", "pool": "p", "device": "gpu-0", **entry}
        device["conditions"] = [
            {"type": t, "status": s, "reason": "Why", "message": 'said "no"'} for t, s in conditions
        ]
        st["devices"] = [device]
    return {"metadata": {"name": "c", "namespace": "ns"}, "status": st}


def test_has_binding_conditions() -> None:
    assert has_binding_conditions({"devices": {"results": [PLAIN, RESULT]}})
    assert not has_binding_conditions({"devices": {"results": [PLAIN]}})
    assert not has_binding_conditions(None)


def test_not_ready_without_allocation_or_device_status() -> None:
    assert ready_for_binding(claim(None)) is False
    assert ready_for_binding(claim([RESULT])) is False


def test_ready_only_when_every_condition_is_true() -> None:
    assert ready_for_binding(claim([RESULT], ("Attached", "True"))) is False
    assert ready_for_binding(claim([RESULT], ("Attached", "True"), ("Powered", "False"))) is False
    assert ready_for_binding(claim([RESULT, PLAIN], ("Attached", "True"), ("Powered", "True"))) is True
    assert ready_for_binding(claim([PLAIN])) is True  # nothing to wait for


def test_the_status_entry_is_found_by_driver_pool_and_device_alone() -> None:
    """As upstream's ``getAllocatedDeviceStatus``: a ``shareID`` is not compared."""
    shared = {**RESULT, "shareID": "s-1"}
    both = (("Attached", "True"), ("Powered", "True"))
    assert ready_for_binding(claim([shared], *both, shareID="s-2")) is True
    assert ready_for_binding(claim([shared], *both, device="gpu-9")) is False


def test_a_true_failure_condition_fails_with_upstreams_words() -> None:
    with pytest.raises(BindingFailed) as e:
        ready_for_binding(
            claim([RESULT], ("Attached", "True"), ("Powered", "True"), ("AttachFailed", "True"))
        )
    assert str(e.value) == 'claim c binding failed: reason=Why, message="said \\"no\\""'
    assert ready_for_binding(claim([RESULT], ("AttachFailed", "False"))) is False
