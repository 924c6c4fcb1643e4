"""A chart row for tests: the cluster (draxr installed by its chart on containerd), the host as it
was before (checked once the row stops), kubectl with draxr's plugin on PATH, and the KEP example's
workload run through it.

Skips with the reason without the runtime binaries, image tools or helm; fails instead under
CI=true."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..chart import find_helm
from ..conftest import selected_targets
from ..controlplane.host import HostState
from ..controlplane.realnode import HostNetState
from ..local import KEP_DEVICE_CLASS_NAME, ROWS, LocalCluster, LocalError, unavailable

Obj = dict[str, Any]
VENV_BIN = Path(sys.executable).parent
NS = "kep-example"
DRA_NODE = "e2e-node-a"  # the DRA-only node: e2e-node-b also has the device plugin's example.com/gpu


@dataclass
class ChartRow:
    cluster: LocalCluster
    host: HostState
    host_net: HostNetState
    started: float  # seconds from nothing to the JSON line's moment (draxr available, hooks called)
    env: dict[str, str]

    def kubectl(self, *args: str, stdin: str = "", check: bool = True, timeout: float = 60) -> str:
        done = subprocess.run(
            [self.cluster.kubectl, *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env,
            check=False,
            timeout=timeout,
        )
        if check:
            assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout

    def namespace(self, name: str) -> None:
        """The namespace (made unless it exists), once its default ServiceAccount exists: pods
        created before that are refused."""
        if self.kubectl("get", "namespace", name, check=False) == "":
            self.kubectl("create", "namespace", name)
        self.cluster.cp.wait_for(
            f"namespace {name} has no default ServiceAccount",
            lambda: (
                self.cluster.cp.client().get(f"/api/v1/namespaces/{name}/serviceaccounts/default")[0] == 200
            ),
            60,
        )

    def get(self, *args: str) -> Obj:
        out: Obj = json.loads(self.kubectl("get", *args, "-o", "json"))
        return out


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


@contextmanager
def started_row(name: str, workdir: Path) -> Iterator[ChartRow]:
    """The row ``name`` started in ``workdir`` with draxr installed by its chart (for tests through
    ``chart_row``, for ``bench/`` directly); stopped on leaving."""
    helm = find_helm()
    if helm is None:
        raise LocalError("no helm on PATH nor in .ci/bin")
    # kubectl finds its plugin kubectl-draxr on PATH (the venv's console script), helm its binary.
    path = os.pathsep.join([str(VENV_BIN), str(helm.parent), os.environ.get("PATH", "")])
    host, host_net = HostState.now(), HostNetState.now()
    t0 = time.monotonic()
    cluster = LocalCluster(ROWS[name], workdir, draxr="chart")
    with cluster:
        # KUBECONFIG, not --kubeconfig: kubectl refuses flags before a plugin's name.
        env = {**os.environ, "PATH": path, "KUBECONFIG": str(cluster.kubeconfig)}
        yield ChartRow(cluster, host, host_net, time.monotonic() - t0, env)


def chart_row(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, name: str
) -> Iterator[ChartRow]:
    """The row ``name`` with draxr installed by its chart, for a fixture to yield from; once the
    fixture's scope ends the row is stopped and the host checked."""
    if name not in selected_targets(request.config):
        pytest.skip(
            f"the chart row runs with the {name} row: DRAXR_E2E_TARGETS=controlplane (make e2e-local)"
        )
    if (reason := unavailable(ROWS[name], "chart")) is not None:
        _unusable(reason)
    with started_row(name, tmp_path_factory.mktemp(f"chart-{name}")) as row:
        yield row
        problems = _host_as_before(row)
    assert problems == [], problems


def kep_pod(image: str) -> Obj:
    """The KEP example's workload (examples/kep-5004/deployment.yaml's container) as one pod on the
    DRA node, printing its environment."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "demo", "namespace": NS},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": DRA_NODE},
            "containers": [
                {
                    "name": "app",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", "env; sleep 3600"],
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "64Mi", "example.com/gpu": "2"},
                        "limits": {"example.com/gpu": "2"},
                    },
                }
            ],
        },
    }


def run_kep_example(row: ChartRow) -> tuple[Obj, dict[str, str], dict[str, str]]:
    """Applies the KEP example's pod with kubectl, waits until it runs, and returns the claim that
    holds its devices (the special claim on the native path, the rewritten claim on a gate-off
    row), the ``DRA_DEVICE_`` variables its devices must give, and those its container printed."""
    chart = row.cluster.chart
    assert chart is not None
    row.namespace(NS)
    row.kubectl("apply", "-f", "-", stdin=json.dumps(kep_pod(chart.workload)))
    waited = row.kubectl(
        "-n",
        NS,
        "wait",
        "--for=jsonpath={.status.phase}=Running",
        "pod/demo",
        "--timeout=120s",
        timeout=130,
        check=False,
    )
    if "condition met" not in waited:
        pytest.fail(
            f"the KEP example's pod is not Running:\n{row.kubectl('-n', NS, 'describe', 'pod', 'demo')}"
        )
    pod = row.get("-n", NS, "pod", "demo")
    status = pod["status"]
    if "extendedResourceClaimStatus" in status:
        claim_name = status["extendedResourceClaimStatus"]["resourceClaimName"]
    else:
        [named] = status["resourceClaimStatuses"]
        claim_name = named["resourceClaimName"]
    claim = row.get("-n", NS, "resourceclaim", claim_name)
    results = claim["status"]["allocation"]["devices"]["results"]
    assert len(results) == 2, results
    want = {
        f"DRA_DEVICE_{r['device'].upper().replace('-', '_')}": f"{r['driver']}/{r['pool']}/{r['device']}"
        for r in results
    }
    assert all(v.startswith(f"{KEP_DEVICE_CLASS_NAME}/") for v in want.values())
    last = [""]

    def seen() -> dict[str, str]:
        last[0] = row.kubectl("-n", NS, "logs", "demo")
        return dict(line.split("=", 1) for line in last[0].splitlines() if line.startswith("DRA_DEVICE_"))

    # `env` prints PATH in every container: once it is there, the whole environment is.
    row.cluster.cp.wait_for(
        "the pod printed no environment", lambda: "PATH=" in row.kubectl("-n", NS, "logs", "demo"), 30
    )
    return claim, want, seen()
