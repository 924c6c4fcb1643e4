"""Property-based tests of the allocator's invariants (hypothesis).

Random small clusters and claims; for every answer we check: no device twice, exact counts,
constraints hold, order of pools/slices in the input does not matter, the same answer twice, and,
for tiny instances, that "unsatisfiable" is true (brute force finds no assignment either).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.harness import allocate, claim, exactly, state_of
from tests.core.podfactory import device, device_class, node, resource_slice
from webhook.core.allocation.errors import Unsatisfiable
from webhook.core.allocation.results import ClaimAllocation
from webhook.core.api.objects import Obj

CLASSES = [
    device_class("any", selectors=["true"]),
    device_class("model-a", selectors=["device.attributes['gpu.example.com'].model == 'a'"]),
    device_class("numa-0", selectors=["device.attributes['gpu.example.com'].numa == 0"]),
]
MATCHES: dict[str, Callable[[dict[str, Any]], bool]] = {
    "any": lambda d: True,
    "model-a": lambda d: d["model"] == "a",
    "numa-0": lambda d: d["numa"] == 0,
}


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Obj], list[Obj], dict[str, dict[str, Any]]]:
    slices: list[Obj] = []
    info: dict[str, dict[str, Any]] = {}
    for p in range(draw(st.integers(1, 3))):
        n_slices = draw(st.integers(1, 2))
        for s in range(n_slices):
            devs = []
            for i in range(draw(st.integers(0, 3))):
                name = f"p{p}s{s}d{i}"
                model = draw(st.sampled_from(["a", "b"]))
                numa = draw(st.integers(0, 1))
                devs.append(device(name, {"model": {"string": model}, "numa": {"int": numa}}))
                info[f"pool-{p}/{name}"] = {"model": model, "numa": numa}
            slices.append(
                resource_slice(f"slice-{p}-{s}", devs, pool=f"pool-{p}", node_name="n", count=n_slices)
            )
    claims = []
    for c in range(draw(st.integers(1, 2))):
        reqs = [
            exactly(f"r{r}", draw(st.sampled_from(list(MATCHES))), draw(st.integers(1, 2)))
            for r in range(draw(st.integers(1, 2)))
        ]
        constraint = draw(st.sampled_from([None, "matchAttribute", "distinctAttribute"]))
        cons = [{constraint: "gpu.example.com/numa"}] if constraint else None
        claims.append(claim(f"c{c}", reqs, cons))
    return slices, claims, info


def run(slices: list[Obj], claims: list[Obj]) -> list[ClaimAllocation] | None:
    st_ = state_of(node("n"), *CLASSES, *slices)
    try:
        return allocate(st_, "n", claims)
    except Unsatisfiable:
        return None


def as_plain(result: list[ClaimAllocation] | None) -> Any:
    if result is None:
        return None
    return [[(r.request, r.device.pool, r.device.name) for r in a.results] for a in result]


def brute_force_exists(claims: list[Obj], info: dict[str, dict[str, Any]]) -> bool:
    slots: list[tuple[int, str, str]] = []
    for ci, c in enumerate(claims):
        for r in c["spec"]["devices"]["requests"]:
            slots += [(ci, r["name"], r["exactly"]["deviceClassName"])] * r["exactly"]["count"]
    devices = list(info)
    if len(slots) > len(devices):
        return False
    for combo in itertools.permutations(devices, len(slots)):
        if not all(MATCHES[cls](info[d]) for (_, _, cls), d in zip(slots, combo, strict=True)):
            continue
        ok = True
        for ci, c in enumerate(claims):
            cons = c["spec"]["devices"].get("constraints") or []
            values = [info[d]["numa"] for (cj, _, _), d in zip(slots, combo, strict=True) if cj == ci]
            for con in cons:
                if "matchAttribute" in con and len(set(values)) > 1:
                    ok = False
                if "distinctAttribute" in con and len(set(values)) != len(values):
                    ok = False
        if ok:
            return True
    return False


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.randoms(use_true_random=False))
def test_allocator_invariants(
    cluster: tuple[list[Obj], list[Obj], dict[str, dict[str, Any]]], rnd: Any
) -> None:
    slices, claims, info = cluster
    result = run(slices, claims)
    # Same answer twice, and whatever the order of slices in the input.
    assert as_plain(run(slices, claims)) == as_plain(result)
    shuffled = list(slices)
    rnd.shuffle(shuffled)
    assert as_plain(run(shuffled, claims)) == as_plain(result)
    if result is None:
        assert not brute_force_exists(claims, info)
        return
    seen: set[tuple[str, str]] = set()
    for c, alloc in zip(claims, result, strict=True):
        for r in c["spec"]["devices"]["requests"]:
            got = [x for x in alloc.results if x.request == r["name"]]
            assert len(got) == r["exactly"]["count"]  # counts exact
            for x in got:
                assert MATCHES[r["exactly"]["deviceClassName"]](info[f"{x.device.pool}/{x.device.name}"])
        for x in alloc.results:
            key = (x.device.pool, x.device.name)
            assert key not in seen  # never the same device twice, across all claims
            seen.add(key)
        numas = [info[f"{x.device.pool}/{x.device.name}"]["numa"] for x in alloc.results]
        for con in c["spec"]["devices"].get("constraints") or []:
            if "matchAttribute" in con:
                assert len(set(numas)) == 1
            if "distinctAttribute" in con:
                assert len(set(numas)) == len(numas)


def taint_rules(info: dict[str, dict[str, Any]]) -> st.SearchStrategy[list[Obj]]:
    """Up to three rules selecting pools and devices of the cluster (or none, or all of it)."""
    keys = sorted(info) or ["pool-0/p0s0d0"]
    shapes = st.sampled_from(["none", "empty", "pool", "device", "pool+device", "driver", "other-driver"])

    def build(i: int, shape: str, key: str, effect: str) -> Obj:
        pool, dev = key.split("/")
        selector: Obj | None = {
            "none": None,
            "empty": {},
            "pool": {"pool": pool},
            "device": {"device": dev},
            "pool+device": {"pool": pool, "device": dev},
            "driver": {"driver": "gpu.example.com"},
            "other-driver": {"driver": "other.example.com", "pool": pool},
        }[shape]
        spec: Obj = {"taint": {"key": f"k{i}", "effect": effect}}
        if selector is not None:
            spec["deviceSelector"] = selector
        return {"kind": "DeviceTaintRule", "metadata": {"name": f"rule-{i}"}, "spec": spec}

    one = st.tuples(shapes, st.sampled_from(keys), st.sampled_from(["NoSchedule", "NoExecute", "None"]))
    return st.lists(one, max_size=3).map(lambda rs: [build(i, *r) for i, r in enumerate(rs)])


def _selects(rule: Obj, driver: str, pool: str, dev: str) -> bool:
    """The documented semantics, written out independently of the engine."""
    sel = rule["spec"].get("deviceSelector")
    if sel is None:
        return False
    return all(sel.get(k) in (None, v) for k, v in (("driver", driver), ("pool", pool), ("device", dev)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.data())
def test_a_taint_rule_acts_as_if_the_driver_had_published_the_taint(
    cluster: tuple[list[Obj], list[Obj], dict[str, dict[str, Any]]], data: st.DataObject
) -> None:
    slices, claims, info = cluster
    rules = data.draw(taint_rules(info))
    inlined = copy.deepcopy(slices)
    for sl in inlined:
        pool = sl["spec"]["pool"]["name"]
        for d in sl["spec"]["devices"]:
            taints = [r["spec"]["taint"] for r in rules if _selects(r, sl["spec"]["driver"], pool, d["name"])]
            if taints:
                d["taints"] = taints
    via_rules = run([*slices, *rules], claims)
    assert as_plain(via_rules) == as_plain(run(inlined, claims))
    blocked = {
        (sl["spec"]["pool"]["name"], d["name"])
        for sl in inlined
        for d in sl["spec"]["devices"]
        if any(t["effect"] != "None" for t in d.get("taints", []))
    }
    for alloc in via_rules or []:
        for x in alloc.results:
            assert (x.device.pool, x.device.name) not in blocked


def run_placed(slices: list[Obj], claims: list[Obj], policy: str) -> list[ClaimAllocation] | None:
    from webhook.core.allocation.allocator import Allocator

    st_ = state_of(node("n"), *CLASSES, *slices)
    nd = st_.node_devices("n")
    assert nd is not None
    allocator = Allocator(
        nd, st_.classes.get, st_.cel, st_.allocated.devices, policy=policy, group_attributes=_by_numa
    )
    try:
        return allocator.allocate(claims)
    except Unsatisfiable:
        return None


def _by_numa(class_name: str) -> tuple[str, ...]:
    return ("gpu.example.com/numa",)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.sampled_from(["binpack", "spread"]))
def test_a_placement_order_changes_which_answer_never_whether_there_is_one(
    cluster: tuple[list[Obj], list[Obj], dict[str, dict[str, Any]]], policy: str
) -> None:
    slices, claims, info = cluster
    placed = run_placed(slices, claims, policy)
    assert (placed is None) == (run(slices, claims) is None)
    assert as_plain(run_placed(slices, claims, policy)) == as_plain(placed)  # deterministic
    if placed is None:
        return
    seen: set[tuple[str, str]] = set()
    for c, alloc in zip(claims, placed, strict=True):
        for r in c["spec"]["devices"]["requests"]:
            got = [x for x in alloc.results if x.request == r["name"]]
            assert len(got) == r["exactly"]["count"]
            for x in got:
                assert MATCHES[r["exactly"]["deviceClassName"]](info[f"{x.device.pool}/{x.device.name}"])
        for x in alloc.results:
            assert (x.device.pool, x.device.name) not in seen
            seen.add((x.device.pool, x.device.name))
        numas = [info[f"{x.device.pool}/{x.device.name}"]["numa"] for x in alloc.results]
        for con in c["spec"]["devices"].get("constraints") or []:
            if "matchAttribute" in con:
                assert len(set(numas)) == 1
            if "distinctAttribute" in con:
                assert len(set(numas)) == len(numas)
