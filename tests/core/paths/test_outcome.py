"""A pod's admission outcome (path, JSONPatch, warnings) from what the cluster says, without a
webhook: the facts read under the cache's lock, then the decision."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import jsonpatch
import pytest

from tests.core.harness import state_of
from tests.core.podfactory import container, device_class, gpus, node, pod, resource_slice
from webhook.core.api.labels import parse_label_selector
from webhook.core.api.objects import Obj
from webhook.core.cluster.state import ClusterState
from webhook.core.paths.choice import PathChoice
from webhook.core.paths.consumed import CLAIM, ClaimClasses, ClaimSource, ManagedClasses
from webhook.core.paths.explain import contention_warning, path_warning, quota_warning, unserved_warning
from webhook.core.paths.outcome import ClusterFacts, cluster_facts, pod_outcome
from webhook.core.paths.patch import native_patch, rewrite_patch
from webhook.core.paths.routing import Routing

GPU = "example.com/gpu"
CLASS = "gpu.example.com"
QUOTA: Obj = {"kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "default"}}
QUOTA["spec"] = {"hard": {f"requests.{GPU}": "4"}}


def dra_cluster(*extra: Obj) -> ClusterState:
    n = node("dra")
    n["status"]["nodeInfo"] = {"kubeletVersion": "v1.36.1"}  # the kubelet's gate is on
    return state_of(n, device_class(CLASS, ext=GPU), resource_slice("s", gpus(2), node_name="dra"), *extra)


def annotated_cluster(annotations: dict[str, str]) -> ClusterState:
    """``dra_cluster`` with its class annotated."""
    state = dra_cluster()
    annotated = device_class(CLASS, ext=GPU)
    annotated["metadata"]["annotations"] = annotations
    state.upsert_class(annotated)
    return state


def gpu_pod(quantity: object = 1, **spec: Any) -> Obj:
    return pod(containers=[container("c", {GPU: quantity})], **spec)


def never() -> bool:
    raise AssertionError("read though the answer does not need it")


def no_quotas() -> Iterable[Obj]:
    raise AssertionError("quotas read though the answer does not need them")


def facts(
    state: ClusterState,
    p: Obj,
    names: list[str],
    *,
    gate: bool = True,
    complete: bool = True,
    quotas: Sequence[Obj] = (),
    claims: ClaimClasses | None = None,
    managed: ManagedClasses | None = None,
) -> ClusterFacts:
    resolved = {n: c for n in names if (c := state.classes.class_name(n)) is not None}
    return cluster_facts(
        state,
        p,
        names,
        resolved,
        complete=complete,
        mode="auto",
        apiserver_gate=lambda: gate,
        force_rewrite=False,
        quotas=lambda: quotas,
        namespace="default",
        claims=claims,
        managed=managed or ManagedClasses(),
    )


def test_no_dra_backed_name_leaves_the_pod_alone_and_reads_no_more() -> None:
    state = state_of(node("dp", {"example.com/nic": 2}))
    p = pod(containers=[container("c", {"example.com/nic": 1, "example.com/typo": 1})])
    names = ["example.com/nic", "example.com/typo"]
    seen = cluster_facts(
        state,
        p,
        names,
        {},
        complete=True,
        mode="auto",
        apiserver_gate=never,
        force_rewrite=False,
        quotas=no_quotas,
        namespace="default",
    )
    out = pod_outcome(p, seen, Routing())
    assert (out.kind, out.patch, out.fit_check) == (None, [], False)
    assert out.warnings == [unserved_warning("example.com/typo")]
    # From a cache that is not whole, nothing is said to be unserved.
    assert pod_outcome(p, facts(state, p, names, complete=False), Routing()).warnings == []


def test_the_native_path_patches_routes_and_asks_for_fit_advice() -> None:
    state = dra_cluster()
    p = gpu_pod()
    out = pod_outcome(p, facts(state, p, [GPU]), Routing())
    assert out.kind == "native"
    assert out.patch == native_patch(p, {GPU: CLASS}, "draxr")
    assert {op["path"] for op in out.patch} == {"/metadata/annotations", "/spec/schedulerName"}
    assert out.warnings == []
    assert out.fit_check
    # No fit advice for a bound pod, a pod with claims from templates, or from a half-filled cache.
    bound = gpu_pod(nodeName="dra")
    assert not pod_outcome(bound, facts(state, bound, [GPU]), Routing()).fit_check
    templated = gpu_pod(resourceClaims=[{"name": "x", "resourceClaimTemplateName": "t"}])
    assert not pod_outcome(templated, facts(state, templated, [GPU]), Routing()).fit_check
    assert not pod_outcome(p, facts(state, p, [GPU], complete=False), Routing()).fit_check


def test_a_contended_name_is_explained_first() -> None:
    newer = device_class("newer.example.com", ext=GPU, created="2025-06-01T00:00:00Z")
    state = dra_cluster(newer)
    p = gpu_pod()
    out = pod_outcome(p, facts(state, p, [GPU]), Routing())
    winner = contention_warning(GPU, state.classes.contenders(GPU))
    assert winner is not None
    assert '"newer.example.com" wins' in winner
    assert out.warnings[0] == winner


def test_the_rewrite_explains_its_path_and_the_quota_it_escapes() -> None:
    state = dra_cluster()
    p = gpu_pod()
    seen = facts(state, p, [GPU], gate=False, quotas=[QUOTA])
    assert seen.choice == PathChoice("rewrite", "DRAExtendedResource is off in the apiserver")
    out = pod_outcome(p, seen, Routing())
    assert out.kind == "rewrite"
    # Its claims are of a class draxr manages: routed, one allocator per pool (issue 20).
    assert out.patch == rewrite_patch(p, {GPU: CLASS}, "draxr")
    assert out.warnings == [path_warning([GPU], seen.choice), quota_warning(GPU, CLASS)]
    assert (
        out.warnings[0] == f"{GPU}: rewritten into DRA claims (DRAExtendedResource is off in the apiserver)"
    )
    assert not out.fit_check


def test_a_fractional_quantity_is_not_rewritten_away() -> None:
    state = dra_cluster()
    p = gpu_pod("500m")
    seen = facts(state, p, [GPU], gate=False, quotas=[QUOTA])
    out = pod_outcome(p, seen, Routing())
    assert (out.kind, out.patch) == ("rewrite", [])
    assert out.warnings == [
        path_warning([GPU], PathChoice("rewrite", "DRAExtendedResource is off in the apiserver"))
    ]


def test_the_rewrite_carries_the_class_capacity_requests_into_its_patch() -> None:
    """Issue 23: the webhook's rewrite of a pod whose class has ``draxr.io/capacity-requests``
    names the share template (``-cap-``) and records its capacity requests for the worker."""
    state = annotated_cluster({"draxr.io/capacity-requests": '{"requests": {"memory": "10Gi"}}'})
    p = gpu_pod()
    seen = facts(state, p, [GPU], gate=False)
    assert seen.capacity == {CLASS: {"memory": "10Gi"}}
    out = pod_outcome(p, seen, Routing("always"))
    assert out.patch == rewrite_patch(p, {GPU: CLASS}, "draxr", capacity={CLASS: {"memory": "10Gi"}})
    assert out.patch != rewrite_patch(p, {GPU: CLASS}, "draxr")
    claims = [op["value"] for op in out.patch if op["path"].startswith("/spec/resourceClaims")]
    assert "-cap-" in str(claims)


def test_the_rewrite_carries_both_the_class_tolerations_and_capacity_requests() -> None:
    """Issue 23, both annotations on one class: the template is tolerating and a share, in that
    order in its name, and the pod's ``draxr.io/rewritten`` entry records both for the worker."""
    toleration = {"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}
    state = annotated_cluster(
        {
            "draxr.io/capacity-requests": '{"requests": {"memory": "10Gi"}}',
            "draxr.io/extended-resource-tolerations": json.dumps([toleration]),
        }
    )
    p = gpu_pod()
    seen = facts(state, p, [GPU], gate=False)
    assert seen.capacity == {CLASS: {"memory": "10Gi"}}
    assert seen.tolerations == {CLASS: [toleration]}
    out = pod_outcome(p, seen, Routing("always"))
    patched = jsonpatch.apply_patch(p, out.patch)
    ((name, entry),) = json.loads(patched["metadata"]["annotations"]["draxr.io/rewritten"]).items()
    assert name.startswith(f"draxr-{CLASS}-1-tolerating-")
    assert "-cap-" in name.split("-tolerating-")[1]
    assert entry == [CLASS, 1, [], [toleration], {"memory": "10Gi"}]


# -- one allocator per device pool (issue 20) ------------------------------------------------------

SCHEDULER_OP = {"op": "add", "path": "/spec/schedulerName", "value": "draxr"}
GANG = {"podGroupName": "trainers"}
WORKLOAD = {"name": "w", "podGroup": "g"}  # 1.35's Workload
COMPOSITE: Obj = {"metadata": {"name": "trainers"}, "spec": {"parentCompositePodGroupName": "top"}}


def claim_pod(**spec: Any) -> Obj:
    return pod(
        containers=[container("c", {"cpu": "1"})],
        resourceClaims=[{"name": "gpu", "resourceClaimName": "mine"}],
        **spec,
    )


def claims_of(*classes: str) -> ClaimClasses:
    return ClaimClasses(list(classes))


def test_a_pod_whose_own_claims_use_a_managed_class_is_routed() -> None:
    state = dra_cluster()
    p = claim_pod()
    seen = facts(state, p, [], claims=claims_of(CLASS))
    assert seen.managed == [CLASS]
    assert pod_outcome(p, seen, Routing()) == pod_outcome(p, seen, Routing("always"))
    assert pod_outcome(p, seen, Routing()).patch == [SCHEDULER_OP]
    assert pod_outcome(p, seen, Routing("never")).patch == []
    other = claim_pod(schedulerName="volcano")
    assert pod_outcome(other, facts(state, other, [], claims=claims_of(CLASS)), Routing()).patch == []


def test_a_claim_not_there_yet_routes_the_pod_to_draxr() -> None:
    state = dra_cluster()
    p = claim_pod()
    seen = facts(state, p, [], claims=ClaimClasses(missing=[ClaimSource(CLAIM, "mine")]))
    assert seen.managed == []
    assert seen.claims_unknown
    assert pod_outcome(p, seen, Routing()).patch == [SCHEDULER_OP]


def test_only_the_managed_classes_route() -> None:
    gpu_only = ManagedClasses(parse_label_selector("draxr.io/managed=true"))
    labelled = device_class("nic.example.com", ext="example.com/nic")
    labelled["metadata"]["labels"] = {"draxr.io/managed": "true"}
    state = dra_cluster(labelled)
    p = claim_pod()
    assert facts(state, p, [], claims=claims_of(CLASS), managed=gpu_only).managed == []
    assert (
        pod_outcome(p, facts(state, p, [], claims=claims_of(CLASS), managed=gpu_only), Routing()).patch == []
    )
    both = facts(state, p, [], claims=claims_of(CLASS, "nic.example.com"), managed=gpu_only)
    assert both.managed == ["nic.example.com"]
    assert pod_outcome(p, both, Routing()).patch == [SCHEDULER_OP]
    # A name backed by a class draxr does not manage is annotated, and left with its scheduler.
    g = gpu_pod()
    native = pod_outcome(g, facts(state, g, [GPU], managed=gpu_only), Routing())
    assert native.kind == "native"
    assert native.patch == native_patch(g, {GPU: CLASS})


def test_a_name_served_by_a_device_plugin_consumes_no_dra_device() -> None:
    state = state_of(node("dra"), device_class(CLASS, ext=GPU), node("dp", {GPU: 2}))
    p = gpu_pod()
    seen = facts(state, p, [GPU], gate=False)
    assert seen.choice is not None
    assert seen.choice.kind == "device-plugin"
    assert seen.managed == []
    assert pod_outcome(p, seen, Routing()).patch == []
    with_claims = gpu_pod(resourceClaims=[{"name": "x", "resourceClaimName": "mine"}])
    seen = facts(state, with_claims, [GPU], gate=False, claims=claims_of(CLASS))
    assert pod_outcome(with_claims, seen, Routing()).patch == [SCHEDULER_OP]


def _composite(state: ClusterState, p: Obj, names: list[str], **kw: Any) -> ClusterFacts:
    """The facts of a pod whose PodGroup is a CompositePodGroup's child (which the worker does not
    place), as the webhook reads them."""
    seen = facts(state, p, names, **kw)
    seen.pod_group = COMPOSITE
    return seen


COMPOSITE_TEXT = "a PodGroup of a CompositePodGroup (PodGroup spec.parentCompositePodGroupName)"


def test_what_the_worker_cannot_honour_is_denied_by_default() -> None:
    state = dra_cluster()
    p = gpu_pod(schedulingGroup=GANG)
    out = pod_outcome(p, _composite(state, p, [GPU]), Routing())
    assert out.patch == []
    assert out.denial == (
        f"draxr's worker does not implement {COMPOSITE_TEXT}, and the pod consumes devices of "
        'DeviceClass "gpu.example.com", which draxr allocates: another scheduler would allocate them '
        "beside draxr, two allocators sharing one pool (draxr serve --unsupported-pods=deny)"
    )
    claims = claim_pod(schedulingGroup=GANG)
    denied = pod_outcome(claims, _composite(state, claims, [], claims=claims_of(CLASS)), Routing())
    assert denied.denial is not None
    assert COMPOSITE_TEXT in denied.denial


def test_what_the_worker_cannot_honour_can_be_left_to_kube_scheduler() -> None:
    state = dra_cluster()
    p = gpu_pod(schedulingGroup=GANG)
    out = pod_outcome(p, _composite(state, p, [GPU]), Routing(unsupported="default-scheduler"))
    assert out.denial is None
    assert out.patch == native_patch(p, {GPU: CLASS})  # annotated, not routed
    [warning] = out.warnings
    assert warning.startswith(
        "left to default-scheduler: draxr's worker lacks a PodGroup of a CompositePodGroup"
    )
    rewritten = pod_outcome(
        p, _composite(state, p, [GPU], gate=False), Routing(unsupported="default-scheduler")
    )
    assert rewritten.kind == "rewrite"
    assert rewritten.patch == rewrite_patch(p, {GPU: CLASS})  # rewritten, as today, and not routed


def test_a_pod_naming_draxr_with_what_it_cannot_honour_is_denied() -> None:
    state = dra_cluster()
    p = gpu_pod(schedulerName="draxr", schedulingGroup=GANG)
    out = pod_outcome(p, _composite(state, p, [GPU]), Routing(unsupported="default-scheduler"))
    assert out.denial is not None
    assert out.denial.startswith('spec.schedulerName is "draxr"')


def test_a_pod_draxr_does_not_route_is_not_checked() -> None:
    state = dra_cluster()
    for p, route in (
        (gpu_pod(schedulingGroup=GANG), "never"),
        (gpu_pod(schedulingGroup=GANG, schedulerName="x"), "default-only"),
    ):
        out = pod_outcome(p, _composite(state, p, [GPU]), Routing(route))  # type: ignore[arg-type]
        assert out.denial is None
        assert out.warnings == []


def test_a_pod_of_a_1_35_workload_is_routed_to_the_worker() -> None:
    state = dra_cluster()
    p = gpu_pod(workloadRef=WORKLOAD)
    out = pod_outcome(p, facts(state, p, [GPU]), Routing())
    assert out.denial is None
    assert SCHEDULER_OP in out.patch


def _pod_group(**spec: Any) -> Obj:
    return {
        "metadata": {"name": "trainers", "namespace": "default"},
        "spec": {"schedulingPolicy": {}, **spec},
    }


def test_a_pod_of_a_pod_group_is_routed_to_the_worker() -> None:
    state = dra_cluster()
    p = gpu_pod(schedulingGroup=GANG)
    seen = facts(state, p, [GPU])
    seen.pod_group = _pod_group(schedulingPolicy={"gang": {"minCount": 2}})
    out = pod_outcome(p, seen, Routing())
    assert out.denial is None
    assert SCHEDULER_OP in out.patch
    unknown = facts(state, p, [GPU])  # its PodGroup not made yet: routed, the worker waits for it
    assert SCHEDULER_OP in pod_outcome(p, unknown, Routing()).patch


def test_a_routed_member_whose_priority_is_not_its_groups_is_refused_with_upstreams_words() -> None:
    state = dra_cluster()
    p = gpu_pod(schedulingGroup=GANG, priority=10)
    seen = facts(state, p, [GPU])
    seen.pod_group = _pod_group(priority=100)
    assert pod_outcome(p, seen, Routing()).denial == (
        "all pods in a single pod group should have the same priority as the pod group's priority, "
        "got 10 and 100"
    )
    elsewhere = gpu_pod(schedulingGroup=GANG, priority=10, schedulerName="x")
    seen = facts(state, elsewhere, [GPU])
    seen.pod_group = _pod_group(priority=100)
    assert pod_outcome(elsewhere, seen, Routing()).denial is None  # not draxr's to judge


@pytest.mark.parametrize(
    ("group_spec", "feature"),
    [
        ({"parentCompositePodGroupName": "top"}, "a PodGroup of a CompositePodGroup"),
        ({"resourceClaims": [{"name": "shared"}]}, "a PodGroup's shared ResourceClaims"),
    ],
)
def test_what_of_a_pod_group_the_worker_does_not_place_is_unsupported(group_spec: Obj, feature: str) -> None:
    state = dra_cluster()
    p = gpu_pod(schedulingGroup=GANG)
    seen = facts(state, p, [GPU])
    seen.pod_group = _pod_group(**group_spec)
    denial = pod_outcome(p, seen, Routing()).denial
    assert denial is not None
    assert denial.startswith(f"draxr's worker does not implement {feature}")
    left = pod_outcome(p, seen, Routing(unsupported="default-scheduler"))
    assert SCHEDULER_OP not in left.patch
