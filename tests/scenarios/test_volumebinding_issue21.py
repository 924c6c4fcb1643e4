"""Issue 21: a GPU pod whose PersistentVolumeClaim waits for its first consumer
(``WaitForFirstConsumer``, the default StorageClass on the big clouds) is placed, and the decision
must say which claim gets which ``volume.kubernetes.io/selected-node``: without it nothing provisions
the volume and the pod waits in ContainerCreating forever."""

from __future__ import annotations

from tests.core.harness import state_of
from tests.core.podfactory import container, device_class, gpus, node, pod, resource_slice
from tests.core.volumefactory import WAIT, claim_volume, pvc, storage_class, with_volumes
from webhook.core.scheduling.framework import SCHEDULED
from webhook.core.scheduling.plugins.volumebinding.prebind import api_writes
from webhook.core.scheduling.scheduler import Scheduler

GPU = "example.com/gpu"


def test_a_gpu_pod_on_a_wait_for_first_consumer_claim_selects_its_node() -> None:
    st = state_of(
        device_class("gpu.example.com", ext=GPU, selectors=['device.driver == "gpu.example.com"']),
        node("n0", {GPU: 0}),
        resource_slice("s0", gpus(1, prefix="n0-gpu"), node_name="n0"),
        storage_class("standard-rwo", WAIT, "pd.csi.storage.gke.io"),
        pvc("data-train-0", "standard-rwo", request="100Gi", access_modes=["ReadWriteOnce"]),
    )
    p = with_volumes(pod("train-0", [container("c", {GPU: 1})]), claim_volume("data-train-0", "data"))
    d = Scheduler(st).schedule(p)
    assert (d.status, d.node) == (SCHEDULED, "n0")
    assert d.volumes is not None
    writes = api_writes(d.volumes, "n0")
    assert [(w.resource, w.namespace, w.name, w.patch["metadata"]["annotations"]) for w in writes] == [
        (
            "persistentvolumeclaims",
            "default",
            "data-train-0",
            {"volume.kubernetes.io/selected-node": "n0"},
        )
    ]
