"""The chart row (``LocalCluster(ROWS["1.37"], draxr="chart")``): draxr's image installed with its
Helm chart on kubelets running containerd. One cluster for the whole package: the fixture starts it
on the first test that asks, the package's modules run in file order (the install's checks first,
then the operators' scenarios), and its teardown stops the row and fails if the host is not as
before (links, routes, mounts, rules, cgroups, sysctls).

Skips with the reason without the runtime binaries, image tools or helm; fails instead under
CI=true. Runs only with the 1.37 row selected (``make e2e-local``), never under ``make test``.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..chart import find_helm
from ..conftest import selected_targets
from ..controlplane.host import HostState
from ..controlplane.realnode import HostNetState
from ..local import ROWS, LocalCluster, unavailable
from .row import ChartRow

Obj = dict[str, Any]
VENV_BIN = Path(sys.executable).parent


def _unusable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def _host_as_before(row: ChartRow) -> list[str]:
    """What the stopped row left on the host: links, routes, mounts, rules, cgroups, sysctls."""
    nodes, chart = row.cluster.nodes, row.cluster.chart
    assert nodes is not None
    assert chart is not None
    run_dir = str(nodes._run)
    row.cluster.stop()
    markers = [chart.net.prefix, run_dir, f".{chart.net.base}.", "draxr-e2e-run", "cgroup "]
    problems = [f"left on the host: {x}" for x in row.host_net.leftovers(markers)]
    problems += [f"repaired on teardown: {x}" for x in row.cluster.host_repairs]
    problems += [f"host state changed: {x}" for x in row.host.differences(HostState.now())]
    if not re.fullmatch(r"dx[0-9a-f]{6}", chart.net.prefix):
        problems.append(f"row prefix {chart.net.prefix!r} is not dx + 6 hex digits")
    return problems


@pytest.fixture(scope="package")
def row(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChartRow]:
    if "1.37" not in selected_targets(request.config):
        pytest.skip("the chart row runs with the 1.37 row: DRAXR_E2E_TARGETS=controlplane (make e2e-local)")
    if (reason := unavailable(ROWS["1.37"], "chart")) is not None:
        _unusable(reason)
    helm = find_helm()
    assert helm is not None
    # kubectl finds its plugin kubectl-draxr on PATH (the venv's console script), helm its binary.
    path = os.pathsep.join([str(VENV_BIN), str(helm.parent), os.environ.get("PATH", "")])
    host, host_net = HostState.now(), HostNetState.now()
    t0 = time.monotonic()
    cluster = LocalCluster(ROWS["1.37"], tmp_path_factory.mktemp("chart"), draxr="chart")
    with cluster:
        # KUBECONFIG, not --kubeconfig: kubectl refuses flags before a plugin's name.
        env = {**os.environ, "PATH": path, "KUBECONFIG": str(cluster.kubeconfig)}
        chart_row = ChartRow(cluster, host, host_net, time.monotonic() - t0, env)
        yield chart_row
        problems = _host_as_before(chart_row)
    assert problems == [], problems
