"""The chart row of a cluster with ``DRAExtendedResource`` off (Kubernetes 1.35, alpha and off by
default): draxr's image installed by its chart on containerd, the KEP example's pod rewritten at
admission into a DRA claim, and its container seeing exactly the claim's devices through the real
runtime and the driver's CDI spec. Its own cluster, started after the 1.37 chart row has stopped
(the ``e2e/chartrow`` package runs first); the host is checked when it stops."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from .chart import DEPLOYMENTS, NAMESPACE
from .chartrow.row import ChartRow, chart_row, run_kep_example

ROW = "1.35-gate-off"


@pytest.fixture(scope="module")
def row(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChartRow]:
    yield from chart_row(request, tmp_path_factory, ROW)


def test_both_deployments_have_two_ready_replicas_in_rewrite_mode(row: ChartRow) -> None:
    for name in DEPLOYMENTS:
        status = row.get("-n", NAMESPACE, "deployment", name)["status"]
        assert status.get("readyReplicas") == 2, status
    report = json.loads(row.kubectl("draxr", "status", "--draxr-namespace", NAMESPACE, "-o", "json"))
    assert report["webhooks"] == {"mutating": True, "validating": True}, report
    assert report["doubleAllocated"] == []


def test_the_kep_example_is_rewritten_and_sees_exactly_its_devices(row: ChartRow) -> None:
    claim, want, seen = run_kep_example(row)
    # Rewritten at admission: an ordinary claim from draxr's template, not a special claim.
    annotations = claim["metadata"].get("annotations") or {}
    assert "resource.kubernetes.io/extended-resource-claim" not in annotations
    pod = row.get("-n", "kep-example", "pod", "demo")
    assert "example.com/gpu" not in pod["spec"]["containers"][0]["resources"].get("requests", {})
    assert "extendedResourceClaimStatus" not in pod["status"]
    assert seen == want
