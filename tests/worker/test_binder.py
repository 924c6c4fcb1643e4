"""PreBind, Bind and the API half of Unreserve against the API emulator with the real client:
the writes in upstream order (spec §3.6, §3.7), conflicts retried with fresh reads, fencing."""

from __future__ import annotations

from typing import Any

import pytest

from tests.worker.harness import GPU, Cluster, device_class, gpu_slice, node
from webhook.core.api.constants import (
    DELETE_PROTECTION_FINALIZER,
    EXTENDED_RESOURCE_CLAIM_ANNOTATION,
    WRITER_ANNOTATION,
)
from webhook.core.api.objects import Obj
from webhook.core.scheduling.framework import SCHEDULED, Decision
from webhook.core.scheduling.scheduler import Scheduler
from webhook.kube.cache import ClusterCache
from webhook.kube.client import KubeClient, NotLeader
from webhook.worker.binder import AlreadyBound, Binder, BindError, Written

USER_CLAIM = {
    "metadata": {"name": "mine", "namespace": "default"},
    "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
}


class Steps:
    """The binder's observer: which steps completed, in order."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, step: str, pod: Obj) -> None:
        self.seen.append(step)


def decide(kube: Cluster, pod: Obj, writer: str | None = None) -> Decision:
    """The engine's decision for ``pod`` on the cluster as the API holds it now."""
    engine = Scheduler(ClusterCache.from_objects(kube.snapshot()).state, writer=writer)
    d = engine.schedule(kube.em.get("pods", pod["metadata"]["name"], "default"))
    assert d.status == SCHEDULED, d.message
    return d


def writes(kube: Cluster) -> list[tuple[str, str]]:
    return [(r.verb, r.resource) for r in kube.em.requests() if r.verb not in ("get", "list", "watch")]


def binder(kube: Cluster, fence: Any = None, **kwargs: Any) -> tuple[Binder, Steps]:
    b = Binder(kube.client(), "draxr", fence or (lambda: True), **kwargs)
    steps = Steps()
    b.observer = steps
    return b, steps


@pytest.fixture
def gpu_cluster(kube: Cluster) -> Cluster:
    kube.apply(node("n"), device_class(), gpu_slice("n", 2))
    return kube


# -- PreBind ---------------------------------------------------------------------------------------


def test_pre_bind_creates_allocates_then_maps_in_upstream_order(gpu_cluster: Cluster) -> None:
    kube = gpu_cluster
    pod = kube.pod("p")
    d = decide(kube, pod)
    b, steps = binder(kube)
    kube.em.reset_requests()
    written = Written()
    b.pre_bind(pod, d, written)
    assert writes(kube) == [
        ("create", "resourceclaims"),
        ("update", "resourceclaims/status"),
        ("patch", "pods/status"),
    ]
    assert steps.seen == ["claim-created", "claim-allocated", "pod-status"]
    (claim,) = kube.claims()
    meta = claim["metadata"]
    assert meta["generateName"] == "p-extended-resources-"
    assert meta["name"].startswith("p-extended-resources-")
    assert meta["annotations"] == {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true", WRITER_ANNOTATION: "draxr"}
    assert meta["finalizers"] == [DELETE_PROTECTION_FINALIZER]  # in the POST: no separate PUT
    assert meta["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": pod["metadata"]["uid"], "controller": True}
    ]
    assert claim["status"]["allocation"] == d.special_allocation()
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "p", "uid": pod["metadata"]["uid"]}
    ]
    erc = kube.em.get("pods", "p", "default")["status"]["extendedResourceClaimStatus"]
    assert erc == {"requestMappings": d.mappings, "resourceClaimName": meta["name"]}
    assert written.special_claim is not None
    assert written.special_claim["metadata"]["uid"] == meta["uid"]
    assert written.pod_status is True
    assert written.claim_keys == [("default", meta["name"])]


def test_a_device_plugin_decision_writes_nothing_before_the_binding(kube: Cluster) -> None:
    kube.apply(node("dp", {GPU: 2}), device_class())
    pod = kube.pod("p")
    d = decide(kube, pod)
    assert d.special is None
    b, steps = binder(kube)
    kube.em.reset_requests()
    written = Written()
    b.pre_bind(pod, d, written)
    assert writes(kube) == []
    assert written == Written()
    b.bind(pod, "dp")
    assert kube.bound() == {"p": "dp"}
    assert steps.seen == ["bound"]


def test_user_claims_are_written_before_the_special_claim(gpu_cluster: Cluster) -> None:
    kube = gpu_cluster
    kube.em.create("resourceclaims", USER_CLAIM)
    pod = kube.pod("p", resourceClaims=[{"name": "x", "resourceClaimName": "mine"}])
    d = decide(kube, pod)
    b, _ = binder(kube)
    kube.em.reset_requests()
    written = Written()
    b.pre_bind(pod, d, written)
    updated = [r.name for r in kube.em.requests() if r.resource == "resourceclaims/status"]
    assert updated[0] == "mine"
    # bindClaim: the delete-protection finalizer first, then the allocation and reservedFor.
    assert writes(kube)[:2] == [("update", "resourceclaims"), ("update", "resourceclaims/status")]
    assert kube.em.get("resourceclaims", "mine", "default")["metadata"]["finalizers"] == [
        "resource.kubernetes.io/delete-protection"
    ]
    assert written.user_claims == [("default", "mine", True)]
    user = kube.em.get("resourceclaims", "mine", "default")
    assert len(user["status"]["allocation"]["devices"]["results"]) == 1
    assert [r["name"] for r in user["status"]["reservedFor"]] == ["p"]
    assert sorted(kube.allocated()) == [
        ("gpu.example.com", "n-gpu", "gpu-0"),
        ("gpu.example.com", "n-gpu", "gpu-1"),
    ]


def test_a_second_pre_bind_of_a_resumed_decision_writes_nothing(gpu_cluster: Cluster) -> None:
    kube = gpu_cluster
    pod = kube.pod("p")
    b, _ = binder(kube)
    b.pre_bind(pod, decide(kube, pod), Written())
    again = decide(kube, pod, writer="draxr")
    assert again.resumed is not None
    kube.em.reset_requests()
    written = Written()
    b.pre_bind(kube.em.get("pods", "p", "default"), again, written)
    assert writes(kube) == []
    assert written.reused_claim is not None
    assert len(kube.claims()) == 1


def test_a_stale_copy_showing_the_mapping_does_not_skip_writing_it(gpu_cluster: Cluster) -> None:
    """A failed cycle wrote the mapping and its Unreserve cleared it, but the copy the next cycle
    holds still shows it (the clearing event not seen yet): the mapping is written again, never
    taken from the copy, so the pod is not bound naming no claim (the chaos scenario's failure)."""
    kube = gpu_cluster
    pod = kube.pod("p")
    b, _ = binder(kube)
    b.pre_bind(pod, decide(kube, pod), Written())
    stale = kube.em.get("pods", "p", "default")
    assert stale["status"]["extendedResourceClaimStatus"]
    again = decide(kube, pod, writer="draxr")
    assert again.resumed is not None
    b.clear_mapping(pod, stale["status"]["extendedResourceClaimStatus"]["resourceClaimName"])
    assert "extendedResourceClaimStatus" not in kube.em.get("pods", "p", "default")["status"]
    b.pre_bind(stale, again, Written())
    b.bind(stale, "n")
    live = kube.em.get("pods", "p", "default")
    assert live["spec"]["nodeName"] == "n"
    assert live["status"]["extendedResourceClaimStatus"] == stale["status"]["extendedResourceClaimStatus"]


def _leftover(kube: Cluster, pod: Obj, count: int = 1, finalizer: bool = False) -> Obj:
    request = {
        "name": "container-0-request-0",
        "exactly": {"deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": count},
    }
    meta: Obj = {
        "name": "p-extended-resources-old",
        "namespace": "default",
        "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true", WRITER_ANNOTATION: "draxr"},
        "ownerReferences": [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": "p",
                "uid": pod["metadata"]["uid"],
                "controller": True,
            }
        ],
    }
    if finalizer:
        meta["finalizers"] = [DELETE_PROTECTION_FINALIZER]
    return kube.em.create("resourceclaims", {"metadata": meta, "spec": {"devices": {"requests": [request]}}})


def test_an_unallocated_claim_of_ours_is_reused_and_gets_its_finalizer(gpu_cluster: Cluster) -> None:
    kube = gpu_cluster
    pod = kube.pod("p")
    old = _leftover(kube, pod)
    d = decide(kube, pod, writer="draxr")
    assert d.reuse is not None
    b, steps = binder(kube)
    kube.em.reset_requests()
    written = Written()
    b.pre_bind(pod, d, written)
    assert writes(kube) == [
        ("update", "resourceclaims"),
        ("update", "resourceclaims/status"),
        ("patch", "pods/status"),
    ]
    assert steps.seen == ["claim-allocated", "pod-status"]  # nothing was created
    (claim,) = kube.claims()
    assert claim["metadata"]["uid"] == old["metadata"]["uid"]
    assert claim["metadata"]["finalizers"] == [DELETE_PROTECTION_FINALIZER]
    assert claim["status"]["allocation"] == d.special_allocation()
    assert written.special_claim is None
    assert written.reused_claim is not None
    assert written.claim_keys == [("default", "p-extended-resources-old")]


def test_a_conflicting_finalizer_write_on_a_reused_claim_is_retried_after_a_fresh_read(
    gpu_cluster: Cluster,
) -> None:
    kube = gpu_cluster
    pod = kube.pod("p")
    _leftover(kube, pod)
    d = decide(kube, pod, writer="draxr")
    assert d.reuse is not None
    b, _ = binder(kube)
    rule = kube.em.inject(verbs="update", resource="resourceclaims", error=409, times=1)
    kube.em.reset_requests()
    b.pre_bind(pod, d, Written())
    assert rule.hits == 1
    assert kube.em.counts()[("get", "resourceclaims")] == 1
    (claim,) = kube.claims()
    assert claim["metadata"]["finalizers"] == [DELETE_PROTECTION_FINALIZER]
    assert claim["status"]["reservedFor"][0]["name"] == "p"


def test_a_reusable_claim_with_other_requests_is_deleted_and_replaced(gpu_cluster: Cluster) -> None:
    kube = gpu_cluster
    pod = kube.pod("p")
    d = decide(kube, pod)
    d.reuse = _leftover(kube, pod, count=2, finalizer=True)  # asks for two devices: not reusable
    b, _ = binder(kube)
    written = Written()
    b.pre_bind(pod, d, written)
    (claim,) = kube.claims()
    assert claim["metadata"]["name"] != "p-extended-resources-old"
    assert written.special_claim is not None
    assert kube.em.find("resourceclaims", "p-extended-resources-old", "default") is None


def test_conflicts_on_the_status_write_are_retried_with_fresh_reads(gpu_cluster: Cluster) -> None:
    kube = gpu_cluster
    pod = kube.pod("p")
    d = decide(kube, pod)
    b, _ = binder(kube)
    rule = kube.em.inject(verbs="update", resource="resourceclaims/status", error=409, times=2)
    kube.em.reset_requests()
    b.pre_bind(pod, d, Written())
    assert rule.hits == 2
    counts = kube.em.counts()
    assert counts[("update", "resourceclaims/status")] == 3
    assert counts[("get", "resourceclaims")] == 2  # one fresh read per conflict
    (claim,) = kube.claims()
    assert claim["status"]["reservedFor"][0]["name"] == "p"


def test_a_stale_copy_costs_one_conflict_and_one_read(gpu_cluster: Cluster) -> None:
    kube = gpu_cluster
    kube.em.create("resourceclaims", USER_CLAIM)
    pod = kube.pod("p", resourceClaims=[{"name": "x", "resourceClaimName": "mine"}])
    d = decide(kube, pod)
    fresh = kube.em.get("resourceclaims", "mine", "default")
    fresh["metadata"]["labels"] = {"touched": "yes"}
    kube.em.update("resourceclaims", fresh)  # the decision's copy is now stale
    b, _ = binder(kube)
    kube.em.reset_requests()
    b.pre_bind(pod, d, Written())
    # The finalizer write meets the conflict; its answer is fresh, so the status write does not.
    metadata = [
        (r.name, r.code) for r in kube.em.requests() if r.resource == "resourceclaims" and r.verb == "update"
    ]
    assert metadata[:2] == [("mine", 409), ("mine", 200)]
    statuses = [(r.name, r.code) for r in kube.em.requests() if r.resource == "resourceclaims/status"]
    assert statuses[0] == ("mine", 200)
    user = kube.em.get("resourceclaims", "mine", "default")
    assert user["metadata"]["labels"] == {"touched": "yes"}
    assert user["status"]["reservedFor"][0]["name"] == "p"


def test_a_claim_allocated_elsewhere_meanwhile_fails_the_cycle(gpu_cluster: Cluster) -> None:
    kube = gpu_cluster
    kube.em.create("resourceclaims", USER_CLAIM)
    pod = kube.pod("p", resourceClaims=[{"name": "x", "resourceClaimName": "mine"}])
    d = decide(kube, pod)
    other = kube.em.get("resourceclaims", "mine", "default")
    result = {"request": "r", "driver": "gpu.example.com", "pool": "n-gpu", "device": "gpu-1"}
    other["status"] = {"allocation": {"devices": {"results": [result]}}}
    kube.em.update_status("resourceclaims", other)
    assert d.user_claims[0].allocation is not None
    assert d.user_claims[0].allocation.device_keys != [("gpu.example.com", "n-gpu", "gpu-1")]
    b, _ = binder(kube)
    with pytest.raises(BindError, match="claim default/mine got allocated elsewhere in the meantime"):
        b.pre_bind(pod, d, Written())


def test_endless_conflicts_give_up(gpu_cluster: Cluster) -> None:
    kube = gpu_cluster
    pod = kube.pod("p")
    d = decide(kube, pod)
    b, _ = binder(kube)
    kube.em.inject(verbs="update", resource="resourceclaims/status", error=409)
    with pytest.raises(BindError, match="too many conflicts"):
        b.pre_bind(pod, d, Written())


def test_a_failed_creation_fails_pre_bind_and_is_counted(gpu_cluster: Cluster) -> None:
    kube = gpu_cluster
    pod = kube.pod("p")
    d = decide(kube, pod)
    outcomes: list[tuple[str, bool]] = []
    b, _ = binder(kube, on_claim=lambda op, ok: outcomes.append((op, ok)))
    kube.em.inject(verbs="create", resource="resourceclaims", error=403, message="quota exceeded")
    written = Written()
    with pytest.raises(
        BindError, match=r"claim creation errors: create claim for extended resources default/p: quota"
    ):
        b.pre_bind(pod, d, written)
    assert outcomes == [("create", False)]
    assert written.special_claim is None
    assert kube.claims() == []


def test_empty_mappings_are_refused_before_the_pod_is_patched(gpu_cluster: Cluster) -> None:
    kube = gpu_cluster
    pod = kube.pod("p")
    d = decide(kube, pod)
    d.mappings = []
    b, _ = binder(kube)
    with pytest.raises(BindError, match="nil or empty request mappings"):
        b.pre_bind(pod, d, Written())
    assert "extendedResourceClaimStatus" not in kube.em.get("pods", "p", "default")["status"]


# -- Unreserve -------------------------------------------------------------------------------------


def test_a_mapping_the_apiserver_drops_fails_pre_bind(gpu_cluster: Cluster) -> None:
    """Found by the e2e gate switch: a pod admitted for the native path, still pending when the
    apiserver's DRAExtendedResource goes off, was bound without its mapping (dropped with a 200), so
    its container would get no device while the device stayed taken."""
    kube = gpu_cluster
    pod = kube.pod("p")
    d = decide(kube, pod)
    kube.em.set_feature_gate("DRAExtendedResource", False)
    b, steps = binder(kube)
    written = Written()
    with pytest.raises(BindError, match=r"dropped pod default/p ExtendedResourceClaimStatus"):
        b.pre_bind(pod, d, written)
    assert steps.seen == ["claim-created", "claim-allocated"]
    assert written.pod_status is False
    b.roll_back(pod, written)
    assert kube.claims() == []


def test_roll_back_deletes_the_created_claim_finalizer_first_and_clears_the_mapping(
    gpu_cluster: Cluster,
) -> None:
    kube = gpu_cluster
    kube.em.create("resourceclaims", USER_CLAIM)
    pod = kube.pod("p", resourceClaims=[{"name": "x", "resourceClaimName": "mine"}])
    d = decide(kube, pod)
    deleted: list[tuple[str, bool]] = []
    b, _ = binder(kube, on_claim=lambda op, ok: deleted.append((op, ok)))
    written = Written()
    b.pre_bind(pod, d, written)
    kube.em.reset_requests()
    b.roll_back(pod, written)
    assert writes(kube) == [
        ("update", "resourceclaims"),  # the finalizer goes first
        ("delete", "resourceclaims"),
        ("update", "resourceclaims/status"),  # the user claim is released
        ("update", "resourceclaims"),  # and, deallocated, loses its delete protection
        ("patch", "pods/status"),
    ]
    assert kube.claims() == []
    assert deleted == [("create", True), ("delete", True)]
    assert kube.em.get("pods", "p", "default")["status"].get("extendedResourceClaimStatus") is None
    user = kube.em.get("resourceclaims", "mine", "default")
    assert not (user.get("status") or {}).get("reservedFor")
    assert not (user.get("status") or {}).get("allocation")  # allocated by this cycle: undone


def test_roll_back_keeps_an_allocation_the_cycle_did_not_make(gpu_cluster: Cluster) -> None:
    kube = gpu_cluster
    claim = kube.em.create("resourceclaims", USER_CLAIM)
    result = {"request": "r", "driver": "gpu.example.com", "pool": "n-gpu", "device": "gpu-1"}
    claim["status"] = {"allocation": {"devices": {"results": [result]}}}
    kube.em.update_status("resourceclaims", claim)
    pod = kube.pod("p", {}, resourceClaims=[{"name": "x", "resourceClaimName": "mine"}])
    d = decide(kube, pod)
    b, _ = binder(kube)
    written = Written()
    b.pre_bind(pod, d, written)
    assert written.user_claims == [("default", "mine", False)]
    b.roll_back(pod, written)
    user = kube.em.get("resourceclaims", "mine", "default")
    assert not user["status"].get("reservedFor")
    assert user["status"]["allocation"]["devices"]["results"] == [result]


def test_roll_back_tolerates_a_claim_already_gone(gpu_cluster: Cluster) -> None:
    kube = gpu_cluster
    pod = kube.pod("p")
    b, _ = binder(kube)
    written = Written()
    b.pre_bind(pod, decide(kube, pod), written)
    assert written.special_claim is not None
    name = written.special_claim["metadata"]["name"]
    b.claims.delete("default", name)
    assert b.roll_back(pod, written) is None  # no exception, nothing left
    assert kube.claims() == []


# -- Bind ------------------------------------------------------------------------------------------


def test_bind_binds_and_reports(gpu_cluster: Cluster) -> None:
    kube = gpu_cluster
    pod = kube.pod("p", {})
    b, steps = binder(kube)
    b.bind(pod, "n")
    assert kube.bound() == {"p": "n"}
    assert steps.seen == ["bound"]


def test_bind_to_the_node_the_pod_is_already_on_is_success(gpu_cluster: Cluster) -> None:
    kube = gpu_cluster
    pod = kube.pod("p", {})
    kube.em.bind("p", "n", "default")  # an earlier attempt's binding went through
    b, steps = binder(kube)
    b.bind(pod, "n")
    assert steps.seen == ["bound"]


def test_bind_to_another_node_than_the_pod_is_on_fails(gpu_cluster: Cluster) -> None:
    kube = gpu_cluster
    kube.apply(node("m"))
    pod = kube.pod("p", {})
    kube.em.bind("p", "m", "default")
    b, steps = binder(kube)
    with pytest.raises(BindError, match="binding rejected: pod is already assigned to node m"):
        b.bind(pod, "n")
    assert steps.seen == []


def test_injected_binding_conflicts_are_retried(gpu_cluster: Cluster) -> None:
    kube = gpu_cluster
    pod = kube.pod("p", {})
    rule = kube.em.inject(verbs="create", resource="pods/binding", error=409, times=2)
    b, _ = binder(kube)
    b.bind(pod, "n")
    assert rule.hits == 2
    assert kube.bound() == {"p": "n"}


def test_a_refused_binding_is_not_retried(gpu_cluster: Cluster) -> None:
    kube = gpu_cluster
    pod = kube.pod("p", {})
    rule = kube.em.inject(verbs="create", resource="pods/binding", error=403, message="nope")
    b, _ = binder(kube)
    with pytest.raises(BindError, match="binding rejected: nope"):
        b.bind(pod, "n")
    assert rule.hits == 1


# -- fencing ---------------------------------------------------------------------------------------


def test_a_fenced_binder_writes_nothing(gpu_cluster: Cluster) -> None:
    kube = gpu_cluster
    pod = kube.pod("p")
    d = decide(kube, pod)
    b, _ = binder(kube, fence=lambda: False)
    kube.em.reset_requests()
    with pytest.raises(NotLeader):
        b.pre_bind(pod, d, Written())
    with pytest.raises(NotLeader):
        b.bind(pod, "n")
    assert writes(kube) == []
    assert kube.bound() == {}


def test_losing_the_lease_mid_cycle_stops_the_next_write(gpu_cluster: Cluster) -> None:
    kube = gpu_cluster
    pod = kube.pod("p")
    d = decide(kube, pod)
    leading = [True]
    b, _ = binder(kube, fence=lambda: leading[0])

    def lose(step: str, _: Obj) -> None:
        if step == "claim-created":
            leading[0] = False

    b.observer = lose
    kube.em.reset_requests()
    written = Written()
    with pytest.raises(NotLeader):
        b.pre_bind(pod, d, written)
    assert writes(kube) == [("create", "resourceclaims")]
    assert written.special_claim is not None  # so that the new leader's repair (or Unreserve) finds it
    left = b.roll_back(pod, written)  # fenced too: best effort, nothing written
    assert writes(kube) == [("create", "resourceclaims")]
    assert left == written.special_claim  # the claim left in place, for the next attempt to find


# -- deleteClaim and release -----------------------------------------------------------------------


def test_delete_claim_tolerates_not_found(kube: Cluster) -> None:
    b, _ = binder(kube)
    kube.em.reset_requests()
    assert b.claims.delete("default", "nothing-here") is True
    assert writes(kube) == []


def test_delete_claim_leaves_a_claim_with_another_uid_alone(gpu_cluster: Cluster) -> None:
    kube = gpu_cluster
    pod = kube.pod("p")
    claim = _leftover(kube, pod, finalizer=True)
    b, _ = binder(kube)
    kube.em.reset_requests()
    assert b.claims.delete("default", claim["metadata"]["name"], "some-older-uid") is True
    assert writes(kube) == []
    assert kube.em.find("resourceclaims", claim["metadata"]["name"], "default") is not None


def test_delete_claim_retries_a_conflicting_finalizer_removal(gpu_cluster: Cluster) -> None:
    kube = gpu_cluster
    pod = kube.pod("p")
    claim = _leftover(kube, pod, finalizer=True)
    b, _ = binder(kube)
    rule = kube.em.inject(verbs="update", resource="resourceclaims", error=409, times=1)
    assert b.claims.delete("default", claim["metadata"]["name"], claim["metadata"]["uid"]) is True
    assert rule.hits == 1
    assert kube.em.find("resourceclaims", claim["metadata"]["name"], "default") is None


def test_release_claim_keeps_the_allocation_while_another_pod_holds_it(gpu_cluster: Cluster) -> None:
    kube = gpu_cluster
    claim = kube.em.create("resourceclaims", USER_CLAIM)
    result = {"request": "r", "driver": "gpu.example.com", "pool": "n-gpu", "device": "gpu-0"}
    claim["status"] = {
        "allocation": {"devices": {"results": [result]}},
        "reservedFor": [
            {"resource": "pods", "name": "a", "uid": "ua"},
            {"resource": "pods", "name": "b", "uid": "ub"},
        ],
    }
    kube.em.update_status("resourceclaims", claim)
    b, _ = binder(kube)
    after = b.claims.unreserve("default", "mine", "ua", deallocate=True)
    assert after is not None
    assert [r["uid"] for r in after["status"]["reservedFor"]] == ["ub"]
    assert after["status"]["allocation"]
    after = b.claims.unreserve("default", "mine", "ub", deallocate=True)
    assert after is not None
    assert not after["status"].get("reservedFor")
    assert not after["status"].get("allocation")
    assert b.claims.unreserve("default", "gone", "ub", deallocate=True) is None


# -- a bound pod is never rolled back (issue 20) ------------------------------------------------------


def _bound_with_its_claim(kube: Cluster, pod: Obj) -> tuple[Obj, str]:
    """``pod`` bound on n through PreBind and Bind; the pod as the API now holds it, and its claim."""
    b, _ = binder(kube)
    written = Written()
    b.pre_bind(pod, decide(kube, pod), written)
    b.bind(pod, "n")
    assert written.special_claim is not None
    return kube.em.get("pods", pod["metadata"]["name"], "default"), written.special_claim["metadata"]["name"]


def test_pre_bind_of_a_pod_already_bound_writes_nothing(gpu_cluster: Cluster) -> None:
    """A worker with a lagging view (a new leader) decides for a pod its cache shows pending that
    another worker already bound: PreBind reads the pod first and stops before any write, where it
    overwrote the running pod's mapping with a claim of its own."""
    kube = gpu_cluster
    pod = kube.pod("p")
    stale = decide(kube, pod)  # made from the cache before the other worker bound the pod
    _, claim = _bound_with_its_claim(kube, pod)
    b, steps = binder(kube)
    kube.em.reset_requests()
    written = Written()
    with pytest.raises(AlreadyBound, match="pod default/p is already bound to node n"):
        b.pre_bind(pod, stale, written)
    assert writes(kube) == []
    assert steps.seen == []
    assert written == Written()
    assert (
        kube.em.get("pods", "p", "default")["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
        == claim
    )
    assert [c["metadata"]["name"] for c in kube.claims()] == [claim]


def test_pre_bind_of_a_pod_recreated_under_its_name_writes_nothing(gpu_cluster: Cluster) -> None:
    kube = gpu_cluster
    pod = kube.pod("p")
    d = decide(kube, pod)
    kube.em.delete("pods", "p", "default")
    kube.pod("p")
    b, _ = binder(kube)
    kube.em.reset_requests()
    with pytest.raises(BindError, match="pod default/p was deleted"):
        b.pre_bind(pod, d, Written())
    assert writes(kube) == []


def test_roll_back_never_touches_a_pod_that_got_bound(gpu_cluster: Cluster) -> None:
    """The binding went through although Bind reported a failure (its answer was lost, say): the
    pod runs with this cycle's claim, which Unreserve must neither delete nor unmap."""
    kube = gpu_cluster
    pod = kube.pod("p")
    b, _ = binder(kube)
    written = Written()
    b.pre_bind(pod, decide(kube, pod), written)
    kube.em.bind("p", "n", "default")
    kube.em.reset_requests()
    b.roll_back(pod, written)
    assert writes(kube) == []
    assert written.special_claim is not None
    name = written.special_claim["metadata"]["name"]
    assert (
        kube.em.get("pods", "p", "default")["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
        == name
    )
    assert [c["metadata"]["name"] for c in kube.claims()] == [name]


def test_roll_back_clears_only_the_mapping_this_cycle_wrote(gpu_cluster: Cluster) -> None:
    kube = gpu_cluster
    pod = kube.pod("p")
    b, _ = binder(kube)
    written = Written()
    b.pre_bind(pod, decide(kube, pod), written)
    live = kube.em.get("pods", "p", "default")
    live["status"]["extendedResourceClaimStatus"]["resourceClaimName"] = "another"
    kube.em.update_status("pods", live)  # someone mapped another claim meanwhile
    b.roll_back(pod, written)
    assert kube.em.get("pods", "p", "default")["status"]["extendedResourceClaimStatus"][
        "resourceClaimName"
    ] == ("another")


def test_a_status_patch_never_lands_on_a_pod_recreated_under_its_name(gpu_cluster: Cluster) -> None:
    """upstream's ``PatchPodStatus`` puts the pod's uid in the patch: the apiserver refuses it for
    another pod of the same name (uid is immutable)."""
    kube = gpu_cluster
    pod = kube.pod("p")
    d = decide(kube, pod)
    b, _ = binder(kube)
    recreated: list[str] = []

    def recreate(step: str, _: Obj) -> None:
        if step == "claim-allocated":
            kube.em.delete("pods", "p", "default")
            recreated.append(kube.pod("p")["metadata"]["uid"])

    b.observer = recreate
    with pytest.raises(BindError, match="update pod default/p ExtendedResourceClaimStatus"):
        b.pre_bind(pod, d, Written())
    new = kube.em.get("pods", "p", "default")
    assert new["metadata"]["uid"] == recreated[0]
    assert "extendedResourceClaimStatus" not in new["status"]


def test_a_resumed_claim_the_api_no_longer_has_fails_pre_bind(gpu_cluster: Cluster) -> None:
    """The cache still shows the claim a failed attempt wrote and its Unreserve deleted: the next
    attempt resumes it from that copy, which says there is nothing left to write. The API has the
    last word, or the pod is bound with a mapping to a claim that no longer exists (the flake of
    test_bind_failure_unreserves_and_retries: two claims created for three attempts)."""
    kube = gpu_cluster
    pod = kube.pod("p")
    b, _ = binder(kube)
    first = Written()
    b.pre_bind(pod, decide(kube, pod), first)
    again = decide(kube, pod, writer="draxr")  # the cache's view, from before the deletion
    assert again.resumed is not None
    b.roll_back(pod, first)
    assert kube.claims() == []
    with pytest.raises(BindError, match="got deleted in the meantime"):
        b.pre_bind(kube.em.get("pods", "p", "default"), again, Written())
    assert "extendedResourceClaimStatus" not in kube.em.get("pods", "p", "default")["status"]


def test_a_write_the_server_failed_is_not_sent_again_once_the_lease_is_lost(gpu_cluster: Cluster) -> None:
    """The client retries 503 up to four times: each retry asks the fence again."""
    kube = gpu_cluster
    pod = kube.pod("p")
    d = decide(kube, pod)
    leading = [True]

    def lose_on_503(verb: str, resource: str, code: int) -> None:
        if code == 503:
            leading[0] = False

    client = KubeClient(kube.em.api_client("worker"), hook=lose_on_503).fenced(lambda: leading[0])
    b = Binder(client, "draxr", lambda: leading[0])
    rule = kube.em.inject(verbs="update", resource="resourceclaims/status", error=503)
    with pytest.raises(NotLeader):
        b.pre_bind(pod, d, Written())
    assert rule.hits == 1
