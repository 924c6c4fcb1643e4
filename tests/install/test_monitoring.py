"""Monitoring objects and the Grafana dashboard: kept in manifests/monitoring/, aimed at the Services and
ports draxr has, and naming only metrics a running ``draxr serve`` exports."""

from __future__ import annotations

import io
import json
import re
import ssl
from pathlib import Path

import httpx
import kubernetes_validate
import pytest
from prometheus_client.parser import text_string_to_metric_families

from e2e.emulator.sandbox import Sandbox
from webhook.cli import build_parser
from webhook.commands.manifests import run
from webhook.identity import names
from webhook.install import manifests, monitoring, webhooks
from webhook.install.files import dump

ROOT = Path(__file__).resolve().parents[2]
METRIC = re.compile(r"\b((?:draxr|process|python)_[a-z0-9_]+)")
#: Names the rules and the dashboard may use that a scrape does not show (none).
NOT_YET_EXPORTED: set[str] = set()

SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
    "gauge": ("",),
    "info": ("_info",),
}


def exported(text: str) -> set[str]:
    """Every series name a scrape can hold: each family's samples, and the names its type implies
    (a labelled histogram nobody has observed yet has no samples but will)."""
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.update(sample.name for sample in family.samples)
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ("",)))
    return names


def test_the_checked_in_files_match_the_renderer() -> None:
    for filename, text in monitoring.FILES.items():
        assert (ROOT / "manifests" / "monitoring" / filename).read_text() == text(), (
            f"manifests/monitoring/{filename} is stale: run `make manifests`"
        )
    assert (ROOT / monitoring.CHART_RULES).read_text() == monitoring.rules_yaml(), (
        f"{monitoring.CHART_RULES} (the chart's alerts) is stale: run `make manifests`"
    )


@pytest.mark.parametrize("version", ["1.34", "1.35", "1.36", "1.37"])
def test_the_worker_service_validates(version: str) -> None:
    kubernetes_validate.validate(monitoring.worker_service(), version, strict=True)


def test_the_dashboard_and_the_rules_name_only_metrics_draxr_serve_exports() -> None:
    with Sandbox() as sb:  # webhook and worker in one process: one /metrics holds both
        ctx = ssl.create_default_context(cafile=str(sb.certs / "ca.crt"))
        text = httpx.get(f"https://localhost:{sb.port}/metrics", verify=ctx, timeout=10).text
    names = exported(text)
    assert "draxr_admission_duration_seconds_bucket" in names  # the scrape is the real one
    assert "draxr_scheduling_attempts_total" in names
    named = {m for expr in monitoring.expressions() for m in METRIC.findall(expr)}
    assert len(named) >= 12
    assert named - names - NOT_YET_EXPORTED == set()
    assert named >= NOT_YET_EXPORTED


def test_the_rules_cover_what_an_operator_is_paged_for() -> None:
    rules = {r["alert"]: r for g in monitoring.rule_groups() for r in g["rules"]}
    assert set(rules) >= {
        "DraxrWebhookErrors",
        "DraxrWebhookSlow",
        "DraxrPodsPending",
        "DraxrCertificateExpiresSoon",
        "DraxrOrphanedClaims",
        "DraxrDoubleAllocatedDevices",
        "DraxrPodsWithoutDevices",
    }
    assert rules["DraxrCertificateExpiresSoon"]["expr"].endswith(f"< {14 * 86400}")
    # The budget is half the webhook configurations' timeoutSeconds.
    hooks = [h for cfg in webhooks.webhook_configurations("draxr-system", "Y2E=") for h in cfg["webhooks"]]
    assert {h["timeoutSeconds"] for h in hooks} == {monitoring.WEBHOOK_TIMEOUT_SECONDS}
    assert rules["DraxrWebhookSlow"]["expr"].endswith(f"> {monitoring.WEBHOOK_TIMEOUT_SECONDS / 2:g}")
    for rule in rules.values():
        assert rule["labels"]["severity"] in {"warning", "critical"}
        assert rule["annotations"]["summary"]


def test_the_service_monitor_reaches_the_webhook_and_the_worker_ports() -> None:
    objects = manifests.render(cert_manager=True) + monitoring.render()
    services = [o for o in objects if o["kind"] == "Service"]
    deployments = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Deployment"}
    [sm] = [o for o in objects if o["kind"] == "ServiceMonitor"]
    selector = sm["spec"]["selector"]["matchLabels"]
    selected = [s for s in services if selector.items() <= s["metadata"]["labels"].items()]
    assert {s["metadata"]["name"] for s in selected} == {"draxr-webhook", "draxr-worker"}
    ports = {p["name"]: s for s in selected for p in s["spec"]["ports"]}
    for endpoint in sm["spec"]["endpoints"]:
        service = ports[endpoint["port"]]  # each endpoint names a port of a selected Service
        # ... whose pods are the Deployment of the same name, serving the endpoint's scheme there.
        pod = deployments[service["metadata"]["name"]]["spec"]["template"]
        assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
        [container] = pod["spec"]["containers"]
        [port] = [p for p in service["spec"]["ports"] if p["name"] == endpoint["port"]]
        target = port["targetPort"]
        [served] = [p for p in container["ports"] if target in (p["name"], p["containerPort"])]
        assert container["readinessProbe"]["httpGet"]["scheme"].lower() == endpoint["scheme"]
        assert served["protocol"] == "TCP"
    [https] = [e for e in sm["spec"]["endpoints"] if e["scheme"] == "https"]
    assert https["tlsConfig"]["ca"]["secret"]["name"] == names.TLS_SECRET


def test_the_dashboard_is_grafana_json_with_one_query_per_target() -> None:
    board = json.loads((ROOT / "manifests" / "monitoring" / "grafana-dashboard.json").read_text())
    assert board["uid"] == "draxr"
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        assert panel["targets"], panel["title"]
        assert all(t["expr"] and t["refId"] for t in panel["targets"])


def test_manifests_monitoring_adds_the_monitoring_objects() -> None:
    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args(["manifests", "--cert-manager", "--monitoring", "--namespace", "gpu"])
    assert run(args, out, err) == 0
    tail = dump(monitoring.render("gpu"))
    assert out.getvalue().endswith(tail)
    plain = io.StringIO()
    assert run(build_parser().parse_args(["manifests", "--cert-manager"]), plain, err) == 0
    assert "ServiceMonitor" not in plain.getvalue()
