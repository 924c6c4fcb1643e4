"""The chart row as installed: both Deployments ready, the pods' security settings, the KEP example's
workload seeing exactly its devices through containerd and CDI, ``kubectl draxr status`` (the row:
``conftest.py``)."""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest

from ..chart import DEPLOYMENTS, NAMESPACE, deployment_available, split_ref
from ..local import KEP_DEVICE_CLASS_NAME
from .row import ChartRow, run_kep_example

Obj = dict[str, Any]
NS = "kep-example"
DRA_NODE = "e2e-node-a"  # the DRA-only node: e2e-node-b also has the device plugin's example.com/gpu


def test_the_image_reference_splits_into_the_charts_repository_and_tag() -> None:
    """No binaries needed: what --set image.repository/tag get, a registry port kept in the repo."""
    assert split_ref("localhost/draxr:6fb6a9b4") == ("localhost/draxr", "6fb6a9b4")
    assert split_ref("registry.example:5000/draxr:0.1.0") == ("registry.example:5000/draxr", "0.1.0")
    with pytest.raises(ValueError, match="has no tag"):
        split_ref("registry.example:5000/draxr")


def test_a_deployment_is_available_only_with_every_replica_ready() -> None:
    """No binaries needed: Available with one of two replicas ready (the PDB's minAvailable) is not
    enough, nor a status of an older generation."""
    ready: Obj = {
        "metadata": {"generation": 2},
        "spec": {"replicas": 2},
        "status": {
            "observedGeneration": 2,
            "readyReplicas": 2,
            "updatedReplicas": 2,
            "conditions": [{"type": "Available", "status": "True"}],
        },
    }
    assert deployment_available(ready)
    assert not deployment_available({**ready, "status": {**ready["status"], "readyReplicas": 1}})
    assert not deployment_available({**ready, "metadata": {"generation": 3}})


def test_both_deployments_have_two_ready_replicas(row: ChartRow) -> None:
    chart = row.cluster.chart
    assert chart is not None
    for name in DEPLOYMENTS:
        d = row.get("-n", NAMESPACE, "deployment", name)
        assert d["spec"]["replicas"] == 2
        assert d["status"].get("readyReplicas") == 2, d["status"]
        assert d["status"].get("availableReplicas") == 2, d["status"]
        [container] = d["spec"]["template"]["spec"]["containers"]
        assert container["image"] == chart.image
    print(
        f"draxr image {chart.image}: {chart.draxr_image.unpacked_bytes / 1e6:.0f} MB unpacked, "  # type: ignore[union-attr]
        f"helm install to Available {chart.install_seconds:.1f}s, row start {row.started:.1f}s"
    )


def test_draxr_pods_run_as_65532_with_a_read_only_root(row: ChartRow) -> None:
    pods = row.get("-n", NAMESPACE, "pods")["items"]
    assert len(pods) == 4, [p["metadata"]["name"] for p in pods]
    for pod in pods:
        assert pod["status"]["phase"] == "Running", pod["status"]
        spec = pod["spec"]
        pod_ctx = spec.get("securityContext") or {}
        for c in spec["containers"]:
            ctx = {**pod_ctx, **(c.get("securityContext") or {})}
            assert ctx.get("runAsUser") == 65532, (pod["metadata"]["name"], ctx)
            assert ctx.get("runAsNonRoot") is True
            assert c["securityContext"].get("readOnlyRootFilesystem") is True
        assert all(s.get("ready") for s in pod["status"]["containerStatuses"])


def test_the_kep_example_sees_exactly_its_devices(row: ChartRow) -> None:
    """The native path (1.37): the special claim's devices, and no other, in the container."""
    claim, want, seen = run_kep_example(row)
    assert claim["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"] == "true"
    assert seen == want


def test_kubectl_draxr_status_against_the_deployed_draxr(row: ChartRow) -> None:
    assert shutil.which("kubectl-draxr", path=row.env["PATH"]), "kubectl-draxr is not on PATH"
    """The plugin reads the chart's install: both hooks, a worker pod holding the Lease, the KEP
    class backing example.com/gpu and no device in two claims."""
    report = json.loads(row.kubectl("draxr", "status", "--draxr-namespace", NAMESPACE, "-o", "json"))
    assert report["webhooks"] == {"mutating": True, "validating": True}, report
    workers = {
        p["metadata"]["name"]
        for p in row.get("-n", NAMESPACE, "pods", "-l", "app.kubernetes.io/component=worker")["items"]
    }
    assert report["leader"] in workers, (report["leader"], workers)
    assert report["nodes"] == 2
    [kep] = [c for c in report["classes"] if c["name"] == KEP_DEVICE_CLASS_NAME]
    assert "example.com/gpu" in kep["backs"], kep
    assert report["doubleAllocated"] == []
