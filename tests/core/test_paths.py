"""Which path a pod asking for DRA-backed extended resources takes."""

from __future__ import annotations

from tests.core.harness import state_of
from tests.core.podfactory import device_class, gpus, node, resource_slice
from webhook.core.objects import Obj
from webhook.core.paths import decide_path, path_for

GPU = "example.com/gpu"
CLASSES = {GPU: "gpu.example.com"}


def test_paths() -> None:
    both_on = {"apiserver_gate": True, "kubelet_gate_on_dra_nodes": True, "device_plugin_nodes": False}
    assert decide_path("auto", **both_on).path == "native"
    assert decide_path("auto", **{**both_on, "apiserver_gate": False}).path == "rewrite"
    assert decide_path("auto", **{**both_on, "kubelet_gate_on_dra_nodes": False}).path == "rewrite"
    mixed = {**both_on, "apiserver_gate": False, "device_plugin_nodes": True}
    assert decide_path("auto", **mixed).path == "device-plugin"
    assert decide_path("auto", **mixed, force_rewrite=True).path == "rewrite"
    assert decide_path("native", **{**both_on, "apiserver_gate": False}).path == "native"
    assert decide_path("rewrite", **both_on).path == "rewrite"
    assert decide_path("off", **both_on).path == "none"
    for mode in ("auto", "native", "rewrite", "off"):
        for flags in (both_on, mixed):
            assert len(decide_path(mode, **flags).why) <= 80  # fits a 120-character warning


def kubelet(name: str, version: str, allocatable: dict[str, int] | None = None, ready: bool = True) -> Obj:
    n = node(name, allocatable)
    n["status"]["nodeInfo"] = {"kubeletVersion": version}
    n["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return n


def test_path_for_reads_the_cluster() -> None:
    cls = device_class("gpu.example.com", ext=GPU)
    old_dra = state_of(kubelet("dra", "v1.35.4"), cls, resource_slice("s", gpus(2), node_name="dra"))
    assert path_for(old_dra, CLASSES, "auto", apiserver_gate=True).path == "rewrite"
    assert "kubelet" in path_for(old_dra, CLASSES, "auto", apiserver_gate=True).why
    new_dra = state_of(kubelet("dra", "v1.36.1"), cls, resource_slice("s", gpus(2), node_name="dra"))
    assert path_for(new_dra, CLASSES, "auto", apiserver_gate=True).path == "native"
    assert path_for(new_dra, CLASSES, "auto", apiserver_gate=False).path == "rewrite"


def test_mixed_clusters_leave_pods_to_a_ready_device_plugin_unless_forced() -> None:
    cls = device_class("gpu.example.com", ext=GPU)
    slices = resource_slice("s", gpus(2), node_name="dra")
    mixed = state_of(kubelet("dp", "v1.35.4", {GPU: 2}), kubelet("dra", "v1.35.4"), cls, slices)
    assert path_for(mixed, CLASSES, "auto", apiserver_gate=False).path == "device-plugin"
    assert path_for(mixed, CLASSES, "auto", apiserver_gate=False, force_rewrite=True).path == "rewrite"
    not_ready = state_of(
        kubelet("dp", "v1.35.4", {GPU: 2}, ready=False), kubelet("dra", "v1.35.4"), cls, slices
    )
    assert path_for(not_ready, CLASSES, "auto", apiserver_gate=False).path == "rewrite"


def test_with_no_node_known_the_apiservers_gate_decides() -> None:
    empty = state_of(device_class("gpu.example.com", ext=GPU))
    assert path_for(empty, CLASSES, "auto", apiserver_gate=True).path == "native"
    assert path_for(empty, CLASSES, "auto", apiserver_gate=False).path == "rewrite"
