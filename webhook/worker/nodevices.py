"""The no-device report (issue 23): bound pods that asked for a DRA-backed name and run without it.

Whoever scheduled such a pod (a scheduler without DRAExtendedResource, a hand-written mapping that
names a claim or request that is not there), the kubelet admitted it and injected nothing
(core/paths/nodevices.py says when). This report makes it visible: ``draxr_pods_without_devices`` on
every replica, a log line when a pod is first seen so, and from the leader a Warning Event on the
pod. The pod is not deleted: that is its owner's call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from prometheus_client import Gauge

from ..core.paths.nodevices import NoDevices, pods_without_devices
from ..kube.cache import ClusterCache
from .events import EventRecorder

log = logging.getLogger("draxr.worker")

REASON = "NoDevicesAllocated"


class PodsWithoutDevices:
    """Checks the cache's bound pods every ``every`` seconds (a scan of them: not every second)."""

    every = 10.0

    def __init__(
        self, cache: ClusterCache, events: EventRecorder, gauge: Gauge, is_leader: Callable[[], bool]
    ) -> None:
        self.cache = cache
        self.events = events
        self.gauge = gauge
        self.is_leader = is_leader
        self._logged: set[str] = set()
        self._told: set[str] = set()

    def check(self) -> list[NoDevices]:
        with self.cache.lock:
            state = self.cache.state
            found = pods_without_devices(list(state.allocated.pods.values()), state)
        self.gauge.set(len(found))
        for report in found:
            if report.uid not in self._logged:
                log.error("%s", report.message())
            if report.uid not in self._told and self.is_leader():
                pod = {"metadata": {"namespace": report.namespace, "name": report.pod, "uid": report.uid}}
                if self.events.event(pod, "Warning", REASON, report.message()):
                    self._told.add(report.uid)
        now = {r.uid for r in found}
        self._logged = now
        self._told &= now
        return found
