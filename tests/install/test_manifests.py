"""Installation manifests: schema-valid for 1.34-1.37 in every variant, never a webhook without a
way to trust it nor an empty Secret, kept in manifests/ (with the kustomization and the chart's
matchConditions), least-privilege RBAC, and matchConditions that select exactly what they should."""

from __future__ import annotations

import base64
import datetime as dt
import functools
import io
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.commands.manifests import run
from webhook.core.api.objects import Obj
from webhook.emulator.admission.conditions import ConditionEvaluator
from webhook.install.certs import issue_ca, issue_serving, parse_bundle, serving_names, signed_by
from webhook.install.manifests import (
    CLAIM_GUARDED_CHANGE,
    ERCS_CHANGED,
    HAS_EXTENDED_NAME,
    REQUESTS_DRA_NAME,
    SPECIAL_CLAIM,
    Certificates,
    InstallOptions,
    ManifestError,
    defaults,
    dump,
    render,
    webhook_configurations,
)

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = ["1.34", "1.35", "1.36", "1.37"]
KUBECTL = shutil.which("kubectl")


@functools.cache
def certificates(renewable: bool = True, namespace: str = "draxr-system") -> Certificates:
    """A CA and a serving certificate made in memory (no key ever lands in the repository)."""
    ca = issue_ca(validity=dt.timedelta(days=3650))
    leaf = issue_serving(ca, serving_names("draxr-webhook", namespace), validity=dt.timedelta(days=90))
    if renewable:
        return Certificates(ca.cert_pem, leaf.cert_pem, leaf.key_pem, ca.cert_pem, ca.key_pem)
    return Certificates(ca.cert_pem, leaf.cert_pem, leaf.key_pem)


#: Options far from the defaults: every knob turned.
TURNED = InstallOptions(
    namespace="ml-infra",
    image="registry.example/draxr:1.2.3",
    image_pull_policy="Always",
    webhook_replicas=1,
    worker_replicas=3,
    webhook_resources={"requests": {"cpu": "50m", "memory": "64Mi"}},
    worker_resources={"limits": {"memory": "1Gi"}},
    priority_class_name="system-cluster-critical",
    tolerations=(
        {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
    ),
    node_selector={"kubernetes.io/os": "linux"},
    failure_policy="Ignore",
    timeout_seconds=10,
    route="always",
    opt_out_namespaces=("batch", "ml-infra"),
    opt_out_label="example.com/no-draxr",
    network_policy=True,
    cert_validity="30d",
    cert_renew_before="10d",
)

VARIANTS: dict[str, Any] = {
    "self": lambda: render(certificates=certificates()),
    "yours": lambda: render(certificates=certificates(renewable=False)),
    "cert-manager": lambda: render(cert_manager=True),
    "webhook-url": lambda: render(
        InstallOptions(webhook_url="https://127.0.0.1:9443"), certificates=certificates()
    ),
    "turned": lambda: render(TURNED, certificates=certificates(namespace="ml-infra")),
    "turned-cert-manager": lambda: render(TURNED, cert_manager=True),
}


def kubernetes_objects(objects: list[Obj]) -> list[Obj]:
    """The objects the Kubernetes schemas cover (cert-manager's and Prometheus's are CRDs)."""
    return [
        o for o in objects if not o["apiVersion"].startswith(("cert-manager.io/", "monitoring.coreos.com/"))
    ]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_manifest_validates(version: str, variant: str) -> None:
    objects = VARIANTS[variant]()
    checked = kubernetes_objects(objects)
    assert len(checked) >= len(objects) - 2
    for obj in checked:
        kubernetes_validate.validate(obj, version, strict=True)


def trusted(objects: list[Obj]) -> None:
    """Every hook can be called: a parseable caBundle whose CA signed the Secret's serving
    certificate, or cert-manager's injection with its Certificate; no Secret is ever empty."""
    by_kind: dict[str, list[Obj]] = {}
    for o in objects:
        by_kind.setdefault(o["kind"], []).append(o)
    secrets = {s["metadata"]["name"]: s for s in by_kind.get("Secret", [])}
    for secret in secrets.values():
        assert secret["data"], secret["metadata"]["name"]
        assert all(secret["data"].values()), secret["metadata"]["name"]
    configurations = by_kind["MutatingWebhookConfiguration"] + by_kind["ValidatingWebhookConfiguration"]
    for cfg in configurations:
        injected = (cfg["metadata"].get("annotations") or {}).get("cert-manager.io/inject-ca-from")
        for hook in cfg["webhooks"]:
            bundle = hook["clientConfig"].get("caBundle")
            if injected:
                assert bundle is None
                namespace, name = injected.split("/")
                assert any(
                    c["metadata"]["name"] == name and c["metadata"]["namespace"] == namespace
                    for c in by_kind["Certificate"]
                )
                assert "Secret" not in by_kind  # nothing cert-manager's Secret could be overwritten by
                continue
            cas = parse_bundle(base64.b64decode(bundle))
            serving = parse_bundle(base64.b64decode(secrets["draxr-webhook-tls"]["data"]["tls.crt"]))[0]
            assert any(signed_by(serving, ca) for ca in cas)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_variant_can_be_trusted(variant: str) -> None:
    trusted(VARIANTS[variant]())


@settings(max_examples=40, deadline=None)
@given(
    mode=st.sampled_from(["self", "yours", "cert-manager"]),
    failure_policy=st.sampled_from(["Fail", "Ignore"]),
    timeout=st.integers(1, 30),
    replicas=st.integers(1, 4),
    url=st.sampled_from([None, "https://127.0.0.1:9443", "https://draxr.example.org/p/"]),
    opt_out=st.lists(st.sampled_from(["a", "b", "kube-system", "draxr-system"]), max_size=3),
    label=st.sampled_from(["", "draxr.io/opt-out"]),
    network_policy=st.booleans(),
)
def test_no_rendering_yields_a_webhook_nobody_can_trust(
    mode: str,
    failure_policy: str,
    timeout: int,
    replicas: int,
    url: str | None,
    opt_out: list[str],
    label: str,
    network_policy: bool,
) -> None:
    options = InstallOptions(
        failure_policy=failure_policy,
        timeout_seconds=timeout,
        webhook_replicas=replicas,
        worker_replicas=replicas,
        webhook_url=url,
        opt_out_namespaces=tuple(opt_out),
        opt_out_label=label,
        network_policy=network_policy,
    )
    if mode == "cert-manager":
        objects = render(options, cert_manager=True)
    else:
        objects = render(options, certificates=certificates(renewable=mode == "self"))
    trusted(objects)
    hooks = [h for o in objects if o["kind"].endswith("WebhookConfiguration") for h in o["webhooks"]]
    assert {h["failurePolicy"] for h in hooks} == {failure_policy}
    assert {h["timeoutSeconds"] for h in hooks} == {timeout}
    assert [o["kind"] for o in objects].count("PodDisruptionBudget") == (2 if replicas > 1 else 0)


def test_nothing_is_rendered_without_a_way_to_trust_the_webhook() -> None:
    with pytest.raises(ManifestError, match="no certificates and no cert-manager"):
        render()
    with pytest.raises(ManifestError, match="not both"):
        render(certificates=certificates(), cert_manager=True)
    with pytest.raises(ManifestError, match="no way to trust the webhook"):
        webhook_configurations("draxr-system", None)
    with pytest.raises(ManifestError, match="CA bundle is empty"):
        Certificates(b"", b"crt", b"key")
    with pytest.raises(ManifestError, match=r"tls\.key is empty"):
        Certificates(b"ca", b"crt", b" \n")
    with pytest.raises(ManifestError, match="go together"):
        Certificates(b"ca", b"crt", b"key", ca_crt=b"ca")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"failure_policy": "Sometimes"}, "failurePolicy must be one of Fail, Ignore"),
        ({"timeout_seconds": 31}, "timeoutSeconds must be between 1 and 30"),
        ({"route": "maybe"}, "route must be one of"),
        ({"worker_replicas": 0}, "replicas must be at least 1"),
    ],
)
def test_options_are_checked(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ManifestError, match=message):
        InstallOptions(**change)


def test_self_managed_certificates_are_renewed_by_the_worker() -> None:
    objects = render(certificates=certificates())
    (worker,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "draxr-worker"]
    assert "--rotate-certificates" in worker["spec"]["template"]["spec"]["containers"][0]["args"]
    secrets = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Secret"}
    assert set(secrets) == {"draxr-webhook-ca", "draxr-webhook-tls"}
    ca = certificates()
    assert base64.b64decode(secrets["draxr-webhook-ca"]["data"]["tls.key"]) == ca.ca_key
    assert base64.b64decode(secrets["draxr-webhook-tls"]["data"]["ca.crt"]) == ca.ca_bundle
    # Yours: no CA key, so no CA Secret, no renewal and no RBAC for it.
    yours = render(certificates=certificates(renewable=False))
    assert [o["metadata"]["name"] for o in yours if o["kind"] == "Secret"] == ["draxr-webhook-tls"]
    assert not [o for o in yours if o["metadata"]["name"] == "draxr-worker-certificates"]
    (worker,) = [o for o in yours if o["kind"] == "Deployment" and o["metadata"]["name"] == "draxr-worker"]
    assert "--rotate-certificates" not in worker["spec"]["template"]["spec"]["containers"][0]["args"]


def test_turned_options_reach_the_objects() -> None:
    objects = render(TURNED, cert_manager=True)
    deployments = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Deployment"}
    assert deployments["draxr-webhook"]["spec"]["replicas"] == 1
    assert deployments["draxr-worker"]["spec"]["replicas"] == 3
    assert [o["metadata"]["name"] for o in objects if o["kind"] == "PodDisruptionBudget"] == ["draxr-worker"]
    for d in deployments.values():
        spec = d["spec"]["template"]["spec"]
        assert spec["priorityClassName"] == "system-cluster-critical"
        assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
        assert spec["tolerations"] == list(TURNED.tolerations)
        assert spec["containers"][0]["imagePullPolicy"] == "Always"
    webhook_args = deployments["draxr-webhook"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--route=always" in webhook_args
    worker = deployments["draxr-worker"]["spec"]["template"]["spec"]["containers"][0]
    assert worker["resources"] == {"limits": {"memory": "1Gi"}}
    assert "--rotate-certificates" not in worker["args"]  # cert-manager renews
    hooks = [h for o in objects if o["kind"].endswith("WebhookConfiguration") for h in o["webhooks"]]
    for hook in hooks:
        assert (hook["failurePolicy"], hook["timeoutSeconds"]) == ("Ignore", 10)
        if hook["name"] == "deviceclasses.validate.draxr.io":
            assert "namespaceSelector" not in hook  # cluster-scoped
            continue
        assert hook["namespaceSelector"]["matchExpressions"] == [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", "ml-infra", "batch"],
            },
            {"key": "example.com/no-draxr", "operator": "NotIn", "values": ["true"]},
        ]
    policies = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "NetworkPolicy"}
    assert policies["draxr-webhook"]["ingress"] == [{"ports": [{"protocol": "TCP", "port": 8443}]}]
    assert policies["draxr-worker"]["ingress"] == [{"ports": [{"protocol": "TCP", "port": 8080}]}]
    with_certs = render(TURNED, certificates=certificates(namespace="ml-infra"))
    (worker_d,) = [
        o for o in with_certs if o["metadata"]["name"] == "draxr-worker" and o["kind"] == "Deployment"
    ]
    args = worker_d["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[-3:] == ["--rotate-certificates", "--cert-validity=30d", "--cert-renew-before=10d"]


def _manifests(*argv: str) -> tuple[int, str, str]:
    from webhook.cli import build_parser

    args = build_parser().parse_args(["manifests", *argv])
    out, err = io.StringIO(), io.StringIO()
    return run(args, out, err), out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("https://127.0.0.1:9443", "https://127.0.0.1:9443"),
        ("https://127.0.0.1:9443/", "https://127.0.0.1:9443"),
        ("https://draxr.example.org/prefix", "https://draxr.example.org/prefix"),
    ],
)
def test_webhook_url_replaces_the_service(tmp_path: Path, url: str, base: str) -> None:
    from webhook.install.certs import ensure_certs

    ensure_certs(tmp_path, "draxr-webhook", "draxr-system", extra_ips=["127.0.0.1"])
    code, out, err = _manifests("--ca-bundle", str(tmp_path / "ca.crt"), "--webhook-url", url)
    assert code == 0, err
    objs = list(yaml.safe_load_all(out))
    hooks = [h for o in objs if o["kind"].endswith("WebhookConfiguration") for h in o["webhooks"]]
    assert {h["name"]: h["clientConfig"]["url"] for h in hooks} == {
        "pods.mutate.draxr.io": f"{base}/mutate/pods",
        "deviceclasses.validate.draxr.io": f"{base}/validate/deviceclasses",
        "pods.validate.draxr.io": f"{base}/validate/pods",
        "resourceclaims.validate.draxr.io": f"{base}/validate/resourceclaims",
    }
    ca = (tmp_path / "ca.crt").read_bytes()
    for hook in hooks:
        assert set(hook["clientConfig"]) == {"url", "caBundle"}
        assert base64.b64decode(hook["clientConfig"]["caBundle"]) == ca
    # Everything but the clientConfigs is the Service rendering.
    code, plain, err = _manifests("--ca-bundle", str(tmp_path / "ca.crt"))
    assert code == 0, err
    strip = list(yaml.safe_load_all(plain))
    for o in strip + objs:
        for h in o.get("webhooks") or []:
            del h["clientConfig"]
    assert objs == strip


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://127.0.0.1:9443", "the scheme must be https"),
        ("https://", "no host"),
        ("https://127.0.0.1:9443/?x=1", "a query or fragment is not allowed"),
        ("https://127.0.0.1:9443/#f", "a query or fragment is not allowed"),
        ("https://u:p@127.0.0.1:9443", "user information is not allowed"),
        ("https://127.0.0.1:port", "Port could not be cast to integer value as 'port'"),
    ],
)
def test_unusable_webhook_urls_are_refused(
    url: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from webhook.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["manifests", "--webhook-url", url])
    assert exit_.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"draxr manifests: error: --webhook-url: {url!r}: {problem}\n"


def test_manifests_help_documents_the_webhook_url() -> None:
    import argparse

    from webhook.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert "--webhook-url URL" in sub.choices["manifests"].format_help()


def test_manifests_directory_matches_the_renderer() -> None:
    for name, text in defaults().items():
        assert (ROOT / "manifests" / name).read_text() == text, (
            f"manifests/{name} is stale: run `make manifests`"
        )
    files = [ROOT / "manifests" / n for n in defaults() if n.endswith(".yaml") and "/" not in n]
    on_disk = [
        o
        for f in sorted(files)
        for o in yaml.safe_load_all(f.read_text())
        if o.get("kind") != "Kustomization"
    ]
    assert sorted((o["kind"], o["metadata"]["name"]) for o in on_disk) == sorted(
        (o["kind"], o["metadata"]["name"]) for o in render(cert_manager=True)
    )
    text = "".join(f.read_text() for f in files)
    assert "Secret" not in {o["kind"] for o in on_disk}  # never a key, never an empty Secret
    assert "PRIVATE KEY" not in text
    for f in files:
        first, second = f.read_text().splitlines()[:2]
        assert first.startswith("# `draxr manifests --cert-manager`")
        assert not second.startswith("#")


@pytest.mark.skipif(
    KUBECTL is None and os.environ.get("CI") != "true",
    reason="no kubectl on PATH (`.ci/kubectl.sh` fetches it into .ci/bin)",
)
def test_kubectl_kustomize_renders_the_checked_in_manifests() -> None:
    assert KUBECTL is not None, "CI=true: kubectl is required (.ci/kubectl.sh)"
    done = subprocess.run(
        [KUBECTL, "kustomize", str(ROOT / "manifests")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    built = [o for o in yaml.safe_load_all(done.stdout) if o]

    def key(o: Obj) -> tuple[str, str, str]:
        return (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])

    assert sorted(built, key=key) == sorted(render(cert_manager=True), key=key)


def _rules(kind: str, name: str) -> list[Obj]:
    objects = render(certificates=certificates())
    (obj,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    rules: list[Obj] = obj["rules"]
    return rules


def _flatten(rules: list[Obj]) -> set[tuple[str, str, str, str]]:
    return {
        (g, r, v, n)
        for rule in rules
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
        for n in (rule.get("resourceNames") or ["*any*"])
    }


def test_rbac_is_exactly_the_expected_set() -> None:
    read = ("get", "list", "watch")
    assert _flatten(_rules("ClusterRole", "draxr-webhook")) == {
        *(("", r, v, "*any*") for r in ("nodes", "resourcequotas") for v in read),
        *(
            ("resource.k8s.io", r, v, "*any*")
            for r in ("deviceclasses", "devicetaintrules", "resourceclaims", "resourceslices")
            for v in read
        ),
        ("resource.k8s.io", "deviceclasses", "create", "*any*"),  # the gate probe, a dry run
        ("", "events", "create", "*any*"),
    }
    assert _flatten(_rules("ClusterRole", "draxr-worker")) == {
        *(("", r, v, "*any*") for r in ("nodes", "pods", "resourcequotas") for v in read),
        *(("", "namespaces", v, "*any*") for v in ("list", "watch")),
        ("", "pods/status", "patch", "*any*"),
        ("", "pods/binding", "create", "*any*"),
        ("", "events", "create", "*any*"),
        *(
            ("resource.k8s.io", r, v, "*any*")
            for r in ("deviceclasses", "devicetaintrules", "resourceslices")
            for v in read
        ),
        *(("resource.k8s.io", "resourceclaims", v, "*any*") for v in (*read, "create", "update", "delete")),
        ("resource.k8s.io", "resourceclaims/status", "update", "*any*"),
        ("resource.k8s.io", "resourceclaims/binding", "update", "*any*"),
        *(("resource.k8s.io", "resourceclaimtemplates", v, "*any*") for v in (*read, "create", "delete")),
    }
    assert _flatten(_rules("Role", "draxr-worker-leader-election")) == {
        ("coordination.k8s.io", "leases", "create", "*any*"),
        ("coordination.k8s.io", "leases", "get", "draxr-worker"),
        ("coordination.k8s.io", "leases", "update", "draxr-worker"),
    }
    # Self-managed certificates: the leader reads and updates exactly its two Secrets and two configurations.
    assert _flatten(_rules("Role", "draxr-worker-certificates")) == {
        ("", "secrets", v, n) for v in ("get", "update") for n in ("draxr-webhook-ca", "draxr-webhook-tls")
    }
    assert _flatten(_rules("ClusterRole", "draxr-worker-certificates")) == {
        ("admissionregistration.k8s.io", r, v, "draxr")
        for r in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
        for v in ("get", "update")
    }
    for objects in (render(certificates=certificates()), render(cert_manager=True)):
        text = dump(objects)
        for role in [o for o in objects if o["kind"] in ("ClusterRole", "Role")]:
            for rule in role["rules"]:
                assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], text
    bound = {
        (o["kind"], o["metadata"]["name"])
        for o in render(certificates=certificates())
        if o["kind"].endswith("Binding")
    }
    assert ("RoleBinding", "draxr-worker-certificates") in bound
    assert ("ClusterRoleBinding", "draxr-worker-certificates") in bound
    assert not [o for o in render(cert_manager=True) if o["metadata"]["name"] == "draxr-worker-certificates"]


def test_deployments_are_hardened_and_highly_available() -> None:
    deployments = [o for o in render(cert_manager=True) if o["kind"] == "Deployment"]
    assert {d["metadata"]["name"] for d in deployments} == {"draxr-webhook", "draxr-worker"}
    for d in deployments:
        spec = d["spec"]["template"]["spec"]
        assert d["spec"]["replicas"] >= 2
        assert spec["affinity"]["podAntiAffinity"]
        (c,) = spec["containers"]
        sc = c["securityContext"]
        assert sc["runAsNonRoot"] is True
        assert sc["readOnlyRootFilesystem"] is True
        assert sc["capabilities"] == {"drop": ["ALL"]}
        assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
        assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert c["resources"]["requests"]
        assert c["resources"]["limits"]
        assert spec["serviceAccountName"] == d["metadata"]["name"]
    pdbs = {o["metadata"]["name"] for o in render(cert_manager=True) if o["kind"] == "PodDisruptionBudget"}
    assert pdbs == {"draxr-webhook", "draxr-worker"}


def test_webhook_configurations() -> None:
    objs = {o["kind"]: o for o in render(certificates=certificates())}
    (mutating,) = objs["MutatingWebhookConfiguration"]["webhooks"]
    validating = objs["ValidatingWebhookConfiguration"]["webhooks"]
    for hook in [mutating, *validating]:
        assert hook["sideEffects"] == "None"
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["timeoutSeconds"] == 3
        assert hook["matchPolicy"] == "Equivalent"
        assert hook["matchConditions"]
        assert hook["failurePolicy"] == "Fail"  # every hook is narrowed by its matchConditions
    assert mutating["reinvocationPolicy"] == "IfNeeded"
    excluded, opted_out = mutating["namespaceSelector"]["matchExpressions"]
    assert excluded == {
        "key": "kubernetes.io/metadata.name",
        "operator": "NotIn",
        "values": ["kube-system", "draxr-system"],
    }
    assert opted_out == {"key": "draxr.io/opt-out", "operator": "NotIn", "values": ["true"]}
    assert {h["clientConfig"]["service"]["path"] for h in [mutating, *validating]} == {
        "/mutate/pods",
        "/validate/deviceclasses",
        "/validate/pods",
        "/validate/resourceclaims",
    }


def test_ca_bundle_and_secret_come_from_the_certificates(tmp_path: Path) -> None:
    from webhook.install.certs import ensure_certs

    ensure_certs(tmp_path, "draxr-webhook", "ml-infra")
    code, out, err = _manifests(
        "--namespace", "ml-infra", "--image", "example.org/draxr:1", "--ca-bundle", str(tmp_path / "ca.crt")
    )
    assert code == 0, err
    assert err == ""  # ca.key is beside ca.crt: draxr renews, nothing to warn about
    objs = list(yaml.safe_load_all(out))
    ca = (tmp_path / "ca.crt").read_bytes()
    for cfg in [o for o in objs if o["kind"].endswith("WebhookConfiguration")]:
        for hook in cfg["webhooks"]:
            assert base64.b64decode(hook["clientConfig"]["caBundle"]) == ca
            assert hook["clientConfig"]["service"]["namespace"] == "ml-infra"
    secrets = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Secret"}
    secret = secrets["draxr-webhook-tls"]
    assert base64.b64decode(secret["data"]["tls.crt"]) == (tmp_path / "tls.crt").read_bytes()
    assert (
        base64.b64decode(secrets["draxr-webhook-ca"]["data"]["tls.key"]) == (tmp_path / "ca.key").read_bytes()
    )
    assert secret["metadata"]["namespace"] == "ml-infra"
    assert all(
        c["image"] == "example.org/draxr:1"
        for o in objs
        if o["kind"] == "Deployment"
        for c in o["spec"]["template"]["spec"]["containers"]
    )


def test_your_certificates_without_the_ca_key_are_not_renewed(tmp_path: Path) -> None:
    from webhook.install.certs import ensure_certs

    ensure_certs(tmp_path, "draxr-webhook", "draxr-system")
    (tmp_path / "ca.key").unlink()
    code, out, err = _manifests("--ca-bundle", str(tmp_path / "ca.crt"))
    assert code == 0, err
    assert err.startswith(f"draxr manifests: no ca.key in {tmp_path}/, so draxr will not renew")
    assert len(err.splitlines()) == 1
    objs = list(yaml.safe_load_all(out))
    assert [o["metadata"]["name"] for o in objs if o["kind"] == "Secret"] == ["draxr-webhook-tls"]


def test_missing_certificates_are_reported(tmp_path: Path) -> None:
    code, out, err = _manifests("--namespace", "x", "--image", "i", "--ca-bundle", str(tmp_path / "nope.crt"))
    assert (code, out) == (2, "")
    assert err.startswith(f"draxr manifests: error: --ca-bundle {tmp_path}/nope.crt")
    (tmp_path / "ca.crt").write_bytes(Path(ROOT / "certs" / "README.md").read_bytes())
    code, out, err = _manifests("--ca-bundle", str(tmp_path / "ca.crt"))
    assert (code, out) == (2, "")
    assert "holds no valid PEM certificate" in err


def test_cert_manager_variant() -> None:
    objs = render(cert_manager=True)
    assert {o["kind"] for o in objs} >= {"Issuer", "Certificate"}
    assert not [o for o in objs if o["kind"] == "Secret"]
    for cfg in [o for o in objs if o["kind"].endswith("WebhookConfiguration")]:
        assert cfg["metadata"]["annotations"] == {
            "cert-manager.io/inject-ca-from": "draxr-system/draxr-webhook"
        }
        assert all("caBundle" not in h["clientConfig"] for h in cfg["webhooks"])


EVAL = ConditionEvaluator()


def matches(expression: str, obj: Obj | None, old: Obj | None = None, operation: str = "CREATE") -> bool:
    from celpy.adapter import json_to_cel

    act = {
        "object": json_to_cel(obj),
        "oldObject": json_to_cel(old),
        "request": json_to_cel({"operation": operation}),
    }
    outcome = EVAL.evaluate([{"name": "c", "expression": expression}], act)
    assert not outcome.error, outcome.error
    return outcome.matched


def pod(requests: dict[str, Any] | None = None, init: dict[str, Any] | None = None, **status: Any) -> Obj:
    c: Obj = {"name": "c"}
    if requests is not None:
        c["resources"] = {"requests": requests}
    p: Obj = {"spec": {"containers": [c]}}
    if init is not None:
        p["spec"]["initContainers"] = [{"name": "i", "resources": {"limits": init}}]
    if status:
        p["status"] = status
    return p


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (pod({"example.com/gpu": "1"}), True),
        (pod({"deviceclass.resource.kubernetes.io/gpu": "1"}), True),
        (pod({"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "2Mi"}), False),
        (pod({"kubernetes.io/something": "1"}), False),
        (pod(), False),
        (pod({"cpu": "1"}, init={"example.com/gpu": "1"}), True),
    ],
)
def test_pod_match_condition(obj: Obj, expected: bool) -> None:
    assert matches(REQUESTS_DRA_NAME, obj) is expected


def test_claim_status_match_condition_only_fires_on_changes() -> None:
    erc = {"resourceClaimName": "x", "requestMappings": []}
    assert matches(ERCS_CHANGED, pod(extendedResourceClaimStatus=erc), pod(), "UPDATE")
    assert matches(ERCS_CHANGED, pod(), pod(extendedResourceClaimStatus=erc), "UPDATE")
    assert not matches(
        ERCS_CHANGED,
        pod(phase="Running", extendedResourceClaimStatus=erc),
        pod(extendedResourceClaimStatus=erc),
        "UPDATE",
    )
    assert not matches(ERCS_CHANGED, pod(phase="Running"), pod(), "UPDATE")


def test_special_claim_and_device_class_match_conditions() -> None:
    special = {"metadata": {"annotations": {"resource.kubernetes.io/extended-resource-claim": "true"}}}
    plain: Obj = {"metadata": {}}
    assert matches(SPECIAL_CLAIM, special)
    assert not matches(SPECIAL_CLAIM, plain)
    assert matches(SPECIAL_CLAIM, plain, special, "UPDATE")  # removing the annotation is checked too
    claim = {**special, "spec": {"devices": {"requests": []}}}
    assert matches(CLAIM_GUARDED_CHANGE, claim)
    finalized = {"metadata": {**special["metadata"], "finalizers": []}, "spec": claim["spec"]}
    assert not matches(CLAIM_GUARDED_CHANGE, finalized, claim, "UPDATE")  # Unreserve needs no webhook
    assert matches(CLAIM_GUARDED_CHANGE, {"metadata": {}, "spec": claim["spec"]}, claim, "UPDATE")
    owned = {"metadata": {**special["metadata"], "ownerReferences": [{"uid": "u"}]}, "spec": claim["spec"]}
    assert matches(CLAIM_GUARDED_CHANGE, owned, claim, "UPDATE")
    assert matches(CLAIM_GUARDED_CHANGE, {**claim, "spec": {"devices": {}}}, claim, "UPDATE")
    named = {"metadata": {"name": "gpu"}}
    assert matches(HAS_EXTENDED_NAME, {**named, "spec": {"extendedResourceName": "example.com/gpu"}})
    assert not matches(HAS_EXTENDED_NAME, {**named, "spec": {}})
    assert matches(
        HAS_EXTENDED_NAME, {**named, "spec": {}}, {"spec": {"extendedResourceName": "x/y"}}, "UPDATE"
    )
    # too long for the implicit name: the webhook's warning must be able to reach the user
    assert matches(HAS_EXTENDED_NAME, {"metadata": {"name": "a" * 64}, "spec": {}})
