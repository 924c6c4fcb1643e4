"""The API contract suite: the same tests against the API emulator and a real kube-apiserver.

Every test takes ``api`` (``backend.Api``) and runs once per backend: ``emulator`` always (``make
test``), and ``apiserver`` (``e2e/controlplane``: etcd and kube-apiserver of the newest Kubernetes
built, no kube-controller-manager) when the e2e targets name the real control plane
(``DRAXR_E2E_TARGETS=controlplane``, ``make e2e-local``). Without its binaries (``make
controlplane``) that side skips with the reason, or fails under ``CI=true``.

What the suite asserts is kube-apiserver's behaviour as clients see it (CRUD, resourceVersions and
watches, patch kinds, status subresources, admission webhooks, dry runs, errors as Status objects,
selectors, discovery). Where the two differ the real one is right: the emulator is fixed, or the
feature dropped. What only the emulator can do (faults, dropped watches, compaction on demand, the
request log, its Python API) is tested beside it, in ``e2e/emulator``.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from ..conftest import selected_targets
from ..controlplane.launcher import ControlPlane, find_binaries, read_versions
from ..local import ROWS
from . import support
from .backend import Api, ApiserverApi, EmulatorApi
from .webhook_server import WebhookServer


def newest_built() -> str:
    """The newest Kubernetes minor whose control plane is built, or raise ``LookupError`` with why
    none is."""
    minors = sorted(
        (key.removeprefix("KUBE_").replace("_", ".") for key in read_versions() if key.startswith("KUBE_")),
        key=lambda v: tuple(int(p) for p in v.split(".")),
        reverse=True,
    )
    reasons = []
    for minor in minors:
        found = find_binaries(minor)
        if not isinstance(found, str):
            return minor
        reasons.append(found)
    raise LookupError(reasons[0] if reasons else "versions.env pins no Kubernetes release")


def backends(config: pytest.Config) -> list[str]:
    """``emulator``, and ``apiserver`` when a row of the real control plane is selected."""
    real = any(name in ROWS for name in selected_targets(config))
    return ["emulator", "apiserver"] if real else ["emulator"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "api" in metafunc.fixturenames:
        metafunc.parametrize("server", backends(metafunc.config), indirect=True, scope="session")


@pytest.fixture(scope="session")
def server(request: pytest.FixtureRequest) -> Iterator[ControlPlane | None]:
    """None for the emulator (a fresh one per test); the session's control plane for the apiserver."""
    if request.param == "emulator":
        yield None
        return
    try:
        version = newest_built()
    except LookupError as e:
        if os.environ.get("CI") == "true":
            pytest.fail(str(e))
        pytest.skip(str(e))
    with ControlPlane(version) as cp:
        yield cp


webhook_server = support.webhook_server


@pytest.fixture
def api(server: ControlPlane | None, webhook_server: WebhookServer, tmp_path: Path) -> Iterator[Api]:
    backend: Api = (
        EmulatorApi(webhook_server, tmp_path)
        if server is None
        else ApiserverApi(server, webhook_server, tmp_path)
    )
    backend.start()
    try:
        yield backend
    finally:
        backend.stop()


@pytest.fixture
def hooks(webhook_server: WebhookServer) -> WebhookServer:
    """The test webhook server, its log cleared."""
    webhook_server.clear()
    return webhook_server


@pytest.fixture
def core(api: Api) -> Any:
    return client.CoreV1Api(api.client())


@pytest.fixture
def resource_api(api: Api) -> Any:
    return client.ResourceV1Api(api.client())


@pytest.fixture
def coordination(api: Api) -> Any:
    return client.CoordinationV1Api(api.client())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    cp = getattr(item, "funcargs", {}).get("server")
    if report.failed and isinstance(cp, ControlPlane):
        report.sections.append((f"control plane v{cp.version} logs ({cp.workdir})", cp.logs()))
    return report
