"""The engine's decisions (spec §3, scenarios 16-26) and kube-scheduler-style filters."""

import json
from typing import Any

from tests.core.harness import claim, exactly, scheduler, state_of
from tests.core.podfactory import container, device_class, gpus, node, pod, resource_slice
from webhook.core.api.constants import EXTENDED_RESOURCE_CLAIM_ANNOTATION, WRITER_ANNOTATION
from webhook.core.api.objects import Obj
from webhook.core.scheduling.framework import ERROR, SCHEDULED, UNSCHEDULABLE, fit_error
from webhook.core.scheduling.scheduler import Scheduler

GPU = "example.com/gpu"
CLASS = device_class("gpu.example.com", ext=GPU, selectors=['device.driver == "gpu.example.com"'])


def gpu_pod(name: str = "my-pod", n: int = 1, **kw: Any) -> Obj:
    return pod(name, [container("c", {GPU: n})], **kw)


def test_scenario_16_device_plugin_node_needs_no_claim() -> None:
    s = scheduler(node("dp", {GPU: 4}), CLASS)
    d = s.schedule(gpu_pod())
    assert d.status == SCHEDULED
    assert d.node == "dp"
    assert d.special is None
    assert d.served[GPU].via == "device-plugin"


def test_scenario_17_dra_node_gets_a_claim_with_node_local_allocation() -> None:
    s = scheduler(node("n", {GPU: 0}), CLASS, resource_slice("s", gpus(1), node_name="n"))
    d = s.schedule(gpu_pod())
    assert d.status == SCHEDULED
    assert d.requests == [
        {
            "name": "container-0-request-0",
            "exactly": {"deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1},
        }
    ]
    assert d.mappings == [{"containerName": "c", "resourceName": GPU, "requestName": "container-0-request-0"}]
    assert d.special is not None
    assert d.special.to_api() == {
        "devices": {
            "results": [
                {
                    "request": "container-0-request-0",
                    "driver": "gpu.example.com",
                    "pool": "n",
                    "device": "gpu-0",
                }
            ]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}
            ]
        },
    }


def test_scenario_18_no_class_and_zero_allocatable_is_insufficient() -> None:
    s = scheduler(node("n", {GPU: 0}), resource_slice("s", gpus(1), node_name="n"))
    d = s.schedule(gpu_pod())
    assert d.status == UNSCHEDULABLE
    assert d.message == "0/1 nodes are available: 1 Insufficient example.com/gpu."


def test_scenario_19_class_without_devices_cannot_allocate() -> None:
    s = scheduler(node("n"), CLASS)
    d = s.schedule(gpu_pod())
    assert d.message == "0/1 nodes are available: 1 cannot allocate all claims."


def test_scenario_20_unknown_resource_is_insufficient() -> None:
    d = scheduler(node("n"), CLASS).schedule(pod("p", [container("c", {"example.com/bbb": 1})]))
    assert d.message == "0/1 nodes are available: 1 Insufficient example.com/bbb."


def test_scenario_21_one_device_plugin_one_dra_on_the_same_node() -> None:
    s = scheduler(
        node("n", {"example.com/a": 1}),
        CLASS,
        device_class("b", ext="example.com/b", selectors=["true"]),
        resource_slice("s", gpus(1), node_name="n"),
    )
    d = s.schedule(pod("p", [container("c", {"example.com/a": 1, "example.com/b": 1})]))
    assert d.status == SCHEDULED
    assert [r["name"] for r in d.requests] == ["container-0-request-1"]
    assert d.served["example.com/a"].via == "device-plugin"
    assert d.served["example.com/b"].via == "dra"


def test_scenario_25_zero_request_means_no_dra_work() -> None:
    s = scheduler(node("n"), CLASS)
    d = s.schedule(gpu_pod(n=0))
    assert d.status == SCHEDULED
    assert d.special is None
    assert d.served == {}


def test_scenario_26_stale_special_claim_blocks_every_node() -> None:
    p = gpu_pod()
    stale = claim("my-pod-extended-resources-abcde", [exactly("container-0-request-0", "gpu.example.com")])
    stale["metadata"]["annotations"] = {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"}
    stale["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Pod", "name": "my-pod", "uid": p["metadata"]["uid"], "controller": True}
    ]
    s = scheduler(node("a"), node("b"), CLASS, resource_slice("s", gpus(2), node_name="a"), stale)
    d = s.schedule(p)
    assert d.status == UNSCHEDULABLE
    assert d.message == "0/2 nodes are available: 2 cannot schedule extended resource claim."
    assert d.stale_claim is stale
    # A worker reuses an unallocated special claim it wrote itself instead of deleting it.
    stale["metadata"]["annotations"][WRITER_ANNOTATION] = "draxr"
    s.state.apply("ResourceClaim", stale)
    assert Scheduler(s.state, writer="other").schedule(p).stale_claim is stale
    ours = Scheduler(s.state, writer="draxr").schedule(p)
    assert ours.status == SCHEDULED
    assert ours.reuse is stale


def test_motivating_example_fills_both_kinds_of_node() -> None:
    s = scheduler(node("dp", {GPU: 2}), node("dra"), CLASS, resource_slice("s", gpus(8), node_name="dra"))
    placed = []
    for i in range(10):
        d = s.schedule(gpu_pod(f"p{i}"))
        assert d.status == SCHEDULED
        s.reserve(d)
        placed.append(d.node)
    assert placed.count("dp") == 2
    assert placed.count("dra") == 8
    d = s.schedule(gpu_pod("p10"))
    assert (
        d.message == "0/2 nodes are available: 1 Insufficient example.com/gpu, 1 cannot allocate all claims."
    )


def test_reserve_makes_devices_invisible_to_the_next_decision() -> None:
    s = scheduler(node("n"), CLASS, resource_slice("s", gpus(2), node_name="n"))
    first = s.schedule(gpu_pod("a"))
    token = s.reserve(first)
    second = s.schedule(gpu_pod("b"))
    assert first.special is not None
    assert second.special is not None
    assert first.special.device_keys != second.special.device_keys
    s.unreserve(first, token)
    again = s.schedule(gpu_pod("c"))
    assert again.special is not None
    assert again.special.device_keys == first.special.device_keys


def test_every_reservation_has_its_own_token_across_schedulers_of_one_state() -> None:
    """Unreserve releases exactly one reservation: its token is unique in the process, also between
    two schedulers on one cluster state (the worker's and the webhook's advice)."""
    s = scheduler(node("n"), CLASS, resource_slice("s", gpus(3), node_name="n"))
    other = Scheduler(s.state)
    first = s.schedule(gpu_pod("a"))
    tokens = [s.reserve(first)]
    second = other.schedule(gpu_pod("b"))
    tokens.append(other.reserve(second))
    third = s.schedule(gpu_pod("c"))
    tokens.append(s.reserve(third))
    assert len(set(tokens)) == 3
    other.unreserve(second, tokens[1])
    again = s.schedule(gpu_pod("d"))
    assert again.special is not None
    assert second.special is not None
    assert again.special.device_keys == second.special.device_keys  # the one released, no other


def test_binpack_and_spread() -> None:
    objs = [
        node("a"),
        node("b"),
        CLASS,
        resource_slice("sa", gpus(4), node_name="a"),
        resource_slice("sb", gpus(4), node_name="b"),
    ]
    pack = Scheduler(state_of(*objs), "binpack")
    spread = Scheduler(state_of(*objs), "spread")
    for sch in (pack, spread):
        sch.reserve(sch.schedule(gpu_pod("first")))
    assert pack.schedule(gpu_pod("x")).node == "a"  # fills the node already in use
    assert spread.schedule(gpu_pod("x")).node == "b"


def test_ties_go_to_the_smaller_node_name() -> None:
    s = scheduler(
        node("zeta"),
        node("alpha"),
        CLASS,
        resource_slice("s1", gpus(1), node_name="zeta"),
        resource_slice("s2", gpus(1), node_name="alpha"),
    )
    assert s.schedule(gpu_pod()).node == "alpha"


def test_node_filters_and_messages() -> None:
    tainted = node("tainted", taints=[{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}])
    cordoned = node("cordoned", unschedulable=True)
    small = node("small", {"cpu": "1"})
    notready = node("notready")
    notready["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    labelled = node("other", labels={"zone": "b"})
    s = scheduler(tainted, cordoned, small, notready, labelled)
    p = pod("p", [container("c", {"cpu": "2"})], nodeSelector={"zone": "a"})
    d = s.schedule(p)
    assert d.message == (
        "0/5 nodes are available: 1 node(s) were unschedulable, "
        "2 node(s) didn't match Pod's node affinity/selector, 2 node(s) had untolerated taint(s)."
    )
    fits = pod(
        "q",
        [container("c", {"cpu": "2"})],
        tolerations=[{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}],
    )
    assert s.schedule(fits).node == "other"  # equal scores: the smaller name wins
    assert scheduler(tainted).schedule(fits).node == "tainted"
    assert scheduler(tainted).schedule(p).status == UNSCHEDULABLE


def test_required_node_affinity() -> None:
    aff = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "gpu-count", "operator": "Gt", "values": ["3"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["named"]}]},
                ]
            }
        }
    }
    s = scheduler(node("few", labels={"gpu-count": "2"}), node("many", labels={"gpu-count": "8"}))
    assert s.schedule(pod("p", affinity=aff)).node == "many"
    s2 = scheduler(node("few", labels={"gpu-count": "2"}), node("named"))
    assert s2.schedule(pod("p", affinity=aff)).node == "named"


def test_resource_fit_counts_bound_pods_init_and_overhead() -> None:
    bound = pod("bound", [container("c", {"cpu": "3"})], nodeName="n")
    s = scheduler(node("n", {"cpu": "4", "pods": "2"}), bound)
    too_big = pod("p", [container("c", {"cpu": "500m"})], init=[container("i", {"cpu": "2"})])
    assert s.schedule(too_big).message == "0/1 nodes are available: 1 Insufficient cpu."
    ok = pod("p", [container("c", {"cpu": "500m"})], overhead={"cpu": "500m"})
    assert s.schedule(ok).status == SCHEDULED
    s.reserve(s.schedule(ok))
    assert "Too many pods" in s.schedule(pod("x")).message


def test_sidecar_and_init_requests_on_a_dra_node() -> None:
    s = scheduler(node("n"), CLASS, resource_slice("s", gpus(3), node_name="n"))
    p = pod(
        "p",
        [container("main", {GPU: 1})],
        init=[container("setup", {GPU: 1}), container("side", {GPU: 1}, sidecar=True)],
    )
    d = s.schedule(p)
    assert d.status == SCHEDULED
    assert [r["name"] for r in d.requests] == ["container-1-request-0", "container-2-request-0"]
    assert {
        "containerName": "setup",
        "resourceName": GPU,
        "requestName": "container-1-request-0",
    } in d.mappings


def test_user_claims_are_allocated_with_the_special_claim() -> None:
    user = claim("mine", [exactly("r", "gpu.example.com")], namespace="default")
    s = scheduler(node("n"), CLASS, resource_slice("s", gpus(2), node_name="n"), user)
    p = gpu_pod(resourceClaims=[{"name": "x", "resourceClaimName": "mine"}])
    d = s.schedule(p)
    assert d.status == SCHEDULED
    assert d.user_claims[0].allocation is not None
    assert d.special is not None
    assert set(d.user_claims[0].allocation.device_keys).isdisjoint(d.special.device_keys)
    tight = scheduler(node("n"), CLASS, resource_slice("s", gpus(1), node_name="n"), user)
    assert tight.schedule(p).message == "0/1 nodes are available: 1 cannot allocate all claims."


def test_user_claim_problems_fail_prefilter() -> None:
    s = scheduler(node("a"), node("b"))
    d = s.schedule(pod("p", resourceClaims=[{"name": "x", "resourceClaimName": "nope"}]))
    assert d.message == '0/2 nodes are available: resourceclaim "nope" not found.'
    t = s.schedule(pod("p", resourceClaims=[{"name": "x", "resourceClaimTemplateName": "tpl"}]))
    assert "waiting for resource claim" in t.message


def test_allocated_user_claim_pins_the_node() -> None:
    alloc = {
        "devices": {"results": []},
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}
            ]
        },
    }
    user = claim("mine", [exactly("r", "gpu.example.com")], allocation=alloc)
    s = scheduler(node("a"), node("b"), user)
    d = s.schedule(pod("p", resourceClaims=[{"name": "x", "resourceClaimName": "mine"}]))
    assert d.node == "b"


def test_cel_error_aborts_the_attempt() -> None:
    bad = device_class("bad", ext=GPU, selectors=['device.attributes["gpu.example.com"].nope == 1'])
    s = scheduler(node("n"), bad, resource_slice("s", gpus(1), node_name="n"))
    d = s.schedule(gpu_pod())
    assert d.status == ERROR
    assert "CEL runtime error" in d.message


def test_implicit_name_uses_the_class_directly() -> None:
    s = scheduler(
        node("n"), device_class("plain", selectors=["true"]), resource_slice("s", gpus(1), node_name="n")
    )
    d = s.schedule(pod("p", [container("c", {"deviceclass.resource.kubernetes.io/plain": 1})]))
    assert d.status == SCHEDULED
    assert d.served["deviceclass.resource.kubernetes.io/plain"].device_class == "plain"


def test_fit_error_format() -> None:
    assert fit_error(3, {"a": ["x"], "b": ["x"], "c": ["y", "x"]}) == "0/3 nodes are available: 1 y, 3 x."
    assert fit_error(2, {}, "pre") == "0/2 nodes are available: pre."
    # No nodes at all: kube-scheduler's ErrNoNodesAvailable, not "0/0 nodes are available:".
    assert fit_error(0, {}) == fit_error(0, {}, "pre") == "no nodes available to schedule pods"


def test_feasibility_check_without_scoring_picks_the_first_node_by_name() -> None:
    objs = [
        node("b"),
        node("a"),
        CLASS,
        resource_slice("sa", gpus(4), node_name="a"),
        resource_slice("sb", gpus(4), node_name="b"),
    ]
    s = Scheduler(state_of(*objs), "binpack")
    s.reserve(s.schedule(gpu_pod("first")))  # binpack: "a" (tie, smaller name)
    s.reserve(s.schedule(gpu_pod("second")))  # binpack: "a" again (most used)
    d = s.schedule(gpu_pod("x"), score=False)
    assert d.status == SCHEDULED
    assert d.node == "a"
    spread = Scheduler(state_of(*objs), "spread")
    spread.reserve(spread.schedule(gpu_pod("first")))
    assert spread.schedule(gpu_pod("x")).node == "b"
    assert spread.schedule(gpu_pod("x"), score=False).node == "a"


def test_pod_overhead_is_not_a_device_request() -> None:
    """``resourcehelper.PodRequests`` adds the RuntimeClass overhead to the pod's requests, but
    ``createRequestsAndMappings`` builds the special claim from the containers alone: overhead
    naming a DRA-backed resource asks for no device, so a node with one free device fits."""
    s = scheduler(node("n"), CLASS, resource_slice("s", gpus(1), node_name="n"))
    p = gpu_pod(overhead={GPU: "1", "cpu": "100m"})
    d = s.schedule(p)
    assert d.status == SCHEDULED, d.message
    assert [r["exactly"]["count"] for r in d.requests] == [1]
    assert d.special is not None
    assert len(d.special.results) == 1


def test_invalid_pools_give_upstreams_reason_instead_of_the_precheck_reason() -> None:
    """``Allocate`` returns "invalid resource pools were encountered" when it found no devices and
    a pool was invalid; kube-scheduler aggregates it per node (scheduler_perf's invalid-pool case:
    "0/8 nodes are available: 1 invalid resource pools were encountered, 7 cannot allocate ...")."""
    dup = [*gpus(1), *gpus(1)]  # the same device name twice in one node's pool
    s = scheduler(
        node("bad"),
        node("empty"),
        CLASS,
        resource_slice("s-bad", dup, node_name="bad"),
        resource_slice("s-empty", [], node_name="empty"),
    )
    d = s.schedule(gpu_pod())
    assert d.status == UNSCHEDULABLE
    assert d.message == (
        "0/2 nodes are available: 1 cannot allocate all claims, 1 invalid resource pools were encountered."
    )


def test_a_tainted_device_serves_the_extended_resource_only_through_a_class_that_tolerates_it() -> None:
    """Upstream's special claim has no tolerations (issue 23): a NoSchedule-tainted device never
    served these pods. ``draxr.io/extended-resource-tolerations`` puts the class's tolerations on
    each request of the special claim; the allocator honours them as upstream's does, the allocation
    records them, and the free-device counts count the device."""
    taint = {"key": "example.com/maintenance", "value": "planned", "effect": "NoSchedule"}
    tainted = resource_slice("s", [{"name": "gpu-0", "taints": [taint]}], node_name="n")
    d = scheduler(node("n", {GPU: 0}), CLASS, tainted).schedule(gpu_pod())
    assert d.status == UNSCHEDULABLE
    tolerating = device_class("gpu.example.com", ext=GPU, selectors=['device.driver == "gpu.example.com"'])
    toleration = {"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}
    tolerating["metadata"]["annotations"] = {
        "draxr.io/extended-resource-tolerations": json.dumps([toleration])
    }
    s = scheduler(node("n", {GPU: 0}), tolerating, tainted)
    assert s.state.capacity.free("gpu.example.com") == {"n": 1}
    d = s.schedule(gpu_pod())
    assert d.status == SCHEDULED
    assert d.requests[0]["exactly"]["tolerations"] == [toleration]
    assert d.special is not None
    assert d.special.to_api()["devices"]["results"][0]["tolerations"] == [toleration]
    # an untolerated NoExecute taint on it as well: no longer a candidate
    both = resource_slice(
        "s", [{"name": "gpu-0", "taints": [taint, {**taint, "effect": "NoExecute"}]}], node_name="n"
    )
    s = scheduler(node("n", {GPU: 0}), tolerating, both)
    assert s.state.capacity.free("gpu.example.com") == {}
    assert s.schedule(gpu_pod()).status == UNSCHEDULABLE


def test_a_replica_set_spreads_its_pods_by_the_system_defaults() -> None:
    """PodTopologySpread's system defaults (hostname maxSkew 3, ScheduleAnyway) select a pod's
    ReplicaSet siblings once the cluster holds the ReplicaSet (issue 21): one pod on each node, the
    sibling on ``alpha``, so the next replica goes to ``zeta``; without the ReplicaSet in the cluster
    the tie goes to the smaller name, as before."""
    owner = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs", "controller": True}]

    def replica(name: str) -> Obj:
        p = pod(name, [container("c")])
        p["metadata"]["labels"] = {"app": "web"}
        p["metadata"]["ownerReferences"] = owner
        return p

    sibling = replica("web-1")
    sibling["spec"]["nodeName"] = "alpha"
    stranger = pod("other", [container("c")])  # the same load on zeta: resource scores tie
    stranger["spec"]["nodeName"] = "zeta"
    nodes = (node("zeta"), node("alpha"), stranger)
    replica_set = {
        "kind": "ReplicaSet",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
    }
    assert scheduler(*nodes, sibling, policy="upstream").schedule(replica("web-2")).node == "alpha"
    assert (
        scheduler(*nodes, sibling, replica_set, policy="upstream").schedule(replica("web-2")).node == "zeta"
    )


def test_a_placement_limits_the_decision_and_its_fit_error_to_its_nodes() -> None:
    s = scheduler(
        node("alpha"),
        node("beta"),
        node("gamma", {"cpu": "1"}),
        CLASS,
        resource_slice("s1", gpus(1), node_name="alpha"),
        resource_slice("s2", gpus(1), node_name="beta"),
    )
    assert s.schedule(gpu_pod()).node == "alpha"
    with s.within(["beta"]):
        assert s.schedule(gpu_pod()).node == "beta"
        with s.within(["gamma"]):
            d = s.schedule(gpu_pod())
            assert d.status == UNSCHEDULABLE
            assert d.message.startswith("0/1 nodes are available")
            assert set(d.reasons) == {"gamma"}
        assert s.placement == frozenset({"beta"})
    assert s.placement is None
