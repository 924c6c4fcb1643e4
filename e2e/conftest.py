"""Which targets the e2e scenarios run on, and the failure report.

``--e2e-targets`` (or ``DRAXR_E2E_TARGETS``), a comma-separated list, selects them; the default is
``emulator,emulator-gate-off,cluster``:

- ``emulator``, ``emulator-gate-off``: the API emulator sandbox with ``DRAExtendedResource`` on or
  off (both in ``make test``; ``emulator`` for both);
- ``cluster``: the cluster named by DRAXR_E2E_KUBECONFIG, with draxr installed (skipped without it);
- a row of the local cluster matrix (``e2e/local.py``: real control plane, real kubelets):
  ``1.34-gate-off``, ``1.35-gate-off``, ``1.35-gate-on``, ``1.36-default``, ``1.37``, or
  ``controlplane`` for all five (``make e2e-local``).

Which scenarios run where: ``test_e2e.py`` (the native path) where the apiserver keeps the KEP-5004
fields; ``test_gate_off.py`` (marker ``gate_off``) where it drops them; ``test_rewrite.py`` (marker
``any_gate``) everywhere: draxr rewrites pods into DRA claims where the gate is off and takes the
native path where it is on, and the scenarios check the devices each container gets either way.

Each selected target is set up once per session (pytest groups the tests by it); each test gets a
namespace of its own. A failing test's report carries the tail of every draxr process's log and of
the control plane's.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Generator, Iterator
from typing import Any, NoReturn

import pytest
from xdist.scheduler import LoadScopeScheduling

from webhook.kube.client import KubeClient

from .local import ROWS, LocalCluster, LocalError, unavailable
from .target import EMULATORS, Target, cluster_target, emulator_target

TARGETS_ENV = "DRAXR_E2E_TARGETS"
DEFAULT_TARGETS = (*EMULATORS, "cluster")


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


def native(name: str) -> bool:
    """Whether the target's apiserver keeps the KEP-5004 fields (a ``cluster`` is assumed to)."""
    if name in ROWS:
        return ROWS[name].native
    if name in EMULATORS:
        return EMULATORS[name].gate
    return True


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames:
        return
    selected = selected_targets(metafunc.config)
    if metafunc.definition.get_closest_marker("any_gate"):
        params = selected
    elif metafunc.definition.get_closest_marker("gate_off"):
        # None selected: one parameter that skips, saying how to select it.
        params = [n for n in selected if not native(n)] or ["emulator-gate-off"]
    else:
        params = [n for n in selected if native(n)] or ["emulator"]
    metafunc.parametrize("backend", params, indirect=True, scope="session")


#: Modules that start a cluster on containerd: one at a time (the runtime's cgroups are the host's,
#: and each such row checks the host after it stops).
CONTAINERD = ("e2e/chartrow/", "e2e/test_chart_gate_off.py", "e2e/controlplane/test_realnode.py")


def cluster_group(nodeid: str) -> str:
    """Which cluster a test runs on, from its id: the containerd rows; its row (a parameter id naming
    one, ``backend`` or a module's own control plane of that release); the contract suite's real
    kube-apiserver; else its module (a module starts its own)."""
    path, _, rest = nodeid.partition("::")
    if path.startswith(CONTAINERD):
        return "containerd"
    params = rest[rest.index("[") + 1 : -1] if rest.endswith("]") and "[" in rest else ""
    for row in sorted(ROWS, key=len, reverse=True):
        if re.search(rf"(?:^|-){re.escape(row)}(?:-|$)", params):
            return f"row-{row}"
    if path.startswith("e2e/contract/") and re.search(r"(?:^|-)apiserver(?:-|$)", params):
        return "contract-apiserver"
    return path


class ClusterGroups(LoadScopeScheduling):  # type: ignore[misc]
    """pytest-xdist's scope scheduling with ``cluster_group`` as the scope: one worker runs a whole
    group, so each cluster starts once (make e2e-local runs two workers)."""

    def _split_scope(self, nodeid: str) -> str:
        return cluster_group(nodeid)


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> ClusterGroups | None:
    """``--dist loadgroup`` groups by cluster (``cluster_group``) rather than by markers."""
    if config.getvalue("dist") != "loadgroup":
        return None
    return ClusterGroups(config, log)


def _unusable(reason: str) -> NoReturn:
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
    if name not in selected_targets(request.config):
        how = f"{TARGETS_ENV}=controlplane (make e2e-local)" if name in ROWS else "make test"
        pytest.skip(f"target {name} is not selected: --e2e-targets={name} or {how}")
    if name not in ROWS:
        yield name
        return
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
    if cluster.host_repairs:
        pytest.fail(
            f"row {name}: the kubelets changed the host, the safety net put back: "
            + "; ".join(cluster.host_repairs)
        )


@pytest.fixture
def target(backend: str | LocalCluster) -> Iterator[Target]:
    if isinstance(backend, str) and backend in EMULATORS:
        t = emulator_target(backend)
    elif isinstance(backend, LocalCluster):
        got = cluster_target(str(backend.kubeconfig), name=backend.row.name)
        if isinstance(got, str):
            pytest.fail(f"the local control plane is not usable: {got}")
        t = got
        t.processes = backend.processes
        t.writer = KubeClient.from_config(str(backend.cp.kubeconfig_path("worker")))
        t.local = True
        t.native = backend.row.native
        if backend.nodes is not None:
            t.cdi_log = backend.nodes.cdi_log
            t.prepare_log = backend.nodes.prepare_log
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
        _unusable("no kubectl on PATH: `.ci/kubectl.sh` fetches Debian's kubectl 1.36 into .ci/bin")
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
