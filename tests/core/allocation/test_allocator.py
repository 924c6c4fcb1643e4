"""The structured allocator (spec §5, scenarios 29-32)."""

from typing import Any

import pytest

from tests.core.harness import all_of, allocate, claim, exactly, picked, state_of
from tests.core.podfactory import device, device_class, gpus, node, resource_slice
from webhook.core.allocation.allocator import Allocator
from webhook.core.allocation.errors import AllocationError, Unsatisfiable
from webhook.core.api.objects import Obj

GPU = device_class("gpu", selectors=['device.driver == "gpu.example.com"'])


def test_scenario_29_pools_sorted_by_name_then_slices_by_name() -> None:
    st = state_of(
        node("n1"),
        GPU,
        resource_slice("s3", [device("device-1")], pool="pool-3", allNodes=True),
        resource_slice("s2", [device("device-1")], pool="pool-2", allNodes=True),
        resource_slice("s1", [device("device-1")], pool="pool-1", allNodes=True),
    )
    (a,) = allocate(st, "n1", [claim("c", [exactly("r", "gpu", 2)])])
    assert picked(a) == ["pool-1/device-1", "pool-2/device-1"]
    st2 = state_of(
        node("n1"),
        GPU,
        resource_slice("slice-3", [device("d3")], pool="p", allNodes=True, count=3),
        resource_slice("slice-2", [device("d2")], pool="p", allNodes=True, count=3),
        resource_slice("slice-1", [device("d1")], pool="p", allNodes=True, count=3),
    )
    (b,) = allocate(st2, "n1", [claim("c", [exactly("r", "gpu", 2)])])
    assert picked(b) == ["p/d1", "p/d2"]


def test_binding_condition_pools_go_last_and_their_devices_are_not_picked() -> None:
    st = state_of(
        node("n1"),
        GPU,
        resource_slice(
            "a", [device("bc", bindingConditions=["ready"]), device("x")], pool="a", allNodes=True
        ),
        resource_slice("b", [device("y")], pool="b", allNodes=True),
    )
    (a,) = allocate(st, "n1", [claim("c", [exactly("r", "gpu", 2)])])
    assert picked(a) == ["b/y", "a/x"]
    with pytest.raises(Unsatisfiable):  # the gate off (before 1.36): never picked, even if needed
        allocate(st, "n1", [claim("c", [exactly("r", "gpu", 3)])])


def _attachable(name: str, **extra: Any) -> Obj:
    return device(
        name,
        bindingConditions=["example.com/Attached"],
        bindingFailureConditions=["example.com/AttachFailed"],
        **extra,
    )


def test_binding_conditions_on_such_devices_are_picked_last_and_their_conditions_copied() -> None:
    st = state_of(
        node("n1"),
        GPU,
        resource_slice("a", [_attachable("bc")], pool="a", allNodes=True),
        resource_slice("b", [device("y")], pool="b", allNodes=True),
    )
    st.set_binding_conditions(True)
    (one,) = allocate(st, "n1", [claim("c", [exactly("r", "gpu")])])
    assert picked(one) == ["b/y"]  # pool a sorts first by name, but its binding conditions rank it last
    assert "bindingConditions" not in one.to_api()["devices"]["results"][0]
    (two,) = allocate(st, "n1", [claim("c", [exactly("r", "gpu", 2)])])
    assert picked(two) == ["b/y", "a/bc"]
    by_device = {r["device"]: r for r in two.to_api()["devices"]["results"]}
    assert by_device["bc"]["bindingConditions"] == ["example.com/Attached"]
    assert by_device["bc"]["bindingFailureConditions"] == ["example.com/AttachFailed"]
    assert "bindingConditions" not in by_device["y"]
    assert "bindingFailureConditions" not in by_device["y"]
    assert two.to_api().get("nodeSelector") is None  # allNodes, no bindsToNode: not pinned


def test_binds_to_node_pins_the_allocation_to_the_node_only_with_the_gate_on() -> None:
    st = state_of(
        node("n1"),
        node("n2"),
        GPU,
        resource_slice("a", [_attachable("bc", bindsToNode=True)], pool="a", allNodes=True),
    )
    st.set_binding_conditions(True)
    (a,) = allocate(st, "n2", [claim("c", [exactly("r", "gpu")])])
    assert a.to_api()["nodeSelector"] == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]
    }
    st.set_binding_conditions(False)
    with pytest.raises(Unsatisfiable):
        allocate(st, "n2", [claim("c", [exactly("r", "gpu")])])


def test_binding_condition_devices_stay_last_under_a_placement_policy() -> None:
    """binpack and spread reorder candidates by topology group; a device with binding conditions
    still comes after a plain one of the same group."""
    numa0 = {"numa": {"int": 0}}
    st = state_of(
        node("n1"),
        GPU,
        resource_slice(
            "a", [_attachable("bc", attributes=numa0), device("x", attributes=numa0)], pool="a", allNodes=True
        ),
    )
    st.set_binding_conditions(True)
    nd = st.node_devices("n1")
    assert nd is not None
    for policy in ("binpack", "spread"):
        allocator = Allocator(
            nd,
            st.classes.get,
            st.cel,
            st.allocated.devices,
            policy=policy,
            group_attributes=lambda cls: ("gpu.example.com/numa",),
            binding_conditions=True,
        )
        (a,) = allocator.allocate([claim("c", [exactly("r", "gpu")])])
        assert picked(a) == ["a/x"], policy


def test_scenario_30_cel_runtime_error_is_an_allocation_error() -> None:
    bad = device_class("bad", selectors=['device.attributes["gpu.example.com"].missing == "x"'])
    st = state_of(node("n1"), bad, resource_slice("s", gpus(1), node_name="n1"))
    with pytest.raises(
        AllocationError, match=r"class bad: selector #0 on device gpu.example.com/n1/gpu-0: CEL runtime"
    ):
        allocate(st, "n1", [claim("c", [exactly("r", "bad")])])
    safe = device_class("safe", selectors=['has(device.attributes["gpu.example.com"].missing)'])
    st2 = state_of(node("n1"), safe, resource_slice("s", gpus(1), node_name="n1"))
    with pytest.raises(Unsatisfiable, match="cannot allocate all claims"):
        allocate(st2, "n1", [claim("c", [exactly("r", "safe")])])


def test_request_selector_error_names_the_claim() -> None:
    st = state_of(node("n1"), GPU, resource_slice("s", gpus(1), node_name="n1"))
    sel = [{"cel": {"expression": "device.attributes['gpu.example.com'].nope > 1"}}]
    with pytest.raises(AllocationError, match=r"claim default/c: selector #0 on device"):
        allocate(st, "n1", [claim("c", [exactly("r", "gpu", selectors=sel)])])


def test_scenario_31_incomplete_pool_offers_nothing_and_all_mode_errors() -> None:
    st = state_of(node("n1"), GPU, resource_slice("s1", gpus(2), node_name="n1", pool="p", count=2))
    with pytest.raises(Unsatisfiable):
        allocate(st, "n1", [claim("c", [exactly("r", "gpu")])])
    with pytest.raises(
        AllocationError,
        match=r"asks for all devices, but resource pool gpu\.example\.com/p is currently being updated",
    ):
        allocate(st, "n1", [claim("c", [all_of("r", "gpu")])])


def test_gather_pools_a_complete_view_at_an_older_generation_stands() -> None:
    """``GatherPools`` (incubating): the node's own slices decide when they are complete, even
    though a newer generation of the pool name exists for another node."""
    st = state_of(
        node("n1"),
        node("n2"),
        GPU,
        resource_slice("old", gpus(2), node_name="n1", pool="p", generation=1, count=1),
        resource_slice("new", gpus(2, "other"), node_name="n2", pool="p", generation=2, count=1),
    )
    (a,) = allocate(st, "n1", [claim("c", [exactly("r", "gpu")])])
    assert picked(a) == ["p/gpu-0"]
    (b,) = allocate(st, "n2", [claim("c", [exactly("r", "gpu")])])
    assert picked(b) == ["p/other-0"]


def test_gather_pools_check_slices_in_pool_makes_an_incomplete_older_view_obsolete() -> None:
    """``checkSlicesInPool``: only an incomplete view is checked against every slice of the pool;
    a newer generation there makes it obsolete (scenario 31)."""
    st = state_of(
        node("n1"),
        node("n2"),
        GPU,
        resource_slice("old", gpus(2), node_name="n1", pool="p", generation=1, count=2),
        resource_slice("new", gpus(2, "other"), node_name="n2", pool="p", generation=2, count=1),
    )
    with pytest.raises(Unsatisfiable):
        allocate(st, "n1", [claim("c", [exactly("r", "gpu")])])
    assert st.node_devices("n1") is not None
    assert st.node_devices("n1").pools == []  # type: ignore[union-attr]


def test_gather_pools_an_incomplete_view_is_completed_by_slices_of_other_nodes() -> None:
    """``checkSlicesInPool`` counts every slice of the generation, wherever it points."""
    st = state_of(
        node("n1"),
        node("n2"),
        GPU,
        resource_slice("a", gpus(1), node_name="n1", pool="p", generation=3, count=2),
        resource_slice("b", gpus(1, "other"), node_name="n2", pool="p", generation=3, count=2),
    )
    (a,) = allocate(st, "n1", [claim("c", [exactly("r", "gpu")])])
    assert picked(a) == ["p/gpu-0"]


def test_pool_is_invalid_only_for_duplicates_within_the_nodes_view() -> None:
    """``poolIsInvalid`` looks at the node's slices: the same device name on two nodes' slices of
    one pool name is no conflict."""
    st = state_of(
        node("n1"),
        node("n2"),
        GPU,
        resource_slice("a", gpus(1), node_name="n1", pool="p", generation=1, count=2),
        resource_slice("b", gpus(1), node_name="n2", pool="p", generation=1, count=2),
    )
    (a,) = allocate(st, "n1", [claim("c", [exactly("r", "gpu")])])
    assert picked(a) == ["p/gpu-0"]
    twice = state_of(
        node("n1"),
        GPU,
        resource_slice("a", gpus(1), node_name="n1", pool="p", generation=1, count=2),
        resource_slice("b", gpus(1), node_name="n1", pool="p", generation=1, count=2),
    )
    with pytest.raises(Unsatisfiable, match=r"^invalid resource pools were encountered$"):
        allocate(twice, "n1", [claim("c", [exactly("r", "gpu")])])


def test_highest_generation_of_the_node_wins() -> None:
    st = state_of(
        node("n1"),
        GPU,
        resource_slice("old", [device("old")], node_name="n1", pool="p", generation=1),
        resource_slice("new", [device("new")], node_name="n1", pool="p", generation=2),
    )
    (a,) = allocate(st, "n1", [claim("c", [exactly("r", "gpu")])])
    assert picked(a) == ["p/new"]


def test_invalid_pool_with_duplicate_device_names_fails_allocation() -> None:
    st = state_of(
        node("n1"),
        GPU,
        resource_slice("a", [device("d")], node_name="n1", pool="p", count=2),
        resource_slice("b", [device("d")], node_name="n1", pool="p", count=2),
    )
    with pytest.raises(Unsatisfiable, match="invalid resource pools were encountered"):
        allocate(st, "n1", [claim("c", [exactly("r", "gpu")])])
    with pytest.raises(AllocationError, match="is currently invalid"):
        allocate(st, "n1", [claim("c", [all_of("r", "gpu")])])


def test_scenario_32_allocated_devices_are_skipped_unless_admin_access() -> None:
    holder = claim(
        "holder",
        [exactly("r", "gpu")],
        allocation={
            "devices": {
                "results": [{"request": "r", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}]
            }
        },
    )
    st = state_of(node("n1"), GPU, resource_slice("s", gpus(2), node_name="n1"), holder)
    (a,) = allocate(st, "n1", [claim("c", [exactly("r", "gpu")])])
    assert picked(a) == ["n1/gpu-1"]
    (b,) = allocate(st, "n1", [claim("c", [exactly("r", "gpu", adminAccess=True)])])
    assert picked(b) == ["n1/gpu-0"]
    assert b.results[0].admin_access
    st.allocated.reserve_devices("inflight", [("gpu.example.com", "n1", "gpu-1")])
    with pytest.raises(Unsatisfiable):
        allocate(st, "n1", [claim("c", [exactly("r", "gpu")])])


def test_claims_allocated_together_never_share_a_device() -> None:
    st = state_of(node("n1"), GPU, resource_slice("s", gpus(3), node_name="n1"))
    a, b = allocate(st, "n1", [claim("a", [exactly("r", "gpu", 2)]), claim("b", [exactly("r", "gpu")])])
    assert set(picked(a)).isdisjoint(picked(b))
    with pytest.raises(Unsatisfiable):
        allocate(st, "n1", [claim("a", [exactly("r", "gpu", 2)]), claim("b", [exactly("r", "gpu", 2)])])


def test_backtracking_finds_the_first_complete_solution() -> None:
    # d0 matches both classes, d1 only "wide": greedy would give d0 to "wide" and starve "narrow".
    wide = device_class("wide", selectors=["true"])
    narrow = device_class("narrow", selectors=["device.attributes['gpu.example.com'].index == 0"])
    st = state_of(node("n1"), wide, narrow, resource_slice("s", gpus(2), node_name="n1"))
    (a,) = allocate(st, "n1", [claim("c", [exactly("w", "wide"), exactly("n", "narrow")])])
    assert [(r.request, r.device.name) for r in a.results] == [("w", "gpu-1"), ("n", "gpu-0")]


def test_all_mode_takes_every_matching_device_and_fails_when_one_is_busy() -> None:
    st = state_of(node("n1"), GPU, resource_slice("s", gpus(3), node_name="n1"))
    (a,) = allocate(st, "n1", [claim("c", [all_of("r", "gpu")])])
    assert len(a.results) == 3
    st.allocated.reserve_devices("t", [("gpu.example.com", "n1", "gpu-1")])
    with pytest.raises(Unsatisfiable):
        allocate(st, "n1", [claim("c", [all_of("r", "gpu")])])


def test_at_most_32_devices_per_claim() -> None:
    st = state_of(node("n1"), GPU, resource_slice("s", gpus(40), node_name="n1"))
    with pytest.raises(AllocationError, match="exceeds the claim limit of 32"):
        allocate(st, "n1", [claim("c", [exactly("r", "gpu", 33)])])
    (a,) = allocate(st, "n1", [claim("c", [exactly("r", "gpu", 32)])])
    assert len(a.results) == 32
    with pytest.raises(AllocationError, match="number of requested devices 40"):  # "All" finds 40
        allocate(st, "n1", [claim("c", [all_of("r", "gpu")])])


def test_match_attribute_and_distinct_attribute() -> None:
    devs = [
        device(f"d{i}", {"numa": {"int": i % 2}, "model": {"string": "a" if i < 3 else "b"}})
        for i in range(4)
    ]
    st = state_of(node("n1"), GPU, resource_slice("s", devs, node_name="n1"))
    (a,) = allocate(
        st, "n1", [claim("c", [exactly("r", "gpu", 2)], [{"matchAttribute": "gpu.example.com/numa"}])]
    )
    assert picked(a) == ["n1/d0", "n1/d2"]
    (b,) = allocate(
        st, "n1", [claim("c", [exactly("r", "gpu", 2)], [{"distinctAttribute": "gpu.example.com/numa"}])]
    )
    assert picked(b) == ["n1/d0", "n1/d1"]
    with pytest.raises(Unsatisfiable):
        allocate(
            st, "n1", [claim("c", [exactly("r", "gpu", 3)], [{"distinctAttribute": "gpu.example.com/numa"}])]
        )
    with pytest.raises(Unsatisfiable):  # a missing attribute fails the constraint
        allocate(
            st, "n1", [claim("c", [exactly("r", "gpu")], [{"matchAttribute": "gpu.example.com/absent"}])]
        )


def test_constraints_only_apply_to_listed_requests() -> None:
    devs = [device(f"d{i}", {"numa": {"int": i}}) for i in range(3)]
    st = state_of(node("n1"), GPU, resource_slice("s", devs, node_name="n1"))
    (a,) = allocate(
        st,
        "n1",
        [
            claim(
                "c",
                [exactly("a", "gpu"), exactly("b", "gpu")],
                [{"matchAttribute": "gpu.example.com/numa", "requests": ["a"]}],
            )
        ],
    )
    assert picked(a) == ["n1/d0", "n1/d1"]


def test_list_attributes_match_by_intersection_and_distinct_by_disjointness() -> None:
    devs = [
        device("d0", {"pcie": {"strings": ["r1", "r2"]}}),
        device("d1", {"pcie": {"strings": ["r2", "r3"]}}),
        device("d2", {"pcie": {"string": "r3"}}),
    ]
    st = state_of(node("n1"), GPU, resource_slice("s", devs, node_name="n1"))
    (a,) = allocate(
        st, "n1", [claim("c", [exactly("r", "gpu", 2)], [{"matchAttribute": "gpu.example.com/pcie"}])]
    )
    assert picked(a) == ["n1/d0", "n1/d1"]
    with pytest.raises(Unsatisfiable):  # r1/r2, r2/r3, r3: no value shared by all three
        allocate(
            st, "n1", [claim("c", [exactly("r", "gpu", 3)], [{"matchAttribute": "gpu.example.com/pcie"}])]
        )
    (b,) = allocate(
        st, "n1", [claim("c", [exactly("r", "gpu", 2)], [{"distinctAttribute": "gpu.example.com/pcie"}])]
    )
    assert picked(b) == ["n1/d0", "n1/d2"]


def test_untolerated_device_taints_exclude_devices() -> None:
    devs = [device("t", taints=[{"key": "broken", "value": "yes", "effect": "NoSchedule"}]), device("ok")]
    st = state_of(node("n1"), GPU, resource_slice("s", devs, node_name="n1"))
    (a,) = allocate(st, "n1", [claim("c", [exactly("r", "gpu")])])
    assert picked(a) == ["n1/ok"]
    tol = [{"key": "broken", "operator": "Exists", "effect": "NoSchedule"}]
    (b,) = allocate(st, "n1", [claim("c", [exactly("r", "gpu", tolerations=tol)])])
    assert picked(b) == ["n1/t"]
    assert b.results[0].to_api()["tolerations"] == tol
    none_effect = [device("n", taints=[{"key": "k", "effect": "None"}])]
    st2 = state_of(node("n1"), GPU, resource_slice("s", none_effect, node_name="n1"))
    assert picked(allocate(st2, "n1", [claim("c", [exactly("r", "gpu")])])[0]) == ["n1/n"]


def test_first_available_tries_subrequests_in_order() -> None:
    big = device_class("big", selectors=["device.attributes['gpu.example.com'].index >= 10"])
    st = state_of(node("n1"), GPU, big, resource_slice("s", gpus(2), node_name="n1"))
    req = {
        "name": "r",
        "firstAvailable": [
            {"name": "large", "deviceClassName": "big", "allocationMode": "ExactCount", "count": 1},
            {"name": "small", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2},
        ],
    }
    (a,) = allocate(st, "n1", [claim("c", [req])])
    assert [r.request for r in a.results] == ["r/small", "r/small"]


def test_node_selector_shapes() -> None:
    labelled = node("n1", labels={"zone": "a"})
    sel = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}
    st = state_of(
        labelled,
        GPU,
        resource_slice("local", [device("l")], node_name="n1", pool="local"),
        resource_slice("every", [device("e")], pool="every", allNodes=True),
        resource_slice("zonal", [device("z")], pool="zonal", nodeSelector=sel),
    )
    (loc,) = allocate(st, "n1", [claim("c", [exactly("r", "gpu", 1)])])
    assert picked(loc) == ["every/e"]  # pools by name: every < local < zonal
    assert loc.node_selector is None
    (three,) = allocate(st, "n1", [claim("c", [exactly("r", "gpu", 3)])])
    assert three.node_selector == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
    }
    st.allocated.reserve_devices("t", [("gpu.example.com", "every", "e"), ("gpu.example.com", "local", "l")])
    (zonal,) = allocate(st, "n1", [claim("c", [exactly("r", "gpu", 1)])])
    assert zonal.node_selector == sel


def test_node_selector_slices_only_reach_matching_nodes() -> None:
    sel = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}
    st = state_of(
        node("in", labels={"zone": "a"}),
        node("out", labels={"zone": "b"}),
        GPU,
        resource_slice("zonal", gpus(1), pool="zonal", nodeSelector=sel),
    )
    assert picked(allocate(st, "in", [claim("c", [exactly("r", "gpu")])])[0]) == ["zonal/gpu-0"]
    with pytest.raises(Unsatisfiable):
        allocate(st, "out", [claim("c", [exactly("r", "gpu")])])


def test_per_device_node_selection() -> None:
    devs = [device("for-n2", nodeName="n2"), device("everywhere", allNodes=True)]
    st = state_of(
        node("n1"), node("n2"), GPU, resource_slice("s", devs, pool="p", perDeviceNodeSelection=True)
    )
    (a,) = allocate(st, "n1", [claim("c", [exactly("r", "gpu")])])
    assert picked(a) == ["p/everywhere"]
    assert a.node_selector is None
    (b,) = allocate(st, "n2", [claim("c", [exactly("r", "gpu")])])
    assert picked(b) == ["p/for-n2"]
    assert b.node_selector == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]
    }


def test_class_and_claim_config_in_the_result() -> None:
    cfg = [{"opaque": {"driver": "gpu.example.com", "parameters": {"mode": "shared"}}}]
    cls = device_class("gpu", selectors=["true"], config=cfg)
    st = state_of(node("n1"), cls, resource_slice("s", gpus(2), node_name="n1"))
    claim_cfg = [{"requests": ["b"], "opaque": {"driver": "gpu.example.com", "parameters": {"x": 1}}}]
    (a,) = allocate(st, "n1", [claim("c", [exactly("a", "gpu"), exactly("b", "gpu")], config=claim_cfg)])
    assert a.config == [
        {"source": "FromClass", **cfg[0]},
        {
            "source": "FromClaim",
            "requests": ["b"],
            **{k: v for k, v in claim_cfg[0].items() if k != "requests"},
        },
    ]


def test_partitionable_devices_share_counters() -> None:
    counters = [{"name": "mem", "counters": {"memory": {"value": "80Gi"}}}]

    def part(n: str, size: str) -> Obj:
        return device(n, consumesCounters=[{"counterSet": "mem", "counters": {"memory": {"value": size}}}])

    st = state_of(
        node("n1"),
        GPU,
        resource_slice(
            "s",
            [part("whole", "80Gi"), part("half-a", "40Gi"), part("half-b", "40Gi")],
            node_name="n1",
            sharedCounters=counters,
        ),
    )
    (a,) = allocate(st, "n1", [claim("c", [exactly("r", "gpu")])])
    assert picked(a) == ["n1/whole"]
    with pytest.raises(Unsatisfiable):  # whole + any half would exceed 80Gi; two halves need the whole gone
        allocate(st, "n1", [claim("c", [exactly("r", "gpu", 3)])])
    (b,) = allocate(st, "n1", [claim("c", [exactly("r", "gpu", 2)])])
    assert picked(b) == ["n1/half-a", "n1/half-b"]


def test_unknown_class_is_an_error() -> None:
    st = state_of(node("n1"), resource_slice("s", gpus(1), node_name="n1"))
    with pytest.raises(AllocationError, match="could not retrieve device class nope"):
        allocate(st, "n1", [claim("c", [exactly("r", "nope")])])


def test_selectors_follow_the_served_release() -> None:
    """A class whose selector only the newer releases declare (``includes``, 1.36 on) allocates
    under them and ends in the compile error under an older one, as its kube-scheduler would."""
    cls = device_class("gpu", selectors=['["a", "b"].includes("b")'])
    st = state_of(node("n1"), cls, resource_slice("a", [device("x")], pool="a", allNodes=True))
    (one,) = allocate(st, "n1", [claim("c", [exactly("r", "gpu")])])
    assert picked(one) == ["a/x"]
    st.set_cel_release((1, 35))
    with pytest.raises(AllocationError, match="undeclared reference to 'includes'"):
        allocate(st, "n1", [claim("c", [exactly("r", "gpu")])])
    st.set_cel_release(None)
    assert picked(allocate(st, "n1", [claim("c", [exactly("r", "gpu")])])[0]) == ["a/x"]
