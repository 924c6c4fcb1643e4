"""Parity with kube-scheduler for gangs (issue 33): seeded clusters and streams of PodGroups placed
by the real kube-scheduler with ``GenericWorkload`` and ``TopologyAwareWorkloadScheduling`` on, each
group's verdict checked against draxr's group cycle on the same state, then the same stream placed
by draxr's worker and every binding checked.

A seed makes a cluster on a fresh control plane (``--version``, default 1.37, etcd + kube-apiserver
serving ``scheduling.k8s.io/v1beta1`` + kube-scheduler, Node objects without kubelets):
``--nodes`` nodes in four racks (``topology.kubernetes.io/rack``), 16 CPUs each, and one
ResourceSlice per node of 4 or 8 GPUs; one DeviceClass maps ``example.com/gpu``. Then ``--groups``
PodGroups: a gang (``minCount`` its size, or one less) or ``basic``, with the rack as topology key
or none, of 2 to 4 members asking for 1, 2, 4 or 8 GPUs each.

Phase 1, lockstep: before each group is created the cluster is read, and draxr's group cycle decides
the group on that state twice: as upstream (``--gang-search-steps 0``, policy ``upstream``, every
node scored) and with its search (beyond upstream, draxr's default). Then kube-scheduler places the
group, and its first verdict (the PodGroup's condition) is taken. Compared: wherever kube-scheduler
places a group, its placement is feasible in draxr's engine (the members pinned to its nodes) and
draxr places the group too (a difference otherwise). Where draxr as upstream alone does not,
kube-scheduler broke a tie between nodes at random, which left a later member room, and draxr's
name order did not: counted (``upstream_ties``). Where kube-scheduler does not place a group and
draxr's search does, the group is listed with draxr's placement (``beyond_upstream``).
kube-scheduler's bindings are checked as draxr's are.

Phase 2: the cluster cleaned, the same stream for ``schedulerName: draxr``, one group at a time,
placed by a ``draxr serve --no-webhook --policy upstream`` process. Every binding is checked: no
device twice; every device of the pod's class on its node, reserved for it; a gang bound whole (at
least ``minCount`` of its members) or not at all; all members of a keyed group in one rack.

Prints JSON per seed and in sum; exit 1 on any difference or invalid binding.

    python bench/gang_parity.py [--seeds 1,2,3] [--nodes 8] [--groups 12] [--version 1.37]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
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
from e2e.controlplane.launcher import ControlPlane, wait_until
from webhook.core.api import podgroups
from webhook.core.api.objects import Obj
from webhook.core.scheduling.framework import SCHEDULED
from webhook.core.scheduling.podgroupcycle import PodGroupCycle, PodGroupInfo
from webhook.core.scheduling.scheduler import Scheduler
from webhook.kube.cache import ClusterCache
from webhook.kube.client import KubeClient
from webhook.kube.resources import DEVICE_CLASSES, NODES, PODS, RESOURCE_CLAIMS, RESOURCE_SLICES, pod_groups

DRIVER = "parity.example.com"
GPU = "example.com/gpu"
RACK = "topology.kubernetes.io/rack"
HOSTNAME = "kubernetes.io/hostname"
RACKS = 4
CPUS = 16
PODGROUPS = pod_groups("v1beta1")
GATES = {"GenericWorkload": True, "TopologyAwareWorkloadScheduling": True}
RUNTIME_CONFIG = {"scheduling.k8s.io/v1beta1": "true"}
KINDS = (
    (NODES, "Node"),
    (DEVICE_CLASSES, "DeviceClass"),
    (RESOURCE_SLICES, "ResourceSlice"),
    (RESOURCE_CLAIMS, "ResourceClaim"),
    (PODS, "Pod"),
)


def gpu_class() -> Obj:
    """The one DeviceClass: every device of the test driver, mapped to ``example.com/gpu``."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu"},
        "spec": {
            "extendedResourceName": GPU,
            "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
        },
    }


def rack_node(i: int, racks: int, gpus: int) -> tuple[Obj, Obj]:
    """Node ``node-<i>`` in rack ``i % racks``, and its slice of ``gpus`` devices."""
    name = f"node-{i}"
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {HOSTNAME: name, RACK: f"rack-{i % racks}"}},
        "spec": {},
    }
    pool = {"name": name, "generation": 1, "resourceSliceCount": 1}
    devices = [{"name": f"gpu-{d}"} for d in range(gpus)]
    return node, {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{name}-gpus"},
        "spec": {"driver": DRIVER, "nodeName": name, "pool": pool, "devices": devices},
    }


def cluster(seed: int, nodes: int) -> list[Obj]:
    rnd = random.Random(seed)
    out: list[Obj] = [gpu_class()]
    for i in range(nodes):
        out += rack_node(i, RACKS, rnd.choice((4, 8)))
    return out


def stream(seed: int, groups: int) -> list[Obj]:
    """Each group: name, policy, minCount, topology key, and its members' GPUs."""
    rnd = random.Random(seed * 7919)
    out: list[Obj] = []
    for g in range(groups):
        size = rnd.randint(2, 4)
        gang = rnd.random() < 0.75
        out.append(
            {
                "name": f"g{g}",
                "gang": gang,
                "min": (size if rnd.random() < 0.7 else size - 1) if gang else 1,
                "key": RACK if rnd.random() < 0.5 else None,
                "gpus": [rnd.choice((1, 2, 4, 8)) for _ in range(size)],
            }
        )
    return out


def pod_group(g: Obj) -> Obj:
    policy: Obj = {"gang": {"minCount": g["min"]}} if g["gang"] else {"basic": {}}
    spec: Obj = {"schedulingPolicy": policy}
    if g["key"]:
        spec["schedulingConstraints"] = {"topology": [{"key": g["key"]}]}
    meta = {"name": g["name"]}
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": meta, "spec": spec}


def members(g: Obj, scheduler: str | None) -> list[Obj]:
    out = []
    for i, gpus in enumerate(g["gpus"]):
        spec: Obj = {
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}},
                }
            ],
            "terminationGracePeriodSeconds": 0,
            "schedulingGroup": {"podGroupName": g["name"]},
        }
        if scheduler:
            spec["schedulerName"] = scheduler
        meta = {"name": f"{g['name']}-{i}"}
        out.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
    return out


def create_cluster(client: KubeClient, objects: list[Obj]) -> None:
    for obj in objects:
        if obj["kind"] == "Node":
            ready_node(client, obj, {"cpu": str(CPUS), "memory": "64Gi", "pods": "110"})
        elif obj["kind"] == "ResourceSlice":
            client.create(RESOURCE_SLICES, obj)
        else:
            client.create(DEVICE_CLASSES, obj)


def snapshot(client: KubeClient) -> list[Obj]:
    out: list[Obj] = []
    for res, kind in KINDS:
        for item in client.list(res).get("items") or []:
            item["kind"] = kind
            out.append(item)
    return out


def engine_verdict(
    objects: list[Obj], ns: str, g: Obj, steps: int, pinned: list[str | None] | None = None
) -> Obj:
    """draxr's group cycle on ``objects`` for the group (as upstream with ``steps`` 0); with
    ``pinned``, only the members given a node there, each held to it."""
    state = ClusterCache.from_objects(objects).state
    scheduler = Scheduler(state, policy="upstream", percentage_of_nodes_to_score=100)
    pods = []
    for i, p in enumerate(members(g, None)):
        p["metadata"] |= {"namespace": ns, "uid": f"{g['name']}-{i}-uid"}
        if pinned is not None:
            if pinned[i] is None:
                continue
            p["spec"]["nodeSelector"] = {HOSTNAME: pinned[i]}
        pods.append(p)
    pg = pod_group(g)
    pg["metadata"]["namespace"] = ns
    d = PodGroupCycle(scheduler, search_steps=steps).schedule(PodGroupInfo(pg, pods, []))
    return {
        "status": d.status,
        "message": d.message,
        "placement": d.placement,
        "nodes": [x.node for x, _ in d.placed()],
    }


def settle(client: KubeClient, ns: str, g: Obj, timeout: float = 60.0) -> Obj:
    """The group's outcome once its scheduler has written the PodGroup's condition and every
    member is bound or told why not."""
    names = [f"{g['name']}-{i}" for i in range(len(g["gpus"]))]
    found: Obj = {}

    def done() -> bool:
        group = client.get(PODGROUPS, g["name"], ns)
        cond = podgroups.condition(group)
        if cond is None:
            return False
        pods = {p["metadata"]["name"]: p for p in client.list(PODS, ns).get("items") or []}
        states = []
        for n in names:
            p = pods.get(n, {})
            if (p.get("spec") or {}).get("nodeName"):
                states.append(p["spec"]["nodeName"])
            elif any(
                c.get("type") == "PodScheduled" and c.get("status") == "False"
                for c in (p.get("status") or {}).get("conditions") or []
            ):
                states.append(None)
            else:
                return False
        found.update(condition=cond, nodes=states)
        return cond.get("status") == "False" or any(states)

    wait_until(f"group {g['name']} settled", done, timeout)
    return found


def problems(client: KubeClient, ns: str, stream_: list[Obj]) -> list[str]:
    """Every binding's check: devices, gangs whole, one rack for keyed groups."""
    objects = snapshot(client)
    nodes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Node"}
    pods = {
        o["metadata"]["name"]: o for o in objects if o["kind"] == "Pod" and o["metadata"]["namespace"] == ns
    }
    claims = [o for o in objects if o["kind"] == "ResourceClaim"]
    out: list[str] = []
    held: dict[tuple[str, str, str], str] = {}
    for c in claims:
        for r in ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", []):
            key = (r["driver"], r["pool"], r["device"])
            if key in held:
                out.append(f"device {key} in claims {held[key]} and {c['metadata']['name']}")
            held[key] = c["metadata"]["name"]
    for g in stream_:
        bound = [
            pods[f"{g['name']}-{i}"]["spec"]["nodeName"]
            for i in range(len(g["gpus"]))
            if f"{g['name']}-{i}" in pods and pods[f"{g['name']}-{i}"]["spec"].get("nodeName")
        ]
        if g["gang"] and bound and len(bound) < g["min"]:
            out.append(f"gang {g['name']}: {len(bound)} bound, below its minCount {g['min']}")
        if g["key"] and len({nodes[n]["metadata"]["labels"][RACK] for n in bound}) > 1:
            out.append(f"group {g['name']}: members in more than one rack")
    return out


def lockstep(client: KubeClient, ns: str, stream_: list[Obj]) -> Obj:
    differences: list[Obj] = []
    beyond: list[Obj] = []
    ties = 0
    placed = 0
    outcomes: dict[str, list[str | None]] = {}
    for g in stream_:
        objects = snapshot(client)
        upstream = engine_verdict(objects, ns, g, 0)
        searched = engine_verdict(objects, ns, g, 256)
        client.create(PODGROUPS, pod_group(g), ns)
        for p in members(g, None):
            client.create(PODS, p, ns)
        kube = settle(client, ns, g)
        outcomes[g["name"]] = kube["nodes"]
        ks_placed = kube["condition"].get("status") == "True"
        placed += ks_placed
        if ks_placed:
            # kube-scheduler's placement must be one draxr's engine finds feasible, and draxr must
            # place the group too; as upstream alone it may not, where a tie kube-scheduler broke
            # at random left another member no room (counted).
            feasible = engine_verdict(objects, ns, g, 0, pinned=kube["nodes"])["status"] == SCHEDULED
            if not feasible or searched["status"] != SCHEDULED:
                differences.append({"group": g, "kube-scheduler": kube, "draxr": searched})
            elif upstream["status"] != SCHEDULED:
                ties += 1
        if not ks_placed and searched["status"] == SCHEDULED:
            beyond.append({"group": g, "kube-scheduler": kube["condition"].get("message"), "draxr": searched})
        if not ks_placed:  # nothing of it holds anything: out of the way of the next groups
            for p in members(g, None):
                client.delete(PODS, p["metadata"]["name"], ns)
    return {
        "placed": placed,
        "nodes": outcomes,
        "differences": differences,
        "upstream_ties": ties,
        "beyond_upstream": beyond,
    }


def placed_by_draxr(client: KubeClient, ns: str, stream_: list[Obj]) -> Obj:
    placed = 0
    outcomes: dict[str, list[str | None]] = {}
    for g in stream_:
        client.create(PODGROUPS, pod_group(g), ns)
        for p in members(g, "draxr"):
            client.create(PODS, p, ns)
        outcome = settle(client, ns, g)
        outcomes[g["name"]] = outcome["nodes"]
        placed += outcome["condition"].get("status") == "True"
    return {"placed": placed, "nodes": outcomes}


def run_seed(seed: int, nodes: int, groups: int, version: str, workdir: Path) -> Obj:
    objects, stream_ = cluster(seed, nodes), stream(seed, groups)
    with ControlPlane(
        version,
        gates=GATES,
        scheduler=True,
        runtime_config=RUNTIME_CONFIG,
        workdir=workdir / f"seed-{seed}" / "controlplane",
    ) as cp:
        client = KubeClient.from_config(str(cp.kubeconfig_path("admin")), qps=100000, burst=100000)
        create_cluster(client, objects)
        namespace(client, "gangs-kube-scheduler")
        kube = lockstep(client, "gangs-kube-scheduler", stream_)
        kube["invalid"] = problems(client, "gangs-kube-scheduler", stream_)
        clean(client, "gangs-kube-scheduler")
        install_rbac(client)
        namespace(client, "gangs-draxr")
        worker = DraxrWorker(
            cp, workdir / f"seed-{seed}", 1000, "--policy=upstream", "--percentage-of-nodes-to-score=100"
        )
        try:
            wait_until("draxr's worker did not become ready", worker.ready, 120, alive=worker.dead)
            draxr = placed_by_draxr(client, "gangs-draxr", stream_)
            draxr["invalid"] = problems(client, "gangs-draxr", stream_)
        finally:
            worker.stop()
    return {"seed": seed, "kubernetes": cp.version, "kube-scheduler": kube, "draxr": draxr}


def failures(result: Obj) -> int:
    kube = result["kube-scheduler"]
    return len(kube["differences"]) + len(kube["invalid"]) + len(result["draxr"]["invalid"])


def main(argv: list[str] | None = None, out: Callable[[str], None] = print) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seeds", type=int_list, default="1,2,3", help="comma-separated seeds")
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--groups", type=int, default=12)
    ap.add_argument("--version", default="1.37")
    args = ap.parse_args(argv)
    seeds: list[int] = args.seeds
    if args.nodes < RACKS or args.groups < 1:
        ap.error(f"--nodes must be at least {RACKS} (one per rack) and --groups at least 1")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="draxr-gang-parity-") as tmp:
        results = [run_seed(s, args.nodes, args.groups, args.version, Path(tmp)) for s in seeds]
    summary: dict[str, Any] = {
        "seeds": seeds,
        "groups": args.groups * len(seeds),
        "kube_scheduler_placed": sum(r["kube-scheduler"]["placed"] for r in results),
        "draxr_placed": sum(r["draxr"]["placed"] for r in results),
        "differences": sum(len(r["kube-scheduler"]["differences"]) for r in results),
        "beyond_upstream": sum(len(r["kube-scheduler"]["beyond_upstream"]) for r in results),
        "upstream_ties": sum(r["kube-scheduler"]["upstream_ties"] for r in results),
        "invalid_bindings": sum(
            len(r["kube-scheduler"]["invalid"]) + len(r["draxr"]["invalid"]) for r in results
        ),
        "seconds": round(time.monotonic() - started, 1),
    }
    out(json.dumps({"per_seed": results, "summary": summary}, indent=2))
    return 1 if any(failures(r) for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
