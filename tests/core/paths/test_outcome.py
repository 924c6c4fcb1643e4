"""A pod's admission outcome (path, JSONPatch, warnings) from what the cluster says, without a
webhook: the facts read under the cache's lock, then the decision."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tests.core.harness import state_of
from tests.core.podfactory import container, device_class, gpus, node, pod, resource_slice
from webhook.core.api.objects import Obj
from webhook.core.cluster.state import ClusterState
from webhook.core.paths.choice import PathChoice
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
    assert out.patch == native_patch(p, {GPU: CLASS}, Routing())
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
    out = pod_outcome(p, seen, Routing("always"))
    assert out.kind == "rewrite"
    assert out.patch == rewrite_patch(p, {GPU: CLASS}, Routing("always"))
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
    shared = device_class(CLASS, ext=GPU)
    shared["metadata"]["annotations"] = {"draxr.io/capacity-requests": '{"requests": {"memory": "10Gi"}}'}
    n = node("dra")
    n["status"]["nodeInfo"] = {"kubeletVersion": "v1.36.1"}
    state = state_of(n, shared, resource_slice("s", gpus(2), node_name="dra"))
    p = gpu_pod()
    seen = facts(state, p, [GPU], gate=False)
    assert seen.capacity == {CLASS: {"memory": "10Gi"}}
    out = pod_outcome(p, seen, Routing("always"))
    assert out.patch == rewrite_patch(
        p, {GPU: CLASS}, Routing("always"), capacity={CLASS: {"memory": "10Gi"}}
    )
    assert out.patch != rewrite_patch(p, {GPU: CLASS}, Routing("always"))
    claims = [op["value"] for op in out.patch if op["path"].startswith("/spec/resourceClaims")]
    assert "-cap-" in str(claims)
