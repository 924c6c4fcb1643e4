"""Fixtures: a running emulator, official-client APIs bound to it, and a TLS admission webhook."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from e2e.emulator import Emulator

from .webhook_server import WebhookServer, start_webhook_server

TOKENS = {
    "worker-token": ("system:serviceaccount:draxr-system:draxr-worker", ["system:serviceaccounts"]),
    "alice-token": ("alice", ["devs"]),
}


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator(tokens=TOKENS, bookmark_interval=0.2) as em:
        yield em


@pytest.fixture
def api_client(emulator: Emulator) -> Iterator[Any]:
    api = emulator.api_client("alice-token")
    yield api
    api.close()


@pytest.fixture
def core(api_client: Any) -> Any:
    return client.CoreV1Api(api_client)


@pytest.fixture
def resource_api(api_client: Any) -> Any:
    return client.ResourceV1Api(api_client)


@pytest.fixture
def coordination(api_client: Any) -> Any:
    return client.CoordinationV1Api(api_client)


@pytest.fixture(scope="session")
def webhook_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookServer]:
    server = start_webhook_server(tmp_path_factory.mktemp("webhook-tls"))
    yield server
    server.stop()


def new_watch() -> Any:
    """``kubernetes.watch.Watch`` (untyped upstream)."""
    return watch.Watch()  # type: ignore[no-untyped-call]


def status_of(exc: ApiException) -> dict[str, Any]:
    """The ``Status`` body of a failed call, checked for the fields every error carries."""
    body: dict[str, Any] = json.loads(exc.body or "{}")
    assert body["kind"] == "Status"
    assert body["apiVersion"] == "v1"
    assert body["status"] == "Failure"
    assert body["code"] == exc.status
    return body


def pod(
    name: str = "", generate_name: str = "", labels: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    """A minimal pod manifest as a plain dict."""
    meta: dict[str, Any] = {"name": name} if name else {"generateName": generate_name}
    if labels:
        meta["labels"] = labels
    body_spec: dict[str, Any] = {"containers": [{"name": "main", "image": "registry.example/app:1"}]}
    body_spec.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body_spec}
