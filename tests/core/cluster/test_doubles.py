"""Devices two claims' allocations hold (issue 20 item 2): found whoever allocated them, shares and
admin access excepted, gone when either claim lets go."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.core.api.objects import Obj
from webhook.core.cluster.allocated import AllocatedState
from webhook.core.cluster.doubles import DeviceHolders, held_devices
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
    held = held_devices(
        claim("c", result("gpu-1"), result("gpu-0", shareID="x"), result("gpu-2", adminAccess=True))
    )
    assert held == [(dev("gpu-1"), True), (dev("gpu-0"), False)]


def test_a_device_one_claim_holds_alone_and_another_shares_is_a_double_allocation() -> None:
    """A share is only right beside other shares: a claim holding the device whole (no shareID)
    and a claim holding a share of it are two allocators' doing, whichever came first."""
    state = AllocatedState(Nodes())
    state.upsert_claim(claim("whole", result("gpu-0")))
    state.upsert_claim(claim("share", result("gpu-0", shareID="11111111-1111-1111-1111-111111111111")))
    assert state.holders.double_allocated() == {dev("gpu-0"): [("default", "share"), ("default", "whole")]}
    state.upsert_claim(claim("whole"))  # deallocated: a share alone is fine
    assert state.holders.double_allocated() == {}
    state.upsert_claim(claim("monitor", result("gpu-0", adminAccess=True)))  # admin access never counts
    assert state.holders.double_allocated() == {}


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


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(CLAIMS),
            st.dictionaries(
                st.sampled_from(DEVICES), st.sampled_from(["whole", "share", "admin"]), max_size=3
            ),
        ),
        max_size=25,
    )
)
def test_doubles_are_exactly_the_devices_two_current_allocations_hold(
    steps: list[tuple[str, dict[str, str]]],
) -> None:
    """Property: after any sequence of allocations, reallocations and deallocations (an empty
    dict), the doubles are what a scan of the claims' current allocations finds: devices held by two
    or more claims, one of them holding it whole (shares beside shares and admin access are fine)."""
    holders = DeviceHolders()
    current: dict[str, dict[str, str]] = {}
    extra: dict[str, Obj] = {"whole": {}, "share": {"shareID": "s"}, "admin": {"adminAccess": True}}
    for claim_name, devices in steps:
        results = [result(d, **extra[how]) for d, how in sorted(devices.items())]
        holders.set_claim(("default", claim_name), claim(claim_name, *results))
        current[claim_name] = devices
    expected: dict[tuple[str, str, str], list[tuple[str, str]]] = {}
    for device in DEVICES:
        held = {c: ds[device] for c, ds in current.items() if ds.get(device) in ("whole", "share")}
        if len(held) > 1 and "whole" in held.values():
            expected[dev(device)] = sorted(("default", c) for c in held)
    assert holders.double_allocated() == expected
