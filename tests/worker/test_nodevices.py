"""The no-device report (issue 23 item 4) through the API emulator with the real client: a pod
bound by another scheduler to a DRA node without a mapping gets the gauge and a Warning Event."""

from __future__ import annotations

from tests.worker.harness import Cluster, device_class, gpu_slice, node


def test_a_pod_bound_by_a_scheduler_without_the_gate_is_reported(kube: Cluster) -> None:
    # Reproduces issue 23: bound to a DRA node without a mapping, it runs without its GPU, silently.
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    pod = kube.pod("silent", schedulerName="default-scheduler", nodeName="n")
    kube.em.update_status("pods", {**pod, "status": {"phase": "Running"}})
    proc = kube.worker()
    kube.em.wait_for(
        lambda: [e for e in kube.em.list("events", "default") if e["reason"] == "NoDevicesAllocated"],
        30,
        "a NoDevicesAllocated event",
    )
    [event] = [e for e in kube.em.list("events", "default") if e["reason"] == "NoDevicesAllocated"]
    assert event["involvedObject"]["name"] == "silent"
    assert event["message"].startswith(
        "pod default/silent runs on n without the devices it asked for (c: example.com/gpu)"
    )
    assert proc.registry.get_sample_value("draxr_pods_without_devices") == 1
