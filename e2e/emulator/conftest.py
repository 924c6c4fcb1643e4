"""Fixtures for the emulator's own tests (what only it does: faults, dropped watches, compaction on
demand, the request log, its Python API): a running emulator, official-client APIs bound to it, and
the contract suite's TLS admission webhook. Its API behaviour is tested in e2e/contract, against a
real kube-apiserver too."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from ..contract import support
from . import Emulator

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


webhook_server = support.webhook_server
