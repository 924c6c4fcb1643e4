"""Which path a pod asking for DRA-backed extended resources takes."""

from __future__ import annotations

import itertools
from typing import Any

from tests.core.harness import state_of
from tests.core.podfactory import container, device_class, gpus, node, pod, resource_slice
from webhook.core.api.objects import Obj
from webhook.core.paths.choice import BOUND_AT_CREATION, decide_path, path_for

GPU = "example.com/gpu"
CLASSES = {GPU: "gpu.example.com"}


def test_paths() -> None:
    both_on = {"apiserver_gate": True, "kubelet_gate_on_dra_nodes": True, "device_plugin_nodes": False}
    assert decide_path("auto", **both_on).kind == "native"
    assert decide_path("auto", **{**both_on, "apiserver_gate": False}).kind == "rewrite"
    assert decide_path("auto", **{**both_on, "kubelet_gate_on_dra_nodes": False}).kind == "rewrite"
    mixed = {**both_on, "apiserver_gate": False, "device_plugin_nodes": True, "dra_room": False}
    assert decide_path("auto", **mixed).kind == "device-plugin"
    assert decide_path("auto", **mixed, force_rewrite=True).kind == "rewrite"
    assert decide_path("auto", **{**mixed, "dra_room": True}).kind == "rewrite"
    assert decide_path("native", **{**both_on, "apiserver_gate": False}).kind == "native"
    assert decide_path("rewrite", **both_on).kind == "rewrite"
    assert decide_path("off", **both_on).kind == "none"
    for mode in ("auto", "native", "rewrite", "off"):
        for flags in (both_on, mixed):
            for rooms in itertools.product((False, True), repeat=3):
                room = dict(zip(("dra_room", "plugin_room", "dra_devices"), rooms, strict=True))
                assert len(decide_path(mode, **{**flags, **room}).why) <= 80  # fits a 120-character warning


def test_mixed_clusters_go_where_the_pod_fits_now_dra_first() -> None:
    mixed = {"apiserver_gate": False, "kubelet_gate_on_dra_nodes": False, "device_plugin_nodes": True}
    cases = {  # (dra_room, plugin_room, dra_devices) -> path
        (True, True, True): "rewrite",
        (True, False, True): "rewrite",
        (False, True, True): "device-plugin",
        (False, True, False): "device-plugin",
        (False, False, True): "rewrite",  # waits for DRA devices, which can hold it
        (False, False, False): "device-plugin",  # no node ever has enough DRA devices
    }
    for (dra_room, plugin_room, dra_devices), path in cases.items():
        choice = decide_path(
            "auto", **mixed, dra_room=dra_room, plugin_room=plugin_room, dra_devices=dra_devices
        )
        assert choice.kind == path, (dra_room, plugin_room, dra_devices)
        assert (
            decide_path(
                "auto",
                **mixed,
                dra_room=dra_room,
                plugin_room=plugin_room,
                dra_devices=dra_devices,
                force_rewrite=True,
            ).kind
            == "rewrite"
        )


def kubelet(name: str, version: str, allocatable: dict[str, int] | None = None, ready: bool = True) -> Obj:
    n = node(name, allocatable)
    n["status"]["nodeInfo"] = {"kubeletVersion": version}
    n["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return n


def test_path_for_reads_the_cluster() -> None:
    cls = device_class("gpu.example.com", ext=GPU)
    old_dra = state_of(kubelet("dra", "v1.35.4"), cls, resource_slice("s", gpus(2), node_name="dra"))
    assert path_for(old_dra, CLASSES, "auto", apiserver_gate=True).kind == "rewrite"
    assert "kubelet" in path_for(old_dra, CLASSES, "auto", apiserver_gate=True).why
    new_dra = state_of(kubelet("dra", "v1.36.1"), cls, resource_slice("s", gpus(2), node_name="dra"))
    assert path_for(new_dra, CLASSES, "auto", apiserver_gate=True).kind == "native"
    assert path_for(new_dra, CLASSES, "auto", apiserver_gate=False).kind == "rewrite"


def gpu_pod(count: int) -> Obj:
    return pod("p", [container("c", {GPU: str(count)})])


def test_the_kep_example_with_the_gate_off_uses_dra_while_it_has_room() -> None:
    """The KEP example: a DRA node and a device-plugin node for the same name. Pods go to the DRA
    devices while some node has enough free, then to the device plugin while it has room."""
    cls = device_class("gpu.example.com", ext=GPU)
    slices = resource_slice("s", gpus(2), node_name="dra")
    mixed = state_of(kubelet("dp", "v1.35.4", {GPU: 2}), kubelet("dra", "v1.35.4"), cls, slices)

    def path(p: Obj, **kw: bool) -> str:
        return path_for(mixed, CLASSES, "auto", apiserver_gate=False, pod=p, **kw).kind

    assert path(gpu_pod(2)) == "rewrite"
    assert path(gpu_pod(3)) == "device-plugin"  # neither fits; no DRA node ever can
    assert path(gpu_pod(3), force_rewrite=True) == "rewrite"
    for device in ("gpu-0", "gpu-1"):  # the DRA devices are taken
        mixed.reserve(f"t-{device}", [("gpu.example.com", "dra", device)], gpu_pod(1), "dra")
    assert path(gpu_pod(1)) == "device-plugin"  # the device plugin has room
    assert path(gpu_pod(2)) == "device-plugin"
    busy = pod("busy", [container("c", {GPU: "2"})], uid="busy", nodeName="dp")
    mixed.apply("Pod", busy)  # the device plugin's GPUs are taken too
    assert path(gpu_pod(1)) == "rewrite"  # waits for DRA devices
    not_ready = state_of(
        kubelet("dp", "v1.35.4", {GPU: 2}, ready=False), kubelet("dra", "v1.35.4"), cls, slices
    )
    assert path_for(not_ready, CLASSES, "auto", apiserver_gate=False, pod=gpu_pod(3)).kind == "rewrite"


def test_in_a_mixed_cluster_the_gates_and_the_mode_decide_before_the_device_plugin_nodes() -> None:
    cls = device_class("gpu.example.com", ext=GPU)
    slices = resource_slice("s", gpus(2), node_name="dra")
    mixed = state_of(kubelet("dp", "v1.36.1", {GPU: 2}), kubelet("dra", "v1.36.1"), cls, slices)
    big = gpu_pod(3)  # fits nowhere: a node-reading answer would leave it to the device plugin
    assert path_for(mixed, CLASSES, "auto", apiserver_gate=True, pod=big).kind == "native"
    assert path_for(mixed, CLASSES, "native", apiserver_gate=False, pod=big).kind == "native"
    assert path_for(mixed, CLASSES, "off", apiserver_gate=True, pod=big).kind == "none"
    assert path_for(mixed, CLASSES, "auto", apiserver_gate=False, pod=big).kind == "device-plugin"
    rewrite = path_for(mixed, CLASSES, "rewrite", apiserver_gate=True, pod=big)
    assert (rewrite.kind, rewrite.why) == (
        "device-plugin",
        "no node has enough DRA devices; a device plugin serves it",
    )


def test_with_no_node_known_the_apiservers_gate_decides() -> None:
    empty = state_of(device_class("gpu.example.com", ext=GPU))
    assert path_for(empty, CLASSES, "auto", apiserver_gate=True).kind == "native"
    assert path_for(empty, CLASSES, "auto", apiserver_gate=False).kind == "rewrite"


def test_a_pod_created_with_a_node_name_is_left_alone_in_every_mode_but_off() -> None:
    """No scheduler sees it: neither path's claims would be allocated (issue 23)."""
    cls = device_class("gpu.example.com", ext=GPU)
    state = state_of(kubelet("dra", "v1.36.1"), cls, resource_slice("s", gpus(2), node_name="dra"))
    bound = pod("bound", [container("c", {GPU: "1"})], nodeName="dra")
    for mode in ("auto", "native", "rewrite"):
        choice = path_for(state, CLASSES, mode, apiserver_gate=True, pod=bound)
        assert (choice.kind, choice.why) == ("none", BOUND_AT_CREATION)
    assert path_for(state, CLASSES, "off", apiserver_gate=True, pod=bound).why == "draxr --mode=off"


def upgrading(upgraded: int, old: int) -> Any:
    """A node-by-node 1.35 -> 1.36 upgrade: ``upgraded`` kubelets with the gate, ``old`` without,
    8 GPUs each, the apiserver already on 1.36."""
    objects: list[Obj] = [device_class("gpu.example.com", ext=GPU)]
    for i in range(upgraded + old):
        n = f"n{i}"
        objects.append(kubelet(n, "v1.36.3" if i < upgraded else "v1.35.4"))
        objects.append(resource_slice(f"s{i}", gpus(8), node_name=n))
    return state_of(*objects)


def test_during_an_upgrade_native_only_where_an_upgraded_node_can_hold_the_pod_now() -> None:
    """Reproduced (issue 23): with 1 upgraded and 9 old nodes the pod took the native path as soon as
    one DRA node had the gate, and the worker then refused every old node: once the upgraded node was
    full, new pods went Unschedulable with 72 GPUs free. Now native only where a gated node has room
    for the pod now, otherwise rewrite (which any node can serve), as the mixed-cluster rule decides
    by room."""
    state = upgrading(1, 9)
    assert path_for(state, CLASSES, "auto", apiserver_gate=True, pod=gpu_pod(8)).kind == "native"
    state.reserve("t", [("gpu.example.com", "n0", f"gpu-{i}") for i in range(7)], gpu_pod(7), "n0")
    assert path_for(state, CLASSES, "auto", apiserver_gate=True, pod=gpu_pod(1)).kind == "native"
    two = path_for(state, CLASSES, "auto", apiserver_gate=True, pod=gpu_pod(2))
    assert (two.kind, two.why) == (
        "rewrite",
        "no node whose kubelet has DRAExtendedResource has room for it now",
    )
    assert path_for(state, CLASSES, "auto", apiserver_gate=True, pod=gpu_pod(9)).kind == "rewrite"
    # every DRA node upgraded: native, and a pod that fits nowhere now waits natively
    done = upgrading(3, 0)
    assert path_for(done, CLASSES, "auto", apiserver_gate=True, pod=gpu_pod(9)).kind == "native"
    # none upgraded yet: rewrite, as before
    assert "no DRA node's kubelet" in path_for(upgrading(0, 3), CLASSES, "auto", apiserver_gate=True).why
