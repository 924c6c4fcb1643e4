"""Bound pods that own special claims while their status names none: an anomaly to report, never a
reason to free a device (``core/api/orphans.py`` ``unmapped``).

A binding cycle writes the pod's ``status.extendedResourceClaimStatus`` before the binding, so a
bound pod of draxr's names the claim it runs with. One that names none (someone cleared it; an
older draxr's Unreserve did, for a pod another worker had bound) may run with any claim it owns:
the API no longer says which, so none is freed. Each such pod is reported once while it lasts: a
log line naming its claims (from the event handlers, which never write), a Warning Event (from the
maintenance thread, on the leader), and the gauge ``draxr_unmapped_bound_pods``.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

from prometheus_client import Gauge

from ..core.api.objects import Obj, key, uid
from .events import EventRecorder

log = logging.getLogger("draxr.worker")

#: The Warning Event's reason.
UNMAPPED = "ExtendedResourceClaimStatusMissing"


def unmapped_message(claims: list[str]) -> str:
    return (
        f"bound, but status.extendedResourceClaimStatus names no claim while the pod owns "
        f"{', '.join(claims)}: none of them is freed while the pod runs"
    )


class UnmappedPods:
    def __init__(self, gauge: Gauge, events: EventRecorder, is_leader: Callable[[], bool]) -> None:
        self._gauge = gauge
        self._events = events
        self._is_leader = is_leader
        self._pods: dict[str, str] = {}  # uid -> namespace/name
        self._to_report: deque[tuple[Obj, list[str]]] = deque()
        self._lock = threading.Lock()

    def observe(self, pod: Obj, claims: list[str]) -> None:
        """A bound pod's event showed no claim name while it owns ``claims`` (event handlers)."""
        with self._lock:
            new = uid(pod) not in self._pods
            self._pods[uid(pod)] = key(pod)
            self._gauge.set(len(self._pods))
            if new:
                self._to_report.append((pod, claims))
        if new:
            log.warning("bound pod names no special claim", extra={"pod": key(pod), "claims": claims})

    def forget(self, pod_uid: str) -> None:
        """The pod names a claim now, finished, or is gone."""
        if pod_uid not in self._pods:
            return
        with self._lock:
            self._pods.pop(pod_uid, None)
            self._gauge.set(len(self._pods))

    def report(self) -> None:
        """The Events of pods observed since the last call (maintenance thread; only the leader
        writes, the others keep them for when they lead)."""
        while self._to_report and self._is_leader():
            with self._lock:
                pod, claims = self._to_report.popleft()
                current = uid(pod) in self._pods
            if current:
                self._events.event(pod, "Warning", UNMAPPED, unmapped_message(claims))

    def __len__(self) -> int:
        with self._lock:
            return len(self._pods)
