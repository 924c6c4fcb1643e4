"""``draxr manifests``: safe by default. Without a CA it makes (or keeps) its own and says where the
keys went; it refuses contradictory certificate flags in one line; and applying its output with the
real kubectl again and again, against the API emulator, never empties the Secret."""

from __future__ import annotations

import base64
import datetime as dt
import io
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from e2e.emulator import Emulator
from webhook.cli import main
from webhook.commands.manifests import run
from webhook.core.api.objects import Obj
from webhook.identity.names import CA_SECRET, TLS_SECRET
from webhook.identity.pki import (
    Issued,
    issue_ca,
    issue_serving,
    names_of,
    parse_bundle,
    serving_names,
    signed_by,
)
from webhook.install.files import defaults

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = shutil.which("kubectl")
#: What the emulator serves of draxr's objects (it has no RBAC, PodDisruptionBudgets or CRDs).
SERVED = {
    "Namespace",
    "ServiceAccount",
    "Secret",
    "Service",
    "Deployment",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
}


def draxr_manifests(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, list[str]]:
    try:
        code = main(["manifests", *argv])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err.splitlines()


def secrets_of(text: str) -> dict[str, Obj]:
    return {o["metadata"]["name"]: o for o in yaml.safe_load_all(text) if o and o["kind"] == "Secret"}


def ca_bundles(text: str) -> set[str]:
    return {
        h["clientConfig"]["caBundle"]
        for o in yaml.safe_load_all(text)
        if o and o["kind"].endswith("WebhookConfiguration")
        for h in o["webhooks"]
    }


def test_without_a_ca_draxr_makes_its_own_and_says_where_the_keys_went(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = draxr_manifests(capsys)
    assert code == 0, err
    assert err == [
        "draxr manifests: made a CA and a serving certificate for draxr-webhook.draxr-system.svc in certs/ "
        "(ca.key and tls.key are private keys: keep them secret, never commit them); the output carries them "
        "in the Secrets draxr-webhook-ca and draxr-webhook-tls: treat it as a secret too"
    ]
    certs = tmp_path / "certs"
    assert sorted(p.name for p in certs.iterdir()) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    secrets = secrets_of(out)
    assert base64.b64decode(secrets[TLS_SECRET]["data"]["tls.key"]) == (certs / "tls.key").read_bytes()
    assert base64.b64decode(secrets[CA_SECRET]["data"]["tls.key"]) == (certs / "ca.key").read_bytes()
    (bundle,) = ca_bundles(out)
    assert base64.b64decode(bundle) == (certs / "ca.crt").read_bytes()
    # Again: the same certificates, byte for byte, so applying it again changes nothing.
    code, again, err = draxr_manifests(capsys)
    assert code == 0
    assert again == out
    assert err[0].startswith("draxr manifests: kept the CA and serving certificate for")


def test_own_certificates_name_the_webhook_url_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = draxr_manifests(
        capsys,
        "--cert-dir",
        str(tmp_path / "c"),
        "--webhook-url",
        "https://10.1.2.3:9443",
        "--namespace",
        "ops",
    )
    assert code == 0, err
    leaf = parse_bundle(base64.b64decode(secrets_of(out)[TLS_SECRET]["data"]["tls.crt"]))[0]
    names = names_of(leaf)
    assert "draxr-webhook.ops.svc" in names.dns
    assert "10.1.2.3" in {str(ip) for ip in names.ips}
    code, out, err = draxr_manifests(
        capsys, "--cert-dir", str(tmp_path / "d"), "--webhook-url", "https://draxr.example.org/x"
    )
    assert code == 0, err
    leaf = parse_bundle(base64.b64decode(secrets_of(out)[TLS_SECRET]["data"]["tls.crt"]))[0]
    assert "draxr.example.org" in names_of(leaf).dns


def test_an_unwritable_certificate_directory_fails_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("x")
    code, out, err = draxr_manifests(capsys, "--cert-dir", str(tmp_path / "file" / "certs"))
    assert (code, out) == (2, "")
    assert len(err) == 1
    assert err[0].startswith(
        f"draxr manifests: error: cannot create certificate directory {tmp_path}/file/certs"
    )


def test_cert_manager_renders_no_secret_and_makes_no_certificates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = draxr_manifests(capsys, "--cert-manager")
    assert (code, err) == (0, [])
    assert secrets_of(out) == {}
    assert list(tmp_path.iterdir()) == []


def test_the_flags_reach_the_objects(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = draxr_manifests(
        capsys,
        "--cert-manager",
        "--failure-policy=Ignore",
        "--timeout-seconds=7",
        "--replicas=1",
        "--route=never",
        "--opt-out-namespace=batch",
        "--opt-out-label=",
        "--priority-class-name=draxr-critical",
        "--network-policy",
    )
    assert code == 0, err
    objects = [o for o in yaml.safe_load_all(out) if o]
    kinds = [o["kind"] for o in objects]
    assert "PodDisruptionBudget" not in kinds  # one replica
    assert kinds.count("NetworkPolicy") == 2
    for d in [o for o in objects if o["kind"] == "Deployment"]:
        assert d["spec"]["replicas"] == 1
        assert d["spec"]["template"]["spec"]["priorityClassName"] == "draxr-critical"
    (webhook,) = [
        o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "draxr-webhook"
    ]
    assert "--route=never" in webhook["spec"]["template"]["spec"]["containers"][0]["args"]
    hooks = [h for o in objects if o["kind"].endswith("WebhookConfiguration") for h in o["webhooks"]]
    assert {(h["failurePolicy"], h["timeoutSeconds"]) for h in hooks} == {("Ignore", 7)}
    selectors = [h["namespaceSelector"]["matchExpressions"] for h in hooks if "namespaceSelector" in h]
    assert selectors
    for expressions in selectors:
        assert expressions == [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", "draxr-system", "batch"],
            }
        ]


# --- applying twice with the real kubectl ----------------------------------------------------------------

needs_kubectl = pytest.mark.skipif(
    KUBECTL is None and os.environ.get("CI") != "true",
    reason="no kubectl on PATH (`.ci/kubectl.sh` fetches it into .ci/bin)",
)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Emulator, Path]]:
    with Emulator(tokens={"admin": ("admin", ["system:masters"])}) as em:
        yield em, em.kubeconfig(tmp_path / "kubeconfig", token="admin")


def apply(kubeconfig: Path, text: str) -> str:
    """``kubectl apply -f -`` of the objects the emulator serves; its output."""
    assert KUBECTL is not None, "CI=true: kubectl is required (.ci/kubectl.sh)"
    served = [o for o in yaml.safe_load_all(text) if o and o["kind"] in SERVED]
    done = subprocess.run(
        [KUBECTL, "--kubeconfig", str(kubeconfig), "apply", "-f", "-"],
        input=yaml.safe_dump_all(served),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def live_secret(em: Emulator, name: str = TLS_SECRET) -> dict[str, bytes]:
    data = em.get("secrets", name, "draxr-system").get("data") or {}
    return {k: base64.b64decode(v) for k, v in data.items()}


def callable_hooks(em: Emulator) -> None:
    """Every live hook's caBundle trusts the live Secret's serving certificate."""
    leaf = parse_bundle(live_secret(em)["tls.crt"])[0]
    for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        for hook in em.get(kind, "draxr")["webhooks"]:
            cas = parse_bundle(base64.b64decode(hook["clientConfig"]["caBundle"]))
            assert any(signed_by(leaf, ca) for ca in cas), hook["name"]


@needs_kubectl
def test_applying_draxr_manifests_again_never_empties_the_secret(
    cluster: tuple[Emulator, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    em, kubeconfig = cluster
    certs = tmp_path / "certs"
    code, first, err = draxr_manifests(capsys, "--cert-dir", str(certs))
    assert code == 0, err
    assert "secret/draxr-webhook-tls created" in apply(kubeconfig, first)
    expected = {name: (certs / name).read_bytes() for name in ("ca.crt", "tls.crt", "tls.key")}
    assert live_secret(em) == expected
    callable_hooks(em)
    # Applied again, and rendered again from the same directory: nothing changes.
    assert "secret/draxr-webhook-tls unchanged" in apply(kubeconfig, first)
    code, second, err = draxr_manifests(capsys, "--cert-dir", str(certs))
    assert (code, second) == (0, first)
    assert "secret/draxr-webhook-tls unchanged" in apply(kubeconfig, second)
    assert live_secret(em) == expected
    # The leader renewed the serving certificate in the cluster; an old rendering applied on top puts
    # back the older pair, which the caBundle it carries still trusts: never an empty Secret.
    ca = Issued.parse((certs / "ca.crt").read_bytes(), (certs / "ca.key").read_bytes())
    renewed = issue_serving(
        ca, serving_names("draxr-webhook", "draxr-system"), validity=dt.timedelta(days=90)
    )
    secret = em.get("secrets", TLS_SECRET, "draxr-system")
    secret["data"]["tls.crt"] = base64.b64encode(renewed.cert_pem).decode()
    secret["data"]["tls.key"] = base64.b64encode(renewed.key_pem).decode()
    em.update("secrets", secret)
    assert "secret/draxr-webhook-tls configured" in apply(kubeconfig, first)
    assert live_secret(em) == expected
    callable_hooks(em)


@needs_kubectl
def test_applying_the_checked_in_manifests_leaves_cert_managers_secret_alone(
    cluster: tuple[Emulator, Path],
) -> None:
    em, kubeconfig = cluster
    text = "---\n".join(
        t for name, t in defaults().items() if "/" not in name and name != "kustomization.yaml"
    )
    assert {o["kind"] for o in yaml.safe_load_all(text) if o} >= {"Namespace", "Deployment", "Certificate"}
    apply(kubeconfig, text)
    # cert-manager issues the Secret and injects the CA.
    ca = issue_ca(validity=dt.timedelta(days=365))
    leaf = issue_serving(ca, serving_names("draxr-webhook", "draxr-system"), validity=dt.timedelta(days=90))
    issued = {"ca.crt": ca.cert_pem, "tls.crt": leaf.cert_pem, "tls.key": leaf.key_pem}
    em.create(
        "secrets",
        {
            "metadata": {"name": TLS_SECRET, "namespace": "draxr-system"},
            "type": "kubernetes.io/tls",
            "data": {k: base64.b64encode(v).decode() for k, v in issued.items()},
        },
        "draxr-system",
    )
    for _ in range(2):
        out = apply(kubeconfig, text)
        assert "secret" not in out
        assert live_secret(em) == issued


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
