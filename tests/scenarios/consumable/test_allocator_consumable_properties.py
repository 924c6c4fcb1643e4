"""Property-based tests of consumable capacity in the allocator (hypothesis).

Random small nodes of multi-allocatable (and plain) devices with capacities and request policies,
some already shared by allocated claims, and random claims with capacity requests. For every
answer: the shares on a device never exceed any of its capacities; every share consumes at least
what it asked, rounded up by the policy (never below its minimum, on its step, within its maximum,
one of its values); one share per request and device; share IDs unique; a plain device used once.
And "unsatisfiable" is true: a brute force over every assignment finds none either.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.harness import claim, exactly, state_of
from tests.core.podfactory import device, node
from tests.scenarios.consumable.test_allocator_consumable import (
    CLASS,
    DRIVER,
    NODE,
    POOL,
    allocator,
    klass,
    sliced,
)
from webhook.core.allocation.errors import Unsatisfiable
from webhook.core.allocation.results import ClaimAllocation
from webhook.core.api.objects import Obj
from webhook.core.api.quantity import Quantity
from webhook.core.cluster.consumable import DeviceCapacity, parse_capacities, resolve, violates_policy

NAMES = ("mem", "slots")


@st.composite
def capacities(draw: st.DrawFn) -> dict[str, Obj]:
    out: dict[str, Obj] = {}
    for name in draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=2)):
        value = draw(st.integers(1, 16))
        body: Obj = {"value": str(value)}
        kind = draw(st.sampled_from(["none", "values", "range"]))
        if kind == "values":
            values = sorted(draw(st.lists(st.integers(0, value), min_size=1, max_size=3, unique=True)))
            body["requestPolicy"] = {
                "default": str(draw(st.sampled_from(values))),
                "validValues": [str(v) for v in values],
            }
        elif kind == "range":
            lo = draw(st.integers(0, value // 2))
            step = draw(st.sampled_from([None, 1, 2, 3]))
            hi = draw(st.sampled_from([None, value]))
            rng: Obj = {"min": str(lo)}
            if step is not None:
                rng["step"] = str(step)
            if hi is not None:
                rng["max"] = str(hi)
            top = hi if hi is not None else value
            defaults = [v for v in range(lo, top + 1) if step is None or (v - lo) % step == 0]
            body["requestPolicy"] = {"default": str(draw(st.sampled_from(defaults))), "validRange": rng}
        out[name] = body
    return out


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[Obj], list[Obj], list[Obj]]:
    devices = []
    for i in range(draw(st.integers(1, 3))):
        extra: Obj = {}
        caps = draw(capacities())
        if caps:
            extra["capacity"] = caps
        if draw(st.integers(0, 3)):  # mostly multi-allocatable
            extra["allowMultipleAllocations"] = True
        devices.append(device(f"d{i}", **extra))
    held = []
    for i, d in enumerate(devices):
        if d.get("allowMultipleAllocations") and draw(st.booleans()):
            consumed = {
                n: str(draw(st.integers(0, int(c["value"]) // 2))) for n, c in d.get("capacity", {}).items()
            }
            result = {
                "request": "r",
                "driver": DRIVER,
                "pool": POOL,
                "device": d["name"],
                "shareID": f"{i:08d}-0000-0000-0000-000000000000",
            }
            if consumed:
                result["consumedCapacity"] = consumed
            held.append(
                claim(f"held-{i}", [exactly("r", CLASS)], allocation={"devices": {"results": [result]}})
            )
    claims = []
    for c in range(draw(st.integers(1, 3))):
        requests = []
        for r in range(draw(st.integers(1, 2))):
            asked = {
                n: str(draw(st.integers(0, 4)))
                for n in draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=2))
            }
            extra = {"capacity": {"requests": asked}} if asked else {}
            requests.append(exactly(f"r{r}", CLASS, draw(st.sampled_from([1, 1, 1, 2])), **extra))
        claims.append(claim(f"c{c}", requests))
    return devices, held, claims


def run(devices: list[Obj], held: list[Obj], claims: list[Obj]) -> list[ClaimAllocation] | None:
    st_ = state_of(node(NODE), klass(), sliced(*devices), *held)
    try:
        return allocator(st_).allocate(claims)
    except Unsatisfiable:
        return None


def capacities_of(devices: list[Obj]) -> dict[str, dict[str, DeviceCapacity]]:
    return {d["name"]: parse_capacities(d.get("capacity")) for d in devices}


def already(held: list[Obj]) -> dict[str, dict[str, Fraction]]:
    out: dict[str, dict[str, Fraction]] = {}
    for c in held:
        for r in c["status"]["allocation"]["devices"]["results"]:
            for n, v in r.get("consumedCapacity", {}).items():
                out.setdefault(r["device"], {})[n] = (
                    out.get(r["device"], {}).get(n, Fraction(0)) + Quantity.parse(v).value
                )
    return out


def asked_of(request: Obj) -> dict[str, Quantity] | None:
    asked = request["exactly"].get("capacity", {}).get("requests")
    return {k: Quantity.parse(v) for k, v in asked.items()} if asked else None


def check(devices: list[Obj], held: list[Obj], claims: list[Obj], result: list[ClaimAllocation]) -> None:
    caps = capacities_of(devices)
    multi = {d["name"] for d in devices if d.get("allowMultipleAllocations")}
    used = {k: dict(v) for k, v in already(held).items()}
    share_ids: set[str] = set()
    plain_uses: list[str] = []
    for c, alloc in zip(claims, result, strict=True):
        requests = {r["name"]: r for r in c["spec"]["devices"]["requests"]}
        per_request: dict[str, list[str]] = {}
        for r in alloc.results:
            name = r.device.name
            per_request.setdefault(r.request, []).append(name)
            if name not in multi:
                assert r.share_id is None
                assert r.consumed is None
                plain_uses.append(name)
                continue
            assert r.share_id is not None
            assert r.share_id not in share_ids
            share_ids.add(r.share_id)
            asked = asked_of(requests[r.request])
            consumed = r.consumed or {}
            assert set(consumed) == set(caps[name])  # every capacity of the device, nothing else
            for cap_name, cap in caps[name].items():
                q = consumed[cap_name]
                used.setdefault(name, {})[cap_name] = used.get(name, {}).get(cap_name, Fraction(0)) + q.value
                wanted = asked.get(cap_name) if asked else None
                assert not violates_policy(q, cap.policy)
                policy = cap.policy
                if wanted is None:
                    assert q.value == (policy.default if policy and policy.default else cap.value).value
                    continue
                assert q.value >= wanted.value  # never below what it asked
                if policy is not None and policy.valid_range is not None:
                    rng = policy.valid_range
                    assert rng.min is not None
                    assert q.value >= rng.min.value  # never below the minimum
                    if rng.step is not None:
                        assert (q.value - rng.min.value) % rng.step.value == 0
                        assert q.value - rng.step.value < max(wanted.value, rng.min.value)  # the next step up
                    else:
                        assert q.value == max(wanted.value, rng.min.value)
                elif policy is not None and policy.valid_values:
                    assert q.value in {v.value for v in policy.valid_values}
                else:
                    assert q.value == wanted.value
        for names in per_request.values():
            assert len(names) == len(set(names))  # one share (or device) per request and device
    for name, by_cap in used.items():
        for cap_name, total in by_cap.items():
            assert total <= caps[name][cap_name].value.value, (name, cap_name)  # never over capacity
    assert len(plain_uses) == len(set(plain_uses))


def exists(devices: list[Obj], held: list[Obj], claims: list[Obj]) -> bool:
    """Any assignment of devices to every requested device at all (order does not matter: the
    checks are on sums)."""
    caps = capacities_of(devices)
    multi = {d["name"] for d in devices if d.get("allowMultipleAllocations")}
    base = already(held)
    slots: list[tuple[int, str, dict[str, Quantity] | None]] = []
    for ci, c in enumerate(claims):
        for r in c["spec"]["devices"]["requests"]:
            slots += [(ci, r["name"], asked_of(r))] * r["exactly"]["count"]
    shares: list[list[dict[str, Quantity] | None]] = []
    names = [d["name"] for d in devices]
    for _, _, asked in slots:
        per_device: list[dict[str, Quantity] | None] = []
        for n in names:
            share = resolve(asked, caps[n])
            ok = share is not None and not any(
                violates_policy(q, caps[n][k].policy) for k, q in share.items()
            )
            per_device.append(share if ok else None)
        shares.append(per_device)
    for choice in itertools.product(range(len(names)), repeat=len(slots)):
        used = {n: dict(v) for n, v in base.items()}
        seen_plain: set[str] = set()
        per_request: set[tuple[int, str, str]] = set()
        ok = True
        for (ci, rname, _), di, options in zip(slots, choice, shares, strict=True):
            n = names[di]
            share = options[di]
            if share is None or (ci, rname, n) in per_request:
                ok = False
                break
            per_request.add((ci, rname, n))
            if n not in multi:
                if n in seen_plain:
                    ok = False
                    break
                seen_plain.add(n)
            for k, q in share.items():
                total = used.setdefault(n, {}).get(k, Fraction(0)) + q.value
                used[n][k] = total
                ok = ok and total <= caps[n][k].value.value  # every device, shared or not
            if not ok:
                break
        if ok:
            return True
    return False


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_shares_hold_their_capacity_and_unsatisfiable_is_true(
    case: tuple[list[Obj], list[Obj], list[Obj]],
) -> None:
    devices, held, claims = case
    result = run(devices, held, claims)
    if result is None:
        assert not exists(devices, held, claims)
    else:
        check(devices, held, claims, result)
        assert exists(devices, held, claims)


def test_the_brute_force_itself_finds_shares() -> None:
    """Guard for the property: the brute force is not trivially empty or trivially full."""
    d = [device("d0", capacity={"mem": {"value": "4"}}, allowMultipleAllocations=True)]
    two = [claim(f"c{i}", [exactly("r0", CLASS, 1, capacity={"requests": {"mem": "2"}})]) for i in range(2)]
    assert exists(d, [], two)
    assert not exists(
        d, [], [*two, claim("c2", [exactly("r0", CLASS, 1, capacity={"requests": {"mem": "1"}})])]
    )
    assert not exists(d, [], [claim("c", [exactly("r0", CLASS, 2, capacity={"requests": {"mem": "1"}})])])
    result = run(d, [], two)
    assert result is not None
    check(d, [], two, result)
