"""What ``draxr manifests`` renders, as a whole: schema-valid for 1.34-1.37 in every variant, never a
webhook without a way to trust it nor an empty Secret, and every option reaching the objects."""

from __future__ import annotations

import base64
from typing import Any

import kubernetes_validate
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.install.builders import certificates
from webhook.core.api.objects import Obj
from webhook.identity.pki import parse_bundle, signed_by
from webhook.install.manifests import render
from webhook.install.options import InstallOptions, ManifestError
from webhook.install.trust import Certificates
from webhook.install.webhooks import webhook_configurations

VERSIONS = ["1.34", "1.35", "1.36", "1.37"]


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
    flow_control_shares=120,
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
