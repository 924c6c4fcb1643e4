"""On the local rows, where real kubelets run the pods (e2e/local.py): KEP-5004's example runs, and
each container is handed exactly the devices of its allocation.

The row has the KEP example's DeviceClass (``gpu.example.com`` maps ``example.com/gpu``), eight GPUs
of the DRA driver ``gpu.example.com`` on each node, and on ``e2e-node-b`` a device plugin with two
``example.com/gpu``: there the name is the device plugin's (KEP-5004's mixed cluster), so a pod placed
there gets a device-plugin GPU and no special claim. The fake runtimes record the CDI devices each
container was created with (``Target.cdi_log``); the DRA driver names a device in its CDI ID
(``draxr.e2e/gpu=<pool>-<device>``), the device plugin uses its own class (``draxr.e2e/dp-gpu``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from webhook.core.api.objects import Obj

from .controlplane.nodes import CDI_KIND, DEVICE_PLUGIN_CDI_KIND, DRIVER, EXTENDED_RESOURCE
from .kubelet_logs import cdi_records, prepared_twice
from .target import RESOURCES, Target

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "kep-5004" / "deployment.yaml"


def _running(n: int) -> Callable[[list[Obj]], list[Obj] | None]:
    def check(pods: list[Obj]) -> list[Obj] | None:
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        running = [p for p in live if (p.get("status") or {}).get("phase") == "Running"]
        return running if len(live) == n and len(running) == n else None

    return check


def test_the_kep_example_runs_with_the_devices_of_its_allocation(target: Target, kubectl: str) -> None:
    """examples/kep-5004/deployment.yaml as it is (four replicas asking ``example.com/gpu: 1``),
    applied with kubectl: every pod reaches Running; a pod with a special claim was created with the
    CDI IDs of exactly the devices allocated for its container's request, on the claim's node; a pod
    without one runs on the device plugin's node with one device-plugin GPU. No claim is prepared
    twice."""
    if target.cdi_log is None or target.prepare_log is None:
        pytest.skip("needs the local rows' kubelets (make e2e-local)")
    deployment = yaml.safe_load(EXAMPLE.read_text())
    deployment["metadata"]["namespace"] = target.namespace
    deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 0
    done = target.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(deployment))
    assert done.returncode == 0, done.stderr
    pods = target.wait("pods", _running(4), timeout=120)
    nodes = {n["metadata"]["name"]: n for n in target.admin.list(RESOURCES["nodes"]).get("items") or []}
    on_dra = 0
    for pod in pods:
        name, node = pod["metadata"]["name"], pod["spec"]["nodeName"]
        [record] = cdi_records(target.cdi_log, target.namespace, name)  # one container, created once
        assert record["container"] == "app"
        mapping = pod["status"].get("extendedResourceClaimStatus")
        if mapping is None:
            assert EXTENDED_RESOURCE in nodes[node]["status"]["allocatable"], f"{name} on {node}"
            [device] = record["cdi_devices"]
            assert device.startswith(f"{DEVICE_PLUGIN_CDI_KIND}={node}-dp-gpu-"), record
            continue
        on_dra += 1
        claim = target.admin.get(RESOURCES["resourceclaims"], mapping["resourceClaimName"], target.namespace)
        requests = {
            m["requestName"]
            for m in mapping["requestMappings"]
            if (m["containerName"], m["resourceName"]) == ("app", EXTENDED_RESOURCE)
        }
        results = [
            r
            for r in claim["status"]["allocation"]["devices"]["results"]
            if r["request"] in requests and r["driver"] == DRIVER
        ]
        assert len(results) == 1, claim["status"]
        assert record["cdi_devices"] == [f"{CDI_KIND}={r['pool']}-{r['device']}" for r in results]
        assert {r["pool"] for r in results} == {node}  # the driver's pool is its node
    assert on_dra >= 2  # the device plugin has two GPUs: at least two pods took the DRA path
    assert prepared_twice(target.prepare_log) == []
