"""``worker.scheduling``: the guards of ``schedule_one`` and the one log line of each decision (the
loop end to end is in test_worker)."""

from __future__ import annotations

import logging

import pytest

from tests.worker.harness import GPU, Cluster, device_class, gpu_slice, node
from tests.worker.workers import a_pod, log_lines, make_worker
from webhook.kube.cache import ClusterCache
from webhook.kube.client import KubeClient
from webhook.kube.leader import LeaderElector
from webhook.worker.worker import Worker


def test_a_pod_that_is_no_longer_ours_is_dropped(offline: Worker) -> None:
    offline.cache.handle("Pod", "ADDED", a_pod())
    entry = offline.queue.pop(timeout=0)
    assert entry is not None
    offline.cache.handle("Pod", "MODIFIED", a_pod(nodeName="elsewhere"), notify=False)
    assert offline.schedule_one(entry.uid) is None
    assert len(offline.queue) == 0


def test_a_follower_gives_the_pod_back_untouched() -> None:
    client = KubeClient(None)
    cache = ClusterCache.from_objects([a_pod()])
    w = make_worker(client, cache, leader=LeaderElector(client, "ns", "lease", "me"))
    try:
        w.resync()
        entry = w.queue.pop(timeout=0)
        assert entry is not None
        assert w.schedule_one(entry.uid) is None
        again = w.queue.pop(timeout=0)
        assert again is not None
        assert again.uid == entry.uid
        assert again.attempts == 0  # not counted as a failed attempt
    finally:
        w.stop()


def test_each_decision_is_one_log_line_with_pod_node_devices_claim_and_latency(
    kube: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="draxr")
    kube.apply(node("n"), device_class(), gpu_slice("n", 2))
    kube.worker()
    kube.pod("two", {GPU: 2})
    kube.pod("more", {GPU: 1})
    kube.em.wait_for(lambda: log_lines(caplog, "bound"), 10, "the bound line")
    kube.em.wait_for(lambda: log_lines(caplog, "unschedulable"), 10, "the unschedulable line")
    [bound] = log_lines(caplog, "bound")
    erc = kube.em.get("pods", "two", "default")["status"]["extendedResourceClaimStatus"]
    claim = erc["resourceClaimName"]
    assert bound["pod"] == "default/two"
    assert bound["node"] == "n"
    assert bound["devices"] == ["gpu.example.com/n-gpu/gpu-0", "gpu.example.com/n-gpu/gpu-1"]
    assert bound["claim"] == f"default/{claim}"
    assert bound["latency_ms"] > 0
    waiting = log_lines(caplog, "unschedulable")[0]
    assert waiting["pod"] == "default/more"
    assert waiting["reason"].startswith("0/1 nodes are available: 1 ")
    assert waiting["latency_ms"] >= 0
    assert waiting["retry_in_s"] > 0
