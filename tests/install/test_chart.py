"""The Helm chart (manifests/helm/draxr), with the real helm (``.ci/helm.sh`` builds it into .ci/bin
from its Go module): ``helm lint`` passes, the default ``helm template`` equals ``draxr manifests``,
every value reaches the same objects as the matching ``InstallOptions``, every rendered object
validates against the 1.34-1.37 schemas, the chart's certificates can be trusted, bad values are
refused by values.schema.json, the alert rules name only metrics draxr exports, and an upgrade
keeps the certificates the worker renewed."""

from __future__ import annotations

import base64
import datetime as dt
import io
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from e2e.emulator import Emulator
from webhook.cli import build_parser
from webhook.commands.manifests import run
from webhook.core.api.objects import Obj
from webhook.identity.names import DEFAULT_NAMESPACE, WEBHOOK
from webhook.identity.pki import parse_bundle, serving_names, signed_by
from webhook.install import monitoring
from webhook.install.manifests import render
from webhook.install.options import InstallOptions
from webhook.kube.client import KubeClient
from webhook.runtime.rotation import CertRotator, RotationConfig

from .builders import certificates
from .test_files import ROOT
from .test_manifests import TURNED, VERSIONS, kubernetes_objects, trusted

CHART = ROOT / "manifests" / "helm" / "draxr"
HELM = shutil.which("helm")

pytestmark = pytest.mark.skipif(
    HELM is None and os.environ.get("CI") != "true",
    reason="no helm on PATH: `.ci/helm.sh` builds it into .ci/bin with `go install` (needs Go >= 1.24)",
)

#: The chart's values for ``TURNED`` (every knob turned). Helm merges maps with the defaults, so a
#: key the options leave out is set to null to remove it.
TURNED_VALUES: dict[str, Any] = {
    "image": {"repository": "registry.example/draxr", "tag": "1.2.3", "pullPolicy": "Always"},
    "webhook": {"replicas": 1, "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": None}},
    "worker": {"replicas": 3, "resources": {"requests": None, "limits": {"cpu": None, "memory": "1Gi"}}},
    "priorityClassName": "system-cluster-critical",
    "tolerations": [
        {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}
    ],
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "failurePolicy": "Ignore",
    "timeoutSeconds": 10,
    "route": "always",
    "optOut": {"namespaces": ["batch", "ml-infra"], "label": "example.com/no-draxr"},
    "networkPolicy": {"enabled": True},
    "certs": {"mode": "self", "validity": "30d", "renewBefore": "10d"},
    "flowControl": {"nominalConcurrencyShares": 120},
}

#: Everything the chart can render on top: Namespace, NetworkPolicies, ServiceMonitor, PrometheusRule.
ALL_ON: dict[str, Any] = {
    "namespace": {"create": True},
    "networkPolicy": {"enabled": True},
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
    "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}},
}


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    assert HELM is not None, "CI=true: helm is required (.ci/helm.sh builds it)"
    return subprocess.run([HELM, *args], capture_output=True, text=True, timeout=120, check=False)


def template(
    tmp_path: Path,
    values: dict[str, Any] | None = None,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    kube_version: str | None = None,
) -> list[Obj]:
    args = ["template", "draxr", str(CHART), "--namespace", namespace]
    if values is not None:
        file = tmp_path / f"values-{len(list(tmp_path.glob('values-*')))}.yaml"
        file.write_text(yaml.safe_dump(values))
        args += ["-f", str(file)]
    if kube_version is not None:
        args += ["--kube-version", kube_version]
    done = helm(*args)
    assert done.returncode == 0, done.stderr
    return [o for o in yaml.safe_load_all(done.stdout) if o]


def key(o: Obj) -> tuple[str, str, str]:
    return (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])


def without_key_material(objects: list[Obj]) -> list[Obj]:
    """The objects with every certificate and key replaced by a marker (each rendering makes its
    own); sorted, since helm orders objects by kind."""
    out = []
    for o in yaml.safe_load(yaml.safe_dump(objects)):  # a deep copy
        if o["kind"] == "Secret":
            o["data"] = dict.fromkeys(o["data"], "<pem>")
        for hook in o.get("webhooks") or []:
            if "caBundle" in hook["clientConfig"]:
                hook["clientConfig"]["caBundle"] = "<ca>"
        out.append(o)
    return sorted(out, key=key)


def draxr_manifests(*argv: str) -> list[Obj]:
    args = build_parser().parse_args(["manifests", *argv])
    out, err = io.StringIO(), io.StringIO()
    assert run(args, out, err) == 0, err.getvalue()
    return [o for o in yaml.safe_load_all(out.getvalue()) if o]


def test_helm_lint_passes() -> None:
    done = helm("lint", "--strict", str(CHART))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout


def test_helm_lint_passes_with_every_switch_on(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({**TURNED_VALUES, **ALL_ON}))
    done = helm("lint", "--strict", str(CHART), "-f", str(values), "--namespace", "ml-infra")
    assert done.returncode == 0, done.stdout + done.stderr


def test_default_render_equals_draxr_manifests(tmp_path: Path) -> None:
    """`helm template` with the defaults is `draxr manifests` with its defaults, but for the
    Namespace (`helm install --create-namespace` makes it; namespace.create renders it) and the
    freshly generated certificates."""
    chart = template(tmp_path)
    cli = draxr_manifests("--cert-dir", str(tmp_path / "certs"))
    namespace = [o for o in cli if o["kind"] == "Namespace"]
    assert len(namespace) == 1
    assert without_key_material(chart) == without_key_material([o for o in cli if o["kind"] != "Namespace"])
    with_namespace = template(tmp_path, {"namespace": {"create": True}})
    assert without_key_material(with_namespace) == without_key_material(cli)
    cert_manager = template(tmp_path, {"certs": {"mode": "cert-manager"}})
    assert sorted(cert_manager, key=key) == sorted(
        [o for o in draxr_manifests("--cert-manager") if o["kind"] != "Namespace"], key=key
    )


@pytest.mark.parametrize("mode", ["self", "cert-manager"])
def test_every_value_reaches_the_same_objects_as_the_install_options(tmp_path: Path, mode: str) -> None:
    values = {**TURNED_VALUES, "certs": {**TURNED_VALUES["certs"], "mode": mode}}
    if mode == "cert-manager":
        del values["certs"]["validity"], values["certs"]["renewBefore"]  # self-managed only
        expected = render(TURNED, cert_manager=True)
    else:
        expected = render(TURNED, certificates=certificates(namespace="ml-infra"))
    chart = template(tmp_path, {**values, "namespace": {"create": True}}, namespace="ml-infra")
    assert without_key_material(chart) == without_key_material(expected)


@pytest.mark.parametrize(
    ("url", "ip", "dns"),
    [
        ("https://10.9.8.7:9443", "10.9.8.7", None),
        ("https://draxr.example.org/hooks/", None, "draxr.example.org"),
    ],
)
def test_webhook_url_replaces_the_service_and_is_named_by_the_certificate(
    tmp_path: Path, url: str, ip: str | None, dns: str | None
) -> None:
    chart = template(tmp_path, {"webhookURL": url})
    expected = render(InstallOptions(webhook_url=url), certificates=certificates())
    assert without_key_material(chart) == without_key_material(
        [o for o in expected if o["kind"] != "Namespace"]
    )
    trusted(chart)
    names = serving_names(
        WEBHOOK, DEFAULT_NAMESPACE, extra_ips=[ip] if ip else [], extra_dns=[dns] if dns else []
    )
    assert names.covered_by(serving_certificate(chart))


def serving_certificate(objects: list[Obj]) -> Any:
    (secret,) = [o for o in objects if o["kind"] == "Secret" and o["metadata"]["name"] == "draxr-webhook-tls"]
    return parse_bundle(base64.b64decode(secret["data"]["tls.crt"]))[0]


def test_the_charts_certificates_can_be_trusted(tmp_path: Path) -> None:
    objects = template(tmp_path, namespace="ml-infra")
    trusted(objects)
    (ca_secret,) = [
        o for o in objects if o["kind"] == "Secret" and o["metadata"]["name"] == "draxr-webhook-ca"
    ]
    (ca,) = parse_bundle(base64.b64decode(ca_secret["data"]["tls.crt"]))
    assert ca_secret["data"]["tls.key"]  # the worker's leader signs renewals with it
    serving = serving_certificate(objects)
    assert signed_by(serving, ca)
    assert serving_names(WEBHOOK, "ml-infra").covered_by(serving)
    # As `draxr manifests` makes them: a 10-year CA, a 90-day serving certificate.
    assert ca.not_valid_after_utc - ca.not_valid_before_utc == dt.timedelta(days=3650)
    assert serving.not_valid_after_utc - serving.not_valid_before_utc == dt.timedelta(days=90)
    # Two renderings never share a key (helm template: nothing to look up).
    again = serving_certificate(template(tmp_path, namespace="ml-infra"))
    assert again.serial_number != serving.serial_number


@pytest.mark.parametrize("version", VERSIONS)
def test_every_rendered_object_validates(tmp_path: Path, version: str) -> None:
    renderings = {
        "default": template(tmp_path, kube_version=f"{version}.0"),
        "all-on": template(
            tmp_path, {**TURNED_VALUES, **ALL_ON}, namespace="ml-infra", kube_version=f"{version}.0"
        ),
        "cert-manager": template(
            tmp_path, {"certs": {"mode": "cert-manager"}, **ALL_ON}, kube_version=f"{version}.0"
        ),
    }
    for name, objects in renderings.items():
        checked = kubernetes_objects(objects)
        assert checked, name
        for obj in checked:
            kubernetes_validate.validate(obj, version, strict=True)
    kinds = {o["kind"] for o in renderings["all-on"]}
    assert {"Namespace", "NetworkPolicy", "ServiceMonitor", "PrometheusRule", "PodDisruptionBudget"} <= kinds


def test_switches_are_off_by_default(tmp_path: Path) -> None:
    kinds = {o["kind"] for o in template(tmp_path)}
    assert not kinds & {"Namespace", "NetworkPolicy", "ServiceMonitor", "PrometheusRule"}


def test_monitoring_objects(tmp_path: Path) -> None:
    """The worker's metrics Service and the ServiceMonitor are what ``draxr manifests --monitoring``
    renders (the chart's extra ``serviceMonitor.labels`` aside)."""
    objects = template(tmp_path, ALL_ON, namespace="ml-infra")
    (monitor,) = [o for o in objects if o["kind"] == "ServiceMonitor"]
    assert monitor["metadata"]["labels"].pop("release") == "prometheus"
    expected = {(o["kind"], o["metadata"]["name"]): o for o in monitoring.render("ml-infra")}
    assert monitor == expected[("ServiceMonitor", "draxr")]
    services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}
    assert services["draxr-worker"] == expected[("Service", "draxr-worker")]
    for endpoint in monitor["spec"]["endpoints"]:  # each endpoint has a Service port to scrape
        assert any(
            endpoint["port"] in {p["name"] for p in svc["spec"]["ports"]}
            and monitor["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
            for svc in services.values()
        )
    (rule,) = [o for o in objects if o["kind"] == "PrometheusRule"]
    alerts = [r["alert"] for g in rule["spec"]["groups"] for r in g["rules"]]
    assert "DraxrCertificateExpiresSoon" in alerts
    assert "DraxrWebhookErrors" in alerts


#: Suffixes prometheus_client adds to a counter or histogram name.
SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_created")


def test_alert_rules_name_only_metrics_draxr_exports(tmp_path: Path) -> None:
    (rule,) = [o for o in template(tmp_path, ALL_ON) if o["kind"] == "PrometheusRule"]
    names = {
        n for g in rule["spec"]["groups"] for r in g["rules"] for n in re.findall(r"draxr_\w+", r["expr"])
    }
    assert names
    source = "\n".join(p.read_text() for p in (ROOT / "webhook").rglob("*.py") if "emulator" not in p.parts)
    exported = set(re.findall(r'"(draxr_\w+)"', source)) | set(
        re.findall(r"^EXPIRY_METRIC = \"(\w+)\"", source, re.M)
    )
    for name in names:
        base = next((name.removesuffix(s) for s in SUFFIXES if name.endswith(s)), name)
        assert base in exported, f"{name}: no metric {base} in webhook/"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"failurePolicy": "fail"}, "failurePolicy"),
        ({"timeoutSeconds": 31}, "timeoutSeconds"),
        ({"route": "sometimes"}, "route"),
        ({"webhook": {"replicas": 0}}, "replicas"),
        ({"certs": {"mode": "self-signed"}}, "mode"),
        ({"certs": {"validity": "90 days"}}, "validity"),
        ({"optOut": {"namespaces": ["Batch"]}}, "namespaces"),
        ({"webhookURL": "http://10.0.0.1"}, "webhookURL"),
        ({"flowControl": {"nominalConcurrencyShares": 0}}, "nominalConcurrencyShares"),
        ({"replicas": 2}, "replicas"),  # a misspelt or misplaced key
    ],
)
def test_bad_values_are_refused(tmp_path: Path, values: dict[str, Any], message: str) -> None:
    file = tmp_path / "values.yaml"
    file.write_text(yaml.safe_dump(values))
    done = helm("template", "draxr", str(CHART), "-f", str(file))
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stderr
    assert message in done.stderr


def test_webhook_url_needs_self_managed_certificates(tmp_path: Path) -> None:
    file = tmp_path / "values.yaml"
    file.write_text(yaml.safe_dump({"webhookURL": "https://10.0.0.1", "certs": {"mode": "cert-manager"}}))
    done = helm("template", "draxr", str(CHART), "-f", str(file))
    assert done.returncode != 0
    assert "webhookURL needs certs.mode=self" in done.stderr


def test_kubernetes_older_than_1_34_is_refused(tmp_path: Path) -> None:
    done = helm("template", "draxr", str(CHART), "--kube-version", "1.33.0")
    assert done.returncode != 0
    assert "incompatible with Kubernetes v1.33.0" in done.stderr


def test_an_upgrade_keeps_the_certificates_the_worker_renewed(tmp_path: Path) -> None:
    """`helm upgrade` renders with the cluster at hand (`--dry-run=server` here, against the API
    emulator): the chart looks up the Secrets and keeps what the worker's leader renewed, CA overlap
    included, instead of making new ones."""
    installed = template(tmp_path)
    with Emulator(tokens={"admin": ("admin", ["system:masters"])}) as em:
        em.create("namespaces", {"metadata": {"name": DEFAULT_NAMESPACE}})
        for obj in installed:
            if obj["kind"] == "Secret":
                em.create("secrets", obj, DEFAULT_NAMESPACE)
            elif obj["kind"].endswith("WebhookConfiguration"):
                em.create(obj["kind"].lower() + "s", obj)
        (ca_secret,) = [o for o in installed if o["metadata"]["name"] == "draxr-webhook-ca"]
        (first_ca,) = parse_bundle(base64.b64decode(ca_secret["data"]["tls.crt"]))
        # Near the CA's end: the leader makes a new CA, trusts both, then serves a certificate it signed.
        moment = [first_ca.not_valid_after_utc - dt.timedelta(days=100)]
        rotator = CertRotator(
            KubeClient(em.api_client("admin")), RotationConfig(DEFAULT_NAMESPACE), clock=lambda: moment[0]
        )
        assert rotator.reconcile().renewed_ca
        moment[0] += dt.timedelta(minutes=1)
        assert rotator.reconcile().renewed_serving
        renewed = {
            s: em.get("secrets", s, DEFAULT_NAMESPACE)["data"]
            for s in ("draxr-webhook-ca", "draxr-webhook-tls")
        }
        assert len(parse_bundle(base64.b64decode(renewed["draxr-webhook-tls"]["ca.crt"]))) == 2

        kubeconfig = em.kubeconfig(tmp_path / "kubeconfig", token="admin")
        done = helm(
            "template", "draxr", str(CHART), "--namespace", DEFAULT_NAMESPACE,
            "--dry-run=server", "--kubeconfig", str(kubeconfig),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        upgrade = [o for o in yaml.safe_load_all(done.stdout) if o]
    secrets = {o["metadata"]["name"]: o["data"] for o in upgrade if o["kind"] == "Secret"}
    assert secrets == renewed
    bundles = {h["clientConfig"]["caBundle"] for o in upgrade for h in o.get("webhooks") or []}
    assert bundles == {renewed["draxr-webhook-tls"]["ca.crt"]}  # old and new CA, as the leader left them
    trusted(upgrade)
