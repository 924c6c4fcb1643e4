"""The worker's memory against the number of pods and devices, through the API emulator.

Objects look like what kube-apiserver serves (``managedFields``, images, probes, volumes, container
statuses on pods; images and conditions on nodes; attributes and capacity on devices). They are put
in the emulator's store, then a real ``draxr serve --no-webhook`` process lists and watches them over
HTTP with the official client, as in a cluster. For each shape the script reports:

* the worker's resident memory once its caches are synced (``VmRSS``, and the peak ``VmHWM``);
* the size of its caches, measured in this process with ``tracemalloc`` around a ``ClusterCache``
  synced from the same emulator, with draxr's transform (what the worker keeps) and without it
  (whole objects, as before the transform).

The shapes: a baseline (``--nodes`` nodes with ``--devices-per-node`` devices, no pods), then each
count of ``--pods`` (bound, running pods), then ``--devices`` more devices. Figures per 1,000 are
the difference to the baseline.

First, in this process, bytes per unit (``tracemalloc``, the difference between a shape with N units
and one with 2N, so that fixed costs cancel): per node without devices, per device, per slice beyond
its devices and per running pod (placed by the scheduler, its special claim allocated, the pod
bound), for the engine (``ClusterState`` fed with ``bench/allocate.py``'s shapes: ``engine_bytes_*``)
and for the worker's cache (``ClusterCache`` fed with the realistic objects below, trimmed:
``worker_cache_bytes_*``). tests/scenarios/test_memory_bounds.py and tests/kube/test_cache.py hold them
under stated bounds. ``--units-only`` stops there. Prints JSON.

    python bench/memory.py [--pods 1000,10000] [--nodes 100] [--devices-per-node 8] [--devices 10000]
        [--unit-nodes 500] [--unit-devices-per-node 8] [--unit-pods 1000] [--unit-classes 25]
        [--units-only]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

if __name__ == "__main__":
    # Run as a script, bench/ comes first on sys.path and bench/webhook.py would shadow the package.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    sys.path.insert(0, os.path.dirname(_here))

import httpx

from bench.allocate import build
from bench.allocate import pod as allocate_pod
from bench.common import free_port, memory_mib, serve_argv
from e2e.emulator import Emulator
from webhook.core.allocation.claims import (
    deterministic_name,
    extended_resource_claim_status,
    generate_name,
    special_claim_after_prebind,
)
from webhook.core.api.constants import WRITER_ANNOTATION
from webhook.core.api.objects import Obj, uid
from webhook.core.api.objects import name as name_of
from webhook.core.cluster.state import ClusterState
from webhook.core.scheduling.framework import SCHEDULED, Decision
from webhook.core.scheduling.scheduler import Scheduler
from webhook.kube import trim
from webhook.kube.cache import ALL_KINDS, ClusterCache
from webhook.kube.client import KubeClient

WORKER = "system:serviceaccount:draxr-system:draxr-worker"
MIB = 2**20
T0 = "2025-06-01T10:00:00Z"
DRIVER = "gpu.example.com"


# -- objects as kube-apiserver serves them ---------------------------------------------------------


def _fields(*paths: str) -> Obj:
    """A ``fieldsV1`` tree naming these dotted paths (the shape managedFields has)."""
    tree: Obj = {}
    for path in paths:
        node = tree
        for part in path.split("."):
            node = node.setdefault(f"f:{part}", {})
    return tree


def _managed(manager: str, operation: str, paths: list[str], subresource: str | None = None) -> Obj:
    entry: Obj = {
        "manager": manager,
        "operation": operation,
        "apiVersion": "v1",
        "time": T0,
        "fieldsType": "FieldsV1",
        "fieldsV1": _fields(*paths),
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def realistic_pod(index: int, node: str, namespace: str = "default") -> Obj:
    """A running pod of a Deployment, with what kube-apiserver, the controllers and the kubelet put
    in it (about 8 KB of JSON)."""
    app = f"app-{index % 50}"
    name = f"{app}-7d9f8b6c4d-{index:05d}"
    container = {
        "name": "main",
        "image": f"registry.example.com/team/{app}:1.{index % 7}.3",
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/server"],
        "args": ["--port=8080", "--log-level=info", f"--name={app}"],
        "env": [
            {
                "name": "POD_NAME",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
            },
            {
                "name": "POD_NAMESPACE",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}},
            },
            {"name": "GOMAXPROCS", "value": "2"},
            {"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://otel-collector.observability:4317"},
            {"name": "CONFIG_PATH", "value": "/etc/app/config.yaml"},
        ],
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
            "initialDelaySeconds": 10,
            "periodSeconds": 10,
            "timeoutSeconds": 1,
            "successThreshold": 1,
            "failureThreshold": 3,
        },
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": 8080, "scheme": "HTTP"},
            "periodSeconds": 5,
            "timeoutSeconds": 1,
            "successThreshold": 1,
            "failureThreshold": 3,
        },
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/app", "readOnly": True},
            {
                "name": "kube-api-access-x7k2p",
                "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            },
        ],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    conditions = [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": T0}
        for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
    ]
    status = {
        "phase": "Running",
        "conditions": conditions,
        "hostIP": "10.0.0.10",
        "hostIPs": [{"ip": "10.0.0.10"}],
        "podIP": f"10.244.{index // 250 % 250}.{index % 250}",
        "podIPs": [{"ip": f"10.244.{index // 250 % 250}.{index % 250}"}],
        "startTime": T0,
        "qosClass": "Burstable",
        "containerStatuses": [
            {
                "name": "main",
                "state": {"running": {"startedAt": T0}},
                "lastState": {},
                "ready": True,
                "restartCount": 0,
                "image": container["image"],
                "imageID": f"{container['image']}@sha256:{uuid.UUID(int=index).hex * 2}",
                "containerID": f"containerd://{uuid.UUID(int=index + 1).hex * 2}",
                "started": True,
                "volumeMounts": [
                    {
                        "name": "config",
                        "mountPath": "/etc/app",
                        "readOnly": True,
                        "recursiveReadOnly": "Disabled",
                    },
                    {
                        "name": "kube-api-access-x7k2p",
                        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                        "readOnly": True,
                        "recursiveReadOnly": "Disabled",
                    },
                ],
            }
        ],
    }
    spec = {
        "containers": [container],
        "volumes": [
            {"name": "config", "configMap": {"name": f"{app}-config", "defaultMode": 420}},
            {
                "name": "kube-api-access-x7k2p",
                "projected": {
                    "defaultMode": 420,
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {
                            "configMap": {
                                "name": "kube-root-ca.crt",
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                            }
                        },
                        {
                            "downwardAPI": {
                                "items": [
                                    {
                                        "path": "namespace",
                                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                    }
                                ]
                            }
                        },
                    ],
                },
            },
        ],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "serviceAccount": "default",
        "nodeName": node,
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    spec_paths = [f"spec.{k}" for k in spec if k not in ("nodeName",)] + [
        f"spec.containers.{k}" for k in container
    ]
    status_paths = [f"status.{k}" for k in status]
    meta = {
        "name": name,
        "generateName": f"{app}-7d9f8b6c4d-",
        "namespace": namespace,
        "uid": str(uuid.UUID(int=10**9 + index)),
        "creationTimestamp": T0,
        "labels": {"app": app, "pod-template-hash": "7d9f8b6c4d", "team": "platform"},
        "annotations": {"kubectl.kubernetes.io/restartedAt": T0, "prometheus.io/scrape": "true"},
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": f"{app}-7d9f8b6c4d",
                "uid": str(uuid.UUID(int=index % 50)),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
        "managedFields": [
            _managed(
                "kube-controller-manager",
                "Update",
                [*spec_paths, "metadata.labels", "metadata.ownerReferences"],
            ),
            _managed("kubelet", "Update", status_paths, "status"),
        ],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def realistic_node(name: str) -> Obj:
    images = [
        {
            "names": [
                f"registry.example.com/team/app-{i}@sha256:{uuid.UUID(int=i).hex * 2}",
                f"registry.example.com/team/app-{i}:1.{i % 7}.3",
            ],
            "sizeBytes": 50_000_000 + i,
        }
        for i in range(40)
    ]
    conditions = [
        {
            "type": t,
            "status": "False" if t != "Ready" else "True",
            "lastHeartbeatTime": T0,
            "lastTransitionTime": T0,
            "reason": f"Kubelet{t}",
            "message": f"kubelet reports {t}",
        }
        for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
    ]
    status = {
        "capacity": {"cpu": "64", "memory": "256Gi", "pods": "110", "ephemeral-storage": "500Gi"},
        "allocatable": {"cpu": "63", "memory": "250Gi", "pods": "110", "ephemeral-storage": "480Gi"},
        "conditions": conditions,
        "addresses": [{"type": "InternalIP", "address": "10.0.0.10"}, {"type": "Hostname", "address": name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": uuid.uuid4().hex,
            "systemUUID": str(uuid.uuid4()),
            "bootID": str(uuid.uuid4()),
            "kernelVersion": "6.8.0-45-generic",
            "osImage": "Ubuntu 24.04.1 LTS",
            "containerRuntimeVersion": "containerd://1.7.22",
            "kubeletVersion": "v1.36.3",
            "kubeProxyVersion": "v1.36.3",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
        "images": images,
    }
    meta = {
        "name": name,
        "uid": str(uuid.uuid4()),
        "creationTimestamp": T0,
        "labels": {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": "gpu-8x",
            "topology.kubernetes.io/zone": "zone-a",
        },
        "annotations": {
            "node.alpha.kubernetes.io/ttl": "0",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        },
        "managedFields": [
            _managed("kubelet", "Update", ["metadata.labels", "metadata.annotations"]),
            _managed("kubelet", "Update", [f"status.{k}" for k in status], "status"),
        ],
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "spec": {"podCIDR": "10.244.0.0/24"},
        "status": status,
    }


def realistic_slice(node: str, count: int, suffix: str = "") -> Obj:
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "index": {"int": i},
                "uuid": {"string": str(uuid.UUID(int=hash((node, suffix, i)) & (2**128 - 1)))},
                "productName": {"string": "Example GPU 80GB"},
                "driverVersion": {"version": "550.90.7"},
                "architecture": {"string": "Hopper"},
                "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{i // 4:02x}"},
                "numaNode": {"int": i // 4},
            },
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for i in range(count)
    ]
    name = f"{node}-{DRIVER}{suffix}"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "name": name,
            "uid": str(uuid.uuid4()),
            "creationTimestamp": T0,
            "managedFields": [_managed("gpu-driver", "Update", ["spec.devices", "spec.driver", "spec.pool"])],
        },
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": f"{node}{suffix}", "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


# -- one shape ------------------------------------------------------------------------------------------


def seed(em: Emulator, nodes: int, devices_per_node: int, pods: int, extra_devices: int) -> None:
    """Objects straight into the emulator's store (its API serves them from there)."""
    em.create("namespaces", {"metadata": {"name": "draxr-system"}})
    em.create(
        "deviceclasses",
        {
            "metadata": {"name": DRIVER},
            "spec": {
                "extendedResourceName": "example.com/gpu",
                "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
            },
        },
    )
    names = [f"node-{n:04d}" for n in range(nodes)]
    nodes_key, slices_key, pods_key = (em.index.resolve(r).key for r in ("nodes", "resourceslices", "pods"))
    for name in names:
        em.store.create(nodes_key, realistic_node(name))
        if devices_per_node:
            em.store.create(slices_key, realistic_slice(name, devices_per_node))
    per_slice = 100
    for i in range(0, extra_devices, per_slice):
        node = names[(i // per_slice) % nodes]
        em.store.create(slices_key, realistic_slice(node, min(per_slice, extra_devices - i), f"-x{i}"))
    for i in range(pods):
        em.store.create(pods_key, realistic_pod(i, names[i % nodes]))


def _cached(base: str) -> dict[str, float]:
    text = httpx.get(f"{base}/metrics", timeout=10).text
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("draxr_cache_objects{"):
            kind = line.split('kind="', 1)[1].split('"', 1)[0]
            out[kind] = float(line.rsplit(" ", 1)[1])
    return out


def worker_rss(kubeconfig: Path, pods: int, slices: int, timeout: float = 600) -> dict[str, float]:
    """Start ``draxr serve --no-webhook``; once its caches hold every pod and slice, its memory."""
    port = free_port()
    argv = serve_argv(
        "--log-level=warning", f"--kubeconfig={kubeconfig}", "--host=127.0.0.1", f"--port={port}"
    )
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"draxr serve exited with {proc.returncode}")
            try:
                cached = _cached(base)
            except httpx.HTTPError:
                cached = {}
            if cached.get("Pod") == pods and cached.get("ResourceSlice") == slices:
                break
            if time.monotonic() - started > timeout:
                raise RuntimeError(f"caches not synced after {timeout:g}s: {cached}")
            time.sleep(0.2)
        synced_s = time.monotonic() - started
        time.sleep(1.0)  # let the first scheduling pass and the resync settle
        memory = memory_mib(proc.pid)
        return {
            "rss_mib": memory["VmRSS"],
            "peak_rss_mib": memory["VmHWM"],
            "synced_s": round(synced_s, 2),
        }
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def measure_cache(kubeconfig: str, trimmed: bool) -> float:
    """MiB a synced ``ClusterCache`` of every kind the worker watches holds (``tracemalloc``), in a
    process of its own (``--cache-of``), so that the emulator's memory does not count."""
    client = KubeClient.from_config(kubeconfig)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    cache = ClusterCache()
    cache.start(client, ALL_KINDS, transforms=None if trimmed else dict.fromkeys(ALL_KINDS))
    try:
        if not cache.wait_synced(ALL_KINDS, timeout=600):
            raise RuntimeError("cache not synced")
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
        cache.stop()
    return (after - before) / MIB


def cache_size(kubeconfig: Path, trimmed: bool) -> float:
    argv = [sys.executable, os.path.abspath(__file__), "--cache-of", str(kubeconfig)]
    if not trimmed:
        argv.append("--untrimmed")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=True)
    return round(float(done.stdout.strip()), 1)


def shape(nodes: int, devices_per_node: int, pods: int, extra_devices: int) -> dict[str, Any]:
    with (
        Emulator(tokens={"w": (WORKER, ["system:serviceaccounts"])}, history_size=100) as em,
        tempfile.TemporaryDirectory() as tmp,
    ):
        seed(em, nodes, devices_per_node, pods, extra_devices)
        kubeconfig = em.kubeconfig(Path(tmp) / "kubeconfig", token="w")
        slices = len(em.list("resourceslices"))
        out: dict[str, Any] = {
            "pods": pods,
            "nodes": nodes,
            "devices": nodes * devices_per_node + extra_devices,
            "pod_json_kib": round(len(json.dumps(realistic_pod(0, "n"))) / 1024, 1),
        }
        out.update(worker_rss(kubeconfig, pods, slices))
        out["cache_mib"] = cache_size(kubeconfig, trimmed=True)
        out["cache_untrimmed_mib"] = cache_size(kubeconfig, trimmed=False)
        return out


def per_thousand(run: dict[str, Any], base: dict[str, Any], key: str, count: int) -> float:
    return round((float(run[key]) - float(base[key])) * 1000 / count, 2)


# -- bytes per node, per device and per running pod ------------------------------------------------
#
# Each figure is a ``tracemalloc`` difference between two shapes that differ only in the unit: N and
# 2N nodes (without devices), N nodes with D and with 2D devices each, N and 2N running pods. What
# both shapes share (classes, the fixed structures, module caches) cancels. Every object reaches the
# state as an informer delivers it: decoded from its own JSON document (a watch event), then, for the
# worker's cache, trimmed by its transform. The classes are counted over every node and device
# first, as after a worker's first decisions. A running pod is one the scheduler placed: Reserve,
# its special claim as PreBind writes it (allocation and ``reservedFor``), the pod bound with its
# ``extendedResourceClaimStatus``, then the reservation released, as the worker does once its cache
# shows the claim.

Doc = tuple[str, str]  # (kind, the object as JSON)
T = TypeVar("T")


@contextlib.contextmanager
def tracing() -> Iterator[None]:
    """``tracemalloc`` on for the block (left on if it was on already)."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        yield
    finally:
        if started:
            tracemalloc.stop()


def retained(make: Callable[[], T]) -> tuple[int, T]:
    """Bytes ``make()`` leaves allocated (``tracemalloc``, which must be tracing), and its result."""
    if not tracemalloc.is_tracing():
        raise RuntimeError("tracemalloc is not tracing")
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    kept = make()
    gc.collect()
    return tracemalloc.get_traced_memory()[0] - before, kept


def kept(make: Callable[[], object]) -> int:
    """Bytes what ``make()`` returns holds (it is dropped once measured)."""
    size, _ = retained(make)
    return size


def docs(kind: str, objects: Iterable[Obj]) -> list[Doc]:
    return [(kind, json.dumps(o)) for o in objects]


def engine_docs(nodes: int, devices_per_node: int, classes: int, unique: bool = False) -> list[Doc]:
    """The objects ``bench/allocate.py``'s ``build()`` makes (classes, nodes and, with devices,
    their slices), as JSON documents."""
    st = build(nodes, devices_per_node, classes, unique)
    out = docs("DeviceClass", (c for c in (st.classes.get(f"gpu-{k}") for k in range(classes)) if c))
    out += docs("Node", (info.node for info in st.nodes.by_name.values()))
    if devices_per_node:
        out += docs("ResourceSlice", (sl.source for sl in st.devices.slices.values()))
    return out


def engine_of(documents: list[Doc]) -> ClusterState:
    """A ``ClusterState`` fed with the documents, every class counted over every node."""
    st = ClusterState()
    classes: list[str] = []
    for kind, text in documents:
        obj = json.loads(text)
        st.apply(kind, obj)
        if kind == "DeviceClass":
            classes.append(name_of(obj))
    for c in classes:
        st.capacity.free(c)
    return st


def run_pods(
    handle: Callable[[str, Obj], Obj],
    schedule: Callable[[Obj], tuple[Decision, str | None]],
    release: Callable[[str], None],
    pending: Callable[[int], Obj],
    running: Callable[[int, str], Obj],
    start: int,
    count: int,
) -> None:
    """Pods ``start`` to ``start + count``, each placed and bound as the worker does: the pending
    pod arrives, is scheduled and reserved, its special claim arrives allocated, then the bound pod,
    then the reservation goes. Every object passes through JSON on its way in; ``handle`` stores
    one and answers what it keeps of it."""
    for i in range(start, start + count):
        pod = handle("Pod", json.loads(json.dumps(pending(i))))
        decision, token = schedule(pod)
        if decision.status != SCHEDULED or token is None or decision.special is None:
            raise RuntimeError(f"pod {i}: {decision.status}: {decision.message}")
        claim_name = deterministic_name(generate_name(pod), uid(pod))
        claim = special_claim_after_prebind(
            pod, decision.requests, decision.special, claim_name, decision.constraints
        )
        claim["metadata"]["uid"] = str(uuid.UUID(int=2 * 10**9 + i))
        claim["metadata"]["resourceVersion"] = str(10**6 + i)
        claim["metadata"]["creationTimestamp"] = T0
        claim["metadata"]["annotations"][WRITER_ANNOTATION] = "draxr"
        handle("ResourceClaim", json.loads(json.dumps(claim)))
        assert decision.node is not None
        bound = running(i, decision.node)
        bound["status"]["extendedResourceClaimStatus"] = extended_resource_claim_status(
            claim_name, decision.mappings
        )
        handle("Pod", json.loads(json.dumps(bound)))
        release(token)


def engine_pods(
    st: ClusterState, classes: int, start: int, count: int, seen: Callable[[str, Obj], None] | None = None
) -> None:
    """``bench/allocate.py``'s pods, placed by ``Scheduler`` and run (``run_pods``); ``seen`` is
    told every object the state is given."""
    sched = Scheduler(st, "binpack")

    def schedule(pod: Obj) -> tuple[Decision, str | None]:
        decision = sched.schedule(pod)
        return decision, sched.reserve(decision) if decision.status == SCHEDULED else None

    def running(i: int, node: str) -> Obj:
        out = allocate_pod(i, classes)
        out["spec"]["nodeName"] = node
        out["status"] = {"phase": "Running"}
        return out

    def handle(kind: str, obj: Obj) -> Obj:
        st.apply(kind, obj)
        if seen is not None:
            seen(kind, obj)
        return obj

    run_pods(
        handle,
        schedule,
        lambda token: st.unreserve(token),
        lambda i: allocate_pod(i, classes),
        running,
        start,
        count,
    )


def engine_units(nodes: int, devices_per_node: int, pods: int, classes: int) -> dict[str, Any]:
    """The engine's bytes per node (``nodes`` and twice as many, no devices), per device (``nodes``
    with ``devices_per_node`` and twice as many; identical devices, and devices that each carry a
    UUID), per slice (what a node's slice costs beyond its devices) and per running pod
    (``pods`` more on ``nodes`` x ``devices_per_node`` that ran ``pods`` already)."""
    if 2 * pods > nodes * devices_per_node:
        raise ValueError(f"{2 * pods} pods need as many devices, {nodes} x {devices_per_node} is too few")
    engine_pods(engine_of(engine_docs(1, 2, classes)), classes, 0, 1)  # one-time costs, unmeasured
    bare = kept(lambda: engine_of(engine_docs(nodes, 0, classes)))
    per_node = (kept(lambda: engine_of(engine_docs(2 * nodes, 0, classes))) - bare) / nodes
    out: dict[str, Any] = {"engine_bytes_per_node": round(per_node)}
    devices = nodes * devices_per_node
    small = kept(lambda: engine_of(engine_docs(nodes, devices_per_node, classes)))
    large = kept(lambda: engine_of(engine_docs(nodes, 2 * devices_per_node, classes)))
    out["engine_bytes_per_device"] = round((large - small) / devices)
    out["engine_bytes_per_slice"] = round((small - bare - (large - small)) / nodes)
    small = kept(lambda: engine_of(engine_docs(nodes, devices_per_node, classes, unique=True)))
    large = kept(lambda: engine_of(engine_docs(nodes, 2 * devices_per_node, classes, unique=True)))
    out["engine_bytes_per_unique_device"] = round((large - small) / devices)
    st = engine_of(engine_docs(nodes, devices_per_node, classes))
    engine_pods(st, classes, 0, pods)
    out["engine_bytes_per_pod"] = round(kept(lambda: engine_pods(st, classes, pods, pods)) / pods)
    return out


GPU_CLASS: Obj = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": DRIVER, "uid": str(uuid.UUID(int=1)), "creationTimestamp": T0},
    "spec": {
        "extendedResourceName": "example.com/gpu",
        "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
    },
}


def cache_docs(nodes: int, devices_per_node: int) -> list[Doc]:
    """The class, ``nodes`` realistic nodes and, with devices, a realistic slice each."""
    names = [f"node-{n:05d}" for n in range(nodes)]
    out = docs("DeviceClass", [GPU_CLASS]) + docs("Node", map(realistic_node, names))
    if devices_per_node:
        out += docs("ResourceSlice", (realistic_slice(n, devices_per_node) for n in names))
    return out


def cache_of(documents: list[Doc]) -> ClusterCache:
    """A ``ClusterCache`` fed as its informers feed it (each object trimmed by its transform), the
    class counted over every node."""
    cache = ClusterCache()
    for kind, text in documents:
        cache.handle(kind, "ADDED", trim.for_kind(kind)(json.loads(text)))
    cache.state.capacity.free(DRIVER)
    return cache


def gpu_pod(index: int) -> Obj:
    """``realistic_pod`` asking draxr's worker for one ``example.com/gpu``, not yet bound."""
    out = realistic_pod(index, "")
    del out["spec"]["nodeName"]
    out["spec"]["schedulerName"] = "draxr"
    out["status"] = {"phase": "Pending", "qosClass": "Burstable"}
    resources = out["spec"]["containers"][0]["resources"]
    resources["requests"]["example.com/gpu"] = resources["limits"]["example.com/gpu"] = "1"
    return out


def running_gpu_pod(index: int, node: str) -> Obj:
    out = gpu_pod(index)
    out["spec"]["nodeName"] = node
    out["status"] = realistic_pod(index, node)["status"]
    return out


def cache_pods(cache: ClusterCache, start: int, count: int) -> None:
    """``gpu_pod``s placed by the cache's ``SharedScheduler`` and run (``run_pods``)."""
    sched = cache.scheduler("binpack", writer="draxr")

    def handle(kind: str, obj: Obj) -> Obj:
        kept = trim.for_kind(kind)(obj)
        cache.handle(kind, "MODIFIED", kept)
        return kept

    run_pods(
        handle,
        sched.schedule_and_reserve,
        cache.forget_reservation,
        gpu_pod,
        running_gpu_pod,
        start,
        count,
    )


def cache_units(nodes: int, devices_per_node: int, pods: int) -> dict[str, Any]:
    """The worker cache's bytes per node, per device, per slice and per running pod (the shapes of
    ``engine_units`` with ``realistic_node``, ``realistic_slice`` and ``gpu_pod``)."""
    if 2 * pods > nodes * devices_per_node:
        raise ValueError(f"{2 * pods} pods need as many devices, {nodes} x {devices_per_node} is too few")
    cache_pods(cache_of(cache_docs(1, 2)), 0, 1)  # one-time costs, unmeasured
    bare = kept(lambda: cache_of(cache_docs(nodes, 0)))
    per_node = (kept(lambda: cache_of(cache_docs(2 * nodes, 0))) - bare) / nodes
    out: dict[str, Any] = {"worker_cache_bytes_per_node": round(per_node)}
    small = kept(lambda: cache_of(cache_docs(nodes, devices_per_node)))
    large = kept(lambda: cache_of(cache_docs(nodes, 2 * devices_per_node)))
    out["worker_cache_bytes_per_device"] = round((large - small) / (nodes * devices_per_node))
    out["worker_cache_bytes_per_slice"] = round((small - bare - (large - small)) / nodes)
    cache = cache_of(cache_docs(nodes, devices_per_node))
    cache_pods(cache, 0, pods)
    out["worker_cache_bytes_per_pod"] = round(kept(lambda: cache_pods(cache, pods, pods)) / pods)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", default="1000,10000", help="comma-separated pod counts")
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--devices-per-node", type=int, default=8)
    ap.add_argument(
        "--devices", type=int, default=10_000, help="extra devices for the device figure (0: none)"
    )
    ap.add_argument(
        "--unit-nodes", type=int, default=500, help="nodes of the per-unit shapes (and twice as many)"
    )
    ap.add_argument(
        "--unit-devices-per-node",
        type=int,
        default=8,
        help="devices per node of the per-unit shapes (and twice)",
    )
    ap.add_argument(
        "--unit-pods", type=int, default=1000, help="running pods of the per-unit shapes (and twice)"
    )
    ap.add_argument(
        "--unit-classes", type=int, default=25, help="DeviceClasses of the engine's per-unit shapes"
    )
    ap.add_argument(
        "--units-only", action="store_true", help="only the per-unit figures (no emulator, no worker)"
    )
    ap.add_argument("--cache-of", metavar="KUBECONFIG", help=argparse.SUPPRESS)
    ap.add_argument("--untrimmed", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.cache_of:
        print(f"{measure_cache(args.cache_of, not args.untrimmed):.3f}")
        return 0
    out: dict[str, Any] = {}
    nodes, per_node, pods = args.unit_nodes, args.unit_devices_per_node, args.unit_pods
    out["per_unit_shapes"] = {
        "nodes": [nodes, 2 * nodes],
        "devices": [nodes * per_node, 2 * nodes * per_node],
        "running_pods": [pods, 2 * pods],
        "engine_classes": args.unit_classes,
    }
    with tracing():
        out.update(engine_units(nodes, per_node, pods, args.unit_classes))
        out.update(cache_units(nodes, per_node, pods))
    if args.units_only:
        print(json.dumps(out, indent=2))
        return 0
    counts = [int(x) for x in args.pods.split(",") if x]
    base = shape(args.nodes, args.devices_per_node, 0, 0)
    runs = [shape(args.nodes, args.devices_per_node, n, 0) for n in counts]
    out.update({"baseline": base, "pods": runs})
    out["per_1000_pods"] = {
        str(r["pods"]): {
            "rss_mib": per_thousand(r, base, "rss_mib", r["pods"]),
            "cache_mib": per_thousand(r, base, "cache_mib", r["pods"]),
            "cache_untrimmed_mib": per_thousand(r, base, "cache_untrimmed_mib", r["pods"]),
        }
        for r in runs
        if r["pods"]
    }
    if args.devices:
        dev = shape(args.nodes, args.devices_per_node, 0, args.devices)
        out["devices"] = dev
        out["per_1000_devices"] = {
            "rss_mib": per_thousand(dev, base, "rss_mib", args.devices),
            "cache_mib": per_thousand(dev, base, "cache_mib", args.devices),
            "cache_untrimmed_mib": per_thousand(dev, base, "cache_untrimmed_mib", args.devices),
        }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
