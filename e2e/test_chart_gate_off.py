"""The chart row of a cluster with ``DRAExtendedResource`` off (Kubernetes 1.35, alpha and off by
default): draxr's image installed by its chart on containerd, the KEP example's pod rewritten at
admission into a DRA claim, and its container seeing exactly the claim's devices through the real
runtime and the driver's CDI spec. Its own cluster, started after the 1.37 chart row has stopped
(the ``e2e/chartrow`` package runs first); the host is checked when it stops."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from .chart import DEPLOYMENTS, NAMESPACE
from .chartrow.faults import FAULTS, nothing_wrong
from .chartrow.row import ChartRow, chart_row, run_kep_example
from .chartrow.stream import Stream

ROW = "1.35-gate-off"
#: The stream's namespace, deleted after each test (``chartrow.conftest.scratch`` does the same there).
NS = "rewritten"


@pytest.fixture(scope="module")
def row(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChartRow]:
    yield from chart_row(request, tmp_path_factory, ROW)


@pytest.fixture
def stream_namespace(row: ChartRow) -> Iterator[str]:
    row.namespace(NS)
    yield NS
    row.kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=true", timeout=300)


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


@pytest.mark.parametrize(
    "fault",
    [
        "kube-apiserver restarted twice",
        "etcd killed and started again",
        "the worker leader cut from the API server past its lease",
    ],
)
def test_a_rewritten_stream_through_the_fault_binds_every_pod_once(
    row: ChartRow, stream_namespace: str, fault: str
) -> None:
    """The rewrite path under faults of the real components: pods coming and going, rewritten at
    admission and placed by kube-scheduler; none refused, every one bound once, no device in two
    claims or leaked, no write by a fenced worker."""
    cp = row.cluster.cp
    stream = Stream(cp.client(), stream_namespace, f"rw-{uuid.uuid4().hex[:6]}", limit=1_000).start()
    try:
        cp.wait_for("no pod of the stream bound before the fault", lambda: len(stream.bound) >= 2, 120)
        findings = FAULTS[fault](row)
        bound_after_fault = len(stream.bound)
        cp.wait_for(
            "no pod of the stream bound after the fault",
            lambda: len(stream.bound) >= bound_after_fault + 2,
            180,
        )
    finally:
        stream.stop()
    cp.wait_for(
        "pods of the stream never bound",
        lambda: stream.unbound() == [],
        180,
        detail=lambda: str(stream.unbound()),
    )
    assert findings == []
    assert stream.failed == []
    nothing_wrong(row, [stream_namespace])
