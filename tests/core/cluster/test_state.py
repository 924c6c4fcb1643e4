"""ClusterState: every kind the engine reads goes through ``apply``; each change keeps the derived
views (device views, candidates, free counts, node accounting) consistent and bumps ``version``."""

from __future__ import annotations

import pytest

from tests.core.harness import claim, exactly, state_of
from tests.core.podfactory import container, device_class, gpus, node, pod, resource_slice
from webhook.core.api.objects import Obj
from webhook.core.cluster.state import ClusterState

DRIVER = "gpu.example.com"
GPU0 = (DRIVER, "n", "gpu-0")


def taint_rule(name: str) -> Obj:
    return {
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": {"deviceSelector": {"device": "gpu-0"}, "taint": {"key": "broken", "effect": "NoSchedule"}},
    }


def allocated(name: str, device: str = "gpu-0") -> Obj:
    result = {"request": "r", "driver": DRIVER, "pool": "n", "device": device}
    return claim(name, [exactly("r", "gpu")], allocation={"devices": {"results": [result]}})


def zone_slice(zone: str) -> Obj:
    selector = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]}]
    }
    return resource_slice("zoned", gpus(2, "z"), pool="zoned", nodeSelector=selector)


# -- apply, per kind ----------------------------------------------------------------------------


def test_apply_adds_and_removes_every_kind_and_bumps_the_version() -> None:
    st = ClusterState()
    p = pod("p", nodeName="n")
    objects: list[tuple[str, Obj]] = [
        ("Node", node("n")),
        ("DeviceClass", device_class("gpu")),
        ("ResourceSlice", resource_slice("s", gpus(1), node_name="n")),
        ("DeviceTaintRule", taint_rule("r")),
        ("ResourceClaim", allocated("c")),
        ("Pod", p),
    ]
    for i, (kind, obj) in enumerate(objects, start=1):
        assert st.apply(kind, obj) is True
        assert st.version == i
    assert "n" in st.nodes
    assert st.classes.get("gpu") is not None
    assert "s" in st.devices.slices
    assert "r" in st.devices.taint_rules
    assert ("default", "c") in st.allocated.claims
    assert "uid-p" in st.allocated.pods
    for kind, obj in reversed(objects):
        assert st.apply(kind, obj, deleted=True) is True
    assert st.version == 2 * len(objects)
    assert len(st.nodes) == 0
    assert st.classes.get("gpu") is None
    assert st.devices.slices == {}
    assert st.devices.taint_rules == {}
    assert st.allocated.claims == {}
    assert st.allocated.pods == {}


@pytest.mark.parametrize("kind", ["Deployment", "ConfigMap", "", "pod"])
def test_unknown_kinds_are_refused_without_a_version_bump(kind: str) -> None:
    st = ClusterState()
    assert st.apply(kind, {"metadata": {"name": "x"}}) is False
    assert st.version == 0


def test_deleting_what_was_never_there_is_harmless() -> None:
    st = state_of(node("n"))
    for kind in ("Node", "DeviceClass", "ResourceSlice", "DeviceTaintRule", "ResourceClaim", "Pod"):
        assert st.apply(
            kind, {"metadata": {"name": "ghost", "namespace": "default", "uid": "u"}}, deleted=True
        )
    assert list(st.nodes) == ["n"]


# -- nodes ---------------------------------------------------------------------------------------


def test_relabelling_a_node_changes_which_selector_slices_it_sees() -> None:
    st = state_of(node("n", labels={"zone": "a"}), device_class("gpu"), zone_slice("b"))
    assert st.capacity.free("gpu") == {}
    view = st.node_devices("n")
    assert view is not None
    assert view.pools == []
    st.apply("Node", node("n", labels={"zone": "b"}))
    view = st.node_devices("n")
    assert view is not None
    assert [p.name for p in view.pools] == ["zoned"]
    assert st.capacity.free("gpu") == {"n": 2}
    st.apply("Node", node("n", labels={"zone": "c"}))
    assert st.capacity.free("gpu") == {}


def test_a_node_update_that_keeps_its_labels_keeps_the_view() -> None:
    st = state_of(node("n", labels={"zone": "b"}), device_class("gpu"), zone_slice("b"))
    view = st.node_devices("n")
    newer = node("n", {"cpu": "64"}, labels={"zone": "b"})
    st.apply("Node", newer)
    assert st.node_devices("n") is view
    assert view is not None
    assert view.node is newer
    assert st.nodes["n"].allocatable["cpu"] == 64000


def test_a_removed_node_has_no_view_and_no_counts() -> None:
    st = state_of(node("n"), device_class("gpu"), resource_slice("s", gpus(2), node_name="n"))
    assert st.capacity.free("gpu") == {"n": 2}
    st.apply("Node", node("n"), deleted=True)
    assert st.node_devices("n") is None
    assert st.capacity.free("gpu") == {}


def test_a_new_node_is_counted_with_the_slices_already_there() -> None:
    st = state_of(device_class("gpu"), resource_slice("s", gpus(2), node_name="late"))
    assert st.capacity.free("gpu") == {}
    st.apply("Node", node("late"))
    assert st.capacity.free("gpu") == {"late": 2}


# -- classes ----------------------------------------------------------------------------------------


def test_a_class_selector_change_recomputes_candidates_and_counts() -> None:
    st = state_of(node("n"), device_class("gpu"), resource_slice("s", gpus(3), node_name="n"))
    assert st.capacity.free("gpu") == {"n": 3}
    st.apply("DeviceClass", device_class("gpu", selectors=[f'device.attributes["{DRIVER}"].index < 1']))
    view = st.node_devices("n")
    assert view is not None
    assert [d.name for d, _ in view.class_candidates("gpu")] == ["gpu-0"]
    assert st.capacity.free("gpu") == {"n": 1}


def test_a_class_update_with_the_same_selectors_keeps_the_candidates() -> None:
    st = state_of(
        node("n"), device_class("gpu", ext="example.com/gpu"), resource_slice("s", gpus(1), node_name="n")
    )
    view = st.node_devices("n")
    assert view is not None
    cands = view.class_candidates("gpu")
    st.apply("DeviceClass", device_class("gpu", ext="example.com/other"))
    assert view.class_candidates("gpu") is cands
    assert st.classes.class_name("example.com/other") == "gpu"


def test_a_removed_class_has_no_candidates_or_counts() -> None:
    st = state_of(node("n"), device_class("gpu"), resource_slice("s", gpus(1), node_name="n"))
    assert st.capacity.free("gpu") == {"n": 1}
    st.apply("DeviceClass", device_class("gpu"), deleted=True)
    assert st.capacity.free("gpu") == {}


# -- slices, taint rules, claims --------------------------------------------------------------------


def test_slice_and_taint_rule_changes_reach_the_counts() -> None:
    st = state_of(node("n"), device_class("gpu"), resource_slice("s", gpus(2), node_name="n", pool="n"))
    assert st.capacity.free("gpu") == {"n": 2}
    st.apply("DeviceTaintRule", taint_rule("r"))
    assert st.capacity.free("gpu") == {"n": 1}
    st.apply("ResourceSlice", resource_slice("s", gpus(4), node_name="n", pool="n"))
    assert st.capacity.free("gpu") == {"n": 3}  # the rule taints the new slice's gpu-0 too
    st.apply("DeviceTaintRule", taint_rule("r"), deleted=True)
    assert st.capacity.free("gpu") == {"n": 4}
    st.apply("ResourceSlice", resource_slice("s", [], node_name="n"), deleted=True)
    assert st.capacity.free("gpu") == {}


def test_claims_take_and_give_back_devices() -> None:
    st = state_of(node("n"), device_class("gpu"), resource_slice("s", gpus(2), node_name="n", pool="n"))
    assert st.capacity.free("gpu") == {"n": 2}
    st.apply("ResourceClaim", allocated("c"))
    assert st.allocated.is_allocated(GPU0)
    assert st.capacity.free("gpu") == {"n": 1}
    st.apply("ResourceClaim", allocated("c"), deleted=True)
    assert st.capacity.free("gpu") == {"n": 2}


# -- Reserve and release ----------------------------------------------------------------------------


def test_reserve_takes_devices_and_assumes_the_pod_and_release_undoes_both() -> None:
    st = state_of(node("n"), device_class("gpu"), resource_slice("s", gpus(2), node_name="n", pool="n"))
    st.capacity.free("gpu")
    p = pod("p", [container("c", {"cpu": "2"})])
    before = st.version
    st.reserve("t", [GPU0], p, "n")
    assert st.version == before + 1
    assert st.allocated.is_allocated(GPU0)
    assert st.capacity.free("gpu") == {"n": 1}
    assert st.nodes["n"].requested == {"cpu": 2000}
    st.unreserve("t", p)
    assert st.version == before + 2
    assert not st.allocated.is_allocated(GPU0)
    assert st.capacity.free("gpu") == {"n": 2}
    assert st.nodes["n"].requested == {"cpu": 0}


def test_release_without_the_pod_keeps_it_assumed() -> None:
    st = state_of(node("n"), resource_slice("s", gpus(1), node_name="n", pool="n"))
    p = pod("p", [container("c", {"cpu": "1"})])
    st.reserve("t", [GPU0], p, "n")
    st.unreserve("t")  # the worker forgets the reservation once the cache shows the written claim
    assert not st.allocated.is_allocated(GPU0)
    assert st.nodes["n"].requested == {"cpu": 1000}


def test_release_keeps_a_pod_already_seen_bound() -> None:
    st = state_of(node("n"))
    p = pod("p", [container("c", {"cpu": "1"})])
    st.reserve("t", [], p, "n")
    st.apply("Pod", pod("p", [container("c", {"cpu": "1"})], nodeName="n"))
    st.unreserve("t", p)
    assert st.nodes["n"].requested == {"cpu": 1000}


def test_node_devices_of_an_unknown_node_is_none() -> None:
    assert ClusterState().node_devices("nowhere") is None


def test_namespaces_are_applied_with_their_labels_only() -> None:
    st = ClusterState()
    ns: Obj = {"kind": "Namespace", "metadata": {"name": "team-a", "labels": {"team": "a"}}, "spec": {}}
    assert st.apply("Namespace", ns) is True
    assert st.version == 1
    assert st.namespaces.labels_of("team-a") == {"team": "a"}
    assert st.namespaces.labels_of("unknown") == {}
    assert st.apply("Namespace", ns, deleted=True) is True
    assert len(st.namespaces) == 0


def test_binding_conditions_gate_changes_what_counts_free() -> None:
    """With ``DRADeviceBindingConditions`` on, a device with binding conditions is a candidate of the
    special claim, so it counts free; off, it does not. The flip bumps ``version`` only on change."""
    attachable = {"name": "bc", "bindingConditions": ["ready"], "bindingFailureConditions": ["failed"]}
    st = state_of(
        node("n"),
        device_class("gpu", "example.com/gpu"),
        resource_slice("s", [*gpus(1), attachable], node_name="n"),
    )
    assert st.capacity.free("gpu") == {"n": 1}
    before = st.version
    st.set_binding_conditions(True)
    assert st.capacity.free("gpu") == {"n": 2}
    assert st.version == before + 1
    st.set_binding_conditions(True)
    assert st.version == before + 1
    st.set_binding_conditions(False)
    assert st.capacity.free("gpu") == {"n": 1}
