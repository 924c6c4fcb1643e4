"""Which targets the e2e scenarios run on, and the failure report.

``--e2e-targets`` (or ``DRAXR_E2E_TARGETS``), a comma-separated list, selects them; the default is
``emulator,cluster``:

- ``emulator``: the API emulator sandbox (in ``make test``);
- ``cluster``: the cluster named by DRAXR_E2E_KUBECONFIG, with draxr installed (skipped without it);
- a row of the local control plane's matrix (``e2e/local.py``): ``1.35-gate-off``, ``1.35-gate-on``,
  ``1.36-default``, or ``controlplane`` for all three (``make e2e-local``). The scenarios of
  ``test_e2e.py`` run on the rows where the native path works; ``test_gate_off.py`` on the others.

Each selected target is set up once per session (pytest groups the tests by it); each test gets a
namespace of its own. A failing test's report carries the tail of every draxr process's log and of
the control plane's.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Generator, Iterator
from typing import Any

import pytest

from .local import ROWS, LocalCluster, LocalError, unavailable
from .target import Target, cluster_target, emulator_target

TARGETS_ENV = "DRAXR_E2E_TARGETS"
DEFAULT_TARGETS = ("emulator", "cluster")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--e2e-targets",
        default=None,
        help=f"comma-separated e2e targets: emulator, cluster, {', '.join(ROWS)} or controlplane "
        f"(all rows); default ${TARGETS_ENV} or {','.join(DEFAULT_TARGETS)}",
    )


def selected_targets(config: pytest.Config) -> list[str]:
    raw = config.getoption("--e2e-targets") or os.environ.get(TARGETS_ENV) or ",".join(DEFAULT_TARGETS)
    out: list[str] = []
    for name in (n.strip() for n in raw.split(",")):
        names = list(ROWS) if name == "controlplane" else [name]
        for n in names:
            if n not in (*DEFAULT_TARGETS, *ROWS):
                raise pytest.UsageError(
                    f"unknown e2e target {n!r} (known: {', '.join((*DEFAULT_TARGETS, *ROWS))})"
                )
            if n not in out:
                out.append(n)
    return out


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames:
        return
    selected = selected_targets(metafunc.config)
    if metafunc.definition.get_closest_marker("gate_off"):
        rows = [n for n in selected if n in ROWS and not ROWS[n].native]
        # Not selected: one parameter that skips, saying how to select it.
        params = rows or [n for n in ROWS if not ROWS[n].native][:1]
    else:
        params = [n for n in selected if n not in ROWS or ROWS[n].native]
    metafunc.parametrize("backend", params, indirect=True, scope="session")


def _unusable(reason: str) -> None:
    """Skip, or fail when CI=true: CI must not pass by running nothing."""
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str | LocalCluster]:
    """``emulator``/``cluster`` (a Target per test), or a running LocalCluster of a matrix row."""
    name: str = request.param
    if name not in ROWS:
        yield name
        return
    if name not in selected_targets(request.config):
        pytest.skip(
            f"row {name} is not selected: --e2e-targets={name} or {TARGETS_ENV}=controlplane (make e2e-local)"
        )
    row = ROWS[name]
    if (reason := unavailable(row)) is not None:
        _unusable(reason)
    cluster = LocalCluster(row, tmp_path_factory.mktemp(f"local-{name}"))
    try:
        cluster.start()
    except LocalError as e:
        cluster.stop()
        _unusable(str(e))
    except BaseException:
        cluster.stop()
        raise
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def target(backend: str | LocalCluster) -> Iterator[Target]:
    if backend == "emulator":
        t = emulator_target()
    elif isinstance(backend, LocalCluster):
        got = cluster_target(str(backend.kubeconfig), name=backend.row.name)
        if isinstance(got, str):
            pytest.fail(f"the local control plane is not usable: {got}")
        t = got
        t.processes = backend.processes
        t.local = True
    else:
        got = cluster_target()
        if isinstance(got, str):
            pytest.skip(got)
        t = got
    try:
        yield t
    finally:
        try:
            if t.sandbox is None and t.processes is not None:
                # Every replica runs again before the clean-up (special claims keep their finalizer
                # until a worker releases them) and for the next test.
                t.processes.restore()
            t.teardown()
        finally:
            if t.sandbox is not None:
                t.sandbox.stop()


@pytest.fixture
def kubectl() -> str:
    exe = shutil.which("kubectl")
    if exe is None:
        pytest.skip("no kubectl on PATH: `.ci/kubectl.sh` fetches Debian's kubectl 1.36 into .ci/bin")
    return exe


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        funcargs: dict[str, Any] = getattr(item, "funcargs", {})
        backend = funcargs.get("backend")
        t = funcargs.get("target")
        if isinstance(backend, LocalCluster):
            report.sections.append((f"draxr and control plane logs ({backend.workdir})", backend.logs()))
        elif isinstance(t, Target) and t.processes is not None:
            report.sections.append(("draxr logs", t.processes.logs()))
    return report
