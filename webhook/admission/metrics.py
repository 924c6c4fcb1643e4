"""Prometheus metrics of the admission endpoints, registered once per registry."""

from __future__ import annotations

import threading
import weakref
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram

#: Admission answers should take milliseconds; the top buckets catch a stalled hook before the
#: apiserver's own timeout (10 s by default, 30 s at most) does.
DURATION_BUCKETS: Final = (0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 25.0)
RESULTS: Final = ("allowed", "denied", "invalid_request", "too_many_requests", "error")


class AdmissionMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "draxr_admission_requests",
            "Admission requests by endpoint, operation and result "
            "(allowed, denied, invalid_request: HTTP 400, too_many_requests: a large review refused "
            "unread with HTTP 429, error: internal failure answered with 400).",
            ["endpoint", "operation", "result"],
            registry=registry,
        )
        self.duration = Histogram(
            "draxr_admission_duration_seconds",
            "Time to answer an admission request, from the first byte of the body to the response.",
            ["endpoint"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.class_reads = Counter(
            "draxr_admission_deviceclass_reads",
            "Fresh DeviceClass lists made because the cache knew no class for a name a new pod asks "
            "for, by result (found: the list backed a name the cache missed, none, error).",
            ["result"],
            registry=registry,
        )

        self.claim_reads = Counter(
            "draxr_admission_resourceclaim_reads",
            "ResourceClaims and ResourceClaimTemplates a new pod names, read from the API server because "
            "the cache did not have them, by result (found, missing: routed to draxr, which waits for "
            "it; error).",
            ["result"],
            registry=registry,
        )

    def claim_read(self, result: str) -> None:
        self.claim_reads.labels(result).inc()

    def class_read(self, result: str) -> None:
        self.class_reads.labels(result).inc()

    def observe(self, endpoint: str, operation: str, result: str, seconds: float) -> None:
        self.requests.labels(endpoint, operation, result).inc()
        self.duration.labels(endpoint).observe(seconds)


_lock = threading.Lock()
_by_registry: weakref.WeakKeyDictionary[CollectorRegistry, AdmissionMetrics] = weakref.WeakKeyDictionary()


def metrics_for(registry: CollectorRegistry) -> AdmissionMetrics:
    """The metrics registered in ``registry`` (a second app on the same registry shares them)."""
    with _lock:
        found = _by_registry.get(registry)
        if found is None:
            found = _by_registry[registry] = AdmissionMetrics(registry)
        return found
