"""The engine's memory per node, per device and per running pod stays under stated bounds, and what
it keeps per pod refers to the slice index's own objects instead of copying them.

The figures are ``bench/memory.py``'s (``engine_units``): ``tracemalloc`` growth from N to 2N units
(nodes without devices; devices per node; running pods, each placed by the ``Scheduler`` with its
special claim allocated and the pod bound), every object decoded from its own JSON document as an
informer delivers it, every class counted over every node. Python's sets grow fourfold and its dicts
twofold, so a figure depends on where N falls: the bounds leave 1.5 to 2 times what was measured
(CPython 3.11, cel-python, 25 classes; docs/install.md, "Sizing").
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.allocate import pod as allocate_pod
from bench.memory import Doc, docs, engine_docs, engine_of, engine_pods, engine_units, kept, tracing
from webhook.core.api.objects import Obj, name, namespace
from webhook.core.cluster.state import ClusterState
from webhook.core.scheduling.framework import SCHEDULED
from webhook.core.scheduling.scheduler import Scheduler

KIB = 1024
#: A node without devices, 25 DeviceClasses counted over it (measured 6.0 to 9.1 KB).
ENGINE_BYTES_PER_NODE = 16 * KIB
#: A device like its neighbours (``bench/allocate.py``'s two attributes; measured 2.8 to 5.1 KB).
ENGINE_BYTES_PER_DEVICE = 8 * KIB
#: A device with an attribute of its own (a UUID, as real GPUs publish; measured 9.6 to 10.6 KB,
#: mostly the CEL engine's activation and result caches, which are bounded LRUs).
ENGINE_BYTES_PER_UNIQUE_DEVICE = 16 * KIB
#: A running pod: the pod and its special claim as the API serves them, and the engine's
#: accounting of both (measured 12.8 KB).
ENGINE_BYTES_PER_POD = 20 * KIB

CLASSES = 25


@pytest.fixture(scope="module")
def engine() -> dict[str, Any]:
    """100 and 200 nodes; 100 nodes with 4 and 8 devices each; 100 and 200 running pods."""
    with tracing():
        return engine_units(nodes=100, devices_per_node=4, pods=100, classes=CLASSES)


def test_a_node_costs_the_engine_less_than_its_bound(engine: dict[str, Any]) -> None:
    assert 0 < engine["engine_bytes_per_node"] < ENGINE_BYTES_PER_NODE


def test_a_device_costs_the_engine_less_than_its_bound(engine: dict[str, Any]) -> None:
    assert 0 < engine["engine_bytes_per_device"] < ENGINE_BYTES_PER_DEVICE
    assert 0 < engine["engine_bytes_per_unique_device"] < ENGINE_BYTES_PER_UNIQUE_DEVICE


def test_a_running_pod_costs_the_engine_less_than_its_bound(engine: dict[str, Any]) -> None:
    assert 0 < engine["engine_bytes_per_pod"] < ENGINE_BYTES_PER_POD


# -- no per-pod copies of slice data --------------------------------------------------------------


def fatten(documents: list[Doc], attributes: int) -> list[Doc]:
    """The same cluster, every device with ``attributes`` more attributes of 200 characters each."""
    out: list[Doc] = []
    for kind, text in documents:
        if kind == "ResourceSlice":
            obj = json.loads(text)
            for d in obj["spec"]["devices"]:
                d["attributes"].update(
                    {f"extra-{k}": {"string": f"{d['name']}-{k}-".ljust(200, "x")} for k in range(attributes)}
                )
            text = json.dumps(obj)
        out.append((kind, text))
    return out


def pod_growth(documents: list[Doc], classes: int, pods: int) -> int:
    """Bytes ``pods`` more running pods add to a state that runs ``pods`` already."""
    st = engine_of(documents)
    engine_pods(st, classes, 0, pods)
    return kept(lambda: engine_pods(st, classes, pods, pods))


def test_what_a_running_pod_costs_does_not_grow_with_its_devices_data() -> None:
    """Devices with 40 more attributes of 200 characters (each device about 10 KB more): a running
    pod costs the engine the same bytes (measured: to the byte), so nothing it keeps per pod copies
    device data. The 4 % allowed (about 500 bytes a pod) is less than a copy of one such device's
    attribute map alone (830 bytes)."""
    thin = engine_docs(30, 8, 5)
    with tracing():
        engine_pods(engine_of(engine_docs(1, 2, 5)), 5, 0, 1)  # one-time costs, unmeasured
        lean = pod_growth(thin, 5, 100)
        fat = pod_growth(fatten(thin, 40), 5, 100)
    assert lean > 0
    assert abs(fat - lean) <= lean // 25, (lean, fat)


def index_keys(st: ClusterState) -> dict[int, tuple[str, str, str]]:
    """The device index's own key tuples, by identity."""
    return {id(d.key): d.key for sl in st.devices.slices.values() for d in sl.devices}


def test_a_decision_and_its_reservation_hold_the_index_devices_themselves() -> None:
    st = engine_of(engine_docs(4, 4, 2))
    devices = {id(d): d for sl in st.devices.slices.values() for d in sl.devices}
    sched = Scheduler(st)
    decision = sched.schedule(allocate_pod(0, 2))
    assert decision.status == SCHEDULED
    assert decision.special is not None
    assert decision.special.results
    for result in decision.special.results:
        assert devices.get(id(result.device)) is result.device
    sched.reserve(decision)
    keys = index_keys(st)
    taken = list(st.allocated.devices)
    assert len(taken) == len(decision.special.results)
    assert all(keys.get(id(key)) is key for key in taken)


def test_running_pods_keep_the_index_keys_and_the_objects_they_arrived_as() -> None:
    """After Reserve, the claim's arrival, the pod's binding and the release, every taken device is
    still the index's own key tuple (no tuple or string copied per pod), and the engine keeps the
    pod and claim objects it was given, not copies."""
    st = engine_of(engine_docs(4, 4, 2))
    given: dict[tuple[str, str, str], Obj] = {}
    engine_pods(st, 2, 0, 12, lambda kind, obj: given.__setitem__((kind, namespace(obj), name(obj)), obj))
    keys = index_keys(st)
    taken = list(st.allocated.devices)
    assert len(taken) == 12
    assert all(keys.get(id(key)) is key for key in taken)
    assert len(st.allocated.pods) == 12
    assert len(st.allocated.claims) == 12
    for pod in st.allocated.pods.values():
        assert pod is given["Pod", namespace(pod), name(pod)]
    for claim in st.allocated.claims.values():
        assert claim is given["ResourceClaim", namespace(claim), name(claim)]


# -- storage objects (issue 21) ----------------------------------------------------------------------

#: A bound claim and its volume as the engine keeps them (measured 6.3 KB: the trimmed copies).
ENGINE_BYTES_PER_CLAIM_AND_VOLUME = 12 * KIB


def claim_and_volume(i: int, fat: int = 0) -> list[Doc]:
    """A bound gp3 claim and its EBS volume as the API serves them (managed fields, finalizers,
    provisioner annotations), each ``fat`` times 200 more characters of what the engine never reads."""
    uid = f"0000-{i:08d}-aaaa-bbbb-cccccccccccc"
    extra = {f"example.com/note-{k}": "x" * 200 for k in range(fat)}
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": f"data-web-{i}",
            "namespace": "default",
            "uid": uid,
            "resourceVersion": str(1000 + i),
            "labels": {"app": "web"},
            "finalizers": ["kubernetes.io/pvc-protection"],
            "annotations": {
                "pv.kubernetes.io/bind-completed": "yes",
                "pv.kubernetes.io/bound-by-controller": "yes",
                "volume.kubernetes.io/storage-provisioner": "ebs.csi.aws.com",
                "volume.kubernetes.io/selected-node": f"ip-10-0-{i % 250}-{i % 200}.ec2.internal",
                **extra,
            },
            "managedFields": [{"manager": "kube-controller-manager", "fieldsV1": {"f:metadata": {}}}],
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "100Gi"}},
            "storageClassName": "gp3",
            "volumeMode": "Filesystem",
            "volumeName": f"pvc-{uid}",
        },
        "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "100Gi"}},
    }
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": f"pvc-{uid}",
            "resourceVersion": str(2000 + i),
            "annotations": {"pv.kubernetes.io/provisioned-by": "ebs.csi.aws.com", **extra},
            "finalizers": ["kubernetes.io/pv-protection", "external-attacher/ebs-csi-aws-com"],
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "capacity": {"storage": "100Gi"},
            "claimRef": {
                "kind": "PersistentVolumeClaim",
                "name": f"data-web-{i}",
                "namespace": "default",
                "uid": uid,
            },
            "csi": {
                "driver": "ebs.csi.aws.com",
                "fsType": "ext4",
                "volumeAttributes": {
                    "storage.kubernetes.io/csiProvisionerIdentity": "1700000000000-8081",
                    **extra,
                },
                "volumeHandle": f"vol-0{i:016x}",
            },
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}
                            ]
                        }
                    ]
                }
            },
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": "gp3",
            "volumeMode": "Filesystem",
        },
        "status": {"phase": "Bound"},
    }
    return docs("PersistentVolumeClaim", [claim]) + docs("PersistentVolume", [volume])


def storage_growth(start: int, count: int, fat: int = 0) -> int:
    """Bytes ``count`` more claims and volumes add to a state that holds ``start`` of each."""
    st = ClusterState()

    def feed(a: int, b: int) -> None:
        for i in range(a, b):
            for kind, text in claim_and_volume(i, fat):
                st.apply(kind, json.loads(text))

    feed(0, start)
    return kept(lambda: feed(start, start + count))


def test_a_claim_and_its_volume_cost_the_engine_less_than_their_bound() -> None:
    with tracing():
        per_pair = storage_growth(300, 300) / 300
    assert 0 < per_pair < ENGINE_BYTES_PER_CLAIM_AND_VOLUME


def test_what_a_claim_costs_does_not_grow_with_what_the_engine_never_reads() -> None:
    """Claims and volumes with 20 more annotations (and volume attributes) of 200 characters each
    (about 8 KB more a pair as served): the engine keeps the same trimmed copies (4 % allowed)."""
    with tracing():
        storage_growth(1, 1)  # one-time costs, unmeasured
        lean = storage_growth(200, 200)
        fat = storage_growth(200, 200, fat=20)
    assert lean > 0
    assert abs(fat - lean) <= lean // 25, (lean, fat)
