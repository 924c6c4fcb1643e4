"""Streams of gangs (issue 33): how fast groups are placed whole, and how many GPUs they strand,
by draxr's worker and by kube-scheduler on the same control plane and stream.

A fresh control plane (``--version``, default 1.37, ``GenericWorkload`` and
``TopologyAwareWorkloadScheduling`` on, Node objects without kubelets): ``--nodes`` nodes of 8 GPUs
(64 by default) in ``--racks`` racks (8). The stream (``--groups``, seeded): gangs of 8 pods x 8
GPUs and of 4 pods x 2 GPUs (``minCount`` their size, each in one rack), and single pods of 1 GPU,
created one after another; each gang's members all at once. With churn: while the stream runs,
every placed group lives for ``--lifetime`` further arrivals, then its pods are deleted.

Per scheduler: the gangs placed whole, the seconds from a gang's last member's creation to its last
member bound (p50, p99), and at the end of the stream the GPUs left free in racks where some GPUs
are in use and whose free GPUs no waiting gang of 8 x 8 could use (a rack with fewer than 64 free:
stranded for the big gangs). Prints JSON.

    python bench/gangs.py [--nodes 64] [--racks 8] [--groups 40] [--seed 1] [--version 1.37]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    # Run as a script, bench/ comes first on sys.path and bench/webhook.py would shadow the package.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    sys.path.insert(0, os.path.dirname(_here))

from bench.common import percentile
from bench.gang_parity import GATES, GPU, PODGROUPS, RACK, RUNTIME_CONFIG, gpu_class, rack_node
from bench.versus_scheduler import BindWatch, DraxrWorker, clean, install_rbac, namespace, ready_node
from e2e.controlplane.launcher import ControlPlane, wait_until
from webhook.core.api.objects import Obj
from webhook.kube.client import KubeClient
from webhook.kube.resources import DEVICE_CLASSES, PODS, RESOURCE_SLICES

GPUS_PER_NODE = 8
SHAPES = {"8x8": (8, 8), "4x2": (4, 2), "1x1": (1, 1)}


def stream(seed: int, groups: int) -> list[Obj]:
    rnd = random.Random(seed)
    out = []
    for i in range(groups):
        shape = rnd.choices(list(SHAPES), weights=(2, 4, 4))[0]
        size, gpus = SHAPES[shape]
        out.append({"name": f"s{i}", "shape": shape, "size": size, "gpus": gpus})
    return out


def create_cluster(client: KubeClient, nodes: int, racks: int) -> None:
    client.create(DEVICE_CLASSES, gpu_class())
    for i in range(nodes):
        node, gpus = rack_node(i, racks, GPUS_PER_NODE)
        ready_node(client, node, {"cpu": "64", "memory": "256Gi", "pods": "110"})
        client.create(RESOURCE_SLICES, gpus)


def objects_of(g: Obj, scheduler: str | None) -> tuple[Obj | None, list[Obj]]:
    """The PodGroup (None for a single pod) and the pods of one arrival."""
    spec_extra: Obj = {"schedulerName": scheduler} if scheduler else {}
    group = None
    if g["size"] > 1:
        group = {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": g["name"]},
            "spec": {
                "schedulingPolicy": {"gang": {"minCount": g["size"]}},
                "schedulingConstraints": {"topology": [{"key": RACK}]},
            },
        }
        spec_extra["schedulingGroup"] = {"podGroupName": g["name"]}
    pods = []
    for i in range(g["size"]):
        res = {GPU: str(g["gpus"])}
        container = {"name": "c", "image": "registry.k8s.io/pause:3.10"}
        spec: Obj = {
            "containers": [{**container, "resources": {"requests": res, "limits": res}}],
            "terminationGracePeriodSeconds": 0,
            **spec_extra,
        }
        meta = {"name": f"{g['name']}-{i}"}
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
    return group, pods


def run(client: KubeClient, ns: str, stream_: list[Obj], scheduler: str | None, lifetime: int) -> Obj:
    """The stream, one arrival after another, each waited for (or given up after 20 s: it stays
    pending), placed groups deleted after ``lifetime`` arrivals."""
    latencies: list[float] = []
    placed = 0
    alive: list[tuple[int, Obj]] = []
    watch = BindWatch(client, ns)
    try:
        for step, g in enumerate(stream_):
            if arrive(client, ns, g, scheduler, watch, latencies):
                alive.append((step, g))
                placed += g["size"] > 1
            for born, old in [a for a in alive if step + 1 - a[0] >= lifetime]:
                for p in objects_of(old, scheduler)[1]:
                    client.delete(PODS, p["metadata"]["name"], ns)
                alive.remove((born, old))
    finally:
        watch.stop()
    return {
        "gangs": sum(g["size"] > 1 for g in stream_),
        "gangs_placed": placed,
        "seconds_p50": round(percentile(latencies, 0.5), 3) if latencies else None,
        "seconds_p99": round(percentile(latencies, 0.99), 3) if latencies else None,
    }


def arrive(
    client: KubeClient, ns: str, g: Obj, scheduler: str | None, watch: BindWatch, latencies: list[float]
) -> bool:
    """One arrival created; True once every pod of it is bound (its latency recorded)."""
    group, pods = objects_of(g, scheduler)
    if group is not None:
        client.create(PODGROUPS, group, ns)
    for p in pods:
        client.create(PODS, p, ns)
    created = time.monotonic()
    names = {p["metadata"]["name"] for p in pods}
    if not watch.wait_names(names, 20):
        return False
    latencies.append(max(watch.bound[n] for n in names) - created)
    return True


def stranded(client: KubeClient, ns: str, nodes: int, racks: int) -> int:
    """GPUs free in racks partly in use that cannot host an 8 x 8 gang (fewer than 64 free)."""
    per_rack_capacity = (nodes // racks) * GPUS_PER_NODE
    used: Counter[str] = Counter()
    for p in client.list(PODS, ns).get("items") or []:
        node = p["spec"].get("nodeName")
        if node and not p["metadata"].get("deletionTimestamp"):
            gpus = int(p["spec"]["containers"][0]["resources"]["requests"][GPU])
            used[f"rack-{int(node.rsplit('-', 1)[1]) % racks}"] += gpus
    return sum(per_rack_capacity - n for n in used.values() if n > 0 and per_rack_capacity - n < 64)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--racks", type=int, default=8)
    ap.add_argument("--groups", type=int, default=40)
    ap.add_argument("--lifetime", type=int, default=10, help="arrivals a placed group lives for")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--version", default="1.37")
    args = ap.parse_args(argv)
    if args.nodes < args.racks or args.racks < 1 or args.groups < 1:
        ap.error("--racks must be at least 1, --nodes at least --racks, --groups at least 1")
    stream_ = stream(args.seed, args.groups)
    started = time.monotonic()
    out: dict[str, Any] = {"nodes": args.nodes, "racks": args.racks, "groups": args.groups, "seed": args.seed}
    with (
        tempfile.TemporaryDirectory(prefix="draxr-gangs-") as tmp,
        ControlPlane(
            args.version, gates=GATES, scheduler=True, runtime_config=RUNTIME_CONFIG, workdir=Path(tmp) / "cp"
        ) as cp,
    ):
        client = KubeClient.from_config(str(cp.kubeconfig_path("admin")), qps=100000, burst=100000)
        create_cluster(client, args.nodes, args.racks)
        namespace(client, "gangs-kube-scheduler")
        kube = run(client, "gangs-kube-scheduler", stream_, None, args.lifetime)
        kube["gpus_stranded"] = stranded(client, "gangs-kube-scheduler", args.nodes, args.racks)
        clean(client, "gangs-kube-scheduler")
        install_rbac(client)
        namespace(client, "gangs-draxr")
        worker = DraxrWorker(cp, Path(tmp), 1000)
        try:
            wait_until("draxr's worker did not become ready", worker.ready, 120, alive=worker.dead)
            draxr = run(client, "gangs-draxr", stream_, "draxr", args.lifetime)
            draxr["gpus_stranded"] = stranded(client, "gangs-draxr", args.nodes, args.racks)
        finally:
            worker.stop()
        out["kubernetes"] = cp.version
    out |= {"kube-scheduler": kube, "draxr": draxr, "seconds": round(time.monotonic() - started, 1)}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
