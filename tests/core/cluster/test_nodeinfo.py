"""NodeInfo (upstream's per-node accounting) and Nodes (the node index, with the device-plugin
``serving`` index)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.core.podfactory import container, node, pod
from webhook.core.api.objects import Obj
from webhook.core.cluster.nodeinfo import (
    NodeChange,
    NodeInfo,
    Nodes,
    hard_taints,
    host_ports,
    node_allocatable,
)

GPU = "example.com/gpu"


def ready(status: str) -> Obj:
    return {"type": "Ready", "status": status}


def with_conditions(n: Obj, *conditions: Obj) -> Obj:
    n["status"]["conditions"] = list(conditions)
    return n


# -- NodeInfo -----------------------------------------------------------------------------------


def test_of_reads_allocatable_unschedulable_and_hard_taints() -> None:
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    info = NodeInfo.of(node("n", {"cpu": "4", GPU: 2}, unschedulable=True, taints=[taint]))
    assert info.allocatable["cpu"] == 4000
    assert info.allocatable[GPU] == 2
    assert info.allocatable_names == frozenset({"cpu", "memory", "pods", GPU})
    assert info.unschedulable is True
    assert info.hard_taints == [taint]
    assert info.requested == {}
    assert info.pods == {}


def test_plain_is_schedulable_untainted_and_gated_and_follows_each_change() -> None:
    assert NodeInfo.of(node("n")).plain is True
    assert NodeInfo.of(node("n", unschedulable=True)).plain is False
    assert NodeInfo.of(node("n", taints=[{"key": "k", "effect": "NoExecute"}])).plain is False
    assert NodeInfo.of(with_conditions(node("n"), ready("False"))).plain is False
    info = NodeInfo.of(node("n"))
    info.set_kubelet_gate(False)
    assert (info.kubelet_gate, info.plain) == (False, False)
    assert info.snapshot().plain is False
    info.set_kubelet_gate(True)
    assert info.plain is True
    info.refresh(node("n", unschedulable=True))
    assert (info.kubelet_gate, info.plain) == (True, False)
    info.set_kubelet_gate(True)  # the gate alone does not make a cordoned node plain
    assert (info.kubelet_gate, info.plain) == (True, False)


def test_a_gate_set_on_the_nodes_keeps_the_index_of_ungated_nodes() -> None:
    nodes = Nodes()
    nodes.upsert(node("a"))
    nodes.upsert(node("b"))
    assert nodes.ungated == set()
    nodes.set_kubelet_gate("a", False)
    assert nodes.ungated == {"a"}
    assert (nodes["a"].kubelet_gate, nodes["a"].plain) == (False, False)
    nodes.set_kubelet_gate("a", True)
    assert nodes.ungated == set()
    assert nodes["a"].plain is True


def test_max_pods_is_allocatable_pods_or_the_kubelet_default() -> None:
    n = node("n")
    n["status"]["allocatable"]["pods"] = "3"
    assert NodeInfo.of(n).max_pods == 3
    assert NodeInfo.of(n).snapshot().max_pods == 3
    del n["status"]["allocatable"]["pods"]
    assert NodeInfo.of(n).max_pods == 110


def test_unschedulable_must_be_literally_true() -> None:
    assert NodeInfo.of(node("n", unschedulable="true")).unschedulable is False
    assert NodeInfo.of(node("n")).unschedulable is False


def test_add_pod_sums_requests_and_remove_pod_takes_them_back() -> None:
    info = NodeInfo.of(node("n"))
    info.add_pod("a", {"cpu": 500, "memory": 10}, [])
    info.add_pod("b", {"cpu": 250, GPU: 1}, [("TCP", "0.0.0.0", 80)])
    assert info.requested == {"cpu": 750, "memory": 10, GPU: 1}
    assert set(info.pods) == {"a", "b"}
    assert info.host_ports == {"b": [("TCP", "0.0.0.0", 80)]}  # a pod without ports has no entry
    info.remove_pod("b")
    assert info.requested == {"cpu": 500, "memory": 10, GPU: 0}
    assert set(info.pods) == {"a"}
    assert info.host_ports == {}


def test_adding_a_pod_twice_replaces_its_requests() -> None:
    info = NodeInfo.of(node("n"))
    info.add_pod("a", {"cpu": 500}, [("TCP", "0.0.0.0", 80)])
    info.add_pod("a", {"cpu": 200}, [])
    assert info.requested == {"cpu": 200}
    assert info.host_ports == {}


def test_removing_an_unknown_pod_changes_nothing() -> None:
    info = NodeInfo.of(node("n"))
    info.add_pod("a", {"cpu": 500}, [])
    info.remove_pod("nobody")
    assert info.requested == {"cpu": 500}


def test_refresh_takes_the_new_node_and_keeps_what_pods_request() -> None:
    info = NodeInfo.of(node("n", {"cpu": "4"}))
    info.add_pod("a", {"cpu": 1000}, [("TCP", "0.0.0.0", 80)])
    newer = node("n", {"cpu": "8"}, unschedulable=True)
    info.refresh(newer)
    assert info.node is newer
    assert info.allocatable["cpu"] == 8000
    assert info.unschedulable is True
    assert info.requested == {"cpu": 1000}
    assert info.host_ports == {"a": [("TCP", "0.0.0.0", 80)]}


Step = tuple[str, str, dict[str, int]]  # ("add", pod, requests), ("remove", pod, {}), ("refresh", cpu, {})
STEPS: st.SearchStrategy[Step] = st.one_of(
    st.tuples(
        st.just("add"),
        st.sampled_from(["a", "b", "c"]),
        st.dictionaries(st.sampled_from(["cpu", "memory", GPU, "pods"]), st.integers(0, 5000), max_size=3),
    ),
    st.tuples(st.just("remove"), st.sampled_from(["a", "b", "c", "nobody"]), st.just({})),
    st.tuples(st.just("refresh"), st.sampled_from(["1", "4", "8"]), st.just({})),
)


def _apply(info: NodeInfo, step: Step) -> None:
    verb, arg, reqs = step
    if verb == "add":
        info.add_pod(arg, reqs, [])
    elif verb == "remove":
        info.remove_pod(arg)
    else:
        info.refresh(node("n", {"cpu": arg, "memory": "1Gi"}))


@given(st.lists(STEPS, max_size=12))
def test_free_is_allocatable_minus_requested_through_every_change(steps: list[Step]) -> None:
    """``free``, which the usual-node check reads instead of subtracting per node, never drifts from
    allocatable minus requested: through pods added (again), removed, the node refreshed, snapshots."""
    info = NodeInfo.of(node("n", {"cpu": "4", "memory": "1Gi"}))
    for step in steps:
        _apply(info, step)
        for view in (info, info.snapshot()):
            keys = set(view.allocatable) | set(view.requested) | set(view.free)
            assert {k: view.free.get(k, 0) for k in keys} == {
                k: view.allocatable.get(k, 0) - view.requested.get(k, 0) for k in keys
            }
    copy = info.snapshot()
    copy.add_pod("only-in-the-copy", {"cpu": 1}, [])
    assert "only-in-the-copy" not in info.pods
    assert info.free.get("cpu", 0) == info.allocatable.get("cpu", 0) - info.requested.get("cpu", 0)


@given(st.lists(STEPS, min_size=1, max_size=12))
def test_every_change_renews_the_stamp_and_no_two_nodeinfos_share_one(steps: list[Step]) -> None:
    """A verdict remembered with a stamp (``scheduling.usual``) holds only while nothing changed:
    each add, remove (even of an unknown pod), refresh and gate gives a stamp never seen before."""
    info = NodeInfo.of(node("n", {"cpu": "4", "memory": "1Gi"}))
    seen = {info.stamp}
    for step in steps:
        _apply(info, step)
        assert info.stamp not in seen
        seen.add(info.stamp)
        copy = info.snapshot()
        assert copy.stamp not in seen
        seen.add(copy.stamp)
    info.set_kubelet_gate(False)
    assert info.stamp not in seen


# -- runs of nodes -------------------------------------------------------------------------------


def _nodes(*names: str) -> Nodes:
    nodes = Nodes()
    for n in names:
        nodes.upsert(node(n, {"cpu": "4"}))
    return nodes


def test_the_names_are_cut_into_runs_each_node_holding_its_run_s_cell() -> None:
    nodes = _nodes("e", "a", "d", "b", "c")
    nodes.block_size = 2
    blocks = nodes.blocks()
    assert blocks.firsts == ["a", "c", "e"]
    assert [nodes[n].cell is blocks.cells[i // 2] for i, n in enumerate("abcde")] == [True] * 5
    assert nodes.blocks() is blocks  # kept while no node comes or goes
    assert blocks.span(["a", "b2", "c", "d", "e"], 1) == (2, 4)  # run "c": c and d
    assert blocks.span(["a", "b2", "c", "d", "e"], 2) == (4, 5)  # the last run to the end


@given(st.lists(STEPS, min_size=1, max_size=12))
def test_every_change_of_a_node_moves_its_run_s_cell_and_no_other(steps: list[Step]) -> None:
    """What a search remembers of a run of nodes holds while the run's cell does: each change of a
    node (as ``NodeInfo.changed`` tells it) moves that run's cell to the node's new stamp."""
    nodes = _nodes("m", "n", "o", "p")
    nodes.block_size = 2
    blocks = nodes.blocks()
    before = [cell[0] for cell in blocks.cells]
    for step in steps:
        _apply(nodes["n"], step)
        assert blocks.cells[0][0] == nodes["n"].stamp
        assert blocks.cells[1][0] == before[1]
    assert nodes["n"].snapshot().cell is None  # a what-if's changes are its own


def test_a_node_that_comes_or_goes_makes_new_runs_with_new_cells() -> None:
    """What a search remembered of a run is kept with the run's cell: new cells, nothing of it holds."""
    nodes = _nodes("a", "b", "c")
    nodes.block_size = 2
    old = nodes.blocks()
    nodes.upsert(node("bb", {"cpu": "4"}))
    new = nodes.blocks()
    assert new.firsts == ["a", "bb"]
    assert not {id(c) for c in old.cells} & {id(c) for c in new.cells}
    nodes.remove("c")
    after = nodes.blocks()
    assert after.firsts == ["a", "bb"]
    assert not {id(c) for c in new.cells} & {id(c) for c in after.cells}
    assert [nodes[n].cell is after.cells[i // 2] for i, n in enumerate(["a", "b", "bb"])] == [True] * 3
    nodes.block_size = 3
    assert nodes.blocks().firsts == ["a"]


# -- hard taints ----------------------------------------------------------------------------------


def test_hard_taints_keep_no_schedule_and_no_execute_only() -> None:
    taints = [
        {"key": "a", "effect": "NoSchedule"},
        {"key": "b", "effect": "PreferNoSchedule"},
        {"key": "c", "effect": "NoExecute"},
        "not a taint",
    ]
    assert [t["key"] for t in hard_taints(node("n", taints=taints))] == ["a", "c"]


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("True", []),
        ("False", [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]),
        ("Unknown", [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}]),
    ],
)
def test_ready_condition_adds_the_lifecycle_taint(status: str, expected: list[Obj]) -> None:
    assert hard_taints(with_conditions(node("n"), ready(status))) == expected


def test_other_conditions_add_no_taint() -> None:
    n = with_conditions(node("n"), {"type": "MemoryPressure", "status": "False"}, ready("True"))
    assert hard_taints(n) == []


def test_a_lifecycle_taint_already_on_the_node_is_not_added_twice() -> None:
    existing = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}
    n = with_conditions(node("n", taints=[existing]), ready("False"))
    assert hard_taints(n) == [existing]


# -- allocatable units ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource", "value", "units"),
    [
        ("cpu", "1500m", 1500),
        ("cpu", "2", 2000),
        ("cpu", "0.0005", 1),  # millicores round up
        ("memory", "1Ki", 1024),
        ("memory", "1500m", 2),  # everything but cpu rounds up to whole units
        ("ephemeral-storage", "1G", 10**9),
        (GPU, 3, 3),  # a JSON number is read too
        ("pods", "-5", 0),  # never below zero
    ],
)
def test_node_allocatable_units(resource: str, value: Any, units: int) -> None:
    got, names = node_allocatable({"status": {"allocatable": {resource: value}}})
    assert got == {resource: units}
    assert names == frozenset({resource})


def test_unreadable_allocatable_values_are_skipped() -> None:
    got, names = node_allocatable({"status": {"allocatable": {"cpu": "lots", "memory": "1Gi", GPU: None}}})
    assert got == {"memory": 2**30}
    assert names == frozenset({"memory"})


def test_no_status_means_nothing_allocatable() -> None:
    assert node_allocatable({"metadata": {"name": "n"}}) == ({}, frozenset())


# -- host ports ------------------------------------------------------------------------------------


def test_host_ports_of_init_and_regular_containers_with_defaults() -> None:
    init = container("init")
    init["ports"] = [{"containerPort": 53, "hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"}]
    main = container("main")
    main["ports"] = [
        {"containerPort": 8080, "hostPort": 80},
        {"containerPort": 9090},  # no host port
        {"containerPort": 1, "hostPort": 0},
        {"containerPort": 2, "hostPort": "443"},  # not an integer: ignored
    ]
    assert host_ports(pod("p", [main], init=[init])) == [("UDP", "10.0.0.1", 53), ("TCP", "0.0.0.0", 80)]


def test_a_pod_without_ports_has_none() -> None:
    assert host_ports(pod("p")) == []


# -- Nodes -----------------------------------------------------------------------------------------


def test_upsert_reports_added_then_relabelled() -> None:
    nodes = Nodes()
    assert nodes.upsert(node("n", labels={"zone": "a"})) == NodeChange(added=True, relabelled=False)
    assert nodes.upsert(node("n", {"cpu": "8"}, labels={"zone": "a"})) == NodeChange(
        added=False, relabelled=False
    )
    assert nodes.upsert(node("n", labels={"zone": "b"})) == NodeChange(added=False, relabelled=True)


def test_upsert_refreshes_the_info_and_keeps_pod_accounting() -> None:
    nodes = Nodes()
    nodes.upsert(node("n", {"cpu": "4"}))
    nodes["n"].add_pod("a", {"cpu": 1000}, [])
    nodes.upsert(node("n", {"cpu": "8"}))
    assert nodes["n"].allocatable["cpu"] == 8000
    assert nodes["n"].requested == {"cpu": 1000}


def test_nodes_is_a_mapping_by_name() -> None:
    nodes = Nodes()
    nodes.upsert(node("a"))
    nodes.upsert(node("b"))
    assert sorted(nodes) == ["a", "b"]
    assert len(nodes) == 2
    assert nodes.get("c") is None
    with pytest.raises(KeyError):
        nodes["c"]


def test_serving_indexes_extended_resources_with_allocatable_above_zero() -> None:
    nodes = Nodes()
    nodes.upsert(node("dp", {GPU: 2, "hugepages-2Mi": "1Gi"}))
    nodes.upsert(node("dra", {GPU: 0}))
    nodes.upsert(node("plain"))
    assert nodes.serving(GPU) == {"dp"}
    assert nodes.serving("cpu") == set()  # native names are not indexed
    assert nodes.serving("hugepages-2Mi") == set()  # only names with a domain
    assert nodes.serving("example.com/other") == set()


def test_serving_follows_updates_and_removal() -> None:
    nodes = Nodes()
    nodes.upsert(node("a", {GPU: 2}))
    nodes.upsert(node("b", {GPU: 1}))
    nodes.upsert(node("a", {GPU: 0}))  # the device plugin went away
    assert nodes.serving(GPU) == {"b"}
    nodes.upsert(node("a", {GPU: 4}))
    assert nodes.serving(GPU) == {"a", "b"}
    removed = nodes.remove("b")
    assert removed is not None
    assert removed.allocatable[GPU] == 1
    assert nodes.serving(GPU) == {"a"}
    assert "b" not in nodes


def test_removing_an_unknown_node_returns_none() -> None:
    nodes = Nodes()
    nodes.upsert(node("a", {GPU: 1}))
    assert nodes.remove("zzz") is None
    assert nodes.serving(GPU) == {"a"}


def test_nodes_keep_names_in_order_and_the_device_plugin_nodes_with_room() -> None:
    nodes = Nodes()
    for n, gpus in (("c", 2), ("a", 1), ("b", 0)):
        nodes.upsert(node(n, {"example.com/gpu": str(gpus)}))
    assert nodes.names() == ["a", "b", "c"]
    assert nodes.serving("example.com/gpu") == {"a", "c"}
    assert nodes.with_room("example.com/gpu") == ["a", "c"]
    nodes["a"].add_pod("p1", {"example.com/gpu": 1}, [])
    assert nodes.with_room("example.com/gpu") == ["c"]  # a is full
    nodes["c"].add_pod("p2", {"example.com/gpu": 1}, [])
    assert nodes.with_room("example.com/gpu") == ["c"]  # one left on c
    nodes["a"].remove_pod("p1")
    assert nodes.with_room("example.com/gpu") == ["a", "c"]
    nodes.upsert(node("c", {"example.com/gpu": "1"}))  # shrinks under the pod already there
    assert nodes.with_room("example.com/gpu") == ["a"]
    nodes.upsert(node("b", {"example.com/gpu": "4"}))
    assert nodes.with_room("example.com/gpu") == ["a", "b"]
    assert nodes.remove("a") is not None
    assert (nodes.names(), nodes.with_room("example.com/gpu")) == (["b", "c"], ["b"])
    assert "a" not in nodes
    assert nodes.get("a") is None


# -- the topology index (pod placement) -----------------------------------------------------------


def test_the_topology_index_follows_labels_as_nodes_come_change_and_go() -> None:
    nodes = Nodes()
    nodes.upsert(node("a", labels={"zone": "z1"}))
    assert nodes.topology("zone") == {"z1": {"a"}}  # built on first ask
    nodes.upsert(node("b", labels={"zone": "z1"}))
    nodes.upsert(node("c"))
    assert nodes.topology("zone") == {"z1": {"a", "b"}}
    assert nodes.with_label("zone") == {"a", "b"}
    nodes.upsert(node("b", labels={"zone": "z2"}))  # relabelled
    nodes.upsert(node("c", labels={"zone": "z2"}))
    assert nodes.topology("zone") == {"z1": {"a"}, "z2": {"b", "c"}}
    nodes.remove("a")
    nodes.upsert(node("b"))  # the label removed
    assert nodes.topology("zone") == {"z2": {"c"}}
    assert nodes.with_label("zone") == {"c"}
    assert nodes.topology("kubernetes.io/hostname") == {"b": {"b"}, "c": {"c"}}


def test_a_snapshot_counts_pods_of_its_own() -> None:
    info = NodeInfo.of(node("n", {GPU: 2}))
    info.add_pod("p", {"cpu": 1000, GPU: 1}, [("TCP", "0.0.0.0", 80)], {"cpu": 1000})
    copy_ = info.snapshot()
    copy_.add_pod("q", {"cpu": 500}, [("TCP", "0.0.0.0", 81)], {"cpu": 500})
    assert (copy_.requested["cpu"], len(copy_.pods), len(copy_.host_ports)) == (1500, 2, 2)
    assert (info.requested["cpu"], len(info.pods), len(info.host_ports)) == (1000, 1, 1)
    assert copy_.nonzero_requested["cpu"] == 1500
    assert info.nonzero_requested["cpu"] == 1000
    assert copy_.watch is None
