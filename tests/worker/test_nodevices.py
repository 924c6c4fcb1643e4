"""The no-device report (issue 23 item 4) through the API emulator with the real client: a pod
bound by another scheduler to a DRA node without a mapping gets the gauge and a Warning Event; the
scan's memo of each pod's names."""

from __future__ import annotations

from tests.worker.harness import Cluster, device_class, gpu_slice, node
from webhook.core.api.objects import Obj
from webhook.core.paths.requested import requested_extended
from webhook.worker.nodevices import AskingPods


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


# -- AskingPods: the scan's pods that ask for a DRA-candidate name, each pod object parsed once -------


def _pod(pod_uid: str, names: dict[str, str]) -> Obj:
    return {
        "metadata": {"name": pod_uid, "namespace": "ns", "uid": pod_uid},
        "spec": {"nodeName": "n", "containers": [{"name": "c", "resources": {"requests": names}}]},
    }


def test_asking_pods_are_those_requested_extended_names_in_order() -> None:
    pods = {
        "a": _pod("a", {"cpu": "1", "example.com/gpu": "1"}),
        "b": _pod("b", {"cpu": "1"}),
        "c": _pod("c", {"example.com/gpu": "0"}),  # zero asks for nothing, as upstream skips it
        "d": _pod("d", {"deviceclass.resource.kubernetes.io/gpu": "2"}),
    }
    assert AskingPods()(pods) == [p for p in pods.values() if requested_extended(p)]
    assert [p["metadata"]["uid"] for p in AskingPods()(pods)] == ["a", "d"]


def test_a_pod_changed_under_its_uid_is_read_again() -> None:
    asking = AskingPods()
    assert asking({"a": _pod("a", {"cpu": "1"})}) == []
    # The cache replaces a changed pod's object: the new one is read, not the scan before's answer.
    changed = _pod("a", {"example.com/gpu": "1"})
    assert asking({"a": changed}) == [changed]
    assert asking({"a": _pod("a", {"cpu": "1"})}) == []


def test_the_same_pod_object_is_answered_from_the_scan_before() -> None:
    asking = AskingPods()
    pod = _pod("a", {"example.com/gpu": "1"})
    assert asking({"a": pod}) == [pod]
    # Changed in place, which the cache never does: the answer of the scan before stands, so
    # this shows the object was not parsed again.
    pod["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "1"}
    assert asking({"a": pod}) == [pod]
    assert asking({}) == []
    assert asking({"a": pod}) == []  # forgotten by the scan that did not see it, then read again
