"""ResourceSlices as the structured allocator reads them (spec §5.4 and scenarios 29 and 31):
parsing, which slices target a node, and how slices gather into pools."""

from __future__ import annotations

from typing import Any

import pytest

from tests.core.podfactory import device, gpus, node, resource_slice
from webhook.core.api.objects import Obj
from webhook.core.api.quantity import Quantity
from webhook.core.cel.values import unusable_value
from webhook.core.cluster.slices import (
    Pool,
    Slice,
    device_id,
    gather_pools,
    parse_slice,
    qualify,
    slice_targets_node,
)
from webhook.core.cluster.taintrules import parse_taint_rule

DRIVER = "gpu.example.com"
N = node("n", labels={"zone": "a"})


def parsed(*objs: Obj) -> list[Slice]:
    return [parse_slice(o) for o in objs]


def pools_for(n: Obj, slices: list[Slice]) -> list[Pool]:
    by_pool: dict[tuple[str, str], list[Slice]] = {}
    for s in slices:
        by_pool.setdefault(s.pool_key, []).append(s)
    return gather_pools(n, slices, by_pool)


def zone(value: str, op: str = "In") -> Obj:
    return {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": op, "values": [value]}]}]}


# -- parse_slice ------------------------------------------------------------------------------------


def test_parse_reads_placement_pool_and_devices() -> None:
    obj = resource_slice("s", gpus(2), node_name="n", pool="p", generation=3, count=2)
    obj["metadata"]["uid"] = "u-1"
    sl = parse_slice(obj)
    assert (sl.name, sl.uid, sl.driver, sl.pool, sl.generation, sl.slice_count) == (
        "s",
        "u-1",
        DRIVER,
        "p",
        3,
        2,
    )
    assert (sl.node_name, sl.all_nodes, sl.node_selector, sl.per_device) == ("n", False, None, False)
    assert sl.problem is None
    assert sl.local_node == "n"
    assert sl.pool_key == (DRIVER, "p")
    assert sl.source is obj
    assert [d.key for d in sl.devices] == [(DRIVER, "p", "gpu-0"), (DRIVER, "p", "gpu-1")]
    assert device_id(sl.devices[0].key) == "gpu.example.com/p/gpu-0"
    assert sl.devices[1].slice_name == "s"


def test_attributes_and_capacity_without_a_domain_belong_to_the_driver() -> None:
    d = device(
        "d",
        {"model": {"string": "a100"}, "numa.example.org/node": {"int": 1}},
        capacity={"memory": {"value": "40Gi"}, "other.example.org/bw": {"value": "10G"}},
    )
    (dev,) = parse_slice(resource_slice("s", [d], node_name="n")).devices
    assert dev.attributes == {f"{DRIVER}/model": ("string", "a100"), "numa.example.org/node": ("int", 1)}
    assert dev.attribute(f"{DRIVER}/model") == ("string", "a100")
    assert dev.capacity == {
        f"{DRIVER}/memory": Quantity.parse("40Gi"),
        "other.example.org/bw": Quantity.parse("10G"),
    }
    assert qualify(DRIVER, "x") == f"{DRIVER}/x"
    assert qualify(DRIVER, "a.b/x") == "a.b/x"
    # Parsing checked every value, so CEL engines need not check them again.
    assert dev.checked is True
    assert unusable_value(dev) is None


def test_counters_shared_and_consumed_are_quantities() -> None:
    obj = resource_slice(
        "s",
        [device("part", consumesCounters=[{"counterSet": "mem", "counters": {"memory": {"value": "10Gi"}}}])],
        node_name="n",
        sharedCounters=[{"name": "mem", "counters": {"memory": {"value": "80Gi"}}}],
    )
    sl = parse_slice(obj)
    assert sl.shared_counters == {"mem": {"memory": Quantity.parse("80Gi")}}
    assert sl.devices[0].consumes_counters == (("mem", {"memory": Quantity.parse("10Gi")}),)


def test_device_flags_taints_and_binding_conditions() -> None:
    taint = {"key": "k", "value": "v", "effect": "NoSchedule"}
    devs = [
        device("a", allowMultipleAllocations=True, taints=[taint, "junk"]),
        device("b", bindingConditions=["up"], bindingFailureConditions=["down"], bindsToNode=True),
    ]
    a, b = parse_slice(resource_slice("s", devs, node_name="n")).devices
    assert a.allow_multiple_allocations is True
    assert a.taints == (taint,)
    assert a.binding_conditions == ()
    assert a.binding_failure_conditions == ()
    assert not a.binds_to_node
    assert b.binding_conditions == ("up",)
    assert b.binding_failure_conditions == ("down",)
    assert b.binds_to_node is True
    assert b.allow_multiple_allocations is False


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ({"driver": ""}, "spec.driver and spec.pool.name are required"),
        ({"pool": {"generation": 1}}, "spec.driver and spec.pool.name are required"),
        ({"devices": [{"attributes": {}}]}, "device without a name"),
        ({"devices": [{"name": "d", "attributes": {"x": {}}}]}, "device d: attribute x: exactly one value"),
        (
            {"devices": [{"name": "d", "capacity": {"mem": {"value": "lots"}}}]},
            "device d: quantities must match",
        ),
        ({"sharedCounters": [{"name": "c", "counters": {"x": {"value": "?"}}}]}, "quantities must match"),
    ],
)
def test_content_errors_mark_the_slice_and_drop_its_devices(spec: Obj, problem: str) -> None:
    obj = resource_slice("s", gpus(1), node_name="n")
    obj["spec"].update(spec)
    sl = parse_slice(obj)
    assert sl.problem is not None
    assert sl.problem.startswith(problem)
    assert sl.devices == []


@pytest.mark.parametrize(("generation", "count"), [("2", "3"), (True, False), (None, None)])
def test_unreadable_generation_and_count_fall_back(generation: Any, count: Any) -> None:
    obj = resource_slice("s", gpus(1), node_name="n")
    obj["spec"]["pool"] = {"name": "p", "generation": generation, "resourceSliceCount": count}
    sl = parse_slice(obj)
    assert (sl.generation, sl.slice_count) == (0, 1)


def test_per_device_placement_is_read_only_with_per_device_node_selection() -> None:
    devs = [device("a", nodeName="n"), device("b", allNodes=True), device("c", nodeSelector=zone("a"))]
    plain = parse_slice(resource_slice("s", devs, allNodes=True))
    assert [(d.node_name, d.all_nodes, d.node_selector) for d in plain.devices] == [(None, False, None)] * 3
    per = parse_slice(resource_slice("s", devs, perDeviceNodeSelection=True))
    assert per.local_node is None
    assert [(d.node_name, d.all_nodes, d.node_selector) for d in per.devices] == [
        ("n", False, None),
        (None, True, None),
        (None, False, zone("a")),
    ]


def test_taint_rules_add_their_taint_to_the_devices_they_match() -> None:
    rule = parse_taint_rule(
        {
            "metadata": {"name": "r"},
            "spec": {
                "deviceSelector": {"device": "gpu-1"},
                "taint": {"key": "broken", "effect": "NoExecute"},
            },
        }
    )
    sl = parse_slice(resource_slice("s", gpus(2), node_name="n"), [rule])
    assert [d.taints for d in sl.devices] == [(), ({"key": "broken", "effect": "NoExecute"},)]


# -- slice_targets_node -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("placement", "targets"),
    [
        ({"node_name": "n"}, True),
        ({"node_name": "m"}, False),
        ({"allNodes": True}, True),
        ({"nodeSelector": zone("a")}, True),
        ({"nodeSelector": zone("b")}, False),
        ({"nodeSelector": zone("a", op="Bogus")}, False),  # an unreadable selector selects nothing
        ({}, False),  # nothing set: a future extension, not for us
    ],
)
def test_slice_targets_node(placement: Obj, targets: bool) -> None:
    assert slice_targets_node(parse_slice(resource_slice("s", gpus(1), **placement)), N) is targets


@pytest.mark.parametrize(
    ("devices", "targets"),
    [
        ([device("a", nodeName="m"), device("b", nodeName="n")], True),
        ([device("a", nodeName="m")], False),
        ([device("a", allNodes=True)], True),
        ([device("a", nodeSelector=zone("a"))], True),
        ([device("a", nodeSelector=zone("b"))], False),
        ([device("a")], False),
    ],
)
def test_per_device_node_selection_targets_a_node_when_any_device_selects_it(
    devices: list[Obj], targets: bool
) -> None:
    sl = parse_slice(resource_slice("s", devices, perDeviceNodeSelection=True))
    assert slice_targets_node(sl, N) is targets


# -- gather_pools (spec §5.4) -----------------------------------------------------------------------


def test_rule_5_4_1_only_slices_relevant_for_the_node_are_kept() -> None:
    slices = parsed(
        resource_slice("mine", gpus(1), node_name="n", pool="mine"),
        resource_slice("theirs", gpus(1), node_name="m", pool="theirs"),
        resource_slice("zone-a", gpus(1), pool="za", nodeSelector=zone("a")),
        resource_slice("zone-b", gpus(1), pool="zb", nodeSelector=zone("b")),
        resource_slice("everyone", gpus(1), pool="all", allNodes=True),
    )
    assert [p.name for p in pools_for(N, slices)] == ["all", "mine", "za"]


def test_rule_5_4_2_only_the_highest_generation_is_kept() -> None:
    slices = parsed(
        resource_slice("old", gpus(3, "old"), node_name="n", pool="p", generation=1),
        resource_slice("new", gpus(1, "new"), node_name="n", pool="p", generation=2),
    )
    (pool,) = pools_for(N, slices)
    assert pool.generation == 2
    assert [s.name for s in pool.slices] == ["new"]
    assert not pool.incomplete


def test_rule_5_4_3_a_pool_is_complete_when_its_generation_has_resource_slice_count_slices() -> None:
    slices = parsed(
        resource_slice("s1", gpus(1, "a"), node_name="n", pool="p", count=2),
        resource_slice("s2", gpus(1, "b"), node_name="n", pool="p", count=2),
    )
    (pool,) = pools_for(N, slices)
    assert not pool.incomplete
    assert [s.name for s in pool.slices] == ["s1", "s2"]


def test_rule_5_4_3_completeness_counts_slices_that_target_other_nodes() -> None:
    slices = parsed(
        resource_slice("here", gpus(1, "a"), node_name="n", pool="p", count=2),
        resource_slice("there", gpus(1, "b"), node_name="m", pool="p", count=2),
    )
    (pool,) = pools_for(N, slices)
    assert not pool.incomplete
    assert [s.name for s in pool.slices] == ["here"]  # what the node can use
    assert [s.name for s in pool.all_slices] == ["here", "there"]  # what the pool holds


def test_scenario_31_a_pool_missing_a_slice_is_incomplete() -> None:
    (pool,) = pools_for(N, parsed(resource_slice("s1", gpus(1), node_name="n", pool="p", count=2)))
    assert pool.incomplete


def test_scenario_31_a_newer_generation_elsewhere_makes_an_incomplete_node_view_obsolete() -> None:
    """``checkSlicesInPool`` runs only for an incomplete view (the node sees 1 of 2 slices)."""
    slices = parsed(
        resource_slice("old", gpus(1, "old"), pool="p", generation=1, nodeSelector=zone("a"), count=2),
        resource_slice("new", gpus(1, "new"), pool="p", generation=2, nodeSelector=zone("b")),
        resource_slice("other", gpus(1), pool="q", allNodes=True),
    )
    assert [p.name for p in pools_for(N, slices)] == ["q"]


def test_gather_pools_a_complete_node_view_stands_beside_a_newer_generation_elsewhere() -> None:
    slices = parsed(
        resource_slice("old", gpus(1, "old"), pool="p", generation=1, nodeSelector=zone("a")),
        resource_slice("new", gpus(1, "new"), pool="p", generation=2, nodeSelector=zone("b")),
    )
    (pool,) = pools_for(N, slices)
    assert (pool.name, pool.generation, pool.incomplete) == ("p", 1, False)


def test_rule_5_4_5_duplicate_device_names_make_the_pool_invalid() -> None:
    slices = parsed(
        resource_slice("s1", [device("x")], node_name="n", pool="p", count=2),
        resource_slice("s2", [device("x")], node_name="n", pool="p", count=2),
    )
    (pool,) = pools_for(N, slices)
    assert pool.invalid == "duplicate device name x"


def test_rule_5_4_5_a_slice_with_a_problem_makes_its_pool_invalid() -> None:
    bad = resource_slice("bad", [{"attributes": {}}], node_name="n", pool="p", count=2)
    slices = parsed(resource_slice("good", gpus(1), node_name="n", pool="p", count=2), bad)
    (pool,) = pools_for(N, slices)
    assert pool.invalid == "slice bad: device without a name"


def test_scenario_29_pools_by_driver_and_name_slices_by_name() -> None:
    slices = parsed(
        resource_slice("s3", [device("device-1")], pool="pool-3", allNodes=True),
        resource_slice("s2", [device("device-1")], pool="pool-2", allNodes=True),
        resource_slice("s1", [device("device-1")], pool="pool-1", allNodes=True),
        resource_slice("s0", [device("device-1")], driver="a.example.com", pool="pool-9", allNodes=True),
        resource_slice("slice-3", [device("d3")], pool="p", count=3, allNodes=True),
        resource_slice("slice-1", [device("d1")], pool="p", count=3, allNodes=True),
        resource_slice("slice-2", [device("d2")], pool="p", count=3, allNodes=True),
    )
    pools = pools_for(N, slices)
    assert [p.id for p in pools] == [
        "a.example.com/pool-9",
        f"{DRIVER}/p",
        f"{DRIVER}/pool-1",
        f"{DRIVER}/pool-2",
        f"{DRIVER}/pool-3",
    ]
    assert [s.name for s in pools[1].slices] == ["slice-1", "slice-2", "slice-3"]


def test_scenario_29_binding_condition_pools_go_last() -> None:
    slices = parsed(
        resource_slice("a", [device("x", bindingConditions=["ready"])], pool="a", allNodes=True),
        resource_slice("b", [device("y")], pool="b", allNodes=True),
    )
    pools = pools_for(N, slices)
    assert [p.name for p in pools] == ["b", "a"]
    assert pools[1].has_binding_conditions


def test_counter_sets_come_from_every_slice_of_the_generation() -> None:
    counters = [{"name": "mem", "counters": {"memory": {"value": "80Gi"}}}]
    slices = parsed(
        resource_slice("devs", gpus(1), node_name="n", pool="p", count=2),
        resource_slice("counters", [], node_name="m", pool="p", count=2, sharedCounters=counters),
    )
    (pool,) = pools_for(N, slices)
    assert pool.counter_sets == {"mem": {"memory": Quantity.parse("80Gi")}}


def test_disagreeing_slice_counts_give_the_same_answer_in_any_arrival_order() -> None:
    first, second = parsed(
        resource_slice("s-a", gpus(1, "a"), node_name="n", pool="p", count=2),
        resource_slice("s-b", gpus(1, "b"), node_name="n", pool="p", count=1),
    )
    (one,) = pools_for(N, [first, second])
    (other,) = pools_for(N, [second, first])
    assert one.incomplete == other.incomplete
