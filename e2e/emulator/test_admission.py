"""Admission as only the emulator offers it: webhook Services mapped to loopback, admission for direct
store writes only when asked, the anonymous user. The webhook calls themselves are
e2e/contract/test_admission.py's."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ..contract.support import pod, status_of
from ..contract.test_admission import hook as _hook
from ..contract.webhook_server import WebhookServer
from . import Emulator


def _install(emulator: Emulator, kind: str, name: str, *hooks: dict[str, Any]) -> None:
    resource = "mutatingwebhookconfigurations" if kind == "mutating" else "validatingwebhookconfigurations"
    emulator.create(resource, {"metadata": {"name": name}, "webhooks": list(hooks)})


@pytest.fixture
def hooks(webhook_server: WebhookServer) -> WebhookServer:
    webhook_server.clear()
    return webhook_server


def test_service_client_config_resolves_to_loopback(
    core: Any, emulator: Emulator, hooks: WebhookServer
) -> None:
    hook = _hook(hooks, "/mutate-label", "svc.test.io")
    hook["clientConfig"] = {
        "service": {"namespace": "webhook-test", "name": "hooks", "path": "/mutate-label", "port": 443},
        "caBundle": hooks.tls.ca_bundle,
    }
    _install(emulator, "mutating", "m", hook | {"failurePolicy": "Fail"})
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("default", pod("unmapped"))
    assert "hooks.webhook-test.svc is not mapped" in status_of(err.value)["message"]
    emulator.set_service("webhook-test", "hooks", "127.0.0.1", hooks.port)
    assert core.create_namespaced_pod("default", pod("mapped")).metadata.labels == {"mutated-by": "hook"}


def test_direct_api_runs_admission_only_when_asked(emulator: Emulator, hooks: WebhookServer) -> None:
    _install(emulator, "mutating", "m", _hook(hooks, "/mutate-label", "label.test.io"))
    assert emulator.create("pods", pod("plain"))["metadata"].get("labels") is None
    assert emulator.create("pods", pod("admitted"), admission=True)["metadata"]["labels"] == {
        "mutated-by": "hook"
    }


def test_the_anonymous_identity_reaches_the_webhook(emulator: Emulator, hooks: WebhookServer) -> None:
    """The emulator authorizes nothing: an anonymous client can create a pod (a real apiserver's RBAC
    would refuse), and the webhook sees who it was."""
    _install(emulator, "validating", "v", _hook(hooks, "/echo", "echo.test.io"))
    anonymous: Any = client.CoreV1Api(emulator.api_client())
    anonymous.create_namespaced_pod("default", pod("by-nobody"))
    [review] = hooks.log("/echo")
    assert review["userInfo"] == {"username": "system:anonymous", "groups": ["system:unauthenticated"]}
    anonymous.api_client.close()
