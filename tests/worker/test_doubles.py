"""The double-allocation report (issue 20 item 2) through the API emulator with the real client: a
device two claims hold (kube-scheduler's claim and draxr's special claim, say) gets the gauge, an
Event on both claims and their pods, and a log line naming both; never counted once silently."""

from __future__ import annotations

import logging

import pytest

from tests.worker.harness import Cluster, device_class, gpu_slice, node, poll
from webhook.core.api.objects import Obj

DRIVER = "gpu.example.com"
SHARE = "11111111-1111-1111-1111-111111111111"


def allocated_claim(claim_name: str, pod_name: str, pod_uid: str, device: str, **extra: object) -> Obj:
    """A claim as another scheduler leaves it: allocated, reserved for its pod."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": claim_name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": DRIVER, "pool": "n-gpu", "device": device, **extra}
                    ]
                }
            },
            "reservedFor": [{"resource": "pods", "name": pod_name, "uid": pod_uid}],
        },
    }


def reasons(kube: Cluster) -> list[tuple[str, str]]:
    return sorted(
        (e["involvedObject"]["kind"], e["involvedObject"]["name"])
        for e in kube.em.list("events", "default")
        if e["reason"] == "DeviceAllocatedTwice"
    )


def test_a_device_in_two_claims_is_reported_on_both(kube: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    # Reproduces issue 20: 2 claims on e2e-node-a/gpu-2, no Event, no metric.
    kube.apply(node("n"), device_class(), gpu_slice("n", 2))
    kube.apply(allocated_claim("c2", "k2", "uid-k2", "gpu-1"))
    kube.apply(allocated_claim("x0-extended-resources-zxlw7", "x0", "uid-x0", "gpu-1"))
    kube.apply(allocated_claim("alone", "k3", "uid-k3", "gpu-0"))
    with caplog.at_level(logging.ERROR, logger="draxr.worker"):
        proc = kube.worker()
        kube.em.wait_for(lambda: len(reasons(kube)) == 4, 20, "four DeviceAllocatedTwice events")
    assert reasons(kube) == [
        ("Pod", "k2"),
        ("Pod", "x0"),
        ("ResourceClaim", "c2"),
        ("ResourceClaim", "x0-extended-resources-zxlw7"),
    ]
    event = next(e for e in kube.em.list("events", "default") if e["reason"] == "DeviceAllocatedTwice")
    assert event["type"] == "Warning"
    assert event["message"].startswith(
        "device gpu.example.com/n-gpu/gpu-1 is allocated to ResourceClaims default/c2 and "
        "default/x0-extended-resources-zxlw7 at once (pods: default/k2, default/x0)"
    )
    assert proc.registry.get_sample_value("draxr_double_allocated_devices") == 1
    lines = [r.getMessage() for r in caplog.records if "double allocation" in r.getMessage()]
    assert len(lines) == 1
    assert "default/c2 and default/x0-extended-resources-zxlw7" in lines[0]
    # One claim lets go: the gauge falls back. The gauge lives in the worker, not in the emulator's
    # store, so it is polled (a store wait would sleep its whole timeout after the deletion).
    kube.em.delete("resourceclaims", "c2", "default")
    poll(lambda: proc.registry.get_sample_value("draxr_double_allocated_devices") == 0, 20, "gauge back to 0")


def test_shares_of_one_device_are_not_reported(kube: Cluster) -> None:
    # The gauge starts at 0, so 0 alone would not show that a check ran: a true double beside the
    # shares makes the check visible (1, not 2 had the shares been counted).
    kube.apply(node("n"), device_class(), gpu_slice("n", 2))
    kube.apply(allocated_claim("a", "pa", "uid-a", "gpu-0", shareID=SHARE))
    kube.apply(allocated_claim("b", "pb", "uid-b", "gpu-0", shareID=SHARE.replace("1", "2")))
    kube.apply(allocated_claim("c", "pc", "uid-c", "gpu-1"))
    kube.apply(allocated_claim("d", "pd", "uid-d", "gpu-1"))
    proc = kube.worker()
    poll(lambda: proc.registry.get_sample_value("draxr_double_allocated_devices") == 1, 20, "one double")
    kube.em.wait_for(lambda: len(reasons(kube)) == 4, 20, "four DeviceAllocatedTwice events")
    assert reasons(kube) == [("Pod", "pc"), ("Pod", "pd"), ("ResourceClaim", "c"), ("ResourceClaim", "d")]
    assert proc.registry.get_sample_value("draxr_double_allocated_devices") == 1
