"""Devices two claims' allocations hold (issue 20 item 2): found whoever allocated them, shares and
admin access excepted, gone when either claim lets go."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.core.api.objects import Obj
from webhook.core.cluster.allocated import AllocatedState
from webhook.core.cluster.doubles import DeviceHolders, exclusive_devices
from webhook.core.cluster.nodeinfo import Nodes

DRIVER = "gpu.example.com"


def result(device: str, **extra: object) -> Obj:
    return {"request": "gpu", "driver": DRIVER, "pool": "node-a", "device": device, **extra}


def claim(claim_name: str, *results: Obj, ns: str = "default") -> Obj:
    obj: Obj = {"kind": "ResourceClaim", "metadata": {"name": claim_name, "namespace": ns, "uid": claim_name}}
    if results:
        obj["status"] = {"allocation": {"devices": {"results": list(results)}}}
    return obj


def dev(device: str) -> tuple[str, str, str]:
    return (DRIVER, "node-a", device)


def test_a_device_in_two_claims_is_a_double_allocation() -> None:
    # Issue 20's measurement: kube-scheduler's c2 and draxr's special claim on e2e-node-a/gpu-2.
    state = AllocatedState(Nodes())
    state.upsert_claim(claim("c2", result("gpu-2")))
    assert state.holders.double_allocated() == {}
    state.upsert_claim(claim("x0-extended-resources-zxlw7", result("gpu-2"), result("gpu-3")))
    assert state.holders.double_allocated() == {
        dev("gpu-2"): [("default", "c2"), ("default", "x0-extended-resources-zxlw7")]
    }
    state.upsert_claim(claim("c2"))  # deallocated
    assert state.holders.double_allocated() == {}


def test_shares_and_admin_access_are_not_double_allocations() -> None:
    state = AllocatedState(Nodes())
    state.upsert_claim(claim("a", result("gpu-0", shareID="11111111-1111-1111-1111-111111111111")))
    state.upsert_claim(claim("b", result("gpu-0", shareID="22222222-2222-2222-2222-222222222222")))
    state.upsert_claim(claim("c", result("gpu-1")))
    state.upsert_claim(claim("monitor", result("gpu-1", adminAccess=True)))
    assert state.holders.double_allocated() == {}
    assert exclusive_devices(claim("c", result("gpu-1"), result("gpu-0", shareID="x"))) == [dev("gpu-1")]


def test_in_flight_reservations_are_not_allocations() -> None:
    state = AllocatedState(Nodes())
    state.upsert_claim(claim("a", result("gpu-0")))
    state.reserve_devices("token", [dev("gpu-0")])
    assert state.holders.double_allocated() == {}


def test_a_deleted_claim_lets_go() -> None:
    state = AllocatedState(Nodes())
    state.upsert_claim(claim("a", result("gpu-0")))
    state.upsert_claim(claim("b", result("gpu-0"), ns="other"))
    assert list(state.holders.double_allocated()) == [dev("gpu-0")]
    state.remove_claim("other", "b")
    assert state.holders.double_allocated() == {}


CLAIMS = [f"c{i}" for i in range(5)]
DEVICES = [f"gpu-{i}" for i in range(4)]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(CLAIMS), st.sets(st.sampled_from(DEVICES), max_size=3)), max_size=25)
)
def test_doubles_are_exactly_the_devices_two_current_allocations_hold(
    steps: list[tuple[str, set[str]]],
) -> None:
    """Property: after any sequence of allocations, reallocations and deallocations (an empty
    set), the doubles are what a scan of the claims' current allocations finds."""
    holders = DeviceHolders()
    current: dict[str, set[str]] = {}
    for claim_name, devices in steps:
        holders.set_claim(("default", claim_name), claim(claim_name, *map(result, sorted(devices))))
        current[claim_name] = devices
    expected: dict[tuple[str, str, str], list[tuple[str, str]]] = {}
    for device in DEVICES:
        held = sorted(("default", c) for c, ds in current.items() if device in ds)
        if len(held) > 1:
            expected[dev(device)] = held
    assert holders.double_allocated() == expected
