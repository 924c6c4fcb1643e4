"""Parity with kube-scheduler itself (issue 21): seeded random clusters and pod streams placed by the
real kube-scheduler, each of its verdicts checked against draxr's engine on the same state, then the
same stream placed by draxr's worker (``--policy upstream``) and every binding checked.

A seed makes a cluster on a fresh control plane (``--version``, default the newest pinned release,
etcd + kube-apiserver + kube-scheduler, Node objects without kubelets): ``--nodes`` nodes in three
zones (``topology.kubernetes.io/zone``), a third of them tainted ``parity/dedicated=gpu:NoSchedule``,
8 CPUs each, and one ResourceSlice per node of 2 to 4 GPUs whose ``model`` is ``a`` or ``b``; two
DeviceClasses select a model by CEL and map ``example.com/gpu-a`` and ``example.com/gpu-b``. Then
``--pods`` pods: each asks for one or two GPUs of a model and 1 to 4 CPUs; some tolerate the taint;
some belong to a group whose pods keep apart (required anti-affinity on the hostname), some to a
group spread over the zones (``maxSkew: 1``, ``DoNotSchedule``), the others are plain; a fifth mount
a PersistentVolumeClaim bound to a volume of one zone (its PV's node affinity and zone label:
VolumeBinding and VolumeZone), and a tenth an unbound claim of a ``WaitForFirstConsumer``
StorageClass whose ``allowedTopologies`` leave out one zone (VolumeBinding's dynamic provisioning:
the scheduler's PreBind names the node in ``volume.kubernetes.io/selected-node`` and waits; the
harness plays the provisioner, binding each such claim to a new volume of the node's zone).

Pods come in three PriorityClasses (10, 100, 1000), so kube-scheduler preempts.

Phase 1, lockstep: before each pod is created the cluster is read; kube-scheduler places the pod, or
reports it Unschedulable, or nominates it and evicts victims before binding it; draxr's engine
(``core.scheduling.Scheduler``, policy ``upstream``, every node scored) decides the same pod on the
state read before, with kube-scheduler's own DefaultPreemption (``device_aware=False``: no victim
frees devices, as dynamicresources.go's ``statusUnschedulable`` makes a device shortage
unresolvable). Compared: bound against Unschedulable against preempting; for a bound pod, that draxr
finds kube-scheduler's node feasible too (the pod pinned there); for an Unschedulable one, the whole
message byte for byte (Filter reasons and the ``preemption:`` part, per-node counts); for a
preempting one, the victims' priorities. Where draxr's device-aware preemption would place a pod
kube-scheduler leaves pending, that is counted apart (``device_preemptions_beyond_upstream``), not
as a difference. A step where kube-scheduler also placed another pod meanwhile (a retry of a pending
one) is not compared and is counted.

Phase 2: the cluster cleaned, the same stream for ``schedulerName: draxr``, one pod at a time, placed by
a ``draxr serve --no-webhook --policy upstream`` process (device-aware preemption). Every binding is
checked: the special claim allocates devices of the pod's model on its node, reserved for it, none
twice; CPUs within the node; taints tolerated; a static volume's zone is the node's, a provisioned
claim names the pod's node and its volume is in an allowed zone, the node's; no two pods of a
keep-apart group on one node; each
spread pod within skew 1 over the zones when it was bound (victims of a preemption may lower a zone
afterwards; kube-scheduler's bindings get this check too). Bound and pending counts are reported
beside kube-scheduler's (ties are broken at random upstream, so placements, and what fits later, may
differ without a bug).

Prints JSON per seed and in sum; exit 1 on any difference or invalid binding.

    python bench/parity.py [--seeds 1,2,3,4,5] [--nodes 8] [--pods 40] [--version 1.37]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    # Run as a script, bench/ comes first on sys.path and bench/webhook.py would shadow the package.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    sys.path.insert(0, os.path.dirname(_here))

from bench.common import int_list
from bench.versus_scheduler import DraxrWorker, clean, install_rbac, namespace, ready_node
from e2e.controlplane.launcher import ControlPlane, ControlPlaneError, wait_until
from e2e.target import PRIORITY_CLASSES
from webhook.core.api.objects import Obj
from webhook.core.scheduling.framework import SCHEDULED
from webhook.core.scheduling.plugins.defaultpreemption.postfilter import DefaultPreemption
from webhook.core.scheduling.scheduler import Scheduler
from webhook.kube.cache import ClusterCache
from webhook.kube.client import ApiError, KubeClient
from webhook.kube.resources import (
    DEVICE_CLASSES,
    EVENTS,
    NAMESPACES,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    STORAGE_CLASSES,
    Resource,
)

DRIVER = "gpu.parity.draxr.io"
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
TAINT = {"key": "parity/dedicated", "value": "gpu", "effect": "NoSchedule"}
TOLERATION = {"key": "parity/dedicated", "operator": "Exists", "effect": "NoSchedule"}
MODELS = ("a", "b")
CPUS = 8
#: The stream's PriorityClasses and how often each is drawn.
PRIORITIES = {"low": (10, 0.6), "mid": (100, 0.25), "high": (1000, 0.15)}
#: What the lockstep reads of the cluster, as the engine's cache holds it.
KINDS = (
    (NODES, "Node"),
    (RESOURCE_SLICES, "ResourceSlice"),
    (DEVICE_CLASSES, "DeviceClass"),
    (PODS, "Pod"),
    (RESOURCE_CLAIMS, "ResourceClaim"),
    (NAMESPACES, "Namespace"),
    (PERSISTENT_VOLUME_CLAIMS, "PersistentVolumeClaim"),
    (PERSISTENT_VOLUMES, "PersistentVolume"),
    (STORAGE_CLASSES, "StorageClass"),
)
#: A pod's annotation in the stream: the zone of the volume it mounts (made for it in each phase).
VOLUME_ZONE = "parity.draxr.io/volume-zone"
#: A pod's annotation in the stream: it mounts an unbound claim of this StorageClass.
VOLUME_CLASS = "parity.draxr.io/volume-class"
#: The ``WaitForFirstConsumer`` class, its provisioner (the harness) and the zones it allows.
WFFC_CLASS = "parity-wffc"
PROVISIONER = "volumes.parity.draxr.io"
ALLOWED_ZONES = ("zone-0", "zone-1")
SELECTED_NODE = "volume.kubernetes.io/selected-node"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"


def ext(model: str) -> str:
    return f"example.com/gpu-{model}"


# ---------------------------------------------------------------------------------------------------------
# The seeded cluster and stream


def cluster(seed: int, nodes: int) -> list[Obj]:
    """Nodes (with their status and taints), slices, classes and PriorityClasses of the seed."""
    rnd = random.Random(seed)
    out: list[Obj] = [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": f"parity-{name}"},
            "value": value,
        }
        for name, (value, _) in PRIORITIES.items()
    ]
    out.append(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": WFFC_CLASS},
            "provisioner": PROVISIONER,
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": list(ALLOWED_ZONES)}]}],
        }
    )
    for model in MODELS:
        out.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": f"gpu-{model}"},
                "spec": {
                    "extendedResourceName": ext(model),
                    "selectors": [
                        {
                            "cel": {
                                "expression": f'device.driver == "{DRIVER}" && '
                                f'device.attributes["{DRIVER}"].model == "{model}"'
                            }
                        }
                    ],
                },
            }
        )
    for i in range(nodes):
        name = f"node-{i}"
        node: Obj = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {HOSTNAME: name, ZONE: f"zone-{i % 3}"}},
            "spec": {"taints": [dict(TAINT)] if rnd.random() < 1 / 3 else []},
        }
        out.append(node)
        devices = [
            {"name": f"gpu-{d}", "attributes": {"model": {"string": rnd.choice(MODELS)}}}
            for d in range(rnd.randint(2, 4))
        ]
        out.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{name}-gpus"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": devices,
                },
            }
        )
    return out


def stream(seed: int, pods: int) -> list[Obj]:
    """The seed's pods, in arrival order (without schedulerName)."""
    rnd = random.Random(seed * 7919 + 1)
    out: list[Obj] = []
    for i in range(pods):
        model = rnd.choice(MODELS)
        gpus = 1 if rnd.random() < 0.8 else 2
        cpu = str(rnd.randint(1, 4))
        spec: Obj = {
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {
                        "requests": {ext(model): str(gpus), "cpu": cpu},
                        "limits": {ext(model): str(gpus)},
                    },
                }
            ],
            "terminationGracePeriodSeconds": 0,
        }
        if rnd.random() < 0.35:
            spec["tolerations"] = [dict(TOLERATION)]
        [priority] = rnd.choices(list(PRIORITIES), weights=[w for _, w in PRIORITIES.values()])
        spec["priorityClassName"] = f"parity-{priority}"
        kind = rnd.random()
        if kind < 0.3:
            app = f"apart-{rnd.randrange(3)}"
            term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOSTNAME}
            spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        elif kind < 0.6:
            app = f"spread-{rnd.randrange(2)}"
            spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": ZONE,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": app}},
                }
            ]
        else:
            app = f"plain-{i}"
        meta: Obj = {"name": f"p{i:03d}", "labels": {"app": app}}
        volume = rnd.random()
        if volume < 0.2:  # a volume bound to a zone: VolumeBinding and VolumeZone choose too
            meta["annotations"] = {VOLUME_ZONE: f"zone-{rnd.randrange(3)}"}
            spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-p{i:03d}"}}]
        elif volume < 0.3:  # a claim provisioned where the pod goes (WaitForFirstConsumer)
            meta["annotations"] = {VOLUME_CLASS: WFFC_CLASS}
            spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-p{i:03d}"}}]
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": meta,
                "spec": spec,
            }
        )
    return out


def create_cluster(client: KubeClient, objects: list[Obj]) -> None:
    for obj in objects:
        kind = obj["kind"]
        if kind == "Node":
            body = copy.deepcopy(obj)
            taints = body["spec"].pop("taints")
            ready_node(client, body, {"cpu": str(CPUS), "memory": "64Gi", "pods": "110"}, taints)
        elif kind == "ResourceSlice":
            client.create(RESOURCE_SLICES, obj)
        elif kind == "PriorityClass":
            client.create(PRIORITY_CLASSES, obj)
        elif kind == "StorageClass":
            client.create(STORAGE_CLASSES, obj)
        else:
            client.create(DEVICE_CLASSES, obj)


def create_volume(client: KubeClient, ns: str, pod: Obj) -> None:
    """The pod's claim: bound to a volume of its zone (as the PV controller leaves a static binding:
    ``volumeName``, ``claimRef``, ``bind-completed``, both Bound), or unbound of the
    ``WaitForFirstConsumer`` class (``Provisioner`` binds it once a scheduler selects the node);
    nothing for a pod without one."""
    annotations = pod["metadata"].get("annotations") or {}
    claim_name = f"data-{pod['metadata']['name']}"
    if annotations.get(VOLUME_CLASS):
        client.create(PERSISTENT_VOLUME_CLAIMS, volume_claim(claim_name, annotations[VOLUME_CLASS]), ns)
        set_phase(client, PERSISTENT_VOLUME_CLAIMS, claim_name, "Pending", ns)
        return
    zone = annotations.get(VOLUME_ZONE)
    if zone is None:
        return
    volume = f"pv-{ns}-{pod['metadata']['name']}"
    client.create(PERSISTENT_VOLUMES, zonal_volume(volume, zone, "", {"namespace": ns, "name": claim_name}))
    set_phase(client, PERSISTENT_VOLUMES, volume, "Bound")
    claim = volume_claim(claim_name, "")
    claim["metadata"]["annotations"] = {BIND_COMPLETED: "yes"}
    claim["spec"]["volumeName"] = volume
    client.create(PERSISTENT_VOLUME_CLAIMS, claim, ns)
    set_phase(client, PERSISTENT_VOLUME_CLAIMS, claim_name, "Bound", ns)


def volume_claim(name: str, storage_class: str) -> Obj:
    """A claim of 1Gi, ReadWriteOnce, of the class (an empty name: none)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


def zonal_volume(name: str, zone: str, storage_class: str, claim_ref: Obj) -> Obj:
    """A volume of 1Gi in one zone (its zone label and node affinity), bound to ``claim_ref``."""
    in_zone = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {ZONE: zone}},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class,
            "hostPath": {"path": f"/tmp/{name}"},
            "claimRef": claim_ref,
            "nodeAffinity": {"required": {"nodeSelectorTerms": [in_zone]}},
        },
    }


def set_phase(client: KubeClient, res: Resource, name: str, phase: str, ns: str | None = None) -> None:
    client.patch(res, name, {"status": {"phase": phase}}, namespace=ns, subresource="status")


class Provisioner:
    """The ``WaitForFirstConsumer`` class's provisioner and the PV controller's binding, played in a
    thread of its own while a phase runs: each claim of the class that a scheduler's PreBind named a
    node for (``volume.kubernetes.io/selected-node``) gets a volume of that node's zone, and both are
    bound as the PV controller binds them (``claimRef`` with the claim's uid, ``volumeName``,
    ``bind-completed``, both Bound), which the waiting PreBind then sees."""

    def __init__(self, client: KubeClient, ns: str) -> None:
        self.client, self.ns = client, ns
        self.provisioned = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="parity-provisioner", daemon=True)

    def __enter__(self) -> Provisioner:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            try:
                for claim in self.client.list(PERSISTENT_VOLUME_CLAIMS, self.ns).get("items") or []:
                    node = (claim["metadata"].get("annotations") or {}).get(SELECTED_NODE)
                    if node and not claim["spec"].get("volumeName"):
                        self._provision(claim, node)
            except ApiError as e:  # a claim deleted meanwhile; anything else is reported
                if not e.not_found:
                    self.errors.append(str(e))
            except Exception as e:  # the harness's own fault: reported (the run fails), no more binding
                self.errors.append(f"provisioner: {type(e).__name__}: {e}")
                return

    def _provision(self, claim: Obj, node_name: str) -> None:
        meta = claim["metadata"]
        zone = self.client.get(NODES, node_name)["metadata"]["labels"][ZONE]
        volume = f"pv-{self.ns}-{meta['name']}"
        claim_ref = {"namespace": self.ns, "name": meta["name"], "uid": meta["uid"]}
        self.client.create(PERSISTENT_VOLUMES, zonal_volume(volume, zone, WFFC_CLASS, claim_ref))
        set_phase(self.client, PERSISTENT_VOLUMES, volume, "Bound")
        self.client.patch(
            PERSISTENT_VOLUME_CLAIMS,
            meta["name"],
            {"metadata": {"annotations": {BIND_COMPLETED: "yes"}}, "spec": {"volumeName": volume}},
            namespace=self.ns,
        )
        set_phase(self.client, PERSISTENT_VOLUME_CLAIMS, meta["name"], "Bound", self.ns)
        self.provisioned += 1


# ---------------------------------------------------------------------------------------------------------
# Reading the cluster and the verdicts


def snapshot(client: KubeClient) -> list[Obj]:
    out: list[Obj] = []
    for res, kind in KINDS:
        for item in client.list(res).get("items") or []:
            item["kind"] = kind
            out.append(item)
    return out


def bindings(objects: list[Obj]) -> dict[str, str]:
    return {
        f"{o['metadata']['namespace']}/{o['metadata']['name']}": o["spec"].get("nodeName") or ""
        for o in objects
        if o["kind"] == "Pod"
    }


def unschedulable_message(pod: Obj) -> str | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if (c.get("type"), c.get("status"), c.get("reason")) == ("PodScheduled", "False", "Unschedulable"):
            return str(c.get("message") or "")
    return None


def verdict(client: KubeClient, ns: str, name: str, timeout: float = 60.0) -> tuple[str, str, str]:
    """("bound", node, "") or ("pending", the scheduler's whole message, the nominated node or "")."""
    found: list[tuple[str, str, str]] = []

    def settled() -> bool:
        pod = client.get(PODS, name, ns)
        if pod["spec"].get("nodeName"):
            found[:] = [("bound", str(pod["spec"]["nodeName"]), "")]
            return True
        message = unschedulable_message(pod)
        if message is not None:
            nominated = str((pod.get("status") or {}).get("nominatedNodeName") or "")
            found[:] = [("pending", message, nominated)]
            return True
        return False

    wait_until(f"pod {ns}/{name} neither bound nor unschedulable", settled, timeout)
    return found[0]


def bound_after_preemption(client: KubeClient, ns: str, name: str, timeout: float = 60.0) -> str:
    """The node a nominated pod is bound to once its victims are gone ("" if it is not within
    ``timeout``)."""
    node: list[str] = [""]

    def bound() -> bool:
        node[0] = str(client.get(PODS, name, ns)["spec"].get("nodeName") or "")
        return bool(node[0])

    try:
        wait_until(f"nominated pod {ns}/{name} not bound", bound, timeout)
    except ControlPlaneError:  # reported as not bound
        return ""
    return node[0]


def preemptors(client: KubeClient, ns: str, victims: set[str], timeout: float = 10.0) -> set[str]:
    """The uids of the pods that preempted ``victims``, read from their ``Preempted`` Events
    ("Preempted by pod <uid> on node <node>"), waited for (they are sent asynchronously); an empty
    set when some victim has none within ``timeout``."""
    found: dict[str, str] = {}

    def all_seen() -> bool:
        for e in client.list(EVENTS, ns).get("items") or []:
            obj = e.get("involvedObject") or {}
            message = str(e.get("message") or "")
            if (
                e.get("reason") == "Preempted"
                and obj.get("name") in victims
                and message.startswith("Preempted by pod ")
            ):
                found[obj["name"]] = message.split()[3]
        return victims <= found.keys()

    try:
        wait_until("Preempted Events", all_seen, timeout)
    except ControlPlaneError:
        return set()
    return set(found.values())


def priorities(objects: list[Obj], names: set[str]) -> list[int]:
    return sorted(
        int(o["spec"].get("priority") or 0)
        for o in objects
        if o["kind"] == "Pod" and o["metadata"]["name"] in names
    )


def engine(objects: list[Obj]) -> Scheduler:
    state = ClusterCache.from_objects(objects).state
    return Scheduler(state, policy="upstream", percentage_of_nodes_to_score=100)


def pinned(pod: Obj, node: str) -> Obj:
    out = copy.deepcopy(pod)
    out["spec"]["nodeSelector"] = {HOSTNAME: node}
    return out


# ---------------------------------------------------------------------------------------------------------
# Phase 1: kube-scheduler, each verdict checked against draxr's engine


def lockstep(client: KubeClient, ns: str, pods: list[Obj]) -> Obj:
    differences: list[Obj] = []
    raced = 0
    outcome: Counter[str] = Counter()
    victims_seen: list[int] = []
    skewed: list[str] = []
    beyond = 0
    for pod in pods:
        name = pod["metadata"]["name"]
        this = f"{ns}/{name}"
        create_volume(client, ns, pod)
        before = snapshot(client)
        created = client.create(PODS, pod, ns)
        created["kind"] = "Pod"
        kind, what, nominated = verdict(client, ns, name)
        if nominated:
            what = bound_after_preemption(client, ns, name)
        now = snapshot(client)
        # Victims: pods gone meanwhile (nothing else deletes pods here). A preemption may be over
        # before the first look, the pod bound already.
        victims = {o["metadata"]["name"] for o in before if o["kind"] == "Pod"} - {
            o["metadata"]["name"] for o in now if o["kind"] == "Pod"
        }
        # Another pending pod, retried meanwhile, preempted (its victims' Events name it): the step is
        # not this pod's alone. Its own verdict still counts, so the counts add up to the stream.
        others_preempted = bool(victims) and preemptors(client, ns, victims) != {created["metadata"]["uid"]}
        if nominated or (victims and not others_preempted):
            kind = "preempted"
        outcome[kind] += 1
        if others_preempted:
            raced += 1
            continue
        if victims:
            victims_seen += priorities(before, victims)
        if kind != "pending" and (problem := spread_problem(now, ns, name)):
            skewed.append(problem)
        earlier, after = bindings(before), bindings(now)
        # Another pod placed meanwhile (kube-scheduler retried a pending one): not comparable.
        if any(k != this and v and earlier.get(k) != v for k, v in after.items()):
            raced += 1
            continue
        scheduler = engine(before)
        decision = scheduler.schedule(created)
        draxr: str
        if decision.status == SCHEDULED:
            draxr = f"bound to {decision.node}"
            on_node = scheduler.schedule(pinned(created, what)) if kind == "bound" else decision
            if on_node.status != SCHEDULED:  # a decision without Reserve leaves the state as it was
                draxr = f"not on {what}: {on_node.message}"
        else:
            # kube-scheduler's own DefaultPreemption (no victim frees devices), to compare to the letter.
            post = DefaultPreemption(scheduler, device_aware=False).post_filter(created, decision, [])
            draxr = decision.message + (f" {post.message}" if post.message else "")
            if post.success:
                draxr = f"preempts {priorities(before, {v['metadata']['name'] for v in post.victims})}"
            elif DefaultPreemption(scheduler).post_filter(created, decision, []).success:
                beyond += 1  # draxr's worker would preempt for the devices: issue 21's device awareness
        kube = {
            "bound": f"bound to {what}",
            "pending": what,
            "preempted": f"preempts {priorities(before, victims)}",
        }[kind]
        same = draxr == kube or (kind == "bound" and draxr.startswith("bound to "))
        if not same:
            differences.append({"pod": name, "kube-scheduler": kube, "draxr": draxr})
    return {
        "bound": outcome["bound"],
        "pending": outcome["pending"],
        "preempted": outcome["preempted"],
        "victims_priorities": victims_seen,
        "device_preemptions_beyond_upstream": beyond,
        "raced": raced,
        "differences": differences,
        "skewed": skewed,
    }


# ---------------------------------------------------------------------------------------------------------
# Phase 2: draxr's worker, every binding checked


def placed_by_draxr(client: KubeClient, ns: str, pods: list[Obj]) -> Obj:
    outcome: Counter[str] = Counter()
    skewed: list[str] = []
    for pod in pods:
        body = copy.deepcopy(pod)
        body["spec"]["schedulerName"] = "draxr"
        name = pod["metadata"]["name"]
        create_volume(client, ns, pod)
        before = {o["metadata"]["name"] for o in snapshot(client) if o["kind"] == "Pod"}
        client.create(PODS, body, ns)
        kind, _, nominated = verdict(client, ns, name)
        if nominated:
            kind = "preempted" if bound_after_preemption(client, ns, name) else "pending"
        now = snapshot(client)
        gone = before - {o["metadata"]["name"] for o in now if o["kind"] == "Pod"}
        if gone and kind == "bound":
            kind = "preempted"
        outcome["victims"] += len(gone)
        outcome[kind] += 1
        if kind != "pending" and (problem := spread_problem(now, ns, name)):
            skewed.append(problem)
    return {
        "bound": outcome["bound"],
        "pending": outcome["pending"],
        "preempted": outcome["preempted"],
        "victims": outcome["victims"],
        "invalid": invalid(client, ns) + skewed,
    }


def invalid(client: KubeClient, ns: str) -> list[str]:
    """What is wrong with the namespace's bindings (empty: every one valid)."""
    objects = snapshot(client)
    nodes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Node"}
    models = {
        (s["spec"]["nodeName"], d["name"]): d["attributes"]["model"]["string"]
        for s in objects
        if s["kind"] == "ResourceSlice"
        for d in s["spec"]["devices"]
    }
    claims = {
        o["metadata"]["name"]: o
        for o in objects
        if o["kind"] == "ResourceClaim" and o["metadata"]["namespace"] == ns
    }
    pods = [
        o
        for o in objects
        if o["kind"] == "Pod" and o["metadata"]["namespace"] == ns and o["spec"].get("nodeName")
    ]
    problems: list[str] = []
    held: Counter[tuple[str, str]] = Counter()
    cpu: Counter[str] = Counter()
    apart: Counter[tuple[str, str]] = Counter()
    for pod in pods:
        name, node = pod["metadata"]["name"], pod["spec"]["nodeName"]
        [c] = pod["spec"]["containers"]
        requests = c["resources"]["requests"]
        [(resource, count)] = [(k, int(v)) for k, v in requests.items() if k.startswith("example.com/")]
        cpu[node] += int(requests["cpu"])
        mapping = (pod.get("status") or {}).get("extendedResourceClaimStatus") or {}
        claim = claims.get(mapping.get("resourceClaimName", ""))
        if claim is None:
            problems.append(f"{name}: no special claim")
            continue
        results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])
        reserved = [r.get("uid") for r in (claim.get("status") or {}).get("reservedFor") or []]
        if pod["metadata"]["uid"] not in reserved:
            problems.append(f"{name}: claim not reserved for it")
        if len(results) != count:
            problems.append(f"{name}: {len(results)} devices for {count}")
        for r in results:
            held[(r["pool"], r["device"])] += 1
            if r["pool"] != node or f"example.com/gpu-{models.get((node, r['device']))}" != resource:
                problems.append(f"{name}: device {r['pool']}/{r['device']} is not a {resource} on {node}")
        zone = (pod["metadata"].get("annotations") or {}).get(VOLUME_ZONE)
        if zone is not None and nodes[node]["metadata"]["labels"][ZONE] != zone:
            problems.append(f"{name}: on {node}, its volume in {zone}")
        if (pod["metadata"].get("annotations") or {}).get(VOLUME_CLASS):
            problems += provisioned_problems(objects, ns, pod, nodes[node])
        taints = nodes[node]["spec"].get("taints") or []
        if any(t.get("key") == TAINT["key"] for t in taints) and not pod["spec"].get("tolerations"):
            problems.append(f"{name}: on tainted {node} without a toleration")
        app = pod["metadata"]["labels"]["app"]
        if app.startswith("apart-"):
            apart[(app, node)] += 1
    problems += [f"device {p}/{d} in {n} claims" for (p, d), n in held.items() if n > 1]
    problems += [f"{n}: {c} CPUs requested of {CPUS}" for n, c in cpu.items() if c > CPUS]
    problems += [f"{app}: {n} pods on {node}" for (app, node), n in apart.items() if n > 1]
    return problems


def provisioned_problems(objects: list[Obj], ns: str, pod: Obj, node: Obj) -> list[str]:
    """A bound pod's ``WaitForFirstConsumer`` claim: selected for the pod's node, bound to a volume
    of the node's zone, a zone the class allows."""
    name, node_name = pod["metadata"]["name"], node["metadata"]["name"]
    zone = node["metadata"]["labels"][ZONE]
    [claim] = [
        o
        for o in objects
        if o["kind"] == "PersistentVolumeClaim"
        and o["metadata"]["namespace"] == ns
        and o["metadata"]["name"] == f"data-{name}"
    ]
    problems: list[str] = []
    selected = (claim["metadata"].get("annotations") or {}).get(SELECTED_NODE)
    if selected != node_name:
        problems.append(f"{name}: on {node_name}, its claim selected for {selected}")
    volume = claim["spec"].get("volumeName")
    pv = next(
        (o for o in objects if o["kind"] == "PersistentVolume" and o["metadata"]["name"] == volume), None
    )
    if pv is None:
        problems.append(f"{name}: bound with its claim unbound")
    elif pv["metadata"]["labels"][ZONE] != zone:
        problems.append(f"{name}: on {node_name} in {zone}, its volume in {pv['metadata']['labels'][ZONE]}")
    if zone not in ALLOWED_ZONES:
        problems.append(f"{name}: on {node_name} in {zone}, which {WFFC_CLASS} does not allow")
    return problems


def spread_problem(objects: list[Obj], ns: str, name: str) -> str | None:
    """For a pod just bound: its zone spread held when it was placed (the other pods of its group
    as they are right after; victims of a preemption already gone), or what broke."""
    nodes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Node"}
    pods = [o for o in objects if o["kind"] == "Pod" and o["metadata"]["namespace"] == ns]
    [pod] = [p for p in pods if p["metadata"]["name"] == name]
    app = pod["metadata"]["labels"]["app"]
    if not pod["spec"].get("topologySpreadConstraints") or not pod["spec"].get("nodeName"):
        return None
    counts = Counter({n["metadata"]["labels"][ZONE]: 0 for n in nodes.values()})
    for p in pods:
        if p is not pod and p["metadata"]["labels"]["app"] == app and p["spec"].get("nodeName"):
            counts[nodes[p["spec"]["nodeName"]]["metadata"]["labels"][ZONE]] += 1
    zone = nodes[pod["spec"]["nodeName"]]["metadata"]["labels"][ZONE]
    skew = counts[zone] + 1 - min(counts.values())
    return f"{name} ({app}) in {zone}: skew {skew} over {dict(sorted(counts.items()))}" if skew > 1 else None


# ---------------------------------------------------------------------------------------------------------
# A seed, and the command


def run_seed(seed: int, nodes: int, pods: int, version: str, workdir: Path) -> Obj:
    objects, stream_ = cluster(seed, nodes), stream(seed, pods)
    with ControlPlane(
        version, scheduler=True, runtime_config={}, workdir=workdir / f"seed-{seed}" / "controlplane"
    ) as cp:
        client = KubeClient.from_config(str(cp.kubeconfig_path("admin")), qps=100000, burst=100000)
        create_cluster(client, objects)
        namespace(client, "parity-kube-scheduler")
        with Provisioner(client, "parity-kube-scheduler") as provisioner:
            kube = lockstep(client, "parity-kube-scheduler", stream_)
        kube["invalid"] = invalid(client, "parity-kube-scheduler") + provisioner.errors
        kube["provisioned"] = provisioner.provisioned
        clean(client, "parity-kube-scheduler")
        install_rbac(client)
        namespace(client, "parity-draxr")
        worker = DraxrWorker(
            cp, workdir / f"seed-{seed}", 1000, "--policy=upstream", "--percentage-of-nodes-to-score=100"
        )
        try:
            wait_until("draxr's worker did not become ready", worker.ready, 120, alive=worker.dead)
            with Provisioner(client, "parity-draxr") as provisioner:
                draxr = placed_by_draxr(client, "parity-draxr", stream_)
            draxr["invalid"] += provisioner.errors
            draxr["provisioned"] = provisioner.provisioned
        finally:
            worker.stop()
    return {"seed": seed, "kubernetes": cp.version, "kube-scheduler": kube, "draxr": draxr}


def failures(result: Obj) -> int:
    kube = result["kube-scheduler"]
    return (
        len(kube["differences"])
        + len(kube["invalid"])
        + len(kube["skewed"])
        + len(result["draxr"]["invalid"])
    )


def main(argv: list[str] | None = None, out: Callable[[str], None] = print) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seeds", type=int_list, default="1,2,3,4,5", help="comma-separated seeds")
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--pods", type=int, default=40)
    ap.add_argument("--version", default="1.37")
    args = ap.parse_args(argv)
    seeds: list[int] = args.seeds
    if args.nodes < 3 or args.pods < 1:
        ap.error("--nodes must be at least 3 (three zones) and --pods at least 1")
    started = time.monotonic()
    # The control planes' keys and logs go with the run.
    with tempfile.TemporaryDirectory(prefix="draxr-parity-") as tmp:
        results = [run_seed(s, args.nodes, args.pods, args.version, Path(tmp)) for s in seeds]
    summary: dict[str, Any] = {
        "seeds": seeds,
        "pods": args.pods * len(seeds),
        "compared": len(seeds) * args.pods - sum(r["kube-scheduler"]["raced"] for r in results),
        "raced": sum(r["kube-scheduler"]["raced"] for r in results),
        "differences": sum(len(r["kube-scheduler"]["differences"]) for r in results),
        "invalid_bindings": sum(
            len(r["kube-scheduler"]["invalid"])
            + len(r["kube-scheduler"]["skewed"])
            + len(r["draxr"]["invalid"])
            for r in results
        ),
        "kube_scheduler_bound": sum(r["kube-scheduler"]["bound"] for r in results),
        "kube_scheduler_preempted": sum(r["kube-scheduler"]["preempted"] for r in results),
        "kube_scheduler_victims": sum(len(r["kube-scheduler"]["victims_priorities"]) for r in results),
        "device_preemptions_beyond_upstream": sum(
            r["kube-scheduler"]["device_preemptions_beyond_upstream"] for r in results
        ),
        "draxr_bound": sum(r["draxr"]["bound"] for r in results),
        "draxr_preempted": sum(r["draxr"]["preempted"] for r in results),
        "draxr_victims": sum(r["draxr"]["victims"] for r in results),
        "kube_scheduler_provisioned": sum(r["kube-scheduler"]["provisioned"] for r in results),
        "draxr_provisioned": sum(r["draxr"]["provisioned"] for r in results),
        "seconds": round(time.monotonic() - started, 1),
    }
    out(json.dumps({"per_seed": results, "summary": summary}, indent=2))
    return 1 if any(failures(r) for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
