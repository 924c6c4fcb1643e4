"""Monitoring objects for the Prometheus Operator (``draxr manifests --monitoring``) and a Grafana
dashboard.

* a Service ``draxr-worker`` in front of the worker's plain-HTTP ``/metrics`` (the webhook's metrics
  are on its own Service, over TLS);
* a ServiceMonitor scraping both: the webhook verified against its CA (the TLS Secret's ``ca.crt``),
  the worker over HTTP;
* a PrometheusRule: webhook errors, webhook latency p99 over the timeout budget, pods pending on
  DRA-backed names, a certificate expiring within 14 days, orphaned special claims, no leader;
* the Grafana dashboard (``dashboard()``), kept in ``manifests/monitoring/`` with the objects.

Every metric named here is exported by ``draxr serve``; tests/install/test_monitoring.py scrapes a
running webhook and worker to keep it so.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import yaml

from ..core.api.objects import Obj
from ..identity.names import APP_LABEL, DEFAULT_NAMESPACE, TLS_SECRET, WEBHOOK, WORKER, labels
from .files import dump

#: The webhook configurations' ``timeoutSeconds``: the apiserver gives up on a hook after this.
WEBHOOK_TIMEOUT_SECONDS = 3
#: An alert fires when the webhook's p99 latency uses more than this share of the timeout.
LATENCY_BUDGET = 0.5
CERT_EXPIRY_WARNING_DAYS = 14
WORKER_METRICS_PORT = 8080
SCRAPE_INTERVAL = "30s"
DASHBOARD_UID = "draxr"

HEADER = "# Rendered by `draxr manifests --monitoring` with the defaults; regenerate with `make manifests`.\n"


def worker_service(namespace: str = DEFAULT_NAMESPACE) -> Obj:
    """The worker's ``/metrics`` (and probes) on a Service, for Prometheus to find its pods."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": WORKER, "namespace": namespace, "labels": labels("worker")},
        "spec": {
            "selector": labels("worker"),
            "ports": [
                {"name": "metrics", "port": WORKER_METRICS_PORT, "targetPort": "http", "protocol": "TCP"}
            ],
        },
    }


def service_monitor(namespace: str = DEFAULT_NAMESPACE) -> Obj:
    """Scrapes every draxr Service: the webhook's ``https`` port (verified against the CA in the TLS
    Secret, as the apiserver does) and the worker's ``metrics`` port. An endpoint whose port a
    Service does not have yields no target for it."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": "draxr", "namespace": namespace, "labels": {APP_LABEL: "draxr"}},
        "spec": {
            "selector": {"matchLabels": {APP_LABEL: "draxr"}},
            "namespaceSelector": {"matchNames": [namespace]},
            "endpoints": [
                {
                    "port": "https",
                    "scheme": "https",
                    "path": "/metrics",
                    "interval": SCRAPE_INTERVAL,
                    "tlsConfig": {
                        "serverName": f"{WEBHOOK}.{namespace}.svc",
                        "ca": {"secret": {"name": TLS_SECRET, "key": "ca.crt"}},
                    },
                },
                {"port": "metrics", "scheme": "http", "path": "/metrics", "interval": SCRAPE_INTERVAL},
            ],
        },
    }


def _alert(name: str, expr: str, for_: str, severity: str, summary: str, description: str) -> Obj:
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity},
        "annotations": {"summary": summary, "description": description},
    }


def rule_groups(timeout_seconds: float = WEBHOOK_TIMEOUT_SECONDS) -> list[Obj]:
    """The alerting rules (a PrometheusRule's ``spec.groups``)."""
    budget = round(timeout_seconds * LATENCY_BUDGET, 3)
    expiry = CERT_EXPIRY_WARNING_DAYS * 86400
    return [
        {
            "name": "draxr",
            "rules": [
                _alert(
                    "DraxrWebhookErrors",
                    'sum by (endpoint) (rate(draxr_admission_requests_total{result="error"}[5m])) > 0',
                    "5m",
                    "warning",
                    "draxr's webhook fails admission requests",
                    "The webhook answered {{ $value | humanize }} requests/s on {{ $labels.endpoint }} with "
                    "an internal error over 5 minutes; see its logs (one line per failure, with the reason).",
                ),
                _alert(
                    "DraxrWebhookSlow",
                    "histogram_quantile(0.99, sum by (le) "
                    f"(rate(draxr_admission_duration_seconds_bucket[5m]))) > {budget:g}",
                    "10m",
                    "warning",
                    "draxr's webhook p99 latency is over its budget",
                    f"p99 admission latency is {{{{ $value | humanizeDuration }}}}, over {budget:g}s "
                    f"(half the webhook's timeoutSeconds of {timeout_seconds:g}s); past the timeout the "
                    "apiserver refuses the pods the hooks match (failurePolicy: Fail).",
                ),
                _alert(
                    "DraxrPodsPending",
                    'sum(draxr_queue_pods{queue=~"unschedulable|backoff"}) > 0',
                    "15m",
                    "warning",
                    "Pods asking for DRA-backed names wait",
                    "{{ $value }} pods routed to draxr have waited unschedulable or in backoff for 15 "
                    "minutes; `kubectl draxr why POD` gives the reasons, draxr_devices the free devices.",
                ),
                _alert(
                    "DraxrCertificateExpiresSoon",
                    f"min by (certificate) (draxr_certificate_expiry_seconds) < {expiry}",
                    "1h",
                    "critical",
                    "A draxr certificate expires within 14 days",
                    "The {{ $labels.certificate }} certificate expires in {{ $value | humanizeDuration }}; "
                    "without it the apiserver cannot call the webhook.",
                ),
                _alert(
                    "DraxrOrphanedClaims",
                    "max(draxr_orphaned_claims) > 0",
                    "30m",
                    "warning",
                    "Special claims outlive their pods",
                    "{{ $value }} special ResourceClaims whose pod is gone or finished could not be "
                    "released by the worker's repair passes; their devices stay allocated.",
                ),
                _alert(
                    "DraxrDoubleAllocatedDevices",
                    "max(draxr_double_allocated_devices) > 0",
                    "0m",
                    "critical",
                    "A device is allocated to two ResourceClaims",
                    "{{ $value }} devices are held by two claims at once: two schedulers allocated from "
                    "one pool. Each claim and pod has a DeviceAllocatedTwice Event; route every pod of "
                    "the class to one scheduler (draxr serve --managed-classes) and delete one pod.",
                ),
                _alert(
                    "DraxrPodsWithoutDevices",
                    "max(draxr_pods_without_devices) > 0",
                    "5m",
                    "warning",
                    "Pods run without the devices they asked for",
                    "{{ $value }} bound pods ask for a DRA-backed name on a node that does not advertise it "
                    "and have no valid mapping to an allocated claim: the kubelet gave them no device. Each "
                    "has a NoDevicesAllocated Event; delete them so that a DRA-aware scheduler places them.",
                ),
                _alert(
                    "DraxrNoLeader",
                    "sum(draxr_leader) < 1",
                    "5m",
                    "critical",
                    "No draxr worker holds the Lease",
                    "Pods routed to draxr are not scheduled while no worker leads.",
                ),
            ],
        }
    ]


def prometheus_rule(namespace: str = DEFAULT_NAMESPACE) -> Obj:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "draxr", "namespace": namespace, "labels": {APP_LABEL: "draxr"}},
        "spec": {"groups": rule_groups()},
    }


def render(namespace: str = DEFAULT_NAMESPACE) -> list[Obj]:
    return [worker_service(namespace), service_monitor(namespace), prometheus_rule(namespace)]


# -- the dashboard -------------------------------------------------------------------------------------


def _panel(
    pid: int, title: str, targets: list[tuple[str, str]], pos: tuple[int, int], unit: str = "short"
) -> Obj:
    x, y = pos
    return {
        "id": pid,
        "type": "timeseries",
        "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"x": x, "y": y, "w": 12, "h": 8},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
        "targets": [
            {"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(targets)
        ],
    }


_PANELS: list[tuple[str, list[tuple[str, str]], str]] = [
    (
        "Admission requests by result",
        [("sum by (result) (rate(draxr_admission_requests_total[5m]))", "{{result}}")],
        "reqps",
    ),
    (
        "Admission latency",
        [
            (
                "histogram_quantile(0.99, sum by (le) (rate(draxr_admission_duration_seconds_bucket[5m])))",
                "p99",
            ),
            (
                "histogram_quantile(0.5, sum by (le) (rate(draxr_admission_duration_seconds_bucket[5m])))",
                "p50",
            ),
        ],
        "s",
    ),
    (
        "Scheduling attempts by result",
        [("sum by (result) (rate(draxr_scheduling_attempts_total[5m]))", "{{result}}")],
        "ops",
    ),
    (
        "Pod creation to binding",
        [
            (
                "histogram_quantile(0.99, sum by (le) "
                "(rate(draxr_pod_scheduling_duration_seconds_bucket[5m])))",
                "p99",
            ),
            (
                "histogram_quantile(0.5, sum by (le) "
                "(rate(draxr_pod_scheduling_duration_seconds_bucket[5m])))",
                "p50",
            ),
        ],
        "s",
    ),
    ("Scheduling queue", [("sum by (queue) (draxr_queue_pods)", "{{queue}}")], "short"),
    (
        "Free devices by class",
        [('sum by (class) (draxr_devices{state="free"})', "{{class}}")],
        "short",
    ),
    (
        "Special claims",
        [
            ("sum(rate(draxr_resourceclaim_creates_total[5m]))", "created/s"),
            ("sum(rate(draxr_resourceclaim_deletes_total[5m]))", "deleted/s"),
            ("max(draxr_orphaned_claims)", "orphaned"),
        ],
        "short",
    ),
    (
        "API errors by verb and code",
        [("sum by (verb, code) (rate(draxr_api_errors_total[5m]))", "{{verb}} {{code}}")],
        "reqps",
    ),
    (
        "Certificate expiry",
        [("min by (certificate) (draxr_certificate_expiry_seconds)", "{{certificate}}")],
        "s",
    ),
    ("Cached objects", [("max by (kind) (draxr_cache_objects)", "{{kind}}")], "short"),
    (
        "Resident memory",
        [('process_resident_memory_bytes{namespace="$namespace"}', "{{pod}}")],
        "bytes",
    ),
    ("Leader", [("sum(draxr_leader)", "leaders")], "short"),
]


def dashboard() -> Obj:
    """A Grafana dashboard over draxr's metrics (import it, or load it with a dashboard sidecar)."""
    panels = [
        _panel(i + 1, title, targets, ((i % 2) * 12, (i // 2) * 8), unit)
        for i, (title, targets, unit) in enumerate(_PANELS)
    ]
    return {
        "uid": DASHBOARD_UID,
        "title": "draxr",
        "tags": ["draxr", "dra", "kubernetes"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source"},
                {
                    "name": "namespace",
                    "type": "constant",
                    "query": DEFAULT_NAMESPACE,
                    "label": "draxr's namespace",
                },
            ]
        },
        "panels": panels,
    }


def dashboard_json() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


def rules_yaml() -> str:
    """The PrometheusRule's ``spec`` alone (``groups``), for a chart to embed."""
    return RULES_HEADER + yaml.safe_dump({"groups": rule_groups()}, sort_keys=False, width=120)


RULES_HEADER = (
    "# The PrometheusRule's spec (draxr's alerts), as rendered by webhook/install/monitoring.py; "
    "regenerate with `make manifests`.\n"
)

FILES: dict[str, Callable[[], str]] = {
    "monitoring.yaml": lambda: HEADER + dump(render()),
    "prometheus-rules.yaml": rules_yaml,
    "grafana-dashboard.json": dashboard_json,
}


#: The chart embeds the same rules (``prometheusRule.enabled``), never a copy kept by hand.
CHART_RULES = Path("manifests/helm/draxr/files/prometheus-rules.yaml")


def write_defaults(directory: str | Path) -> None:
    """``manifests/monitoring/``: the objects with the defaults, and the dashboard."""
    Path(directory).mkdir(parents=True, exist_ok=True)
    for filename, text in FILES.items():
        (Path(directory) / filename).write_text(text())


def expressions() -> list[str]:
    """Every PromQL expression the rules and the dashboard hold."""
    exprs = [rule["expr"] for group in rule_groups() for rule in group["rules"]]
    exprs += [t["expr"] for panel in dashboard()["panels"] for t in panel["targets"]]
    return exprs
