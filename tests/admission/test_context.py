"""The claim waiter and the fit advisor on their own (no server)."""

from __future__ import annotations

import threading

import pytest

from webhook.admission.advice import FitAdvisor
from webhook.admission.blocking import MAY_BLOCK, WouldBlock
from webhook.admission.context import ClaimWaiter
from webhook.core.api.objects import Obj
from webhook.kube.cache import ClusterCache

from .builders import gpu_cluster, gpu_pod, special_claim


def _wait_in_thread(waiter: ClaimWaiter, found: list[Obj | None]) -> threading.Thread:
    def run() -> None:
        MAY_BLOCK.set(True)
        found.append(waiter.get("default", "c"))

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_the_event_loop_is_never_made_to_wait() -> None:
    waiter = ClaimWaiter(ClusterCache(), timeout=30)
    with pytest.raises(WouldBlock):
        waiter.get("default", "c")


def test_a_claim_delivered_under_the_cache_lock_wakes_the_waiter() -> None:
    # Listeners may run while their caller holds the cache lock: the waiter must never hold its
    # condition while it takes that lock, or this would deadlock.
    cache = ClusterCache()
    waiter = ClaimWaiter(cache, timeout=30)
    found: list[Obj | None] = []
    thread = _wait_in_thread(waiter, found)
    thread.join(0.2)
    assert thread.is_alive()
    claim = special_claim("c", gpu_pod())
    with cache.lock:
        cache.handle("ResourceClaim", "ADDED", claim)
        cache.handle("ResourceClaim", "MODIFIED", claim)
    thread.join(10)
    assert not thread.is_alive()
    assert found == [claim]


def test_other_claims_do_not_end_the_wait_early(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another claim's event wakes the waiter: it must look, not find its claim and wait again (its
    second wait, observed below), then end with the claim it asked for. A waiter that gave up on any
    event would return None before that second wait, and this test would fail."""
    cache = ClusterCache()
    waiter = ClaimWaiter(cache, timeout=30)
    waits = [threading.Event(), threading.Event()]
    entered: list[int] = []
    wait_past = waiter._wait_past

    def counted(seen: int, timeout: float) -> int:
        if len(entered) < len(waits):
            waits[len(entered)].set()
        entered.append(seen)
        return wait_past(seen, timeout)

    monkeypatch.setattr(waiter, "_wait_past", counted)
    found: list[Obj | None] = []
    thread = _wait_in_thread(waiter, found)
    assert waits[0].wait(10), "the waiter never waited for the cache"
    cache.handle("ResourceClaim", "ADDED", special_claim("other", gpu_pod()))
    assert waits[1].wait(10), f"another claim ended the wait: {found}"
    assert found == []
    claim = special_claim("c", gpu_pod())
    cache.handle("ResourceClaim", "ADDED", claim)
    thread.join(10)
    assert not thread.is_alive()
    assert found == [claim]


def test_no_wait_on_a_snapshot_or_when_disabled() -> None:
    assert ClaimWaiter(ClusterCache.from_objects([]), timeout=30).get("default", "c") is None
    assert ClaimWaiter(ClusterCache(), timeout=0).get("default", "c") is None


def test_the_fit_cache_is_bounded_and_keyed_by_name() -> None:
    cache = ClusterCache.from_objects(gpu_cluster(devices=1))
    advisor = FitAdvisor(cache, size=2)
    for name in ("a", "b", "c", "a"):
        assert advisor.warning(gpu_pod(name, 2), "default") is not None
    assert (advisor.misses, advisor.hits) == (4, 0)  # "a" was evicted by "c"
    assert advisor.warning(gpu_pod("c", 2), "default") is not None
    assert advisor.hits == 1
    assert advisor.warning(gpu_pod("c", 1), "default") is None  # another spec, another answer


def follower(name: str) -> Obj:
    """A pod with required affinity to a leader pod's node (issue 21's pod placement)."""
    term = {"labelSelector": {"matchLabels": {"role": "leader"}}, "topologyKey": "kubernetes.io/hostname"}
    return gpu_pod(
        name, 1, affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    )


def test_a_cache_without_pods_gives_no_pod_placement_warning() -> None:
    """The webhook's own cache watches no pods: the fit check cannot tell whether a pod's affinity
    can be met and says nothing of it (before, every follower was warned: no leader in sight). A
    cache that holds the pods (``draxr serve`` with the worker, a snapshot) still warns."""
    objects = gpu_cluster()
    objects[1]["metadata"].setdefault("labels", {})["kubernetes.io/hostname"] = "dra-node"
    webhook_cache = ClusterCache()
    for o in objects:
        webhook_cache.handle(o["kind"], "ADDED", o)
    assert not webhook_cache.holds("Pod")
    assert FitAdvisor(webhook_cache).warning(follower("f"), "default") is None
    snapshot = ClusterCache.from_objects(objects)
    assert snapshot.holds("Pod")
    warning = FitAdvisor(snapshot).warning(follower("f"), "default")
    assert warning is not None
    assert "didn't match pod affinity rules" in warning
