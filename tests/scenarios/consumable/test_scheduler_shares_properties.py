"""Property: extended-resource pods of a class with ``draxr.io/capacity-requests`` scheduled one
after another (Reserve, then the written claim, then Unreserve, as the worker does) never
over-consume a device, each share is at least the class's request rounded up by the device's
policy, and a pod refused truly has no room (no device has a share of its size left)."""

from __future__ import annotations

import json
from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.harness import state_of
from tests.core.podfactory import container, device, device_class, node, pod, resource_slice
from webhook.core.allocation.claims import as_obj, special_claim_after_prebind
from webhook.core.allocation.results import share_id_sequence
from webhook.core.api.objects import Obj
from webhook.core.api.quantity import Quantity
from webhook.core.scheduling.framework import SCHEDULED
from webhook.core.scheduling.scheduler import Scheduler

GPU = "example.com/gpu"
DRIVER = "gpu.example.com"


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[Obj], str, list[int]]:
    devices = []
    for i in range(draw(st.integers(1, 3))):
        value = draw(st.integers(1, 12))
        cap: Obj = {"value": f"{value}Gi"}
        if draw(st.booleans()):
            cap["requestPolicy"] = {"validRange": {"min": "1Gi", "step": f"{draw(st.integers(1, 3))}Gi"}}
        devices.append(device(f"d{i}", capacity={"memory": cap}, allowMultipleAllocations=True))
    asked = f"{draw(st.integers(1, 5))}Gi"
    counts = draw(st.lists(st.integers(1, 2), min_size=1, max_size=8))
    return devices, asked, counts


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_pods_never_over_consume_a_device(scenario: tuple[list[Obj], str, list[int]]) -> None:
    devices, asked, counts = scenario
    cls = device_class(DRIVER, ext=GPU, selectors=[f'device.driver == "{DRIVER}"'])
    cls["metadata"]["annotations"] = {
        "draxr.io/capacity-requests": json.dumps({"requests": {"memory": asked}})
    }
    st_ = state_of(node("n"), cls, resource_slice("n-gpus", devices, node_name="n", pool="n"))
    capacity = {d["name"]: Quantity.parse(d["capacity"]["memory"]["value"]).value for d in devices}
    want = Quantity.parse(asked).value
    s = Scheduler(st_, share_ids=share_id_sequence())
    used: dict[str, Fraction] = dict.fromkeys(capacity, Fraction(0))
    for i, count in enumerate(counts):
        p = pod(f"p{i}", [container("c", {GPU: count})])
        d = s.schedule(p)
        if d.status != SCHEDULED:
            # Refused: fewer than ``count`` devices still have room for one more share.
            room = [n for n in capacity if capacity[n] - used[n] >= want]
            assert len(room) < count or any(
                "requestPolicy" in dv["capacity"]["memory"] for dv in devices if dv["name"] in room
            ), (d.message, used)
            continue
        assert d.special is not None
        token = s.reserve(d)
        for r in d.special.to_api()["devices"]["results"]:
            share = Quantity.parse(r["consumedCapacity"]["memory"]).value
            assert share >= want
            used[r["device"]] += share
        st_.apply(
            "ResourceClaim", as_obj(special_claim_after_prebind(d.pod, d.requests, d.special, f"p{i}-claim"))
        )
        s.unreserve(d, token)
        for n, total in used.items():
            assert total <= capacity[n], (n, total, capacity[n])
            consumed = st_.allocated.consumed(("gpu.example.com", "n", n))
            assert (consumed or {}).get("memory", Fraction(0)) == total
