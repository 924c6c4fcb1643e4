"""DeviceTaintRules: which devices a rule taints, and what that does to allocation."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.harness import allocate, claim, exactly, state_of
from tests.core.podfactory import container, device_class, gpus, node, pod, resource_slice
from webhook.core.allocation.errors import Unsatisfiable
from webhook.core.api.objects import Obj
from webhook.core.cluster.state import ClusterState
from webhook.core.cluster.taintrules import parse_taint_rule
from webhook.core.scheduling.framework import SCHEDULED, UNSCHEDULABLE
from webhook.core.scheduling.scheduler import Scheduler

GPU = "example.com/gpu"
DRIVER = "gpu.example.com"


def rule(name: str, selector: Obj | None, effect: str = "NoSchedule", key: str = "example.com/broken") -> Obj:
    body: Obj = {"taint": {"key": key, "value": "true", "effect": effect}}
    if selector is not None:
        body["deviceSelector"] = selector
    return {
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": body,
    }


def cluster(*extra: Obj) -> list[Obj]:
    return [
        device_class("gpu", GPU, [f'device.driver == "{DRIVER}"']),
        node("a"),
        resource_slice("a-gpus", gpus(2), node_name="a", pool="a"),
        node("b"),
        resource_slice("b-gpus", gpus(2), node_name="b", pool="b"),
        *extra,
    ]


def _free(st: ClusterState) -> dict[str, int]:
    """Free, untainted GPUs per node (nodes with none included)."""
    counts = st.capacity.free("gpu")
    return {n: counts.get(n, 0) for n in sorted(st.nodes)}


@pytest.mark.parametrize(
    ("selector", "tainted"),
    [
        (None, {}),  # no selector: no device (kubernetes/kubernetes#141648)
        ({}, {"a": 2, "b": 2}),  # empty selector: every device
        ({"driver": DRIVER}, {"a": 2, "b": 2}),
        ({"driver": "other.example.com"}, {}),
        ({"pool": "a"}, {"a": 2}),
        ({"pool": "a", "device": "gpu-1"}, {"a": 1}),
        ({"device": "gpu-0"}, {"a": 1, "b": 1}),
        ({"driver": DRIVER, "pool": "b", "device": "gpu-9"}, {}),
    ],
)
def test_what_a_selector_matches(selector: Obj | None, tainted: dict[str, int]) -> None:
    st = state_of(*cluster(rule("r", selector)))
    assert _free(st) == {n: 2 - tainted.get(n, 0) for n in ("a", "b")}


def test_effect_none_only_reports() -> None:
    st = state_of(*cluster(rule("r", {}, effect="None")))
    assert _free(st) == {"a": 2, "b": 2}


def test_no_execute_blocks_allocation_too() -> None:
    st = state_of(*cluster(rule("r", {"pool": "b"}, effect="NoExecute")))
    assert _free(st) == {"a": 2, "b": 0}


def test_selector_fields_removed_in_1_35_taint_nothing() -> None:
    parsed = parse_taint_rule(rule("r", {"deviceClassName": "gpu", "pool": "a"}))
    assert (
        parsed.unsupported == "deviceSelector.deviceClassName is not supported (removed in Kubernetes 1.35)"
    )
    assert not parsed.matches(DRIVER, "a", "gpu-0")
    assert _free(state_of(*cluster(rule("r", {"deviceClassName": "gpu"})))) == {"a": 2, "b": 2}


def test_rules_follow_changes_and_deletion() -> None:
    st = state_of(*cluster())
    st.apply("DeviceTaintRule", rule("r", {"pool": "a"}))
    assert _free(st) == {"a": 0, "b": 2}
    st.apply("DeviceTaintRule", rule("r", {"pool": "b", "device": "gpu-0"}))  # the rule is edited
    assert _free(st) == {"a": 2, "b": 1}
    st.apply("DeviceTaintRule", rule("r", {"pool": "b", "device": "gpu-0"}), deleted=True)
    assert _free(st) == {"a": 2, "b": 2}


def test_a_slice_published_after_the_rule_is_tainted_too() -> None:
    st = state_of(rule("r", {"pool": "c"}), *cluster())
    st.apply("Node", node("c"))
    st.apply("ResourceSlice", resource_slice("c-gpus", gpus(3), node_name="c", pool="c"))
    assert _free(st)["c"] == 0


def test_the_pod_goes_where_no_rule_taints_the_devices() -> None:
    st = state_of(*cluster(rule("r", {"pool": "a"})))
    p = pod("p", [container("c", {GPU: "2"})])
    decision = Scheduler(st).schedule(p)
    assert decision.status == SCHEDULED
    assert decision.node == "b"
    st.apply("DeviceTaintRule", rule("s", {"pool": "b"}))
    blocked = Scheduler(st).schedule(p)
    assert blocked.status == UNSCHEDULABLE
    assert "cannot allocate all claims" in blocked.message


def test_a_claim_that_tolerates_the_taint_gets_the_device() -> None:
    st = state_of(*cluster(rule("r", {})))
    tolerant = exactly("r", "gpu", tolerations=[{"key": "example.com/broken", "operator": "Exists"}])
    (got,) = allocate(st, "a", [claim("c", [tolerant])])
    assert [r.device.name for r in got.results] == ["gpu-0"]
    with pytest.raises(Unsatisfiable, match="cannot allocate all claims"):
        allocate(st, "a", [claim("d", [exactly("r", "gpu")])])


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
_selector_like = st.fixed_dictionaries(
    {},
    optional={
        "driver": st.sampled_from([DRIVER, "x"]) | _json,
        "pool": st.sampled_from(["a", "b"]) | _json,
        "device": st.sampled_from(["gpu-0", "gpu-1"]) | _json,
    },
)


@settings(max_examples=200, deadline=None)
@given(
    spec=st.fixed_dictionaries(
        {},
        optional={
            "deviceSelector": _selector_like | _json,
            "taint": st.fixed_dictionaries({}, optional={"key": _json, "effect": _json}) | _json,
        },
    )
    | _json
)
def test_fuzz_any_rule_object_is_taken_without_error(spec: Any) -> None:
    st_ = state_of(*cluster())
    before = _free(st_)
    obj = {"kind": "DeviceTaintRule", "metadata": {"name": "r"}, "spec": spec}
    st_.apply("DeviceTaintRule", obj)
    after = _free(st_)
    assert all(after[n] <= before[n] for n in before)  # a rule only ever takes devices away
    st_.apply("DeviceTaintRule", obj, deleted=True)
    assert _free(st_) == before
