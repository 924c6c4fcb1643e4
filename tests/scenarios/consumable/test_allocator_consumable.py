"""Consumable capacity (KEP-5075) in the allocator: upstream's own table cases, transcribed.

Each case carries the name of its upstream test case in
``k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting/allocator_testing.go``
(v0.37.2), run there against the incubating allocator that 1.37's default gates pick. What upstream
feeds as ``allocatedDevices``, ``allocatedSharedDeviceIDs`` and ``allocatedCapacityDevices`` is here
what produces it in a cluster: allocated claims whose results take the device (no ``shareID``) or
share it (a ``shareID``, with the ``consumedCapacity``). Share IDs are compared as upstream does,
present or not (their values come from the caller: see the tests after the table). Where upstream
has two slices of one name (``distinct-constraint-two-...``), the second is ``slice-2`` here: draxr
keeps slices by name, as the API server does.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.core.harness import all_of, claim, exactly, state_of
from tests.core.podfactory import device, device_class, node, resource_slice
from webhook.core.allocation.allocator import Allocator
from webhook.core.allocation.errors import AllocationError, Unsatisfiable
from webhook.core.allocation.results import ClaimAllocation, ShareIds, share_id_sequence
from webhook.core.api.objects import Obj
from webhook.core.api.quantity import Quantity
from webhook.core.cluster.allocated import Share
from webhook.core.cluster.state import ClusterState

DRIVER = "driver-a"
POOL = "pool-1"
NODE = "node-1"
CLASS = "class-a"
C0, C1 = "capacity-0", "capacity-1"
FIXED_SHARE_ID = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"
STRING_ATTRIBUTE = f"{DRIVER}/stringAttribute"
LOCAL = {
    "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}]
}

# -- upstream's object generators, as JSON ----------------------------------------------------------


def klass(multi: bool | None = None) -> Obj:
    """``class(classA, driverA)``, or ``classWithAllowMultipleAllocations(classA, driverA, multi)``."""
    expr = f'device.driver == "{DRIVER}"'
    if multi is not None:
        expr += f" && device.allowMultipleAllocations == {str(multi).lower()}"
    return device_class(CLASS, selectors=[expr])


def dev(
    name: str,
    capacity: dict[str, Any] | None = None,
    attributes: dict[str, str] | None = None,
    *,
    multi: bool = False,
    counters: dict[str, dict[str, str]] | None = None,
    from_counters: bool = False,
) -> Obj:
    """``device(name, capacity, attributes)``: a capacity is a quantity or a whole ``DeviceCapacity``;
    ``counters``: ``withDeviceCounterConsumption``, which with ``from_counters`` (upstream's
    ``fromCounters``) also makes them the device's capacity."""
    extra: Obj = {}
    caps: dict[str, Any] = {}
    if counters:
        extra["consumesCounters"] = [
            {"counterSet": cs, "counters": {k: {"value": v} for k, v in c.items()}}
            for cs, c in counters.items()
        ]
        for c in counters.values() if from_counters else ():
            caps.update({k: {"value": v} for k, v in c.items()})
    for k, v in (capacity or {}).items():
        caps[k] = {"value": v} if isinstance(v, str) else v
    if caps:
        extra["capacity"] = caps
    if multi:
        extra["allowMultipleAllocations"] = True
    attrs = {k: {"string": v} for k, v in (attributes or {}).items()}
    return device(name, attrs or None, **extra)


def policy_range(value: str) -> Obj:
    """``withCapacityRequestPolicyRange``: default 2, min 2, step 2, max 4."""
    return {
        "value": value,
        "requestPolicy": {"default": "2", "validRange": {"min": "2", "step": "2", "max": "4"}},
    }


def policy_fractional(value: str) -> Obj:
    """``withFractionalCapacityRequestPolicyRange``: default 200m, min 200m, step 100m, max 1."""
    return {
        "value": value,
        "requestPolicy": {"default": "200m", "validRange": {"min": "200m", "step": "100m", "max": "1"}},
    }


def policy_values(default: str, value: str, *more: str) -> Obj:
    """``withCapacityRequestPolicyValidValues``: the default, then ``more``."""
    return {"value": value, "requestPolicy": {"default": default, "validValues": [default, *more]}}


def sliced(*devices: Obj, name: str = "slice-1", count: int = 1, counter_sets: Obj | None = None) -> Obj:
    extra: Obj = {}
    if counter_sets:
        extra["sharedCounters"] = [
            {"name": cs, "counters": {k: {"value": v} for k, v in c.items()}}
            for cs, c in counter_sets.items()
        ]
    return resource_slice(name, list(devices), driver=DRIVER, pool=POOL, node_name=NODE, count=count, **extra)


def capacity(q: str | None) -> Obj:
    return {"capacity": {"requests": {C0: q}}} if q is not None else {}


def selecting(*exprs: str) -> Obj:
    return {"selectors": [{"cel": {"expression": e}} for e in exprs]} if exprs else {}


def req(name: str, count: int = 1, cap: str | None = None, *sel: str) -> Obj:
    return exactly(name, CLASS, count, **capacity(cap), **selecting(*sel))


def all_req(name: str, cap: str | None = None) -> Obj:
    return all_of(name, CLASS, **capacity(cap))


def sub(name: str, count: int = 1, cap: str | None = None, *sel: str, mode: str = "ExactCount") -> Obj:
    body: Obj = {
        "name": name,
        "deviceClassName": CLASS,
        "allocationMode": mode,
        **capacity(cap),
        **selecting(*sel),
    }
    if mode == "ExactCount":
        body["count"] = count
    return body


def first(name: str, *subs: Obj) -> Obj:
    return {"name": name, "firstAvailable": list(subs)}


def match(attr: str = STRING_ATTRIBUTE, *requests: str) -> Obj:
    return {"matchAttribute": attr, **({"requests": list(requests)} if requests else {})}


def distinct(attr: str = STRING_ATTRIBUTE) -> Obj:
    return {"distinctAttribute": attr}


def kind_is(value: str) -> str:
    return f'device.attributes["{DRIVER}"].kind == "{value}"'


def holding(
    name: str, device_name: str, *, share: bool = True, consumed: dict[str, str] | None = None
) -> Obj:
    """An allocated claim: what upstream's allocated state says of ``device_name``."""
    result: Obj = {"request": "r", "driver": DRIVER, "pool": POOL, "device": device_name}
    if share:
        result["shareID"] = FIXED_SHARE_ID
    if consumed:
        result["consumedCapacity"] = consumed
    return claim(name, [exactly("r", CLASS)], allocation={"devices": {"results": [result]}})


# -- the expectations -------------------------------------------------------------------------------

#: One result: (request, device) takes the device; (request, device, consumed) is a share of it,
#: with what it consumes (None: nothing, upstream's nil ``ConsumedCapacity``).
Result = tuple[str, str] | tuple[str, str, dict[str, Any] | None]


@dataclass
class Case:
    claims: list[Obj]
    slices: list[Obj]
    classes: list[Obj] = field(default_factory=lambda: [klass()])
    allocated: list[Obj] = field(default_factory=list)
    expect: list[list[Result]] | None = None  # None: nothing fits (upstream: no result, no error)
    error: str | None = None


def run(case: Case, share_ids: ShareIds | None = None) -> list[ClaimAllocation]:
    st = state_of(node(NODE), *case.classes, *case.slices, *case.allocated)
    return allocator(st, share_ids).allocate(case.claims)


def allocator(st: ClusterState, share_ids: ShareIds | None = None) -> Allocator:
    nd = st.node_devices(NODE)
    assert nd is not None
    taken = st.allocated
    return Allocator(
        nd,
        st.classes.get,
        st.cel,
        taken.devices,
        taken.allocated_counters,
        shares=taken.shares,
        share_ids=share_ids or share_id_sequence(),
    )


def plain(allocation: ClaimAllocation) -> list[Result]:
    """The results, a share's consumed amounts as the quantities they are (``to_api`` prints them as
    upstream's ``String()`` does, which loses amounts past ``999E``: see the test below)."""
    assert allocation.to_api().get("nodeSelector") == LOCAL
    out: list[Result] = []
    for r in allocation.results:
        assert (r.device.driver, r.device.pool) == (DRIVER, POOL)
        if r.share_id is not None:
            assert uuid.UUID(r.share_id)
            consumed = dict(r.consumed) if r.consumed is not None else None
            out.append((r.request, r.device.name, consumed))
        else:
            assert r.consumed is None
            out.append((r.request, r.device.name))
    return out


def same(actual: list[Result], expected: list[Result]) -> bool:
    """Equal, comparing consumed amounts by value (``2`` is ``2000m``)."""
    if len(actual) != len(expected):
        return False
    for a, e in zip(actual, expected, strict=True):
        if a[:2] != e[:2] or len(a) != len(e):
            return False
        ac, ec = (a[2], e[2]) if len(a) == 3 else (None, None)  # type: ignore[misc]
        if (ac is None) != (ec is None):
            return False
        if (
            ac is not None
            and ec is not None
            and (ac.keys() != ec.keys() or any(Quantity.parse(ac[k]) != Quantity.parse(ec[k]) for k in ac))
        ):
            return False
    return True


CASES = {
    "consumable-capacity-multi-allocatable-device-with-missing-capacity-request": Case(
        claims=[claim("claim-0", [req("req-0", 1, "1")])],
        slices=[sliced(dev("device-1", {C1: "1"}, multi=True))],
    ),
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-with-missing-capacity-request": Case(
        claims=[claim("claim-0", [all_req("req-0", "1")])],
        classes=[klass(True)],
        slices=[sliced(dev("device-1", {C1: "1"}, multi=True))],
    ),
    "consumable-capacity-multi-allocatable-device-without-capacity-without-capacity-request": Case(
        claims=[claim("claim-0", [req("req-0")]), claim("claim-1", [req("req-0")])],
        classes=[klass(True)],
        slices=[sliced(dev("device-1", multi=True))],
        expect=[[("req-0", "device-1", None)], [("req-0", "device-1", None)]],
    ),
    "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request": Case(
        claims=[claim("claim-0", [req("req-0")]), claim("claim-1", [req("req-0")])],
        classes=[klass(True)],
        slices=[sliced(dev("device-1", {C0: "1"}, multi=True), dev("device-2", {C0: "1"}, multi=True))],
        expect=[[("req-0", "device-1", {C0: "1"})], [("req-0", "device-2", {C0: "1"})]],
    ),
    "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request-block": Case(
        claims=[claim("claim-0", [req("req-0")]), claim("claim-1", [req("req-0")])],
        classes=[klass(True)],
        slices=[sliced(dev("device-1", {C0: "2"}, multi=True))],
    ),
    "consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request": Case(
        claims=[claim("claim-0", [req("req-0", 1, "1")]), claim("claim-1", [req("req-0", 1, "1")])],
        classes=[klass(True)],
        slices=[sliced(dev("device-1", {C0: "2"}, multi=True))],
        expect=[[("req-0", "device-1", {C0: "1"})], [("req-0", "device-1", {C0: "1"})]],
    ),
    "consumable-capacity-multi-allocatable-device-with-policy-without-capacity-request": Case(
        claims=[claim("claim-0", [req("req-0")]), claim("claim-1", [req("req-0")])],
        classes=[klass(True)],
        slices=[sliced(dev("device-1", {C0: policy_range("4")}, multi=True))],
        expect=[[("req-0", "device-1", {C0: "2"})], [("req-0", "device-1", {C0: "2"})]],
    ),
    "consumable-capacity-multi-allocatable-device-with-zero-request-policy": Case(
        claims=[claim("claim-0", [req("req-0")]), claim("claim-1", [req("req-0")])],
        classes=[klass(True)],
        slices=[sliced(dev("device-1", {C0: policy_values("0", "1")}, multi=True))],
        expect=[[("req-0", "device-1", {C0: "0"})], [("req-0", "device-1", {C0: "0"})]],
    ),
    "consumable-capacity-multi-allocatable-device-violates-zero-request-policy": Case(
        claims=[claim("claim-0", [req("req-0", 1, "1")])],
        classes=[klass(True)],
        slices=[sliced(dev("device-1", {C0: policy_values("0", "1")}, multi=True))],
    ),
    "consumable-capacity-multi-allocatable-device-with-range-policy-with-capacity-request": Case(
        claims=[claim("claim-0", [req("req-0", 1, "1")]), claim("claim-1", [req("req-0", 1, "1")])],
        classes=[klass(True)],
        slices=[sliced(dev("device-1", {C0: policy_range("4")}, multi=True))],
        expect=[[("req-0", "device-1", {C0: "2"})], [("req-0", "device-1", {C0: "2"})]],
    ),
    "consumable-capacity-multi-allocatable-device-with-range-policy-step": Case(
        claims=[claim("claim-0", [req("req-0", 1, "3")])],
        classes=[klass(True)],
        slices=[sliced(dev("device-1", {C0: policy_range("4")}, multi=True))],
        expect=[[("req-0", "device-1", {C0: "4"})]],
    ),
    "consumable-capacity-range-policy-request-above-int64-rejected": Case(
        claims=[claim("claim-0", [req("req-0", 1, "18446744073709551616")])],
        classes=[klass(True)],
        slices=[sliced(dev("device-1", {C0: policy_range("4")}, multi=True))],
        error="cannot be represented",
    ),
    "consumable-capacity-range-policy-rounded-value-overflow-rejected": Case(
        claims=[claim("claim-0", [req("req-0", 1, "9223372036854775807")])],
        classes=[klass(True)],
        slices=[sliced(dev("device-1", {C0: policy_range("4")}, multi=True))],
        error="cannot be represented",
    ),
    "consumable-capacity-range-policy-overflow-aborts-not-skip": Case(
        claims=[claim("claim-0", [req("req-0", 1, "18446744073709551616")])],
        classes=[klass(True)],
        slices=[
            sliced(
                dev("device-1", {C0: policy_range("4")}, multi=True),
                dev("device-2", {C0: "36893488147419103232"}, multi=True),
            )
        ],
        error="cannot be represented",
    ),
    "consumable-capacity-range-policy-allocation-mode-all-overflow-aborts": Case(
        claims=[claim("claim-0", [all_req("req-0", "18446744073709551616")])],
        classes=[klass(True)],
        slices=[sliced(dev("device-1", {C0: policy_range("4")}, multi=True))],
        error="cannot be represented",
    ),
    "consumable-capacity-negative-request-aborts": Case(
        claims=[claim("claim-0", [req("req-0", 1, "-5")])],
        classes=[klass(True)],
        slices=[sliced(dev("device-1", {C0: "10"}, multi=True))],
        error="negative",
    ),
    "consumable-capacity-multi-allocatable-device-with-valid-values-policy": Case(
        claims=[claim("claim-0", [req("req-0", 1, "2")])],
        classes=[klass(True)],
        slices=[sliced(dev("device-1", {C0: policy_values("1", "4", "2")}, multi=True))],
        expect=[[("req-0", "device-1", {C0: "2"})]],
    ),
    "consumable-capacity-multi-allocatable-device-with-valid-values-policy-round-up": Case(
        claims=[claim("claim-0", [req("req-0", 1, "2")])],
        classes=[klass(True)],
        slices=[sliced(dev("device-1", {C0: policy_values("1", "3", "3")}, multi=True))],
        expect=[[("req-0", "device-1", {C0: "3"})]],
    ),
    "consumable-capacity-multi-allocatable-device-with-exceeded-consumable-capacity-request": Case(
        claims=[claim("claim-0", [req("req-0", 1, "1")]), claim("claim-1", [req("req-0", 1, "2")])],
        classes=[klass(True)],
        slices=[sliced(dev("device-1", {C0: policy_range("2")}, multi=True))],
    ),
    "consumable-capacity-multi-allocatable-device-with-request-over-max-sharing-policy": Case(
        claims=[claim("claim-0", [req("req-0", 1, "6")])],
        classes=[klass(True)],
        slices=[sliced(dev("device-1", {C0: policy_range("10")}, multi=True))],
    ),
    "consumable-capacity-multi-allocatable-device-with-allocated-capacity-use-remaining": Case(
        claims=[claim("claim-0", [req("req-0", 1, "2")])],
        classes=[klass(True)],
        allocated=[holding("held", "device-1", consumed={C0: "2"})],
        slices=[sliced(dev("device-1", {C0: policy_range("4")}, multi=True))],
        expect=[[("req-0", "device-1", {C0: "2"})]],
    ),
    "consumable-capacity-multi-allocatable-device-with-allocated-capacity-next-device": Case(
        claims=[claim("claim-0", [req("req-0", 1, "2")])],
        classes=[klass(True)],
        allocated=[holding("held", "device-1", consumed={C0: "2"})],
        slices=[
            sliced(
                dev("device-1", {C0: policy_range("2")}, multi=True),
                dev("device-2", {C0: policy_range("2")}, multi=True),
            )
        ],
        expect=[[("req-0", "device-2", {C0: "2"})]],
    ),
    "consumable-capacity-with-multi-allocatable-device-backtrack": Case(
        claims=[
            claim("claim-0", [req("req-0", 1, "2"), req("req-1", 1, "2")], [match()]),
            claim("claim-1", [req("req-0", 1, "2")]),
        ],
        slices=[
            sliced(
                dev(
                    "device-2",
                    {C0: policy_range("2")},
                    {"stringAttribute": "stringAttributeValue1"},
                    multi=True,
                ),
                dev(
                    "device-1",
                    {C0: policy_range("4")},
                    {"stringAttribute": "stringAttributeValue2"},
                    multi=True,
                ),
            )
        ],
        expect=[
            [("req-0", "device-1", {C0: "2"}), ("req-1", "device-1", {C0: "2"})],
            [("req-0", "device-2", {C0: "2"})],
        ],
    ),
    "consumable-capacity-multi-allocatable-device-with-subrequest": Case(
        claims=[
            claim(
                "claim-0", [first("req-0", sub("subReq-0", 1, "4"), sub("subReq-1", 1, "2"), sub("subReq-1"))]
            )
        ],
        classes=[klass(True)],
        slices=[sliced(dev("device-1", {C0: policy_range("2")}, multi=True))],
        expect=[[("req-0/subReq-1", "device-1", {C0: "2"})]],
    ),
    "consumable-capacity-multi-allocatable-device-with-no-available-consumable-capacity": Case(
        claims=[claim("claim-0", [req("req-0", 1, "2")])],
        classes=[klass(True)],
        allocated=[holding("held", "device-1", consumed={C0: "2"})],
        slices=[sliced(dev("device-1", {C0: policy_range("2")}, multi=True))],
    ),
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-no-capacity": Case(
        claims=[claim("claim-0", [all_req("req-0", "2")])],
        classes=[klass(True)],
        slices=[sliced(dev("device-1", {C0: "2"}, multi=True), dev("device-2", multi=True))],
        expect=[[("req-0", "device-1", {C0: "2"})]],
    ),
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-insufficient-capacity": Case(
        claims=[claim("claim-0", [all_req("req-0", "2")])],
        classes=[klass(True)],
        slices=[sliced(dev("device-1", {C0: "2"}, multi=True), dev("device-2", {C0: "1"}, multi=True))],
        expect=[[("req-0", "device-1", {C0: "2"})]],
    ),
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-sufficient": Case(
        claims=[claim("claim-0", [req("req-0", 1, "1"), all_req("req-1", "1")])],
        slices=[sliced(dev("device-1", {C0: "2"}, multi=True), dev("device-2", {C0: "1"}, multi=True))],
        expect=[
            [
                ("req-0", "device-1", {C0: "1"}),
                ("req-1", "device-1", {C0: "1"}),
                ("req-1", "device-2", {C0: "1"}),
            ]
        ],
    ),
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-sufficient": Case(
        claims=[claim("claim-0", [all_req("req-0", "1")])],
        allocated=[holding("held", "device-1", consumed={C0: "1"})],
        slices=[sliced(dev("device-1", {C0: "2"}, multi=True), dev("device-2", {C0: "1"}, multi=True))],
        expect=[[("req-0", "device-1", {C0: "1"}), ("req-0", "device-2", {C0: "1"})]],
    ),
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-insufficient": Case(
        claims=[claim("claim-0", [req("req-0", 1, "1"), all_req("req-1", "1")])],
        slices=[sliced(dev("device-1", {C0: "1"}, multi=True), dev("device-2", {C0: "1"}, multi=True))],
    ),
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-insufficient": Case(
        claims=[claim("claim-0", [all_req("req-0", "1")])],
        allocated=[holding("held", "device-1", consumed={C0: "1"})],
        slices=[sliced(dev("device-1", {C0: "1"}, multi=True), dev("device-2", {C0: "1"}, multi=True))],
    ),
    "consumable-capacity-dedicated-device-with-consumable-capacity-request": Case(
        claims=[claim("claim-0", [req("req-0", 1, "1")])],
        classes=[klass(False)],
        slices=[sliced(dev("device-1", {C0: "1"}))],
        expect=[[("req-0", "device-1")]],
    ),
    "consumable-capacity-dedicated-device-with-multiple-consumable-capacity-request": Case(
        claims=[claim("claim-0", [req("req-0", 1, "1")]), claim("claim-1", [req("req-0", 1, "1")])],
        classes=[klass(False)],
        slices=[sliced(dev("device-1", {C0: policy_range("2")}))],
    ),
    "consumable-capacity-requests-are-not-modified": Case(
        claims=[claim("claim-0", [req("req-0", 1, "2"), req("req-1", 1, "1000000000000000000000")])],
        slices=[
            sliced(
                dev(
                    "device-1",
                    {
                        C0: {
                            "value": "1000000000000000000002",
                            "requestPolicy": {
                                "default": "1000000000000000000000",
                                "validRange": {"min": "2"},
                            },
                        }
                    },
                    multi=True,
                )
            )
        ],
        expect=[[("req-0", "device-1", {C0: "2"}), ("req-1", "device-1", {C0: "1000000000000000000000"})]],
    ),
    "allow-multiple-allocations-exclude-multi-allocatable-device-by-class-selector": Case(
        claims=[claim("claim-0", [req("req-0", 1, "1")])],
        classes=[klass(False)],
        slices=[sliced(dev("device-1", {C0: "1"}, multi=True))],
    ),
    "allow-multiple-allocations-not-allocate-multi-allocatable-device-which-already-dedicated": Case(
        claims=[claim("claim-0", [req("req-0", 1, "1")])],
        classes=[klass(True)],
        allocated=[holding("held", "device-1", share=False)],
        slices=[sliced(dev("device-1", {C0: policy_range("2")}, multi=True))],
    ),
    "allow-multiple-allocations-not-allocate-dedicated-device-which-change-from-multi-allocatable": Case(
        claims=[claim("claim-0", [req("req-0", 1, "1")])],
        classes=[klass(True)],
        allocated=[holding("held", "device-1", consumed={C0: "1"})],
        slices=[sliced(dev("device-1", {C0: policy_range("2")}))],
    ),
    "allow-multiple-allocations-with-partitionable-device": Case(
        claims=[
            claim(
                "claim-0",
                [
                    req("req-0"),
                    first(
                        "req-1",
                        sub(
                            "subReq-0",
                            1,
                            None,
                            f'device.capacity["{DRIVER}"].memory.compareTo(quantity("6Gi")) >= 0',
                        ),
                        sub(
                            "subReq-1",
                            1,
                            None,
                            f'device.capacity["{DRIVER}"].memory.compareTo(quantity("4Gi")) >= 0',
                        ),
                    ),
                ],
            )
        ],
        classes=[klass(True)],
        slices=[
            sliced(
                dev(
                    "device-1", multi=True, counters={"counter-set-1": {"memory": "4Gi"}}, from_counters=True
                ),
                dev(
                    "device-2", multi=True, counters={"counter-set-1": {"memory": "6Gi"}}, from_counters=True
                ),
                dev(
                    "device-3", multi=True, counters={"counter-set-1": {"memory": "4Gi"}}, from_counters=True
                ),
                count=2,
            ),
            sliced(name="slice-2", count=2, counter_sets={"counter-set-1": {"memory": "8Gi"}}),
        ],
        expect=[
            [("req-0", "device-1", {"memory": "4Gi"}), ("req-1/subReq-1", "device-3", {"memory": "4Gi"})]
        ],
    ),
    "allow-multiple-allocations-with-shared-device-counter-cross-cycle": Case(
        claims=[claim("claim-0", [req("req-0", 1, "1", kind_is("b").replace("kind", "mode"))])],
        classes=[klass(True)],
        allocated=[holding("held", "device-1", consumed={C0: "1"})],
        slices=[
            sliced(
                dev(
                    "device-1",
                    None,
                    {"mode": "a"},
                    multi=True,
                    counters={"counter-set-1": {C0: "1"}},
                    from_counters=True,
                ),
                dev(
                    "device-2",
                    None,
                    {"mode": "b"},
                    multi=True,
                    counters={"counter-set-1": {C0: "1"}},
                    from_counters=True,
                ),
                count=2,
            ),
            sliced(name="slice-2", count=2, counter_sets={"counter-set-1": {C0: "1"}}),
        ],
    ),
    "partitionable-consumable-capacity-shared-device-counter-not-recharged": Case(
        claims=[claim("claim-0", [req("req-0")])],
        allocated=[holding("held", "device-1")],
        slices=[
            sliced(dev("device-1", multi=True, counters={"counter-set-1": {"c": "1"}}), count=2),
            sliced(name="slice-2", count=2, counter_sets={"counter-set-1": {"c": "1"}}),
        ],
        expect=[[("req-0", "device-1", None)]],
    ),
    "consumable-capacity-with-partitionable-device-multiple-capacity-pools": Case(
        claims=[
            claim(
                "claim-0",
                [
                    req("req-0", 1, "1"),
                    req("req-2", 1, "2"),
                    first(
                        "req-1",
                        sub(
                            "subReq-0",
                            1,
                            "1",
                            f'device.capacity["{DRIVER}"]["{C0}"].compareTo(quantity("4")) >= 0',
                        ),
                        sub(
                            "subReq-1",
                            1,
                            "1",
                            f'device.capacity["{DRIVER}"]["{C0}"].compareTo(quantity("2")) >= 0',
                        ),
                    ),
                ],
            )
        ],
        slices=[
            sliced(
                *(
                    dev(
                        name,
                        {C1: policy_range("4")},
                        multi=True,
                        counters={"counter-set-1": {C0: c0}, "counter-set-2": {C1: "4"}},
                        from_counters=True,
                    )
                    for name, c0 in (("device-1", "2"), ("device-2", "4"), ("device-3", "2"))
                ),
                count=2,
            ),
            sliced(
                name="slice-2", count=2, counter_sets={"counter-set-1": {C0: "4"}, "counter-set-2": {C1: "8"}}
            ),
        ],
        expect=[
            [
                ("req-0", "device-1", {C0: "1", C1: "2"}),
                ("req-2", "device-3", {C0: "2", C1: "2"}),
                ("req-1/subReq-1", "device-1", {C0: "1", C1: "2"}),
            ]
        ],
    ),
    "partitionable-consumable-capacity-backtrack-releases-counter": Case(
        claims=[
            claim(
                "claim-0",
                [req("req-0", 1, None, kind_is("shared")), req("req-1", 1, None, kind_is("counteronly"))],
            )
        ],
        slices=[
            sliced(
                dev("device-1", None, {"kind": "shared"}, multi=True, counters={"counter-set-1": {"c": "1"}}),
                dev("device-2", None, {"kind": "shared"}),
                dev("device-3", None, {"kind": "counteronly"}, counters={"counter-set-1": {"c": "1"}}),
                count=2,
            ),
            sliced(name="slice-2", count=2, counter_sets={"counter-set-1": {"c": "1"}}),
        ],
        expect=[[("req-0", "device-2"), ("req-1", "device-3")]],
    ),
    "consumable-capacity-rejection-rolls-back-constraints": Case(
        claims=[
            claim(
                "claim-0", [req("req-0", 1, "2", f'device.attributes["{DRIVER}"].stringAttribute == "cap"')]
            ),
            claim(
                "claim-1",
                [
                    first(
                        "req-0",
                        sub(
                            "subReq-0",
                            1,
                            "2",
                            f'device.attributes["{DRIVER}"].stringAttribute == "cap"',
                            mode="All",
                        ),
                        sub("subReq-1", 1, None, f'device.attributes["{DRIVER}"].stringAttribute == "fb"'),
                    )
                ],
                [match()],
            ),
        ],
        slices=[
            sliced(
                dev("device-1", {C0: "2"}, {"stringAttribute": "cap"}, multi=True),
                dev("device-2", None, {"stringAttribute": "fb"}),
            )
        ],
        expect=[[("req-0", "device-1", {C0: "2"})], [("req-0/subReq-1", "device-2")]],
    ),
    "partitionable-empty-capacity-multiple-share-backtrack-keeps-counter-ownership": Case(
        claims=[
            claim("claim-0", [req("req-0", 1, None, kind_is("shared"))]),
            claim(
                "claim-1",
                [
                    req("req-1", 1, None, f"{kind_is('shared')} || {kind_is('fallback')}"),
                    req("req-2", 1, None, kind_is("gate")),
                    req("req-3", 1, None, kind_is("shared")),
                ],
                [match(STRING_ATTRIBUTE, "req-1", "req-2")],
            ),
        ],
        slices=[
            sliced(
                dev(
                    "device-1",
                    None,
                    {"kind": "shared", "stringAttribute": "red"},
                    multi=True,
                    counters={"counter-set-1": {"c": "1"}},
                ),
                dev("device-2", None, {"kind": "fallback", "stringAttribute": "blue"}),
                dev("device-3", None, {"kind": "gate", "stringAttribute": "blue"}),
                count=2,
            ),
            sliced(name="slice-2", count=2, counter_sets={"counter-set-1": {"c": "1"}}),
        ],
        expect=[
            [("req-0", "device-1", None)],
            [("req-1", "device-2"), ("req-2", "device-3"), ("req-3", "device-1", None)],
        ],
    ),
    "distinct-constraint-one-multi-allocatable-device-with-distinct-constraint": Case(
        claims=[claim("claim-0", [req("req-0", 1, "1"), req("req-1", 1, "1")], [distinct()])],
        classes=[klass(True)],
        slices=[
            sliced(
                dev(
                    "device-1",
                    {C0: policy_range("2")},
                    {"stringAttribute": "stringAttributeValue"},
                    multi=True,
                )
            )
        ],
    ),
    "distinct-constraint-two-multi-allocatable-devices-with-distinct-constraint": Case(
        claims=[claim("claim-0", [req("req-0", 1, "2"), req("req-1", 1, "2")], [distinct()])],
        classes=[klass(True)],
        slices=[
            sliced(
                dev(
                    "device-1",
                    {C0: policy_range("4")},
                    {"stringAttribute": "stringAttributeValue1"},
                    multi=True,
                ),
                count=2,
            ),
            sliced(
                dev(
                    "device-2",
                    {C0: policy_range("4")},
                    {"stringAttribute": "stringAttributeValue2"},
                    multi=True,
                ),
                name="slice-2",
                count=2,
            ),
        ],
        expect=[[("req-0", "device-1", {C0: "2"}), ("req-1", "device-2", {C0: "2"})]],
    ),
    "consumable-capacity-fractional-range-gate-enabled-round-up": Case(
        claims=[claim("claim-0", [req("req-0", 1, "250m")])],
        classes=[klass(True)],
        slices=[sliced(dev("device-1", {C0: policy_fractional("1")}, multi=True))],
        expect=[[("req-0", "device-1", {C0: "300m"})]],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_upstream_case(name: str) -> None:
    case = CASES[name]
    if case.error is not None:
        with pytest.raises(AllocationError, match=case.error):
            run(case)
        return
    if case.expect is None:
        with pytest.raises(Unsatisfiable, match="cannot allocate all claims"):
            run(case)
        return
    got = [plain(a) for a in run(case)]
    assert len(got) == len(case.expect)
    for actual, expected in zip(got, case.expect, strict=True):
        assert same(actual, expected), (actual, expected)


# -- what upstream leaves to the caller or to its Go types --------------------------------------------


def test_share_ids_come_from_the_caller_in_the_order_shares_are_made() -> None:
    """Upstream draws a random UID per share (``GenerateNewShareID``); draxr takes each from the
    caller, here a sequence, so the same input gives the same IDs."""
    case = CASES["consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request"]
    ids = iter(["11111111-1111-1111-1111-111111111111", "22222222-2222-2222-2222-222222222222"])
    a, b = run(case, lambda: next(ids))
    assert a.results[0].share_id == "11111111-1111-1111-1111-111111111111"
    assert b.results[0].share_id == "22222222-2222-2222-2222-222222222222"
    first_run = [r.to_api() for x in run(case) for r in x.results]
    assert first_run == [r.to_api() for x in run(case) for r in x.results]
    assert [r["shareID"] for r in first_run] == [
        "00000000-0000-0000-0000-000000000001",
        "00000000-0000-0000-0000-000000000002",
    ]


def test_a_share_prints_upstream_quantities_and_holds_no_device() -> None:
    """``consumedCapacity`` as upstream's JSON (``Quantity.String()``): a rounded amount in the step's
    format; a share is held, not taken; a device without ``allowMultipleAllocations`` is taken."""
    case = Case(
        claims=[claim("claim-0", [req("req-0", 1, "250m"), req("req-1", 1, "1")])],
        slices=[
            sliced(dev("device-1", {C0: policy_fractional("1")}, multi=True), dev("device-2", {C0: "1"}))
        ],
    )
    (a,) = run(case)
    api = a.to_api()["devices"]["results"]
    assert api[0]["consumedCapacity"] == {C0: "300m"}
    assert api[0]["shareID"] == "00000000-0000-0000-0000-000000000001"
    assert api[1] == {"request": "req-1", "driver": DRIVER, "pool": POOL, "device": "device-2"}
    key1, key2 = (DRIVER, POOL, "device-1"), (DRIVER, POOL, "device-2")
    assert a.device_keys == [key1, key2]
    assert a.dedicated_keys == [key2]
    assert a.shares == [Share(key1, "00000000-0000-0000-0000-000000000001", {C0: Quantity.parse("300m")})]


def test_consumed_amounts_print_as_upstream_prints_them() -> None:
    """Go's ``Quantity.String()`` (what the API server stores) has no suffix past ``E``: 10^21
    prints as ``1``, the value upstream writes into ``consumedCapacity`` for
    ``consumable-capacity-requests-are-not-modified``; draxr writes the same."""
    (a,) = run(CASES["consumable-capacity-requests-are-not-modified"])
    assert [r.to_api()["consumedCapacity"] for r in a.results] == [{C0: "2"}, {C0: "1"}]
    assert a.results[1].consumed == {C0: Quantity.parse("1000000000000000000000")}


def test_one_request_takes_one_share_of_a_device() -> None:
    """Upstream's search moves past a request's last pick, so a request of count 2 needs two devices
    even when one could hold both shares; two requests may share one."""
    one_device = [sliced(dev("device-1", {C0: "4"}, multi=True))]
    with pytest.raises(Unsatisfiable):
        run(Case(claims=[claim("claim-0", [req("req-0", 2, "1")])], slices=one_device))
    (a,) = run(
        Case(claims=[claim("claim-0", [req("req-0", 1, "1"), req("req-1", 1, "1")])], slices=one_device)
    )
    assert same(plain(a), [("req-0", "device-1", {C0: "1"}), ("req-1", "device-1", {C0: "1"})])


#: A range whose ``max`` is not exact in milli-units: rounded on the integer path.
NOT_MILLI_RANGE = {"value": "4", "requestPolicy": {"validRange": {"min": "0", "step": "1", "max": "1e19"}}}


def test_capacity_errors_name_the_claim_request_and_device() -> None:
    """``checking capacity for device driver/pool/device`` (the pre-scan of All mode names the bare
    device); a subrequest by its own name."""
    slices = [sliced(dev("device-1", {C0: "10"}, multi=True))]
    with pytest.raises(
        AllocationError,
        match=r"^claim default/claim-0, request subReq-0: checking capacity for device "
        r'driver-a/pool-1/device-1: capacity "capacity-0": capacity value is negative$',
    ):
        run(Case(claims=[claim("claim-0", [first("req-0", sub("subReq-0", 1, "-5"))])], slices=slices))
    with pytest.raises(
        AllocationError,
        match=r"^claim default/claim-0, request req-0: checking capacity for device device-1: capacity "
        r'"capacity-0": capacity request cannot be represented in the device\'s range arithmetic: request '
        r"18446744073709551616 exceeds MaxInt64$",
    ):
        run(
            Case(
                claims=[claim("claim-0", [all_req("req-0", "18446744073709551616")])],
                slices=[sliced(dev("device-1", {C0: NOT_MILLI_RANGE}, multi=True))],
            )
        )


def test_a_device_with_a_negative_capacity_aborts_even_without_capacity_requests() -> None:
    """``errNegativeCapacity`` holds for what a device publishes too, shared or not."""
    with pytest.raises(AllocationError, match="capacity value is negative"):
        run(Case(claims=[claim("claim-0", [req("req-0")])], slices=[sliced(dev("device-1", {C0: "-1"}))]))


def test_admin_access_takes_a_share_that_the_cluster_then_ignores() -> None:
    """An ``adminAccess`` request on a multi-allocatable device gets a share that counts against
    the capacity within its own allocation (upstream checks and records it), but an allocated admin
    result holds nothing (``foreachAllocatedDevice`` skips it)."""
    slices = [sliced(dev("device-1", {C0: "2"}, multi=True))]
    admin = exactly("req-0", CLASS, 1, adminAccess=True, **capacity("2"))
    (a,) = run(Case(claims=[claim("claim-0", [admin])], slices=slices))
    assert a.results[0].admin_access
    assert a.results[0].share_id is not None
    assert a.shares == []
    assert a.device_keys == []
    with pytest.raises(Unsatisfiable):
        run(Case(claims=[claim("claim-0", [admin]), claim("claim-1", [req("req-0", 1, "1")])], slices=slices))
    held = claim("held", [admin], allocation=a.to_api())
    (b,) = run(Case(claims=[claim("claim-1", [req("req-0", 1, "2")])], slices=slices, allocated=[held]))
    assert same(plain(b), [("req-0", "device-1", {C0: "2"})])
