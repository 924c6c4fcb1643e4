"""Installation manifests: schema-valid for 1.34-1.37, kept in manifests/, least-privilege RBAC,
the CA bundle from the certificates, and matchConditions that select exactly what they should."""

from __future__ import annotations

import argparse
import base64
import io
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from webhook.commands.manifests import run
from webhook.core.objects import Obj
from webhook.emulator.admission.conditions import ConditionEvaluator
from webhook.install.certs import ensure_certs
from webhook.install.manifests import (
    CLAIM_GUARDED_CHANGE,
    ERCS_CHANGED,
    HAS_EXTENDED_NAME,
    HEADER,
    REQUESTS_DRA_NAME,
    SPECIAL_CLAIM,
    dump,
    render,
    split,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("version", ["1.34", "1.35", "1.36", "1.37"])
@pytest.mark.parametrize("cert_manager", [False, True])
def test_every_manifest_validates(version: str, cert_manager: bool) -> None:
    for obj in render(cert_manager=cert_manager):
        if obj["apiVersion"].startswith("cert-manager.io/"):
            continue  # not a Kubernetes API type
        kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize("version", ["1.34", "1.35", "1.36", "1.37"])
def test_manifests_with_a_webhook_url_validate(version: str) -> None:
    for obj in render(ca_bundle="Y2E=", webhook_url="https://127.0.0.1:9443"):
        kubernetes_validate.validate(obj, version, strict=True)


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
    secrets = {"Secret"}  # identical: the same files
    assert [o for o in objs if o["kind"] not in secrets] == [o for o in strip if o["kind"] not in secrets]


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
    from webhook.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert "--webhook-url URL" in sub.choices["manifests"].format_help()


def test_manifests_directory_matches_the_renderer() -> None:
    for filename, objects in split(render()).items():
        assert (ROOT / "manifests" / filename).read_text() == HEADER + dump(objects), (
            f"manifests/{filename} is stale: run `make manifests`"
        )
    files = list((ROOT / "manifests").glob("*.yaml"))
    on_disk = [o for f in sorted(files) for o in yaml.safe_load_all(f.read_text())]
    assert sorted((o["kind"], o["metadata"]["name"]) for o in on_disk) == sorted(
        (o["kind"], o["metadata"]["name"]) for o in render()
    )


def _rules(kind: str, name: str) -> list[Obj]:
    (obj,) = [o for o in render() if o["kind"] == kind and o["metadata"]["name"] == name]
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
    text = dump(render())
    for role in [o for o in render() if o["kind"] in ("ClusterRole", "Role")]:
        for rule in role["rules"]:
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], text


def test_deployments_are_hardened_and_highly_available() -> None:
    deployments = [o for o in render() if o["kind"] == "Deployment"]
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
    pdbs = {o["metadata"]["name"] for o in render() if o["kind"] == "PodDisruptionBudget"}
    assert pdbs == {"draxr-webhook", "draxr-worker"}


def test_webhook_configurations() -> None:
    objs = {o["kind"]: o for o in render()}
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
    excluded = mutating["namespaceSelector"]["matchExpressions"][0]
    assert excluded == {
        "key": "kubernetes.io/metadata.name",
        "operator": "NotIn",
        "values": ["kube-system", "draxr-system"],
    }
    assert {h["clientConfig"]["service"]["path"] for h in [mutating, *validating]} == {
        "/mutate/pods",
        "/validate/deviceclasses",
        "/validate/pods",
        "/validate/resourceclaims",
    }


def test_ca_bundle_and_secret_come_from_the_certificates(tmp_path: Path) -> None:
    ensure_certs(tmp_path, "draxr-webhook", "ml-infra")
    out, err = io.StringIO(), io.StringIO()
    args = argparse.Namespace(
        namespace="ml-infra",
        image="example.org/draxr:1",
        ca_bundle=str(tmp_path / "ca.crt"),
        cert_manager=False,
    )
    assert run(args, out, err) == 0, err.getvalue()
    objs = list(yaml.safe_load_all(out.getvalue()))
    ca = (tmp_path / "ca.crt").read_bytes()
    for cfg in [o for o in objs if o["kind"].endswith("WebhookConfiguration")]:
        for hook in cfg["webhooks"]:
            assert base64.b64decode(hook["clientConfig"]["caBundle"]) == ca
            assert hook["clientConfig"]["service"]["namespace"] == "ml-infra"
    (secret,) = [o for o in objs if o["kind"] == "Secret"]
    assert base64.b64decode(secret["data"]["tls.crt"]) == (tmp_path / "tls.crt").read_bytes()
    assert secret["metadata"]["namespace"] == "ml-infra"
    assert all(
        c["image"] == "example.org/draxr:1"
        for o in objs
        if o["kind"] == "Deployment"
        for c in o["spec"]["template"]["spec"]["containers"]
    )


def test_missing_certificates_are_reported(tmp_path: Path) -> None:
    err = io.StringIO()
    args = argparse.Namespace(
        namespace="x", image="i", ca_bundle=str(tmp_path / "nope.crt"), cert_manager=False
    )
    assert run(args, io.StringIO(), err) == 2
    assert "nope.crt" in err.getvalue()


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
