"""core.topology: the annotations, KEP-5491 attribute values, groups, the device order and the
constraints draxr adds (unit tests and hypothesis properties)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.harness import allocate, claim, exactly, state_of
from tests.core.podfactory import device, device_class, node, pod, resource_slice
from webhook.core.allocation.errors import Unsatisfiable
from webhook.core.api.alignment import (
    ALIGN_ANNOTATION,
    ALIGN_BY_ANNOTATION,
    NONE,
    PREFERRED,
    REQUIRED,
    align_by,
    align_by_problems,
    attribute_name_problems,
    pod_alignment,
)
from webhook.core.api.objects import Obj
from webhook.core.cluster.slices import Device, parse_slice
from webhook.core.cluster.topology import (
    Group,
    alignment_constraints,
    group_devices,
    groups_broken,
    order_candidates,
    values_of,
)

ROOT = "resource.kubernetes.io/pcieRoot"
NUMA = "gpu.example.com/numa"


def parsed(devices: list[Obj]) -> list[Device]:
    return parse_slice(resource_slice("s", devices, node_name="n")).devices


def klass(annotation: str | None) -> Obj:
    dc = device_class("gpu")
    if annotation is not None:
        dc["metadata"]["annotations"] = {ALIGN_BY_ANNOTATION: annotation}
    return dc


# --- annotations ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["resource.kubernetes.io/pcieRoot", "gpu.example.com/numa_node", "Example.COM/_x1", "a/" + "b" * 32],
)
def test_fully_qualified_attribute_names_are_accepted(name: str) -> None:
    assert attribute_name_problems(name) == []


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("pcieRoot", "must be a domain and a name separated by one '/'"),
        ("a/b/c", "must be a domain and a name separated by one '/'"),
        ("/pcieRoot", "domain part must not be empty"),
        ("example.com/", "name part must not be empty"),
        ("example.com/pcie-root", "name part: a valid C identifier must start with alphabetic character"),
        ("example.com/1st", "name part: a valid C identifier"),
        ("example.com/" + "a" * 33, "name part must be no more than 32 characters"),
        ("-x.com/a", "domain part: a lowercase RFC 1123 subdomain"),
        ("x" * 64 + "/a", "domain part must be no more than 63 characters"),
        ("", "must not be empty"),
    ],
)
def test_malformed_attribute_names_say_why(name: str, problem: str) -> None:
    problems = attribute_name_problems(name)
    assert problems
    assert problems[0].startswith(problem)


def test_align_by_lists_attributes_and_strips_blanks() -> None:
    assert align_by(klass(f" {ROOT} ,{NUMA}")) == (ROOT, NUMA)
    assert align_by(klass(ROOT)) == (ROOT,)
    assert align_by(klass(None)) == ()
    assert align_by(None) == ()


@pytest.mark.parametrize("value", ["", " , ", f"{ROOT},", f"{ROOT},{ROOT}", "pcieRoot", f"{ROOT},bad"])
def test_a_malformed_align_by_is_ignored_whole(value: str) -> None:
    assert align_by_problems(value)
    assert align_by(klass(value)) == ()


def test_align_by_problems_name_each_entry() -> None:
    assert align_by_problems(f"{ROOT}, {ROOT}") == [f"{ROOT}: named twice"]
    assert align_by_problems("") == ["must name at least one device attribute"]
    assert align_by_problems(f"{ROOT},,{NUMA}") == ["(empty): must not be empty"]
    assert align_by_problems(3) == ["must be a string"]


@pytest.mark.parametrize(
    ("annotation", "mode"),
    [
        (None, REQUIRED),
        ("required", REQUIRED),
        ("preferred", PREFERRED),
        ("none", NONE),
        ("Preferred", REQUIRED),
    ],
)
def test_pod_alignment_defaults_to_required_and_reads_strictly(annotation: str | None, mode: str) -> None:
    p = pod()
    if annotation is not None:
        p["metadata"]["annotations"] = {ALIGN_ANNOTATION: annotation}
    assert pod_alignment(p) == mode


# --- values (KEP-5491) ---------------------------------------------------------------------------


def test_a_scalar_is_a_one_element_set_and_a_list_a_set() -> None:
    scalar, listed, other_type, missing = parsed(
        [
            device("a", {"root": {"string": "x"}}),
            device("b", {"root": {"strings": ["x", "y", "x"]}}),
            device("c", {"root": {"int": 1}}),
            device("d", {}),
        ]
    )
    attr = "gpu.example.com/root"
    assert values_of(scalar, attr) == frozenset({("string", "x")})
    assert values_of(listed, attr) == frozenset({("string", "x"), ("string", "y")})
    assert values_of(other_type, attr) == frozenset({("int", 1)})
    assert values_of(missing, attr) is None
    # Types never compare equal: an int 1 and a string "1" share nothing.
    (ones,) = parsed([device("e", {"root": {"ints": [1, 2]}})])
    (text_one,) = parsed([device("f", {"root": {"string": "1"}})])
    assert not (values_of(ones, attr) or set()) & (values_of(text_one, attr) or set())


def test_versions_compare_by_their_semantic_text() -> None:
    a, b = parsed(
        [device("a", {"v": {"version": "1.2.3"}}), device("b", {"v": {"versions": ["1.2.3", "2.0.0"]}})]
    )
    attr = "gpu.example.com/v"
    assert (values_of(a, attr) or set()) & (values_of(b, attr) or set()) == {("version", "1.2.3")}


# Allocating through a matchAttribute / distinctAttribute constraint must follow KEP-5491 exactly:
# match = a non-empty intersection across every selected device, distinct = pairwise disjoint.

VALUES = ["p", "q", "r"]


@st.composite
def list_typed_devices(draw: st.DrawFn) -> list[tuple[str, frozenset[str]]]:
    out = []
    for i in range(draw(st.integers(1, 5))):
        vals = draw(st.sets(st.sampled_from(VALUES), min_size=1, max_size=3))
        out.append((f"d{i}", frozenset(vals)))
    return out


def as_attribute(vals: frozenset[str], scalar: bool) -> Obj:
    if scalar and len(vals) == 1:
        return {"string": next(iter(vals))}  # a scalar counts as a one-element list
    return {"strings": sorted(vals)}


@settings(max_examples=150, deadline=None)
@given(
    list_typed_devices(),
    st.integers(1, 3),
    st.sampled_from(["matchAttribute", "distinctAttribute"]),
    st.booleans(),
)
def test_list_typed_constraints_follow_kep_5491(
    devices: list[tuple[str, frozenset[str]]], count: int, kind: str, scalars: bool
) -> None:
    st_ = state_of(
        node("n"),
        device_class("any", selectors=["true"]),
        resource_slice(
            "s", [device(n, {"root": as_attribute(v, scalars)}) for n, v in devices], node_name="n"
        ),
    )
    c = claim("c", [exactly("r", "any", count)], [{kind: "gpu.example.com/root"}])
    sets = dict(devices)

    def ok(names: tuple[str, ...]) -> bool:
        chosen = [sets[n] for n in names]
        if kind == "matchAttribute":
            return bool(frozenset.intersection(*chosen))
        return all(not (a & b) for a, b in itertools.combinations(chosen, 2))

    exists = any(ok(combo) for combo in itertools.combinations(sets, count))
    try:
        (alloc,) = allocate(st_, "n", [c])
    except Unsatisfiable:
        assert not exists
        return
    names = tuple(r.device.name for r in alloc.results)
    assert len(set(names)) == count
    assert ok(names)


# --- groups --------------------------------------------------------------------------------------


def group(size: int, free: int) -> Group:
    g = Group(0)
    g.size, g.free = size, free
    return g


def test_groups_count_members_free_devices_and_list_membership() -> None:
    devices = parsed(
        [
            device("a", {"root": {"string": "x"}}),
            device("b", {"root": {"strings": ["x", "y"]}}),
            device("c", {"root": {"string": "y"}}),
            device("d", {}),
        ]
    )
    taken = {devices[2].key}
    groups, values = group_devices(devices, "gpu.example.com/root", taken.__contains__)
    x, y = ("string", "x"), ("string", "y")
    assert (groups[x].size, groups[x].free, groups[x].first) == (2, 2, 0)
    assert (groups[y].size, groups[y].free, groups[y].first) == (2, 1, 1)
    assert groups[x].whole
    assert not groups[y].whole
    assert devices[3].key not in values  # no attribute, no group


@pytest.mark.parametrize(
    ("groups", "demand", "aligned", "broken"),
    [
        ([(4, 4), (4, 4)], 1, False, 1),  # every group whole: one must break
        ([(4, 3), (4, 4)], 1, False, 0),  # a group in use has room
        ([(4, 1), (4, 1), (4, 4)], 2, False, 0),  # unaligned: two groups in use hold two
        ([(4, 1), (4, 1), (4, 4)], 2, True, 1),  # aligned: no group in use has two
        ([(4, 0), (4, 4), (4, 4)], 8, False, 2),
        ([(4, 4), (8, 8)], 4, False, 1),  # the largest whole group first
        ([(4, 4), (8, 8)], 0, True, 0),
    ],
)
def test_groups_broken(groups: list[tuple[int, int]], demand: int, aligned: bool, broken: int) -> None:
    gs = {("string", str(i)): group(size, free) for i, (size, free) in enumerate(groups)}
    assert groups_broken(gs, demand, aligned) == broken


# --- device order --------------------------------------------------------------------------------


def eight_on_two_roots(taken: set[int]) -> tuple[list[Any], Any, Any, set[Any]]:
    devices = parsed([device(f"gpu-{i}", {"pcieRoot": {"string": f"r{i // 4}"}}) for i in range(8)])
    keys = {devices[i].key for i in taken}
    groups, values = group_devices(devices, "gpu.example.com/pcieRoot", keys.__contains__)
    return [(d, None) for d in devices], groups, values, keys


def names(order: list[Any]) -> list[str]:
    return [d.name for d, _ in order]


def test_binpack_fills_the_fullest_group_first_and_spread_the_emptiest() -> None:
    cands, groups, values, keys = eight_on_two_roots({4, 5})
    binpack = order_candidates(cands, values, groups, "binpack", None, keys.__contains__)
    assert names(binpack) == ["gpu-6", "gpu-7", "gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5"]
    spread = order_candidates(cands, values, groups, "spread", None, keys.__contains__)
    assert names(spread)[:2] == ["gpu-0", "gpu-6"]  # interleaved, the emptiest group first


def test_a_constrained_request_tries_groups_with_room_first() -> None:
    cands, groups, values, keys = eight_on_two_roots({4, 5})
    fits = {v for v, g in groups.items() if g.free >= 3}.__contains__
    order = order_candidates(cands, values, groups, "binpack", fits, keys.__contains__)
    assert names(order)[:4] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]


# --- constraints ---------------------------------------------------------------------------------


def request(name: str, cls: str, count: int) -> Obj:
    return {"name": name, "exactly": {"deviceClassName": cls, "allocationMode": "ExactCount", "count": count}}


def largest(size: int) -> Any:
    return lambda cls, attr: size


def test_one_constraint_per_container_and_attribute_shared_by_classes() -> None:
    requests = [
        request("container-0-request-0", "gpu", 2),
        request("container-0-request-1", "nic", 1),
        request("container-1-request-0", "gpu", 4),
        request("container-2-request-0", "gpu", 1),  # one device: nothing to align
        request("container-3-request-0", "other", 4),  # its class does not align
    ]
    aligns = {"gpu": (ROOT, NUMA), "nic": (ROOT,)}
    constraints, notes = alignment_constraints(requests, aligns, largest(4))
    assert constraints == [
        {"requests": ["container-0-request-0", "container-0-request-1"], "matchAttribute": ROOT},
        {"requests": ["container-0-request-0"], "matchAttribute": NUMA},
        {"requests": ["container-1-request-0"], "matchAttribute": ROOT},
        {"requests": ["container-1-request-0"], "matchAttribute": NUMA},
    ]
    assert notes == []


def test_a_demand_no_group_can_hold_is_not_aligned_and_noted() -> None:
    requests = [request("container-0-request-0", "gpu", 8)]
    constraints, notes = alignment_constraints(requests, {"gpu": (ROOT,)}, largest(4))
    assert constraints == []
    assert notes == [f"container-0: 8 devices of class gpu cannot share {ROOT} (the largest group has 4)"]
