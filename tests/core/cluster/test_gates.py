"""Where DRAExtendedResource is on, and which path a pod takes because of it."""

from __future__ import annotations

import pytest

from tests.core.harness import scheduler
from tests.core.podfactory import container, device_class, gpus, node, pod, resource_slice
from webhook.core.api.objects import Obj
from webhook.core.cluster.gates import kubelet_gate, parse_version, version_gate
from webhook.core.scheduling.framework import SCHEDULED, UNSCHEDULABLE

GPU = "example.com/gpu"


def kubelet(version: str | None, label: str | None = None) -> Obj:
    n = node("n", labels={"draxr.io/extended-resource-gate": label} if label else None)
    if version is not None:
        n["status"]["nodeInfo"] = {"kubeletVersion": version}
    return n


@pytest.mark.parametrize(
    ("version", "label", "on"),
    [
        ("v1.35.4", None, False),
        ("v1.36.0", None, True),
        ("v1.37.2", None, True),
        ("v1.34.1", "on", True),  # the gate set by hand on a 1.34 kubelet
        ("v1.36.3", "off", False),
        (None, None, True),  # no version reported (tests, offline manifests): do not block
        ("garbage", None, True),
        ("v1.35.0", "maybe", False),  # an unreadable label is ignored
    ],
)
def test_kubelet_gate(version: str | None, label: str | None, on: bool) -> None:
    assert kubelet_gate(kubelet(version, label)) is on


def test_versions() -> None:
    assert parse_version("v1.36.0-rc.1+abc") == (1, 36)
    assert parse_version("1.35") == (1, 35)
    assert parse_version(None) is None
    assert version_gate("v1.36.1")
    assert not version_gate("v1.35.4")
    assert not version_gate(None)


def test_the_native_path_skips_dra_nodes_whose_kubelet_has_the_gate_off() -> None:
    cls = device_class("gpu.example.com", ext=GPU)
    old, new = kubelet("v1.35.4"), kubelet("v1.36.2")
    old["metadata"]["name"], new["metadata"]["name"] = "old", "new"
    s = scheduler(
        old,
        new,
        cls,
        resource_slice("a", gpus(1), node_name="old"),
        resource_slice("b", gpus(1), node_name="new"),
    )
    d = s.schedule(pod(containers=[container("c", {GPU: 1})]))
    assert d.status == SCHEDULED
    assert d.node == "new"
    only_old = scheduler(old, cls, resource_slice("a", gpus(1), node_name="old"))
    d = only_old.schedule(pod(containers=[container("c", {GPU: 1})]))
    assert d.status == UNSCHEDULABLE
    assert d.message == "0/1 nodes are available: 1 node(s) had a kubelet without DRAExtendedResource."


def test_binding_conditions_gate_is_on_from_1_36() -> None:
    from webhook.core.cluster.gates import binding_conditions_gate

    assert [binding_conditions_gate(v) for v in ("v1.34.2", "v1.35.0", "v1.36.1", "v1.37.2")] == [
        False,
        False,
        True,
        True,
    ]
    assert binding_conditions_gate("") is False
    assert binding_conditions_gate(None) is False
