"""kube-scheduler's own DRA extended-resource path against draxr's worker, on one real kube-apiserver.

Kubernetes ``--version`` (default 1.37; DRAExtendedResource on by default since 1.36) from the local
control plane (e2e/controlplane; ``make controlplane``): etcd, kube-apiserver and kube-scheduler, no
kubelet. Nodes are Ready with their taints lifted, one ResourceSlice each. Three shapes (``--shape``):

- ``single`` (the default; docs/performance.md): ``--nodes`` 500 Nodes with ``--devices`` 8 devices each,
  one DeviceClass ``gpu.example.com`` with ``extendedResourceName: example.com/gpu``; ``--pods`` 1,000
  pods, each asking for ``example.com/gpu: 1``.
- ``upstream``: scheduler_perf's ``ExtendedResource`` workload ``Explicit_25classes_5000pods_500nodes``
  (test/integration/scheduler_perf/dra/extendedresource/performance-config.yaml): ``--classes`` 25
  DeviceClasses ``test-class-<i>`` with ``extendedResourceName: example.com/gpu-<i>``, 500 Nodes with 10
  devices each (resourceslice-basic-devices.yaml's attributes and capacity), ``--init-pods`` 2,500 pods
  placed first, then ``--pods`` 2,500 measured ones, pod ``i`` asking for ``example.com/gpu-<i mod 25>:
  1`` (requests and limits). Upstream's threshold for kube-scheduler there is 120 pods/s (that file);
  issue 22 quotes 195 pods/s for upstream's CI, on much bigger machines.
- ``placement``: ``bench/scale.py --stream placement`` for both schedulers (issue 21): the ``upstream``
  classes and nodes, the nodes in ``--zones`` 10 zones, no init pods, ``--pods`` 1,500 measured, and
  every third pod placing itself among its replicas (required anti-affinity per node, or a
  DoNotSchedule zone spread of maxSkew 1, over ``--groups`` 50 groups of each). Validity also checks
  that no two replicas of an anti-affinity group share a node and that every spread group's zones
  differ by at most one pod.

The same stream of pods is placed three times, each run in namespaces of its own (``<run>-init`` for
the init pods, ``<run>`` for the measured ones) and the cluster cleaned in between:

- ``floor``: no scheduler. ``bench/floor.py`` performs exactly draxr's five writes per pod (special
  claim, its status, the pod's mapping, the binding, the Event) for a placement computed beforehand,
  as draxr's worker identity (its RBAC, FlowSchema and priority level), with no client-side limit and
  ``--floor-threads`` writers (one run per count, the fastest kept): what this API server can take of
  these writes. ``draxr_over_floor`` (and ``kube_scheduler_over_floor``) divide pods bound per second
  by the floor's. Not for the ``placement`` shape (its slots ignore the replicas' constraints).

- ``kube-scheduler``: pods with the default schedulerName; kube-scheduler's DynamicResources plugin
  creates, allocates and reserves the special claim, writes the pod's extendedResourceClaimStatus,
  binds. draxr does not run.
- ``draxr``: pods with ``schedulerName: draxr``; one ``draxr serve --no-webhook --no-leader-elect``
  subprocess (draxr's RBAC, the worker's identity) places them. kube-scheduler runs but ignores
  them.

The init pods are placed by the same scheduler as the measured ones, and all bound, before the first
measured pod is created; every figure is over the measured pods only. Both clients get the same write
limit (``--qps``, default 1000; kube-scheduler's own default is 50 with burst 100); ``--defaults`` runs
each scheduler at its shipped settings instead. draxr gets its chart's FlowSchema and priority level
(kube-scheduler's identity here is exempt from API Priority and Fairness). Per run it prints:
pods bound per second (first create to last binding, seen by a watch), create-to-bound latency, API
writes per pod by verb and resource (deltas of kube-apiserver's ``apiserver_request_total``, less the
benchmark's own pod creations; writes the apiserver makes on its own, such as its identity Lease, are
listed apart), and whether every binding, init pods included, is valid: each bound pod has exactly one
special claim, asking for the DeviceClass of the pod's extended resource, allocated that many devices
from a slice of its node, reserved for it, named by its ``status.extendedResourceClaimStatus``; no
device is allocated twice. Its Events are counted by reason once every measured pod has its
``Scheduled`` Event, or their count stopped growing for 30 s (Events may trail the last binding).

    python bench/versus_scheduler.py [--version 1.37] [--shape single|upstream|placement] [--nodes N]
        [--devices N] [--classes N] [--init-pods N] [--pods N] [--zones N] [--groups N] [--qps 1000]
        [--defaults] [--floor-threads 8,16,32] [--only floor|kube-scheduler|draxr]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    # Run as a script, bench/ comes first on sys.path and bench/webhook.py would shadow the package.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    sys.path.insert(0, os.path.dirname(_here))

from bench.allocate import ZONE, place_among_replicas
from bench.common import int_list, percentile, serve_argv
from bench.floor import SCHEDULER as FLOOR
from bench.floor import FloorWriter, Slot
from e2e.controlplane.launcher import ControlPlane, _die_with_parent, free_port, log_tail, wait_until
from webhook.core.api.objects import Obj
from webhook.install.flowcontrol import flow_control
from webhook.install.rbac import rbac
from webhook.kube.client import ApiError, KubeClient
from webhook.kube.resources import (
    DEVICE_CLASSES,
    EVENTS,
    NAMESPACES,
    NODES,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    Resource,
)

SPECIAL = "resource.kubernetes.io/extended-resource-claim"
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", True)
#: The sides of a run, in the order they run: the floor (no scheduling), then the two schedulers.
SIDES = ("floor", "kube-scheduler", "draxr")
WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE", "APPLY")
#: Resources the placement writes (claims, pod status and binding, events); the rest is background.
PLACEMENT = ("pods", "resourceclaims", "events")
_SAMPLE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parallel(fn: Callable[[Any], Any], items: Iterable[Any], threads: int = 8) -> list[Any]:
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(fn, items))


# ---------------------------------------------------------------------------------------------------------
# The cluster


@dataclass(frozen=True)
class Shape:
    """What is created and placed: ``classes`` DeviceClasses of ``driver``, ``nodes`` Nodes with one
    ResourceSlice of ``devices`` devices each, ``init_pods`` placed first, then ``pods`` measured."""

    name: str  # "single", "upstream" or "placement"
    nodes: int
    devices: int
    classes: int
    init_pods: int
    pods: int
    zones: int = 0  # > 0: nodes in zones, and pods placing themselves among their replicas
    groups: int = 0  # replica groups of each kind (anti-affinity, zone spread)

    def pod(self, name: str, i: int, scheduler: str | None) -> Obj:
        """Pod ``i`` of the stream, named ``name``: it asks for class ``i mod classes``'s resource."""
        body = pod(name, self.resource_name(i % self.classes), scheduler)
        return place_among_replicas(body, i, self.groups) if self.zones else body

    def slot(self, i: int, s: int) -> Slot:
        """The floor's placement of pod ``i`` of the stream on slot ``s``: device ``s mod devices`` of
        node ``s div devices`` (every device matches every class: their selectors name the driver)."""
        node = node_name(s // self.devices)
        return Slot(
            node=node,
            pool=node,
            device=self.device(s % self.devices)["name"],
            driver=self.driver,
            device_class=self.device_class(i % self.classes),
            resource=self.resource_name(i % self.classes),
        )

    @property
    def driver(self) -> str:
        return "gpu.example.com" if self.name == "single" else "test-driver.cdi.k8s.io"

    def device_class(self, i: int) -> str:
        return "gpu.example.com" if self.name == "single" else f"test-class-{i}"

    def resource_name(self, i: int) -> str:
        """The extended resource name of DeviceClass ``i``."""
        return "example.com/gpu" if self.name == "single" else f"example.com/gpu-{i}"

    def device(self, i: int) -> Obj:
        if self.name == "single":
            return {"name": f"gpu-{i}"}
        # resourceslice-basic-devices.yaml: an Intel GPU's attributes, two PCI roots.
        root = i % 2
        return {
            "name": f"basic-device-{i}",
            "attributes": {
                "driver": {"string": "xe"},
                "driverVersion": {"version": "1.2.3"},
                "resource.k8s.io/pciRoot": {"string": str(root)},
                "family": {"string": "Arc Pro B-Series"},
                "health": {"string": "Healthy"},
                "model": {"string": "B60"},
                "pciAddress": {"string": f"0000:0{i}:00.0"},
                "pciId": {"string": "0xe211"},
                "pciRoot": {"string": f"0{root}"},
                "resource.kubernetes.io/pciBusID": {"string": f"0000:0{i}:00.0"},
                "resource.kubernetes.io/pciRoot": {"string": f"pci0000:0{root}"},
                "sriov": {"bool": True},
                "type": {"string": "gpu"},
            },
            "capacity": {"memory": {"value": "24480Mi"}, "millicores": {"value": "1k"}},
        }


#: Each shape's defaults; ``upstream`` is scheduler_perf's Explicit_25classes_5000pods_500nodes.
SHAPES = {
    "single": Shape("single", nodes=500, devices=8, classes=1, init_pods=0, pods=1000),
    "upstream": Shape("upstream", nodes=500, devices=10, classes=25, init_pods=2500, pods=2500),
    "placement": Shape(
        "placement", nodes=500, devices=10, classes=25, init_pods=0, pods=1500, zones=10, groups=50
    ),
}


def setup(client: KubeClient, shape: Shape) -> list[str]:
    for i in range(shape.classes):
        client.create(
            DEVICE_CLASSES,
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": shape.device_class(i)},
                "spec": {
                    "extendedResourceName": shape.resource_name(i),
                    "selectors": [{"cel": {"expression": f'device.driver == "{shape.driver}"'}}],
                },
            },
        )
    names = [node_name(n) for n in range(shape.nodes)]

    def one(name: str) -> None:
        ready_node(
            client,
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": node_labels(name, shape)},
            },
            {"cpu": "64", "memory": "256Gi", "pods": "110"},
        )
        client.create(
            RESOURCE_SLICES,
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{name}-gpus"},
                "spec": {
                    "driver": shape.driver,
                    "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": [shape.device(i) for i in range(shape.devices)],
                },
            },
        )

    parallel(one, names)
    return names


def node_name(n: int) -> str:
    return f"node-{n:03d}"


def node_labels(name: str, shape: Shape) -> dict[str, str]:
    labels = {"kubernetes.io/hostname": name}
    if shape.zones:
        labels[ZONE] = f"zone-{int(name.rsplit('-', 1)[1]) % shape.zones}"
    return labels


def ready_node(
    client: KubeClient, body: Obj, allocatable: dict[str, str], taints: list[Obj] | None = None
) -> None:
    """A Node as a kubelet would leave it: created, its status Ready with ``allocatable``, and only
    ``taints`` (TaintNodesByCondition put node.kubernetes.io/not-ready on the new Node; with no
    kubelet, no controller lifts it)."""
    client.create(NODES, body)
    status = {
        "capacity": allocatable,
        "allocatable": allocatable,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
    }
    client.patch(NODES, body["metadata"]["name"], {"status": status}, subresource="status")
    client.patch(NODES, body["metadata"]["name"], {"spec": {"taints": taints or None}})


def namespace(client: KubeClient, name: str) -> None:
    client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    # The ServiceAccount admission plugin refuses pods until the namespace has its default account.
    client.create(
        SERVICE_ACCOUNTS,
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
        name,
    )


def pod(name: str, resource: str, scheduler: str | None) -> Obj:
    spec: Obj = {
        "containers": [
            {
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {resource: "1"}, "limits": {resource: "1"}},
            }
        ],
        "terminationGracePeriodSeconds": 0,
    }
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def clean(client: KubeClient, ns: str) -> None:
    """Pods gone (grace 0: no kubelet), then each claim's finalizer removed and the claim deleted."""
    pods = client.list(PODS, ns).get("items") or []
    parallel(lambda p: client.delete(PODS, p["metadata"]["name"], ns), pods)

    def drop(claim: Obj) -> None:
        name = claim["metadata"]["name"]
        try:
            client.patch(RESOURCE_CLAIMS, name, {"metadata": {"finalizers": None}}, namespace=ns)
            client.delete(RESOURCE_CLAIMS, name, ns)
        except ApiError as e:
            if not e.not_found:
                raise

    parallel(drop, client.list(RESOURCE_CLAIMS, ns).get("items") or [])
    deadline = time.monotonic() + 60
    while client.list(RESOURCE_CLAIMS, ns).get("items") or client.list(PODS, ns).get("items"):
        if time.monotonic() > deadline:
            raise TimeoutError(f"namespace {ns} still holds pods or claims")
        time.sleep(0.2)  # a poll interval; the loop re-checks the condition


# ---------------------------------------------------------------------------------------------------------
# Measuring


def request_totals(client: KubeClient) -> Counter[tuple[str, str]]:
    """apiserver_request_total of write verbs by (verb, resource[/subresource])."""
    resp = client.api.call_api("GET", f"{client.api.configuration.host}/metrics", {"Accept": "text/plain"})
    text = resp.read().decode()
    out: Counter[tuple[str, str]] = Counter()
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if not m:
            continue
        labels = dict(_LABEL.findall(m.group("labels")))
        if labels.get("verb") not in WRITE_VERBS or labels.get("dry_run"):
            continue
        res = labels.get("resource", "")
        if labels.get("subresource"):
            res += "/" + labels["subresource"]
        out[(labels["verb"], res)] += int(float(m.group("value")))
    return out


class BindWatch:
    """Records when each pod of a namespace is first seen with spec.nodeName: list, then watch from the
    list's resourceVersion, and list and watch again when the apiserver ends the watch (it closes
    watchers that fall behind: "Forcing pods watcher close due to unresponsiveness")."""

    def __init__(self, client: KubeClient, ns: str) -> None:
        self.client, self.ns = client, ns
        self.bound: dict[str, float] = {}
        self.relists = 0
        self.error = ""
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._stream: Any = None
        self._rv = client.list(PODS, ns)["metadata"]["resourceVersion"]
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _seen(self, obj: Obj) -> None:
        name = (obj.get("metadata") or {}).get("name")
        if name and (obj.get("spec") or {}).get("nodeName") and name not in self.bound:
            with self._cond:
                self.bound[name] = time.monotonic()
                self._cond.notify_all()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._stream = self.client.watch(PODS, self._rv, namespace=self.ns, timeout_seconds=3600)
                for event in self._stream:
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        break
                    self._rv = (obj.get("metadata") or {}).get("resourceVersion") or self._rv
                    self._seen(obj)
                    if self._stop.is_set():
                        return
                if self._stop.is_set():
                    return
                self.relists += 1
                listing = self.client.list(PODS, self.ns)
                for obj in listing.get("items") or []:
                    self._seen(obj)
                self._rv = listing["metadata"]["resourceVersion"]
        except Exception as e:
            self.error = f"{type(e).__name__}: {e}"
            with self._cond:
                self._cond.notify_all()

    def wait(self, count: int, timeout: float) -> bool:
        with self._cond:
            self._cond.wait_for(lambda: len(self.bound) >= count or bool(self.error), timeout)
            if self.error:
                raise RuntimeError(f"watching pods failed: {self.error} ({len(self.bound)} bound)")
            return len(self.bound) >= count

    def wait_names(self, names: set[str], timeout: float) -> bool:
        """Whether every pod of ``names`` was seen bound within ``timeout`` seconds."""
        with self._cond:
            self._cond.wait_for(lambda: names <= self.bound.keys() or bool(self.error), timeout)
            if self.error:
                raise RuntimeError(f"watching pods failed: {self.error} ({len(self.bound)} bound)")
            return names <= self.bound.keys()

    def stop(self) -> None:
        self._stop.set()
        if self._stream is not None:
            self._stream.close()


def validate(client: KubeClient, namespaces: list[str], classes: dict[str, str]) -> Obj:
    """Every bound pod of ``namespaces``: exactly one special claim, asking for the DeviceClass of each of
    the pod's extended resources (``classes``: resource name to class) and allocated that many devices,
    each from its node's slice, reserved for it and named by its extendedResourceClaimStatus; no device
    allocated twice, across all of ``namespaces``."""
    pods = [p for ns in namespaces for p in client.list(PODS, ns).get("items") or []]
    claims = [c for ns in namespaces for c in client.list(RESOURCE_CLAIMS, ns).get("items") or []]
    slices = {s["spec"]["pool"]["name"]: s["spec"]["nodeName"] for s in client.list(RESOURCE_SLICES)["items"]}
    by_owner: dict[str, list[Obj]] = {}
    for c in claims:
        if (c["metadata"].get("annotations") or {}).get(SPECIAL) != "true":
            continue
        for ref in c["metadata"].get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == "Pod":
                by_owner.setdefault(ref["uid"], []).append(c)
    problems: list[str] = []
    devices: Counter[tuple[str, str, str]] = Counter()
    bound = [p for p in pods if p["spec"].get("nodeName")]
    for p in bound:
        name, node, puid = p["metadata"]["name"], p["spec"]["nodeName"], p["metadata"]["uid"]
        mine = by_owner.get(puid, [])
        if len(mine) != 1:
            problems.append(f"{name}: {len(mine)} special claims")
            continue
        claim = mine[0]
        wanted: Counter[str] = Counter()
        for c in p["spec"]["containers"]:
            for res, qty in ((c.get("resources") or {}).get("requests") or {}).items():
                if res in classes:
                    wanted[classes[res]] += int(qty)
        asked: Counter[str] = Counter()
        request_class = {}
        for r in claim["spec"]["devices"]["requests"]:
            exactly = r.get("exactly") or {}
            request_class[r["name"]] = exactly.get("deviceClassName")
            asked[exactly.get("deviceClassName", "")] += int(exactly.get("count", 1))
        if asked != wanted:
            problems.append(f"{name}: claim asks for {dict(asked)}, the pod for {dict(wanted)}")
        status = claim.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        got = Counter(request_class.get(r.get("request")) for r in results)
        if got != wanted:
            problems.append(f"{name}: claim allocates {dict(got)}, the pod asks for {dict(wanted)}")
        for r in results:
            devices[(r["driver"], r["pool"], r["device"])] += 1
            if slices.get(r["pool"]) != node:
                problems.append(f"{name}: device {r['pool']}/{r['device']} is not on its node {node}")
        if [(x.get("resource"), x.get("name"), x.get("uid")) for x in status.get("reservedFor") or []] != [
            ("pods", name, puid)
        ]:
            problems.append(f"{name}: claim reservedFor {status.get('reservedFor')}")
        erc = (p.get("status") or {}).get("extendedResourceClaimStatus") or {}
        if erc.get("resourceClaimName") != claim["metadata"]["name"]:
            problems.append(f"{name}: extendedResourceClaimStatus names {erc.get('resourceClaimName')!r}")
    doubles = [k for k, n in devices.items() if n > 1]
    problems += [f"device {d} allocated {devices[d]} times" for d in doubles]
    problems += replica_problems(bound, {n["metadata"]["name"]: n for n in client.list(NODES)["items"]})
    return {
        "pods": len(pods),
        "bound": len(bound),
        "special_claims": sum(len(v) for v in by_owner.values()),
        "devices_allocated": sum(devices.values()),
        "double_allocated": len(doubles),
        "valid": not problems and len(bound) == len(pods),
        "problems": problems[:20],
    }


def replica_problems(bound: list[Obj], nodes: dict[str, Obj]) -> list[str]:
    """The placement shape's constraints on the bound pods: two replicas of an ``anti-<g>`` group on
    one node, or a ``spread-<g>`` group whose zones (every zone of ``nodes``) differ by more than one
    pod (nothing departs, so each DoNotSchedule placement's skew of 1 holds at the end)."""
    zones = {n: (o["metadata"].get("labels") or {}).get(ZONE) for n, o in nodes.items()}
    all_zones = {z for z in zones.values() if z}
    anti: dict[str, set[str]] = {}
    spread: dict[str, Counter[str]] = {}
    problems: list[str] = []
    for p in bound:
        app = (p["metadata"].get("labels") or {}).get("app", "")
        node = p["spec"]["nodeName"]
        if app.startswith("anti-"):
            if node in anti.setdefault(app, set()):
                problems.append(f"{p['metadata']['name']}: a second replica of {app} on node {node}")
            anti[app].add(node)
        elif app.startswith("spread-"):
            spread.setdefault(app, Counter())[str(zones.get(node))] += 1
    for app, counts in sorted(spread.items()):
        per_zone = [counts.get(z, 0) for z in all_zones]
        if per_zone and max(per_zone) - min(per_zone) > 1:
            problems.append(f"{app}: zones hold {sorted(per_zone)} replicas (maxSkew 1)")
    return problems


def events_by_reason(client: KubeClient, ns: str, pods: int, settle: float = 30.0) -> dict[str, int]:
    """The Events of ``ns`` by reason, once ``pods`` pods have their ``Scheduled`` Event or the count
    stopped growing for ``settle`` seconds (a scheduler's Events may trail its last binding)."""
    last, since = -1, time.monotonic()
    while True:
        counts = Counter(str(e.get("reason")) for e in client.list(EVENTS, ns).get("items") or [])
        if counts["Scheduled"] >= pods or time.monotonic() - since > settle:
            return dict(counts.most_common())
        if counts["Scheduled"] != last:
            last, since = counts["Scheduled"], time.monotonic()
        time.sleep(0.5)  # a poll interval; the loop re-checks the count


@dataclass
class Placed:
    start: float  # the first create
    created_at: float  # the last create returned
    done: bool  # every pod bound within the timeout
    created: dict[str, float]  # pod name: when its create returned
    watch: BindWatch


def place(
    client: KubeClient,
    ns: str,
    shape: Shape,
    count: int,
    prefix: str,
    scheduler: str | None,
    timeout: float,
    created_hook: Callable[[int, Obj], None] | None = None,
) -> Placed:
    """Creates ``count`` pods in ``ns``, pod ``i`` asking for the resource of class ``i mod classes``,
    and waits (``timeout`` seconds at most) until every one is bound. ``created_hook(i, pod)`` is
    given each pod as its create returned it (the floor places it from there)."""
    watch = BindWatch(client, ns)
    created: dict[str, float] = {}
    lock = threading.Lock()

    def make(i: int) -> None:
        name = f"{prefix}-{i:04d}"
        body = client.create(PODS, shape.pod(name, i, scheduler), ns)
        with lock:
            created[name] = time.monotonic()
        if created_hook is not None:
            created_hook(i, body)

    start = time.monotonic()
    parallel(make, range(count))
    created_at = time.monotonic()
    done = watch.wait(count, timeout)
    watch.stop()
    return Placed(start, created_at, done, created, watch)


def floor_hook(floor: FloorWriter | None, shape: Shape, first: int) -> Callable[[int, Obj], None] | None:
    """``place``'s hook giving pod ``i`` of a stream to ``floor`` for slot ``first + i``."""
    if floor is None:
        return None
    return lambda i, body: floor.submit(body, shape.slot(i, first + i))


def run(
    client: KubeClient,
    ns: str,
    shape: Shape,
    scheduler: str | None,
    timeout: float,
    floor: FloorWriter | None = None,
) -> Obj:
    """One side's run: the init pods, then the measured ones, and the figures. ``floor`` places each
    pod as its create returns (the pods then name the floor's scheduler), init pods on the first
    slots."""
    namespaces = [ns]
    classes = {shape.resource_name(i): shape.device_class(i) for i in range(shape.classes)}
    init: Obj = {}
    if shape.init_pods:
        namespaces.insert(0, f"{ns}-init")
        namespace(client, namespaces[0])
        t = time.monotonic()
        hook = floor_hook(floor, shape, 0)
        placed = place(client, namespaces[0], shape, shape.init_pods, "init", scheduler, timeout, hook)
        init = {
            "init_pods": shape.init_pods,
            "init_all_bound": placed.done,
            "init_seconds": round(time.monotonic() - t, 2),
        }
        if not placed.done:  # nothing to measure: the cluster is not in the shape's state
            init["validity"] = validate(client, namespaces[:1], classes)
            clean(client, namespaces[0])
            return init
    namespace(client, ns)
    before = request_totals(client)
    hook = floor_hook(floor, shape, shape.init_pods)
    placed = place(client, ns, shape, shape.pods, "p", scheduler, timeout, hook)
    watch, created, start, done = placed.watch, placed.created, placed.start, placed.done
    pods = shape.pods
    end = max(watch.bound.values(), default=time.monotonic())
    after = request_totals(client)
    writes = after - before
    writes[("POST", "pods")] -= len(created)  # the benchmark's own
    writes = +writes
    placement = {f"{v} {r}": n for (v, r), n in sorted(writes.items()) if r.split("/")[0] in PLACEMENT}
    background = {f"{v} {r}": n for (v, r), n in sorted(writes.items()) if r.split("/")[0] not in PLACEMENT}
    per_pod = sum(placement.values()) / max(1, len(watch.bound))
    latencies = [watch.bound[n] - created[n] for n in watch.bound if n in created]
    result: Obj = {
        "pods": pods,
        "all_bound": done,
        "bound": len(watch.bound),
        "seconds": round(end - start, 2),
        "pods_bound_per_second": round(len(watch.bound) / (end - start), 1),
        "pods_created_per_second": round(pods / (placed.created_at - start), 1),
        "pod_watch_relists": watch.relists,
        "create_to_bound_p50_ms": round(percentile(latencies, 0.5) * 1000, 1),
        "create_to_bound_p99_ms": round(percentile(latencies, 0.99) * 1000, 1),
        "writes_per_pod": round(per_pod, 2),
        "writes_per_pod_without_events": round(
            sum(n for k, n in placement.items() if "events" not in k) / max(1, len(watch.bound)), 2
        ),
        "placement_writes": placement,
        "background_writes": background,
        "events_by_reason": events_by_reason(client, ns, pods),
        "validity": validate(client, namespaces, classes),
    }
    for n in namespaces:
        clean(client, n)
    return init | result


# ---------------------------------------------------------------------------------------------------------
# draxr's worker


class DraxrWorker:
    """``draxr serve --no-webhook --no-leader-elect`` as the worker identity; ``qps`` None: the
    shipped write limit."""

    def __init__(self, cp: ControlPlane, workdir: Path, qps: int | None, *flags: str) -> None:
        self.port = free_port()
        self.log = workdir / "draxr-worker.log"
        argv = serve_argv(
            "--host=127.0.0.1",
            f"--port={self.port}",
            f"--kubeconfig={cp.kubeconfig_path('worker')}",
            *([] if qps is None else [f"--qps={qps}", f"--burst={qps}"]),
            *flags,
        )
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )

    def ready(self) -> bool:
        import http.client

        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
            conn.request("GET", "/readyz")
            return conn.getresponse().status == 200
        except OSError:
            return False

    def dead(self) -> str | None:
        code = self.popen.poll()
        return None if code is None else f"draxr exited with {code}:\n{log_tail(self.log)}"

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                self.popen.kill()


def install_rbac(client: KubeClient) -> None:
    """draxr's RBAC and, as its chart installs by default, its FlowSchema and priority level."""
    namespace(client, "draxr-system")
    for obj in [*rbac("draxr-system"), *flow_control("draxr-system")]:
        plural = obj["kind"].lower() + "s"
        group, _, version = obj["apiVersion"].rpartition("/")
        res = Resource(group, version, plural, obj["kind"], "namespace" in obj["metadata"])
        client.create(res, obj, obj["metadata"].get("namespace"))


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, Shape]:
    """The options, and the shape: ``--shape``'s defaults with the sizes given overriding them."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--version", default="1.37", help="Kubernetes minor release (pinned in versions.env)")
    ap.add_argument(
        "--shape",
        choices=sorted(SHAPES),
        default="single",
        help="single: one DeviceClass, 500 nodes x 8 devices, 1,000 pods; upstream: scheduler_perf's "
        "Explicit_25classes_5000pods_500nodes; placement: upstream's classes and nodes in zones, 1,500 "
        "pods, every third one with required anti-affinity or a zone spread",
    )
    ap.add_argument("--nodes", type=int, help="nodes, one ResourceSlice each (500)")
    ap.add_argument("--devices", type=int, help="devices per node (single: 8, upstream: 10)")
    ap.add_argument("--classes", type=int, help="DeviceClasses (upstream only: 25)")
    ap.add_argument(
        "--init-pods", type=int, help="pods placed before the measured ones (single: 0, upstream: 2500)"
    )
    ap.add_argument("--pods", type=int, help="measured pods (single: 1000, upstream: 2500, placement: 1500)")
    ap.add_argument("--zones", type=int, help="zones of the nodes (placement only: 10)")
    ap.add_argument("--groups", type=int, help="replica groups of each kind (placement only: 50)")
    ap.add_argument("--qps", type=int, help="write limit of kube-scheduler and of draxr's worker (1000)")
    ap.add_argument(
        "--defaults",
        action="store_true",
        help="both schedulers at their shipped settings (no --qps for either; the floor has no limit)",
    )
    ap.add_argument(
        "--floor-threads",
        type=thread_counts,
        default="8,16,32",
        help="the floor's writer threads, comma-separated: one floor run each, the fastest kept (8,16,32)",
    )
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds a run may take to bind every pod")
    ap.add_argument("--only", choices=SIDES, help="run one side only")
    args = ap.parse_args(argv)
    base = SHAPES[args.shape]
    if args.defaults and args.qps is not None:
        ap.error("--defaults runs both schedulers at their shipped write limits: drop --qps")
    if not args.defaults and args.qps is None:
        args.qps = 1000  # None from here on: the shipped limits
    if base.zones and args.only == "floor":
        ap.error("the floor places pods by slot: it has no placement for the placement shape's replicas")
    if args.classes is not None and base.name == "single":
        ap.error("--classes needs --shape upstream or placement (the single shape has one DeviceClass)")
    for opt in ("zones", "groups"):
        if getattr(args, opt) is not None and base.name != "placement":
            ap.error(f"--{opt} needs --shape placement")
    keys = ("nodes", "devices", "classes", "init_pods", "pods", "zones", "groups")
    sizes = {k: getattr(args, k) for k in keys}
    for key, value in sizes.items():
        if value is not None and value < (0 if key == "init_pods" else 1):
            ap.error(
                f"--{key.replace('_', '-')} must be {'>= 0' if key == 'init_pods' else '>= 1'}, not {value}"
            )
    return args, replace(base, **{k: v for k, v in sizes.items() if v is not None})


def main(argv: list[str] | None = None) -> int:
    args, shape = parse_args(argv)
    # The control plane's keys and logs go with the run (a failure prints the logs' tails).
    with tempfile.TemporaryDirectory(prefix="draxr-versus-") as tmp:
        return measure(args, shape, Path(tmp))


def thread_counts(text: str) -> list[int]:
    """``--floor-threads``: comma-separated counts, each from 1 to 64 (the client's connection pool:
    each writer on a connection of its own)."""
    counts = int_list(text)
    if not counts or any(not 1 <= n <= 64 for n in counts):
        raise argparse.ArgumentTypeError(f"each thread count must be 1-64: {text!r}")
    return counts


def measure(args: argparse.Namespace, shape: Shape, workdir: Path) -> int:
    out: Obj = {
        "kubernetes": None,
        "shape": {
            "name": shape.name,
            "nodes": shape.nodes,
            "devices_per_node": shape.devices,
            "classes": shape.classes,
            "init_pods": shape.init_pods,
            "pods": shape.pods,
            "zones": shape.zones,
            "groups": shape.groups,
            "qps": "defaults" if args.qps is None else args.qps,
        },
    }
    sides = [args.only] if args.only else [s for s in SIDES if s != "floor" or not shape.zones]
    with ControlPlane(
        args.version,
        scheduler=True,
        runtime_config={},
        scheduler_args=[] if args.qps is None else [f"--kube-api-{k}={args.qps}" for k in ("qps", "burst")],
        workdir=workdir / "controlplane",
    ) as cp:
        out["kubernetes"] = cp.version
        client = KubeClient.from_config(str(cp.kubeconfig_path("admin")), qps=100000, burst=100000)
        t = time.monotonic()
        setup(client, shape)
        install_rbac(client)
        out["setup_seconds"] = round(time.monotonic() - t, 1)
        if "floor" in sides:
            out["floor"] = floor_side(cp, client, shape, args)
        if "kube-scheduler" in sides:
            out["kube-scheduler"] = run(client, "bench-kube-scheduler", shape, None, args.timeout)
        if "draxr" in sides:
            worker = DraxrWorker(cp, workdir, args.qps)
            try:
                wait_until("draxr's worker did not become ready", worker.ready, 120, alive=worker.dead)
                out["draxr"] = run(client, "bench-draxr", shape, "draxr", args.timeout)
            finally:
                worker.stop()
    for side in ("draxr", "kube-scheduler"):
        if side in out and "floor" in out and out["floor"].get("pods_bound_per_second"):
            ratio = out[side].get("pods_bound_per_second", 0) / out["floor"]["pods_bound_per_second"]
            out[f"{side.replace('-', '_')}_over_floor"] = round(ratio, 3)
    print(json.dumps(out, indent=2))
    return 0 if all(out[k]["validity"]["valid"] for k in SIDES if k in out) else 1


def floor_side(cp: ControlPlane, admin: KubeClient, shape: Shape, args: argparse.Namespace) -> Obj:
    """The floor once per ``--floor-threads`` count, as draxr's worker identity (its RBAC and
    priority level); the fastest run, with every count's pods bound per second beside it."""
    runs: dict[int, Obj] = {}
    for threads in args.floor_threads:
        client = KubeClient.from_config(str(cp.kubeconfig_path("worker")), qps=1e9, burst=10**9)
        writer = FloorWriter(client, threads)
        try:
            runs[threads] = run(admin, f"bench-floor-{threads}", shape, FLOOR, args.timeout, writer)
        finally:
            writer.stop()
        runs[threads]["threads"] = threads
        runs[threads]["floor_errors"] = writer.errors[:10]
    best = max(runs.values(), key=lambda r: r.get("pods_bound_per_second", 0))
    return best | {"by_threads": {n: r.get("pods_bound_per_second") for n, r in runs.items()}}


if __name__ == "__main__":
    sys.exit(main())
