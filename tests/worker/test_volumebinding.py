"""Issue 21 on the emulator: the worker watches the storage kinds and runs VolumeBinding's PreBind.

A StatefulSet on a ``WaitForFirstConsumer`` StorageClass: its pod ``web-0`` claims ``data-web-0``
(the claim its volumeClaimTemplate makes; the emulator runs no StatefulSet controller, so the test
creates both as the controller would). The worker sets ``volume.kubernetes.io/selected-node`` on the
claim and waits; the test plays the external provisioner (a PV on that node, the claim bound as the
PV controller binds it), and only then is the pod bound. An unbound claim of an ``Immediate`` class
keeps its pod pending with upstream's reason."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from tests.worker.harness import GPU, Cluster, device_class, gpu_slice, node
from tests.worker.workers import a_pod, log_lines
from webhook.core.api.objects import Obj
from webhook.core.cluster.volumes import DynamicProvision, PodVolumes
from webhook.core.scheduling.framework import SCHEDULED, Decision
from webhook.kube.cache import ClusterCache
from webhook.worker.binder import BindError
from webhook.worker.volumebinding import VolumeBinder

SELECTED_NODE = "volume.kubernetes.io/selected-node"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
PROVISIONER = "pd.csi.storage.gke.io"
T = TypeVar("T")


def storage_class(name: str, mode: str) -> Obj:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": PROVISIONER,
        "volumeBindingMode": mode,
    }


def claim(name: str, cls: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": cls,
            "resources": {"requests": {"storage": "10Gi"}},
        },
    }


def claim_volume(claim_name: str) -> list[Obj]:
    return [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]


def provision(kube: Cluster, pvc: Obj, node_name: str) -> None:
    """What the external provisioner and the PV controller do for a claim with a selected node: a
    PV with the node's affinity, bound to the claim, and the claim bound to it."""
    pv_name = f"pvc-{pvc['metadata']['uid']}"
    pv: Obj = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": pv_name},
        "spec": {
            "capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": pvc["spec"]["storageClassName"],
            "csi": {"driver": PROVISIONER, "volumeHandle": pv_name},
            "claimRef": {
                "kind": "PersistentVolumeClaim",
                "namespace": "default",
                "name": pvc["metadata"]["name"],
                "uid": pvc["metadata"]["uid"],
            },
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node_name]}
                            ]
                        }
                    ]
                }
            },
        },
    }
    created = kube.em.create("persistentvolumes", pv)
    created["status"] = {"phase": "Bound"}
    kube.em.update_status("persistentvolumes", created)
    current = kube.em.get("persistentvolumeclaims", pvc["metadata"]["name"], "default")
    current["spec"]["volumeName"] = pv_name
    current["metadata"].setdefault("annotations", {})[BIND_COMPLETED] = "yes"
    bound = kube.em.update("persistentvolumeclaims", current)
    bound["status"] = {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "10Gi"}}
    kube.em.update_status("persistentvolumeclaims", bound)


def poll(predicate: Callable[[], T], timeout: float) -> T:
    """Poll ``predicate`` (a log line changes no object: ``em.wait_for`` would not wake) until truthy."""
    deadline = time.monotonic() + timeout
    tick = threading.Event()
    while not (result := predicate()):
        assert time.monotonic() < deadline, f"not met within {timeout}s"
        tick.wait(0.02)
    return result


def selected_node(kube: Cluster, name: str) -> Any:
    pvc = kube.em.get("persistentvolumeclaims", name, "default")
    return (pvc["metadata"].get("annotations") or {}).get(SELECTED_NODE)


def unschedulable(kube: Cluster, pod_name: str) -> str:
    """The pod's PodScheduled=False message ("" until there is one)."""
    c = kube.condition(pod_name)
    return str(c.get("message")) if c is not None and c.get("status") == "False" else ""


def labelled_node(name: str) -> Obj:
    n = node(name)
    n["metadata"]["labels"] = {"kubernetes.io/hostname": name}
    return n


def statefulset_pod(kube: Cluster, volume_bind_timeout: float = 600.0) -> None:
    """A GPU node, a WaitForFirstConsumer class, the claim ``data-web-0`` its volumeClaimTemplate
    makes, a worker, and the pod ``web-0`` on the claim."""
    kube.apply(labelled_node("n0"), device_class(), gpu_slice("n0", 1))
    kube.em.create("storageclasses", storage_class("standard-rwo", "WaitForFirstConsumer"))
    kube.em.create("persistentvolumeclaims", claim("data-web-0", "standard-rwo"))
    kube.worker(volume_bind_timeout=volume_bind_timeout)
    kube.pod("web-0", {GPU: 1}, volumes=claim_volume("data-web-0"))


def test_a_statefulset_on_wait_for_first_consumer_is_bound_after_its_claim(kube: Cluster) -> None:
    statefulset_pod(kube)

    node_name = kube.em.wait_for(lambda: selected_node(kube, "data-web-0"), 30, "the selected node")
    assert node_name == "n0"
    # PreBind waits for the provisioner: the pod is not bound while its claim is not.
    assert "web-0" not in kube.bound()
    provision(kube, kube.em.get("persistentvolumeclaims", "data-web-0", "default"), node_name)
    assert kube.wait_bound(1) == {"web-0": "n0"}
    pvc = kube.em.get("persistentvolumeclaims", "data-web-0", "default")
    assert pvc["spec"]["volumeName"].startswith("pvc-")
    kube.check_consistent()


def test_prebind_gives_up_after_its_timeout_and_the_pod_is_retried(
    kube: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """No provisioner within ``bindTimeoutSeconds``: PreBind fails with upstream's error, the pod is
    unreserved and retried; once the provisioner has bound the claim, the pod binds."""
    caplog.set_level(logging.INFO, logger="draxr")
    statefulset_pod(kube, volume_bind_timeout=0.3)
    [failed, *_] = poll(lambda: log_lines(caplog, "binding failed"), 30)
    assert (
        failed["reason"]
        == 'running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded'
    )
    assert "web-0" not in kube.bound()
    assert not kube.claims()  # Unreserve: no special claim left behind
    provision(kube, kube.em.get("persistentvolumeclaims", "data-web-0", "default"), "n0")
    assert kube.wait_bound(1) == {"web-0": "n0"}
    kube.check_consistent()


def test_an_unbound_immediate_claim_keeps_its_pod_pending_with_upstreams_reason(kube: Cluster) -> None:
    kube.apply(labelled_node("n0"), device_class(), gpu_slice("n0", 1))
    kube.em.create("storageclasses", storage_class("fast", "Immediate"))
    kube.em.create("persistentvolumeclaims", claim("data", "fast"))
    kube.worker()
    kube.pod("p", {GPU: 1}, volumes=claim_volume("data"))
    message = kube.em.wait_for(lambda: unschedulable(kube, "p"), 30, "the unschedulable condition")
    assert "pod has unbound immediate PersistentVolumeClaims" in message
    assert kube.bound() == {}
    assert selected_node(kube, "data") is None


def test_a_claim_not_there_keeps_its_pod_pending(kube: Cluster) -> None:
    kube.apply(labelled_node("n0"), device_class(), gpu_slice("n0", 1))
    kube.worker()
    kube.pod("p", {GPU: 1}, volumes=claim_volume("missing"))
    message = kube.em.wait_for(lambda: unschedulable(kube, "p"), 30, "the unschedulable condition")
    assert 'persistentvolumeclaim "missing" not found' in message


def test_a_claim_changed_since_the_decision_fails_prebind_with_the_api_servers_conflict(
    kube: Cluster,
) -> None:
    """``bindAPIUpdate``: the write carries the resourceVersion the decision read; a claim changed
    since fails PreBind with the API server's error, nothing waited for."""
    read = kube.em.create("persistentvolumeclaims", claim("data", "standard-rwo"))
    changed = kube.em.get("persistentvolumeclaims", "data", "default")
    changed["metadata"]["labels"] = {"changed": "yes"}
    kube.em.update("persistentvolumeclaims", changed)
    binder = VolumeBinder(kube.client(), ClusterCache.from_objects([]), timeout=600)
    decision = Decision(
        pod=a_pod("p"),
        status=SCHEDULED,
        node="n0",
        volumes=PodVolumes(dynamic=[DynamicProvision(read)]),
    )
    with pytest.raises(BindError) as failed:
        binder.pre_bind(decision.pod, decision)
    assert str(failed.value).startswith(
        'running PreBind plugin "VolumeBinding": Operation cannot be fulfilled on '
    )
    assert selected_node(kube, "data") is None
