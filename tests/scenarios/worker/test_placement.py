"""Pod placement through the worker (issue 21): what InterPodAffinity, PodTopologySpread and the
nominated pods read reaches the worker's caches over real HTTP (pod labels, affinity, spread
constraints, ``nominatedNodeName``; Namespaces)."""

from __future__ import annotations

from typing import Any

from tests.worker.harness import GPU, Cluster, device_class, gpu_slice, node
from webhook.core.api.objects import Obj

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def placed_pod(
    kube: Cluster, name: str, labels: dict[str, str], namespace: str = "default", **spec: Any
) -> Obj:
    body: Obj = {
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "schedulerName": "draxr",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {GPU: 1}}}],
            **spec,
        },
    }
    return kube.em.create("pods", body, namespace)


def gpu_nodes(kube: Cluster, *names: str, zone: str = "a") -> None:
    for n in names:
        kube.apply(node(n, {}, {HOSTNAME: n, ZONE: zone}), gpu_slice(n, 4))


def anti_affinity(app: str) -> Obj:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOSTNAME}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def test_replicas_with_mutual_required_anti_affinity_never_share_a_node(kube: Cluster) -> None:
    """Issue 21's reproduction: two replicas with mutual required anti-affinity were both bound
    to one node (the pod trim dropped their labels). Now one per node, and a third waits."""
    kube.apply(device_class())
    gpu_nodes(kube, "n1", "n2")
    kube.worker()
    for i in range(3):
        placed_pod(kube, f"r{i}", {"app": "infer"}, affinity=anti_affinity("infer"))
    bound = kube.wait_bound(2)
    assert sorted(bound.values()) == ["n1", "n2"]
    kube.em.wait_for(lambda: kube.condition("r2") is not None, 10, "the third replica is unschedulable")
    cond = kube.condition("r2") or {}
    assert cond["reason"] == "Unschedulable"
    assert "2 node(s) didn't match pod anti-affinity rules" in cond["message"]
    assert len(kube.bound()) == 2


def test_a_zone_spread_places_replicas_in_both_zones(kube: Cluster) -> None:
    kube.apply(device_class())
    gpu_nodes(kube, "a1", "a2", zone="a")
    gpu_nodes(kube, "b1", zone="b")
    kube.worker()
    spread = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
    for i in range(4):
        spread_i = {**spread, "labelSelector": {"matchLabels": {"app": "infer"}}}
        placed_pod(kube, f"s{i}", {"app": "infer"}, topologySpreadConstraints=[spread_i])
        kube.wait_bound(i + 1)  # one after the other: each sees the ones before
    zones = {"a1": "a", "a2": "a", "b1": "b"}
    placed = [zones[n] for n in kube.bound().values()]
    assert sorted(placed) == ["a", "a", "b", "b"]


def test_a_namespace_selector_reads_the_namespaces_labels(kube: Cluster) -> None:
    kube.apply(device_class())
    gpu_nodes(kube, "n1", "n2")
    kube.em.create("namespaces", {"metadata": {"name": "ml", "labels": {"team": "ml"}}})
    kube.em.create(
        "pods",
        {
            "metadata": {"name": "leader", "namespace": "ml", "labels": {"role": "leader"}},
            "spec": {"nodeName": "n2", "containers": [{"name": "c", "image": "x"}]},
        },
        "ml",
    )
    kube.worker()
    term = {
        "labelSelector": {"matchLabels": {"role": "leader"}},
        "namespaceSelector": {"matchLabels": {"team": "ml"}},
        "topologyKey": HOSTNAME,
    }
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    placed_pod(kube, "follower", {}, affinity=affinity)
    assert kube.wait_bound(1) == {"follower": "n2"}


def test_room_kube_scheduler_nominated_a_pod_to_is_left_to_it(kube: Cluster) -> None:
    """Issue 21: draxr took the capacity kube-scheduler had just preempted for its nominated pod."""
    kube.apply(device_class())
    gpu_nodes(kube, "n1", "n2")
    kube.em.create("namespaces", {"metadata": {"name": "batch"}})
    nominated = kube.em.create(
        "pods",
        {
            "metadata": {"name": "important", "namespace": "batch"},
            "spec": {
                "priority": 1000,
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "30"}}}],
            },
        },
        "batch",
    )
    nominated["status"] = {"phase": "Pending", "nominatedNodeName": "n1"}
    kube.em.update_status("pods", nominated)
    kube.worker()
    for i in range(5):  # n2 holds four; the fifth would fit on n1 but for the nominated pod
        kube.pod(f"p{i}", {GPU: 1, "cpu": "8"})
    assert set(kube.wait_bound(4).values()) == {"n2"}
    kube.em.wait_for(lambda: kube.condition("p4") is not None, 10, "the fifth pod is unschedulable")
    assert "Insufficient cpu" in (kube.condition("p4") or {})["message"]
    assert len(kube.bound()) == 4
