"""Worker metrics (Prometheus)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

ORPHANED_CLAIMS = "draxr_orphaned_claims"
UNMAPPED_BOUND_PODS = "draxr_unmapped_bound_pods"
DOUBLE_ALLOCATED_DEVICES = "draxr_double_allocated_devices"
PODS_WITHOUT_DEVICES = "draxr_pods_without_devices"
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class WorkerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.attempts = Counter(
            "draxr_scheduling_attempts_total", "Scheduling attempts by result", ["result"], registry=registry
        )
        self.e2e = Histogram(
            "draxr_pod_scheduling_duration_seconds",
            "Pod creation to successful binding",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.attempt_duration = Histogram(
            "draxr_scheduling_attempt_duration_seconds",
            "One scheduling decision (PreFilter to Reserve)",
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1),
            registry=registry,
        )
        self.claims_created = Counter(
            "draxr_resourceclaim_creates_total", "Special claims created", ["status"], registry=registry
        )
        self.claims_deleted = Counter(
            "draxr_resourceclaim_deletes_total", "Special claims deleted", registry=registry
        )
        self.api_requests = Counter(
            "draxr_api_requests_total",
            "Kubernetes API requests",
            ["verb", "resource", "code"],
            registry=registry,
        )
        self.api_errors = Counter(
            "draxr_api_errors_total",
            "Kubernetes API errors by verb and code",
            ["verb", "code"],
            registry=registry,
        )
        self.leader = Gauge("draxr_leader", "1 while this process holds the lease", registry=registry)
        self.orphans = Gauge(
            ORPHANED_CLAIMS,
            "Special claims whose pod is gone, finished or bound with another claim, that the last "
            "repair pass (every --orphan-interval, and on leadership) could not release",
            registry=registry,
        )
        self.unmapped = Gauge(
            UNMAPPED_BOUND_PODS,
            "Bound pods that own special claims while their status.extendedResourceClaimStatus names "
            "none: their claims are never freed while they run (an anomaly: see the pods' Events)",
            registry=registry,
        )
        self.double_allocated = Gauge(
            DOUBLE_ALLOCATED_DEVICES,
            "Devices held by two or more ResourceClaims' allocations at once (not shares, not admin "
            "access): two schedulers allocated from one pool",
            registry=registry,
        )
        self.pods_without_devices = Gauge(
            PODS_WITHOUT_DEVICES,
            "Bound pods asking for a DRA-backed name on a node without it in allocatable and without "
            "a valid mapping to an allocated claim: they run without their devices",
            registry=registry,
        )
        # KEP-5007: the waits for binding conditions between PreBind's writes and Bind. The duration
        # is upstream's scheduler_plugin_execution_duration_seconds for DynamicResources' PreBind.
        self.binding_conditions = Counter(
            "draxr_binding_conditions_total",
            "Waits for devices' binding conditions by how they ended (ready, failed, timeout)",
            ["result"],
            registry=registry,
        )
        self.binding_conditions_pending = Gauge(
            "draxr_binding_conditions_pending_pods",
            "Pods whose devices' binding conditions are awaited before they bind",
            registry=registry,
        )
        self.plugin_duration = Histogram(
            "draxr_plugin_execution_duration_seconds",
            "Duration of a plugin at one extension point (kube-scheduler's "
            "scheduler_plugin_execution_duration_seconds): DynamicResources' PreBind wait",
            ["plugin", "extension_point", "status"],
            buckets=(0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600),
            registry=registry,
        )
        self.orphans_repaired = Counter(
            "draxr_orphaned_claims_repaired",
            "Orphaned special claims released by repair passes",
            registry=registry,
        )

    def api_hook(self, verb: str, resource: str, code: int) -> None:
        self.api_requests.labels(verb, resource, str(code)).inc()
        if code >= 400 or code == 0:
            self.api_errors.labels(verb, str(code)).inc()

    def on_claim(self, op: str, ok: bool) -> None:
        if op == "create":
            self.claims_created.labels("success" if ok else "failure").inc()
        elif op == "delete" and ok:
            self.claims_deleted.inc()


class CallbackCollector(Collector):
    """Gauges computed at scrape time (queue depth, devices per class)."""

    def __init__(
        self,
        queue_depth: Callable[[], dict[str, int]],
        devices: Callable[[], list[tuple[str, str, int, int]]],
    ) -> None:
        self.queue_depth = queue_depth
        self.devices = devices

    def collect(self) -> Iterator[GaugeMetricFamily]:
        q = GaugeMetricFamily("draxr_queue_pods", "Pending pods in the scheduling queue", labels=["queue"])
        for name, value in sorted(self.queue_depth().items()):
            q.add_metric([name], value)
        yield q
        d = GaugeMetricFamily(
            "draxr_devices", "DRA devices per class and node", labels=["class", "node", "state"]
        )
        for cls, node, free, allocated in self.devices():
            d.add_metric([cls, node, "free"], free)
            d.add_metric([cls, node, "allocated"], allocated)
        yield d
