"""The device index: which node views a slice or taint-rule change drops (derived counts follow
the names it returns), cached per-node views, and per-class candidates in allocation order."""

from __future__ import annotations

from tests.core.podfactory import device, device_class, gpus, node, resource_slice
from webhook.core.api.objects import Obj
from webhook.core.cel import CelRuntimeError
from webhook.core.cluster.deviceclasses import ClassResolver
from webhook.core.cluster.devices import DeviceIndex

DRIVER = "gpu.example.com"


def index(*classes: Obj) -> DeviceIndex:
    return DeviceIndex(ClassResolver(classes))


def taint_rule(name: str, selector: Obj | None) -> Obj:
    spec: Obj = {"taint": {"key": "example.com/broken", "effect": "NoSchedule"}}
    if selector is not None:
        spec["deviceSelector"] = selector
    return {"kind": "DeviceTaintRule", "metadata": {"name": name}, "spec": spec}


def keys(idx: DeviceIndex, n: Obj, cls: str) -> list[str]:
    return ["/".join(d.key) for d, _ in idx.node_devices(n).class_candidates(cls)]


A, B, C = node("a"), node("b"), node("c")


def cache_views(idx: DeviceIndex, *nodes: Obj) -> None:
    for n in nodes:
        idx.node_devices(n)


# -- which views a slice change drops ---------------------------------------------------------------


def test_a_node_local_slice_drops_only_its_node() -> None:
    idx = index()
    cache_views(idx, A, B)
    kept = idx.node_devices(B)
    assert idx.upsert_slice(resource_slice("a-gpus", gpus(1), node_name="a")) == ["a"]
    assert idx.cached_nodes() == ["b"]
    assert idx.node_devices(B) is kept


def test_a_node_local_pool_on_several_nodes_drops_each_of_them() -> None:
    idx = index()
    idx.upsert_slice(resource_slice("s-a", gpus(1, "x"), node_name="a", pool="shared", count=2))
    cache_views(idx, A, B, C)
    dropped = idx.upsert_slice(resource_slice("s-b", gpus(1, "y"), node_name="b", pool="shared", count=2))
    assert sorted(dropped) == ["a", "b"]  # a's pool just became complete
    assert idx.cached_nodes() == ["c"]


def test_a_slice_that_is_not_node_local_drops_every_cached_view() -> None:
    idx = index()
    cache_views(idx, A, B)
    assert sorted(idx.upsert_slice(resource_slice("net", gpus(1), allNodes=True))) == ["a", "b"]
    assert idx.cached_nodes() == []


def test_a_local_slice_of_a_pool_with_a_non_local_slice_drops_every_cached_view() -> None:
    idx = index()
    idx.upsert_slice(resource_slice("global", gpus(1, "g"), pool="p", count=2, allNodes=True))
    cache_views(idx, A, B, C)
    dropped = idx.upsert_slice(resource_slice("local", gpus(1, "l"), pool="p", count=2, node_name="a"))
    assert sorted(dropped) == ["a", "b", "c"]


def test_moving_a_slice_to_another_node_drops_both_nodes() -> None:
    idx = index()
    idx.upsert_slice(resource_slice("s", gpus(1), node_name="a", pool="p"))
    cache_views(idx, A, B, C)
    assert sorted(idx.upsert_slice(resource_slice("s", gpus(1), node_name="b", pool="p"))) == ["a", "b"]
    assert idx.cached_nodes() == ["c"]
    assert [p.name for p in idx.node_devices(A).pools] == []
    assert [p.name for p in idx.node_devices(B).pools] == ["p"]


def test_removing_a_slice_drops_its_node_and_an_unknown_slice_drops_nothing() -> None:
    idx = index()
    idx.upsert_slice(resource_slice("a-gpus", gpus(1), node_name="a"))
    cache_views(idx, A, B)
    assert idx.remove_slice("nope") == []
    assert idx.remove_slice("a-gpus") == ["a"]
    assert idx.cached_nodes() == ["b"]
    assert "a-gpus" not in idx.slices


# -- views ----------------------------------------------------------------------------------------


def test_node_devices_is_cached_until_its_node_is_invalidated() -> None:
    idx = index(device_class("any"))
    idx.upsert_slice(resource_slice("a-gpus", gpus(2), node_name="a"))
    view = idx.node_devices(A)
    assert idx.node_devices(A) is view
    assert [p.name for p in view.pools] == ["a"]
    idx.invalidate_node("a")
    assert idx.node_devices(A) is not view


def test_refresh_node_keeps_the_view_with_the_new_object() -> None:
    idx = index()
    view = idx.node_devices(A)
    newer = node("a", {"cpu": "99"})
    idx.refresh_node(newer)
    assert idx.node_devices(newer) is view
    assert view.node is newer
    idx.refresh_node(B)  # not cached: nothing is built
    assert idx.cached_nodes() == ["a"]


def test_a_node_only_sees_slices_that_target_it() -> None:
    idx = index(device_class("any"))
    idx.upsert_slice(resource_slice("a-gpus", gpus(1, "a"), node_name="a"))
    idx.upsert_slice(resource_slice("b-gpus", gpus(1, "b"), node_name="b"))
    idx.upsert_slice(resource_slice("zone", gpus(1, "z"), pool="zone", nodeSelector=_zone("x")))
    assert keys(idx, A, "any") == [f"{DRIVER}/a/a-0"]
    assert keys(idx, node("b", labels={"zone": "x"}), "any") == [f"{DRIVER}/b/b-0", f"{DRIVER}/zone/z-0"]


def _zone(value: str) -> Obj:
    return {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": [value]}]}]
    }


# -- class candidates -------------------------------------------------------------------------------


def test_candidates_come_in_allocation_order() -> None:
    idx = index(device_class("any"))
    idx.upsert_slice(resource_slice("z", [device("z0")], driver="a.example.com", pool="z", allNodes=True))
    idx.upsert_slice(resource_slice("s2", [device("d2"), device("d3")], pool="p", count=2, allNodes=True))
    idx.upsert_slice(resource_slice("s1", [device("d1")], pool="p", count=2, allNodes=True))
    idx.upsert_slice(resource_slice("o", [device("o0")], pool="o", allNodes=True))
    assert keys(idx, A, "any") == [
        "a.example.com/z/z0",  # drivers sort first
        f"{DRIVER}/o/o0",  # then pools by name
        f"{DRIVER}/p/d1",  # slices by name
        f"{DRIVER}/p/d2",  # devices in slice order
        f"{DRIVER}/p/d3",
    ]


def test_class_selectors_filter_candidates() -> None:
    idx = index(device_class("model-a", selectors=[f'device.attributes["{DRIVER}"].model == "a"']))
    devs = [device(f"d{i}", {"model": {"string": m}}) for i, m in enumerate("abab")]
    idx.upsert_slice(resource_slice("s", devs, node_name="a"))
    assert keys(idx, A, "model-a") == [f"{DRIVER}/a/d0", f"{DRIVER}/a/d2"]
    assert idx.node_devices(A).has_errors("model-a") is False


def test_a_cel_runtime_error_is_recorded_on_its_candidate() -> None:
    selectors = [f'device.attributes["{DRIVER}"].index > 0', f'device.attributes["{DRIVER}"].model == "a"']
    idx = index(device_class("c", selectors=selectors))
    devs = [
        device("d0", {"index": {"int": 0}}),  # fails the first selector: the second never runs
        device("d1", {"index": {"int": 1}}),  # no model: the second selector errors
        device("d2", {"index": {"int": 2}, "model": {"string": "a"}}),
    ]
    idx.upsert_slice(resource_slice("s", devs, node_name="a"))
    view = idx.node_devices(A)
    cands = view.class_candidates("c")
    assert [(d.name, err is None) for d, err in cands] == [("d1", False), ("d2", True)]
    err = cands[0][1]
    assert isinstance(err, CelRuntimeError)
    assert getattr(err, "selector_index", None) == 1
    assert view.has_errors("c") is True


def test_an_unknown_class_has_no_candidates() -> None:
    idx = index()
    idx.upsert_slice(resource_slice("s", gpus(1), node_name="a"))
    assert idx.node_devices(A).class_candidates("missing") == []
    assert idx.node_devices(A).has_errors("missing") is False


def test_incomplete_and_invalid_pools_offer_no_candidates() -> None:
    idx = index(device_class("any"))
    idx.upsert_slice(resource_slice("half", gpus(1, "h"), pool="half", count=2, node_name="a"))
    idx.upsert_slice(resource_slice("dup", [device("x"), device("x")], pool="dup", node_name="a"))
    idx.upsert_slice(resource_slice("ok", gpus(1, "k"), pool="ok", node_name="a"))
    assert keys(idx, A, "any") == [f"{DRIVER}/ok/k-0"]


def test_candidates_are_cached_until_the_class_is_invalidated() -> None:
    resolver = ClassResolver([device_class("c", selectors=[f'device.attributes["{DRIVER}"].index == 0'])])
    idx = DeviceIndex(resolver)
    idx.upsert_slice(resource_slice("s", gpus(2), node_name="a"))
    idx.upsert_slice(resource_slice("t", gpus(2), node_name="b"))
    assert keys(idx, A, "c") == [f"{DRIVER}/a/gpu-0"]
    assert keys(idx, B, "c") == [f"{DRIVER}/b/gpu-0"]
    resolver.upsert(device_class("c", selectors=[f'device.attributes["{DRIVER}"].index == 1']))
    assert keys(idx, A, "c") == [f"{DRIVER}/a/gpu-0"]  # still the cached answer
    idx.invalidate_class("c")
    assert keys(idx, A, "c") == [f"{DRIVER}/a/gpu-1"]
    assert keys(idx, B, "c") == [f"{DRIVER}/b/gpu-1"]
    assert idx.cached_nodes() == ["a", "b"]  # the views themselves stay


def _mixed_index() -> DeviceIndex:
    selectors = [f'device.attributes["{DRIVER}"].index > 0', f'device.attributes["{DRIVER}"].model == "a"']
    idx = index(device_class("c", selectors=selectors), device_class("any"))
    for n in "ab":
        devs = [
            device("d0", {"index": {"int": 0}}),
            device("d1", {"index": {"int": 1}}),  # no model: an error on the second selector
            device("d2", {"index": {"int": 2}, "model": {"string": "a"}}),
        ]
        idx.upsert_slice(resource_slice(f"s-{n}", devs, node_name=n))
    idx.upsert_slice(resource_slice("net", gpus(2, "n"), pool="net", allNodes=True))  # every node
    idx.upsert_slice(resource_slice("half", gpus(1, "h"), pool="half", count=2, node_name="c"))
    return idx


def _view(idx: DeviceIndex, n: Obj, cls: str) -> list[tuple[str, object]]:
    return [
        ("/".join(d.key), None if e is None else (e.selector_index, str(e)))
        for d, e in idx.node_devices(n).class_candidates(cls)
    ]


def test_prime_computes_what_each_node_computes_alone() -> None:
    for cls in ("c", "any", "missing"):
        alone, primed = _mixed_index(), _mixed_index()
        primed.prime(cls, [A, B, C])
        assert all(primed.node_devices(n).knows(cls) for n in (A, B, C)) is (cls != "missing")
        for n in (A, B, C):
            assert _view(primed, n, cls) == _view(alone, n, cls)


def test_prime_evaluates_each_device_content_once_and_skips_known_views() -> None:
    idx = _mixed_index()
    idx.node_devices(A).class_candidates("any")  # a known view stays as it is
    kept = idx.node_devices(A).class_candidates("any")
    idx.prime("any", [A, B, C])
    assert idx.node_devices(A).class_candidates("any") is kept
    idx.prime("c", [A, B, C])
    # Eight devices reach the nodes (d0-d2 on a and b, net's two everywhere), with three contents
    # (index 0, 1, 2; net's equal d0's and d1's): three evaluations of the first selector, and of
    # the second only for the two contents the first matched.
    assert idx.cel.stats()["evaluations"] == 3 + 2


# -- special candidates ---------------------------------------------------------------------------


def test_special_candidates_skip_binding_conditions_and_hard_taints() -> None:
    idx = index(device_class("any"))
    devs = [
        device("plain"),
        device("bc", bindingConditions=["attached"]),
        device("no-schedule", taints=[{"key": "k", "effect": "NoSchedule"}]),
        device("no-execute", taints=[{"key": "k", "effect": "NoExecute"}]),
        device("report-only", taints=[{"key": "k", "effect": "None"}]),
    ]
    idx.upsert_slice(resource_slice("s", devs, node_name="a"))
    view = idx.node_devices(A)
    assert len(view.class_candidates("any")) == 5
    assert [d.name for d in view.special_candidates("any")] == ["plain", "report-only"]
    # DRADeviceBindingConditions on (1.36 and later): such a device counts, in slice order.
    assert idx.set_binding_conditions(True) is True
    assert idx.set_binding_conditions(True) is False
    on = idx.node_devices(A)
    assert [d.name for d in on.special_candidates("any")] == ["plain", "bc", "report-only"]


def test_a_tainted_candidate_with_a_cel_error_still_counts_so_the_error_surfaces() -> None:
    idx = index(device_class("c", selectors=[f'device.attributes["{DRIVER}"].model == "a"']))
    idx.upsert_slice(
        resource_slice("s", [device("d", taints=[{"key": "k", "effect": "NoSchedule"}])], node_name="a")
    )
    assert [d.name for d in idx.node_devices(A).special_candidates("c")] == ["d"]


def test_special_candidates_follow_per_device_node_selection() -> None:
    idx = index(device_class("any"))
    devs = [device("on-a", nodeName="a"), device("on-b", nodeName="b"), device("everywhere", allNodes=True)]
    idx.upsert_slice(resource_slice("s", devs, pool="p", perDeviceNodeSelection=True))
    assert [d.name for d in idx.node_devices(A).special_candidates("any")] == ["on-a", "everywhere"]
    assert [d.name for d in idx.node_devices(B).special_candidates("any")] == ["on-b", "everywhere"]


# -- device taint rules -------------------------------------------------------------------------------


def _taint_keys(idx: DeviceIndex, slice_name: str) -> list[list[str]]:
    return [[t["key"] for t in d.taints] for d in idx.slices[slice_name].devices]


def test_a_taint_rule_re_reads_only_the_slices_it_may_touch() -> None:
    idx = index()
    idx.upsert_slice(resource_slice("a-gpus", gpus(2), node_name="a", pool="a"))
    idx.upsert_slice(resource_slice("b-gpus", gpus(2), node_name="b", pool="b"))
    cache_views(idx, A, B)
    untouched = idx.slices["b-gpus"]
    dropped = idx.upsert_taint_rule(taint_rule("r", {"pool": "a", "device": "gpu-1"}))
    assert dropped == ["a"]
    assert idx.slices["b-gpus"] is untouched
    assert _taint_keys(idx, "a-gpus") == [[], ["example.com/broken"]]
    assert idx.cached_nodes() == ["b"]


def test_removing_a_taint_rule_untaints_and_drops_the_nodes_it_touched() -> None:
    idx = index()
    idx.upsert_slice(resource_slice("a-gpus", gpus(1), node_name="a", pool="a"))
    idx.upsert_slice(resource_slice("b-gpus", gpus(1), node_name="b", pool="b"))
    idx.upsert_taint_rule(taint_rule("r", {"pool": "a"}))
    cache_views(idx, A, B)
    assert idx.remove_taint_rule("r") == ["a"]
    assert _taint_keys(idx, "a-gpus") == [[]]
    assert idx.remove_taint_rule("r") == []  # already gone


def test_retargeting_a_taint_rule_re_reads_the_old_and_the_new_pool() -> None:
    idx = index()
    for n in "abc":
        idx.upsert_slice(resource_slice(f"{n}-gpus", gpus(1), node_name=n, pool=n))
    idx.upsert_taint_rule(taint_rule("r", {"pool": "a"}))
    cache_views(idx, A, B, C)
    assert sorted(idx.upsert_taint_rule(taint_rule("r", {"pool": "b"}))) == ["a", "b"]
    assert _taint_keys(idx, "a-gpus") == [[]]
    assert _taint_keys(idx, "b-gpus") == [["example.com/broken"]]
    assert idx.cached_nodes() == ["c"]


def test_a_taint_rule_without_a_selector_re_reads_nothing() -> None:
    idx = index()
    idx.upsert_slice(resource_slice("a-gpus", gpus(1), node_name="a", pool="a"))
    before = idx.slices["a-gpus"]
    assert idx.upsert_taint_rule(taint_rule("r", None)) == []
    assert idx.slices["a-gpus"] is before
