"""What the worker's unit tests share: a worker over a static cache with a fake clock, pods of ours,
what its event handlers queued, and a pod scheduled and bound through it."""

from __future__ import annotations

import queue
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from tests.worker.harness import Cluster
from webhook.core.api.objects import Obj
from webhook.core.cluster.slices import DeviceKey
from webhook.core.scheduling.framework import SCHEDULED
from webhook.kube.cache import ClusterCache
from webhook.kube.client import KubeClient
from webhook.runtime import logs
from webhook.worker.config import WorkerConfig
from webhook.worker.metrics import WorkerMetrics
from webhook.worker.worker import Worker

GPU0: DeviceKey = ("gpu.example.com", "n-gpu", "gpu-0")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make_worker(client: KubeClient, cache: ClusterCache, clock: Clock | None = None, **kwargs: Any) -> Worker:
    return Worker(
        client,
        cache,
        WorkerConfig(bind_workers=1, identity="test"),
        WorkerMetrics(CollectorRegistry()),
        clock=clock or Clock(),
        **kwargs,
    )


def a_pod(name: str = "p", uid: str | None = None, **spec: Any) -> Obj:
    s: Obj = {"schedulerName": "draxr", "containers": [{"name": "c"}]}
    s.update(spec)
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}"},
        "spec": s,
    }


def cleanups(w: Worker) -> list[tuple[str, str, str]]:
    """What the events queued for the maintenance thread to release (drained):
    (namespace, claim, pod uid)."""
    out = []
    while True:
        try:
            item = w.maintenance.cleanups.get_nowait()
            entry = (item.namespace, item.claim, item.pod_uid)
            if entry not in out:  # a claim event and a pod event may both queue it: release is idempotent
                out.append(entry)
        except queue.Empty:
            return out


def unschedulable_waiting(w: Worker, uid: str = "waiting") -> None:
    """A pod that failed and waits for a cluster change."""
    w.queue.add(uid)
    entry = w.queue.pop(timeout=0)
    assert entry is not None
    w.queue.failed(uid, unschedulable=True)
    assert w.queue.depth()["unschedulable"] == 1


def bind_one(kube: Cluster, pod: Obj) -> tuple[Worker, ClusterCache]:
    """Schedule ``pod`` through a worker over a static cache and wait for its binding cycle."""
    cache = ClusterCache.from_objects(kube.snapshot())
    w = make_worker(kube.client(), cache)
    decision = w.schedule_one(pod["metadata"]["uid"])
    assert decision is not None
    assert decision.status == SCHEDULED, decision.message
    w.stop()  # waits for the binding cycle
    assert kube.bound() == {pod["metadata"]["name"]: "n"}
    return w, cache


def claim_events(
    kube: Cluster, cache: ClusterCache, name: str, *, allocated: bool, resource_version: str | None = None
) -> None:
    """The cache sees the claim as the API holds it, its allocation dropped unless ``allocated``;
    ``resource_version``: as it was then (an older event: the creation, before the status write)."""
    claim = kube.em.get("resourceclaims", name, "default")
    if not allocated:
        claim["status"] = {}
    if resource_version is not None:
        claim["metadata"] = {**claim["metadata"], "resourceVersion": resource_version}
    cache.handle("ResourceClaim", "MODIFIED", {**claim, "kind": "ResourceClaim"})


def log_lines(caplog: pytest.LogCaptureFixture, message: str) -> list[dict[str, Any]]:
    return [
        {"msg": r.getMessage(), **logs.context(r)}
        for r in caplog.records
        if r.name == "draxr.worker" and r.getMessage() == message
    ]
