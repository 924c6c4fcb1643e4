"""Device-aware preemption by the worker, on the API emulator with the real client (issue 21):
a full node of low-priority GPU pods, a high-priority one arrives; the fewest lowest-priority
victims go, their devices go to the preemptor, a PDB is respected, ``preemptionPolicy: Never``
waits."""

from __future__ import annotations

from typing import Any

from tests.worker.harness import GPU, Cluster, device_class, gpu_slice, node
from webhook.core.api.objects import Obj


def low(kube: Cluster, name: str, priority: int, **labels: str) -> Obj:
    body: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": dict(labels)},
        "spec": {
            "schedulerName": "draxr",
            "priority": priority,
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {GPU: 1}}}],
        },
    }
    return kube.em.create("pods", body)


def full_node(kube: Cluster, pods: dict[str, tuple[int, dict[str, str]]]) -> dict[str, list[str]]:
    """One node with as many GPUs as ``pods``, all bound; each pod's devices."""
    kube.apply(node("n"), device_class(), gpu_slice("n", len(pods)))
    proc = kube.worker()
    for name, (prio, labels) in pods.items():
        low(kube, name, prio, **labels)
    kube.wait_bound(len(pods))
    kube.em.wait_for(lambda: len(kube.claims()) == len(pods), 30, "every special claim allocated")
    # Preemption weighs the pods the worker's cache shows bound (docs/limitations.md): the node is
    # full in its view too before a preemptor comes.
    assert proc.cache is not None
    cache = proc.cache
    keys = [(c["metadata"]["namespace"], c["metadata"]["name"]) for c in kube.claims()]
    uids = [p["metadata"]["uid"] for p in kube.pods()]

    def seen_full() -> bool:
        shown = [cache.pod(u) for u in uids]
        return len(cache.allocated(keys)) == len(keys) and all(
            p is not None and p["spec"].get("nodeName") for p in shown
        )

    kube.em.wait_for(seen_full, 30, "the worker's cache shows the node full")
    return devices_by_pod(kube)


def devices_by_pod(kube: Cluster) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for c in kube.claims():
        results = ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])
        out[c["metadata"]["ownerReferences"][0]["name"]] = sorted(r["device"] for r in results)
    return out


def events(kube: Cluster, reason: str) -> list[Obj]:
    return [e for e in kube.em.list("events", "default") if e.get("reason") == reason]


def names(kube: Cluster) -> set[str]:
    return {p["metadata"]["name"] for p in kube.pods()}


def test_a_high_priority_pod_evicts_the_fewest_lowest_and_takes_their_devices(kube: Cluster) -> None:
    before = full_node(kube, {"a": (0, {}), "b": (10, {}), "c": (0, {}), "d": (10, {})})
    train = kube.pod("train", {GPU: 2}, priority=1000)
    kube.em.wait_for(lambda: kube.bound().get("train") == "n", 30, "the preemptor bound")
    assert names(kube) == {"b", "d", "train"}
    assert devices_by_pod(kube)["train"] == sorted(before["a"] + before["c"])
    preempted = events(kube, "Preempted")
    assert sorted(e["involvedObject"]["name"] for e in preempted) == ["a", "c"]
    assert {e["message"] for e in preempted} == {f"Preempted by pod {train['metadata']['uid']} on node n"}
    failed = [e for e in events(kube, "FailedScheduling") if e["involvedObject"]["name"] == "train"]
    assert failed[0]["message"] == (
        "0/1 nodes are available: 1 cannot allocate all claims. "
        "preemption: found a potential placement for pod on node n, preempting 2 victims"
    )
    assert kube.em.get("pods", "train", "default")["status"].get("nominatedNodeName") == "n"
    kube.check_consistent()


def test_a_pod_disruption_budget_is_respected(kube: Cluster) -> None:
    kube.apply(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "keep", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "keep"}}},
            "status": {"disruptionsAllowed": 0},
        }
    )
    guarded = {"app": "keep"}
    full_node(kube, {"a": (0, guarded), "b": (5, {}), "c": (0, guarded), "d": (5, {})})
    kube.pod("train", {GPU: 2}, priority=1000)
    kube.em.wait_for(lambda: kube.bound().get("train") == "n", 30, "the preemptor bound")
    # the lower-priority pods are guarded: the two that violate no budget go instead
    assert names(kube) == {"a", "c", "train"}


def test_preemption_policy_never_waits(kube: Cluster) -> None:
    full_node(kube, {"a": (0, {}), "b": (0, {})})
    kube.pod("polite", {GPU: 1}, priority=1000, preemptionPolicy="Never")

    def failed() -> list[Obj]:
        return [e for e in events(kube, "FailedScheduling") if e["involvedObject"]["name"] == "polite"]

    (event,) = kube.em.wait_for(failed, 30, "the pod reported unschedulable")
    assert event["message"].endswith(" preemption: not eligible due to preemptionPolicy=Never.")
    assert names(kube) == {"a", "b", "polite"}
    assert events(kube, "Preempted") == []
    assert "polite" not in kube.bound()


def test_no_preemption_among_equals(kube: Cluster) -> None:
    full_node(kube, {"a": (100, {})})
    kube.pod("same", {GPU: 1}, priority=100)

    def failed() -> Any:
        return [e for e in events(kube, "FailedScheduling") if e["involvedObject"]["name"] == "same"]

    (event,) = kube.em.wait_for(failed, 30, "the pod reported unschedulable")
    assert event["message"].endswith(
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )
    assert names(kube) == {"a", "same"}


def test_victims_terminate_gracefully_and_the_preemptor_waits_for_them(kube: Cluster) -> None:
    """A victim that takes its grace period (a finalizer stands in for the kubelet): it is marked
    DisruptionTarget and deleted with its own terminationGracePeriodSeconds; meanwhile the
    preemptor, nominated, preempts nobody else; once the victim is gone it binds."""
    kube.apply(node("n"), device_class(), gpu_slice("n", 2))
    kube.worker()
    for name in ("slow", "other"):
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "finalizers": ["example.com/kubelet"]},
            "spec": {
                "schedulerName": "draxr",
                "priority": 0 if name == "slow" else 5,
                "terminationGracePeriodSeconds": 7,
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {GPU: 1}}}],
            },
        }
        kube.em.create("pods", body)
    kube.wait_bound(2)
    kube.pod("train", {GPU: 1}, priority=1000)

    def terminating() -> Obj | None:
        slow = kube.em.get("pods", "slow", "default")
        return slow if slow["metadata"].get("deletionTimestamp") else None

    slow = kube.em.wait_for(terminating, 30, "the victim terminating")
    assert slow is not None
    assert slow["metadata"]["deletionGracePeriodSeconds"] == 7
    (cond,) = [c for c in slow["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert (cond["status"], cond["reason"]) == ("True", "PreemptionByScheduler")
    assert cond["message"] == "draxr: preempting to accommodate a higher priority pod"
    kube.em.wait_for(
        lambda: kube.em.get("pods", "train", "default")["status"].get("nominatedNodeName") == "n",
        30,
        "nominated",
    )
    # the next attempt (a cluster change moves the pod: a node without GPUs joins) waits for the
    # victim instead of preempting "other" too
    kube.apply(node("m"))
    waiting = " preemption: not eligible due to a terminating pod on the nominated node."
    kube.em.wait_for(
        lambda: any(
            e["message"].endswith(waiting)
            for e in events(kube, "FailedScheduling")
            if e["involvedObject"]["name"] == "train"
        ),
        30,
        "the preemptor waiting for its victim",
    )
    assert [e["involvedObject"]["name"] for e in events(kube, "Preempted")] == ["slow"]
    assert "train" not in kube.bound()
    slow = kube.em.get("pods", "slow", "default")
    slow["metadata"]["finalizers"] = []
    kube.em.update("pods", slow)  # the kubelet is done: the pod goes
    kube.em.wait_for(lambda: kube.bound().get("train") == "n", 30, "the preemptor bound")
    assert names(kube) == {"other", "train"}


def test_a_preemptor_the_cache_does_not_show_nominated_yet_preempts_no_second_victim(kube: Cluster) -> None:
    """CI on 1.35 gate off: the first victim's deletion requeued the preemptor before the cache
    showed its ``nominatedNodeName``, and it evicted a second pod for the same device. The worker
    remembers its nominations (upstream's in-memory nominator): with the first victim gone and its
    claim not yet released, the preemptor waits, still nominated."""
    from tests.worker.workers import make_worker
    from webhook.kube.cache import ClusterCache

    kube.apply(node("n"), device_class(), gpu_slice("n", 2))
    pods = [low(kube, "a", 0), low(kube, "b", 10)]
    cache = ClusterCache.from_objects(kube.snapshot())
    w = make_worker(kube.client(), cache)
    for p in pods:
        w.schedule_one(p["metadata"]["uid"])
    w.stop()  # waits for the binding cycles
    assert kube.bound() == {"a": "n", "b": "n"}

    train = kube.pod("train", {GPU: 1}, priority=1000)
    cache = ClusterCache.from_objects(kube.snapshot())  # a static cache: it sees only what we hand it
    w = make_worker(kube.client(), cache)
    w.schedule_one(train["metadata"]["uid"])
    assert names(kube) == {"b", "train"}  # the fewest, lowest: a
    assert kube.em.get("pods", "train", "default")["status"].get("nominatedNodeName") == "n"
    cache.handle("Pod", "DELETED", {**pods[0], "kind": "Pod"})  # a is gone; its claim still allocated
    decision = w.schedule_one(train["metadata"]["uid"])  # the cache's train shows no nomination
    w.stop()
    assert decision is not None
    assert names(kube) == {"b", "train"}  # b is not preempted for the device a still holds
    assert kube.em.get("pods", "train", "default")["status"].get("nominatedNodeName") == "n"


def test_the_nominations_remembered_are_of_pods_that_still_exist(kube: Cluster) -> None:
    """The worker's own record of its nominations holds live pods only: a preemptor deleted while
    nominated leaves it at the next nomination (it grew by one entry per such pod, forever)."""
    from tests.worker.workers import make_worker
    from webhook.kube.cache import ClusterCache

    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    first = low(kube, "a", 0)
    cache = ClusterCache.from_objects(kube.snapshot())
    w = make_worker(kube.client(), cache)
    w.schedule_one(first["metadata"]["uid"])
    w.stop()
    assert kube.bound() == {"a": "n"}

    train = kube.pod("train", {GPU: 1}, priority=1000)
    cache = ClusterCache.from_objects(kube.snapshot())
    w = make_worker(kube.client(), cache)
    w.schedule_one(train["metadata"]["uid"])
    assert set(w.scheduling.preemption.nominated) == {train["metadata"]["uid"]}
    kube.em.delete("pods", "train", "default")
    cache.handle("Pod", "DELETED", {**train, "kind": "Pod"})
    later = kube.pod("later", {GPU: 1}, priority=2000)
    cache.handle("Pod", "ADDED", {**later, "kind": "Pod"})
    w.schedule_one(later["metadata"]["uid"])
    w.stop()
    assert set(w.scheduling.preemption.nominated) == {later["metadata"]["uid"]}
