"""The real kubectl against the emulator (skipped when no kubectl binary is installed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from e2e.emulator import Emulator

from .test_admission import _hook, _install
from .webhook_server import WebhookServer

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(
    KUBECTL is None, reason="no kubectl binary on PATH (install kubernetes-client)"
)

MANIFEST = """\
apiVersion: v1
kind: Pod
metadata:
  name: demo
  namespace: default
  labels:
    app: demo
spec:
  containers:
  - name: main
    image: registry.example/app:1
    resources:
      limits:
        example.com/gpu: 1
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu.example.com
spec:
  extendedResourceName: example.com/gpu
  selectors:
  - cel:
      expression: device.driver == "gpu.example.com"
"""


def _kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def kubeconfig(emulator: Emulator, tmp_path: Path) -> Path:
    return emulator.kubeconfig(tmp_path / "kubeconfig", token="alice-token")


def test_apply_dry_run_server_persists_nothing(emulator: Emulator, kubeconfig: Path, tmp_path: Path) -> None:
    manifest = tmp_path / "x.yaml"
    manifest.write_text(MANIFEST)
    r = _kubectl(kubeconfig, "apply", "--dry-run=server", "-f", str(manifest))
    assert r.returncode == 0, r.stderr
    assert "pod/demo created (server dry run)" in r.stdout
    assert "deviceclass.resource.k8s.io/gpu.example.com created (server dry run)" in r.stdout
    assert emulator.find("pods", "demo") is None
    assert emulator.find("deviceclasses", "gpu.example.com") is None
    dry = [r for r in emulator.requests() if r.verb == "create"]
    assert dry
    assert all(r.dry_run for r in dry)


def test_apply_get_and_delete(emulator: Emulator, kubeconfig: Path, tmp_path: Path) -> None:
    manifest = tmp_path / "x.yaml"
    manifest.write_text(MANIFEST)
    r = _kubectl(kubeconfig, "apply", "-f", str(manifest))
    assert r.returncode == 0, r.stderr
    assert emulator.get("pods", "demo")["spec"]["containers"][0]["resources"]["requests"] == {
        "example.com/gpu": "1"
    }
    r = _kubectl(kubeconfig, "get", "pods")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == "NAME"
    assert "demo" in r.stdout
    r = _kubectl(kubeconfig, "get", "deviceclasses", "-o", "jsonpath={.items[*].spec.extendedResourceName}")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "example.com/gpu"
    manifest.write_text(MANIFEST.replace("app: demo", "app: changed"))
    r = _kubectl(kubeconfig, "apply", "-f", str(manifest))
    assert r.returncode == 0, r.stderr
    assert emulator.get("pods", "demo")["metadata"]["labels"]["app"] == "changed"
    r = _kubectl(kubeconfig, "delete", "pod", "demo")
    assert r.returncode == 0, r.stderr
    assert emulator.find("pods", "demo") is None


def test_create_conflict_and_not_found_messages(emulator: Emulator, kubeconfig: Path, tmp_path: Path) -> None:
    r = _kubectl(kubeconfig, "get", "pod", "missing")
    assert r.returncode != 0
    assert 'Error from server (NotFound): pods "missing" not found' in r.stderr
    manifest = tmp_path / "ns.yaml"
    manifest.write_text("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team\n")
    r = _kubectl(kubeconfig, "create", "-f", str(manifest))
    assert r.returncode == 0, r.stderr
    assert emulator.get("namespaces", "team")["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team"}
    r = _kubectl(kubeconfig, "create", "-f", str(manifest))
    assert 'Error from server (AlreadyExists): error when creating "' in r.stderr
    assert 'namespaces "team" already exists' in r.stderr


def test_kubectl_prints_webhook_warnings_and_denials(
    emulator: Emulator, kubeconfig: Path, tmp_path: Path, webhook_server: WebhookServer
) -> None:
    webhook_server.clear()
    _install(emulator, "validating", "w", _hook(webhook_server, "/warn", "warn.test.io"))
    manifest = tmp_path / "x.yaml"
    manifest.write_text(MANIFEST.split("---")[0])
    r = _kubectl(kubeconfig, "apply", "--dry-run=server", "-f", str(manifest))
    assert r.returncode == 0, r.stderr
    assert "Warning: careful now" in r.stderr
    _install(emulator, "validating", "d", _hook(webhook_server, "/deny", "deny.test.io"))
    r = _kubectl(kubeconfig, "apply", "-f", str(manifest))
    assert r.returncode != 0
    assert 'admission webhook "deny.test.io" denied the request: no pods today' in r.stderr
