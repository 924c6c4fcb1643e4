"""The real kubectl against the apiserver (skipped when no kubectl binary is installed)."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest

from .backend import Api
from .support import missing
from .test_admission import hook, install
from .webhook_server import WebhookServer

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(
    KUBECTL is None, reason="no kubectl binary on PATH (install kubernetes-client)"
)

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: demo
  labels:
    app: demo
spec:
  containers:
  - name: main
    image: registry.example/app:1
    resources:
      limits:
        example.com/gpu: 1
"""
DEVICE_CLASS = """\
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: {name}
spec:
  extendedResourceName: example.com/gpu
  selectors:
  - cel:
      expression: device.driver == "gpu.example.com"
"""


def kubectl(api: Api, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(api.kubeconfig()), "-n", api.namespace, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_apply_dry_run_server_persists_nothing(api: Api, core: Any, resource_api: Any) -> None:
    dc = api.unique("gpu.example.com")
    r = kubectl(api, "apply", "--dry-run=server", "-f", "-", stdin=POD + DEVICE_CLASS.format(name=dc))
    assert r.returncode == 0, r.stderr
    assert "pod/demo created (server dry run)" in r.stdout
    assert f"deviceclass.resource.k8s.io/{dc} created (server dry run)" in r.stdout
    assert missing(core.read_namespaced_pod, "demo", api.namespace)
    assert missing(resource_api.read_device_class, dc)


def test_apply_get_and_delete(api: Api, core: Any) -> None:
    dc = api.unique("gpu.example.com")
    r = kubectl(api, "apply", "-f", "-", stdin=POD + DEVICE_CLASS.format(name=dc))
    assert r.returncode == 0, r.stderr
    requests = core.read_namespaced_pod("demo", api.namespace).spec.containers[0].resources.requests
    assert requests == {"example.com/gpu": "1"}
    r = kubectl(api, "get", "pods")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == "NAME"
    assert "demo" in r.stdout
    r = kubectl(api, "get", "deviceclass", dc, "-o", "jsonpath={.spec.extendedResourceName}")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "example.com/gpu"
    # A second apply of a changed manifest is a strategic merge patch.
    r = kubectl(api, "apply", "-f", "-", stdin=POD.replace("app: demo", "app: changed"))
    assert r.returncode == 0, r.stderr
    assert core.read_namespaced_pod("demo", api.namespace).metadata.labels["app"] == "changed"
    r = kubectl(api, "delete", "pod", "demo")
    assert r.returncode == 0, r.stderr
    assert missing(core.read_namespaced_pod, "demo", api.namespace)


def test_get_prints_the_servers_table(api: Api, core: Any) -> None:
    """kube-apiserver prints pods for ``kubectl get`` (a ``meta.k8s.io`` Table); the emulator serves
    no Tables (kubectl then prints NAME and AGE), so this is the real apiserver's only."""
    if not api.real:
        pytest.skip("the emulator serves no server-side Tables: kubectl prints NAME and AGE")
    r = kubectl(api, "apply", "-f", "-", stdin=POD)
    assert r.returncode == 0, r.stderr
    r = kubectl(api, "get", "pods")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[:5] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert "Pending" in r.stdout


def test_create_conflict_and_not_found_messages(api: Api, core: Any) -> None:
    r = kubectl(api, "get", "pod", "missing")
    assert r.returncode != 0
    assert 'Error from server (NotFound): pods "missing" not found' in r.stderr
    team = api.unique("team")
    manifest = f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {team}\n"
    r = kubectl(api, "create", "-f", "-", stdin=manifest)
    assert r.returncode == 0, r.stderr
    assert core.read_namespace(team).metadata.labels == {"kubernetes.io/metadata.name": team}
    r = kubectl(api, "create", "-f", "-", stdin=manifest)
    assert 'Error from server (AlreadyExists): error when creating "STDIN"' in r.stderr
    assert f'namespaces "{team}" already exists' in r.stderr


def test_kubectl_prints_webhook_warnings_and_denials(api: Api, hooks: WebhookServer) -> None:
    install(api, "validating", "w", hook(hooks, "/warn", "warn.test.io"))
    r = kubectl(api, "apply", "--dry-run=server", "-f", "-", stdin=POD)
    assert r.returncode == 0, r.stderr
    assert "Warning: careful now" in r.stderr
    install(api, "validating", "d", hook(hooks, "/deny", "deny.test.io"))
    r = kubectl(api, "apply", "-f", "-", stdin=POD)
    assert r.returncode != 0
    assert 'admission webhook "deny.test.io" denied the request: no pods today' in r.stderr
