"""The warnings a pod's author gets: short, and saying what happened and why."""

from __future__ import annotations

from tests.core.podfactory import device_class
from webhook.core.api.messages import MAX_WARNING_LENGTH
from webhook.core.paths.choice import PathChoice
from webhook.core.paths.explain import contention_warning, path_warning, quota_warning, unserved_warning

GPU = "example.com/gpu"


def test_each_path_is_told_in_words() -> None:
    said = {
        kind: path_warning([GPU, "example.com/nic"], PathChoice(kind, "because"))
        for kind in ("native", "rewrite", "device-plugin", "none")
    }
    assert said == {
        "native": f"{GPU}, example.com/nic: extended resources from DRA devices (because)",
        "rewrite": f"{GPU}, example.com/nic: rewritten into DRA claims (because)",
        "device-plugin": f"{GPU}, example.com/nic: left to the device plugin (because)",
        "none": f"{GPU}, example.com/nic: left alone (because)",
    }
    assert len(path_warning([f"example.com/{i:03d}" for i in range(50)], PathChoice("none", "x"))) == (
        MAX_WARNING_LENGTH
    )


def test_contention_names_the_winner_and_why() -> None:
    a = device_class("a.example.com", ext=GPU)
    b = device_class("b.example.com", ext=GPU)
    newer = device_class("c.example.com", ext=GPU, created="2025-06-01T00:00:00Z")
    assert contention_warning(GPU, [a]) is None
    assert contention_warning(GPU, [a, b]) == (
        f'{GPU} is declared by 2 DeviceClasses; "a.example.com" wins (same creationTimestamp, smallest name)'
    )
    assert contention_warning(GPU, [newer, a, b]) == (
        f'{GPU} is declared by 3 DeviceClasses; "c.example.com" wins (newest creationTimestamp)'
    )


def test_unserved_and_quota() -> None:
    assert unserved_warning(GPU) == f"{GPU}: no DeviceClass maps this name and no node advertises it"
    assert quota_warning(GPU, "gpu.example.com") == (
        f"quota on {GPU} does not limit rewritten pods; "
        "add gpu.example.com.deviceclass.resource.k8s.io/devices"
    )
