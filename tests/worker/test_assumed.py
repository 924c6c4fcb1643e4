"""``worker.assumed``: a bound pod stays assumed, and its binding cycle's reservation held, until the
cache shows what the cycle wrote."""

from __future__ import annotations

from tests.worker.harness import GPU, Cluster, device_class, gpu_slice, node
from tests.worker.workers import GPU0, bind_one, claim_events, make_worker
from webhook.core.api.objects import Obj
from webhook.kube.cache import ClusterCache
from webhook.kube.resources import RESOURCE_CLAIMS


def test_the_reservation_stays_until_the_cache_shows_the_claim_allocated(kube: Cluster) -> None:
    kube.apply(node("n"), device_class(), gpu_slice("n", 2))
    pod = kube.pod("p")
    _, cache = bind_one(kube, pod)
    (claim,) = kube.claims()
    name = claim["metadata"]["name"]
    assert cache.state.allocated.is_allocated(GPU0)  # only the reservation holds it so far
    assert cache.allocated([("default", name)]) == set()
    # The creation and an update, both older than the status write (events that lag).
    claim_events(kube, cache, name, allocated=False, resource_version="1")
    claim_events(kube, cache, name, allocated=False, resource_version="2")
    assert cache.state.allocated.is_allocated(GPU0)  # still reserved: the claim shows no devices yet
    claim_events(kube, cache, name, allocated=True)  # the reservation goes
    assert cache.allocated([("default", name)]) == {("default", name)}
    claim_events(kube, cache, name, allocated=False)  # deallocated later (the pod finished, say)
    assert not cache.state.allocated.is_allocated(GPU0)  # nothing else held it


def test_a_claim_deletion_also_ends_the_reservation(kube: Cluster) -> None:
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    pod = kube.pod("p")
    _, cache = bind_one(kube, pod)
    (claim,) = kube.claims()
    cache.handle("ResourceClaim", "DELETED", {**claim, "kind": "ResourceClaim"})  # a relist saw only the end
    assert not cache.state.allocated.is_allocated(GPU0)


def test_a_claim_allocated_and_deallocated_within_one_watch_gap_releases_the_reservation(
    kube: Cluster,
) -> None:
    """The cache never sees the claim allocated: its first event after the binding cycle's write
    (a relist after a 410, say) shows it deallocated. That state is newer than the write (its
    resourceVersion), so the reservation ends; it waited forever before, holding the device."""
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    pod = kube.pod("p")
    _, cache = bind_one(kube, pod)
    (claim,) = kube.claims()
    deallocated = kube.client().update(RESOURCE_CLAIMS, {**claim, "status": {}}, subresource="status")
    assert cache.state.allocated.is_allocated(GPU0)
    cache.handle("ResourceClaim", "MODIFIED", {**deallocated, "kind": "ResourceClaim"})
    assert not cache.state.allocated.is_allocated(GPU0)


def test_a_claim_the_cache_already_shows_releases_the_reservation_at_once(kube: Cluster) -> None:
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    pod = kube.pod("p")
    holder: list[ClusterCache] = []

    def cache_catches_up(step: str, _: Obj) -> None:
        if step == "bound":  # the watch was faster than the binding cycle
            (claim,) = kube.claims()
            holder[0].handle("ResourceClaim", "MODIFIED", {**claim, "kind": "ResourceClaim"}, notify=False)

    cache = ClusterCache.from_objects(kube.snapshot())
    holder.append(cache)
    w = make_worker(kube.client(), cache)
    w.binder.observer = cache_catches_up
    w.schedule_one(pod["metadata"]["uid"])
    w.stop()
    (claim,) = kube.claims()
    claim_events(kube, cache, claim["metadata"]["name"], allocated=False)
    assert not cache.state.allocated.is_allocated(GPU0)


def test_the_reservation_waits_for_every_claim_the_cycle_wrote(kube: Cluster) -> None:
    kube.apply(node("n"), device_class(), gpu_slice("n", 2))
    kube.em.create(
        "resourceclaims",
        {
            "metadata": {"name": "mine", "namespace": "default"},
            "spec": {
                "devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.example.com"}}]}
            },
        },
    )
    pod = kube.pod("p", {GPU: 1}, resourceClaims=[{"name": "x", "resourceClaimName": "mine"}])
    _, cache = bind_one(kube, pod)
    (special,) = kube.claims()
    special_name = special["metadata"]["name"]
    special_device = tuple(
        special["status"]["allocation"]["devices"]["results"][0][k] for k in ("driver", "pool", "device")
    )
    claim_events(kube, cache, special_name, allocated=True)
    claim_events(kube, cache, special_name, allocated=False)
    assert cache.state.allocated.is_allocated(special_device)  # the user claim is not seen yet
    claim_events(kube, cache, "mine", allocated=True)
    assert not cache.state.allocated.is_allocated(special_device)


def test_a_late_event_of_a_pod_just_bound_does_not_schedule_it_again(kube: Cluster) -> None:
    """Found on a real apiserver (200 pods at once): the pod's mapping write reached the cache
    after the binding cycle had ended, showing the pod still unbound; scheduled again, its claim
    looked stale to PostFilter and was deleted under the bound pod. Bound pods are assumed until
    the cache shows their node, as kube-scheduler assumes them."""
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    pod = kube.pod("p")
    w, cache = bind_one(kube, pod)
    pod_uid = pod["metadata"]["uid"]
    assert w.assumed(pod_uid) == "n"
    live = kube.em.get("pods", "p", "default")
    stale = {**live, "kind": "Pod", "spec": {k: v for k, v in live["spec"].items() if k != "nodeName"}}
    cache.handle("Pod", "MODIFIED", stale)  # the mapping's status write, seen after the bind
    assert len(w.queue) == 0
    assert w.schedule_one(pod_uid) is None
    (claim,) = kube.claims()
    assert claim["status"]["reservedFor"][0]["uid"] == pod_uid  # still there, still the pod's
    cache.handle("Pod", "MODIFIED", {**live, "kind": "Pod"})  # the binding, at last
    assert w.assumed(pod_uid) is None


def test_a_left_claim_holds_its_pod_until_the_cache_shows_it_or_the_hold_ends(kube: Cluster) -> None:
    """``LeftClaims``: a pod whose failed cycle left a special claim waits until the cache shows
    that claim at its creation's resourceVersion or later; at most ``hold`` seconds."""
    from webhook.worker.assumed import LeftClaims

    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    pod = kube.pod("p")
    cache = ClusterCache.from_objects(kube.snapshot())
    claim = kube.client().create(
        RESOURCE_CLAIMS, {"metadata": {"name": "left", "namespace": "default"}, "spec": {}}, "default"
    )
    now = [0.0]
    left = LeftClaims(cache, hold=10.0, clock=lambda: now[0])
    assert not left.waits("other")
    left.leave(pod["metadata"]["uid"], claim)
    assert left.waits(pod["metadata"]["uid"])
    claim_events(kube, cache, "left", allocated=False, resource_version="1")  # an older version
    assert left.waits(pod["metadata"]["uid"])
    claim_events(kube, cache, "left", allocated=False)
    assert not left.waits(pod["metadata"]["uid"])
    assert not left.waits(pod["metadata"]["uid"])  # done with: forgotten

    left.leave("gone-before-shown", {**claim, "metadata": {**claim["metadata"], "name": "never"}})
    now[0] = 9.9
    assert left.waits("gone-before-shown")
    now[0] = 10.0
    assert not left.waits("gone-before-shown")  # the hold ended
    left.leave("bound", claim)
    left.forget("bound")
    assert not left.waits("bound")
