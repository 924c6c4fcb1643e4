"""The DRA-candidate names a pod asks for, the classes backing them, and their quantities."""

from __future__ import annotations

from tests.core.podfactory import container, device_class, pod
from webhook.core.cluster.deviceclasses import ClassResolver
from webhook.core.paths.requested import backing_classes, quantity_errors, requested_extended

GPU = "example.com/gpu"
IMPLICIT = "deviceclass.resource.kubernetes.io/fpga.example.com"


def test_requested_names_are_sorted_non_zero_and_dra_candidates_only() -> None:
    limits = container("l")
    limits["resources"] = {"limits": {"example.com/nic": "2"}}
    p = pod(
        containers=[container("a", {GPU: 1, "cpu": "1", "example.com/zero": 0}), limits],
        init=[container("i", {IMPLICIT: "1", "example.com/odd": "not-a-quantity"})],
    )
    assert requested_extended(p) == [IMPLICIT, GPU, "example.com/nic"]
    assert requested_extended(pod()) == []


def test_backing_classes_names_only_the_names_a_class_backs() -> None:
    classes = ClassResolver([device_class("gpu.example.com", ext=GPU), device_class("fpga.example.com")])
    assert backing_classes([IMPLICIT, "example.com/nic", GPU], classes) == {
        IMPLICIT: "fpga.example.com",
        GPU: "gpu.example.com",
    }


def test_quantities_of_dra_backed_names_must_be_whole() -> None:
    classes = ClassResolver([device_class("gpu.example.com", ext=GPU)])
    errors = quantity_errors(pod(containers=[container("a", {GPU: "500m"})]), classes)
    assert [e.field for e in errors] == ["spec.containers[0].resources.requests[example.com/gpu]"]
    # A name no class backs is the device plugin's (or nobody's): not draxr's to check.
    assert quantity_errors(pod(containers=[container("a", {"example.com/nic": "500m"})]), classes) == []
