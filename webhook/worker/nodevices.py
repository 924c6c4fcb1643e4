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

from ..core.api.objects import Obj
from ..core.paths.nodevices import NoDevices, pods_without_devices
from ..core.paths.requested import requested_extended
from ..kube.cache import ClusterCache
from .events import EventRecorder

log = logging.getLogger("draxr.worker")

REASON = "NoDevicesAllocated"


class AskingPods:
    """The bound pods that ask for some DRA-candidate name (``requested_extended``), each pod's
    answer kept while the cache holds the same pod object (the cache replaces a pod's object on
    every change). A scan of 100,000 bound pods parsed every container's requests again: 0.5 s of
    CPU every ``every`` seconds, under the cache's lock. Each scan keeps the answers of the pods it
    saw, so a pod gone is forgotten at the next one."""

    def __init__(self) -> None:
        self._memo: dict[str, tuple[Obj, bool]] = {}

    def __call__(self, pods: dict[str, Obj]) -> list[Obj]:
        """The pods of ``pods`` (by uid) that ask for some such name, in their order."""
        memo, seen, out = self._memo, {}, []
        for key, pod in pods.items():
            known = memo.get(key)
            if known is None or known[0] is not pod:
                known = (pod, bool(requested_extended(pod)))
            seen[key] = known
            if known[1]:
                out.append(pod)
        self._memo = seen
        return out


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
        self._asking = AskingPods()

    def check(self) -> list[NoDevices]:
        with self.cache.lock:
            state = self.cache.state
            found = pods_without_devices(self._asking(state.allocated.pods), state)
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
