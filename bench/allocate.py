"""Allocation benchmark: upstream scheduler_perf's "ExtendedResource" shape.

25 DeviceClasses (``example.com/gpu-<k>``), 500 nodes with 10 devices each, 5,000 pods cycling
``example.com/gpu-{i mod 25}``: every device ends up allocated. Prints JSON: decisions per second
and p50/p99 per decision (Filter + Score + allocation + Reserve, CEL results already cached), and
the cold-start cost of evaluating every class selector over every device, and what a
DeviceTaintRule change costs (one pool, then every device: the slices it touches are read again).

    python bench/allocate.py [--nodes 500] [--devices 10] [--classes 25] [--pods 5000] [--unique]
        [--capacity] [--cel-engine cel-python|cel-rust]

``--unique`` gives every device a distinct attribute (a UUID, as real GPUs publish), which
defeats the CEL result cache's de-duplication of identical devices. ``--capacity`` gives every
device a ``memory`` capacity (as real GPUs publish), which consumable capacity checks for every
device, shared or not.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid

if __name__ == "__main__":
    # Run as a script, bench/ comes first on sys.path and bench/webhook.py would shadow the package.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    sys.path.insert(0, os.path.dirname(_here))

from bench.common import percentile
from webhook.core.api.objects import Obj
from webhook.core.cel import DEFAULT_ENGINE, ENGINES
from webhook.core.cel.backend import set_default_engine
from webhook.core.cluster.state import ClusterState
from webhook.core.scheduling.framework import SCHEDULED
from webhook.core.scheduling.scheduler import Scheduler

DRIVER = "gpu.example.com"
ZONE = "topology.kubernetes.io/zone"


def build(
    nodes: int, devices: int, classes: int, unique: bool, zones: int = 0, capacity: bool = False
) -> ClusterState:
    """``zones`` > 0: nodes carry ``kubernetes.io/hostname`` and ``topology.kubernetes.io/zone``
    (``zone-<n mod zones>``), for pod placement (``bench/scale.py --stream placement``);
    ``capacity``: every device has 80Gi of memory to share (consumable capacity)."""
    st = ClusterState()
    for k in range(classes):
        st.upsert_class(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": f"gpu-{k}", "creationTimestamp": "2025-01-01T00:00:00Z"},
                "spec": {
                    "extendedResourceName": f"example.com/gpu-{k}",
                    "selectors": [
                        {"cel": {"expression": f'device.attributes["{DRIVER}"].type == "gpu-{k}"'}}
                    ],
                },
            }
        )
    for n in range(nodes):
        name = f"node-{n:04d}"
        labels = {"kubernetes.io/hostname": name, ZONE: f"zone-{n % zones}"} if zones else {}
        st.upsert_node(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels},
                "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}},
            }
        )
        devs = []
        for d in range(devices):
            attrs: Obj = {"type": {"string": f"gpu-{(n * devices + d) % classes}"}, "index": {"int": d}}
            if unique:
                attrs["uuid"] = {"string": str(uuid.UUID(int=n * devices + d))}
            dev: Obj = {"name": f"gpu-{d}", "attributes": attrs}
            if capacity:
                dev["capacity"] = {"memory": {"value": "80Gi"}}
            devs.append(dev)
        st.apply(
            "ResourceSlice",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{name}-{DRIVER}"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": devs,
                },
            },
        )
    return st


def pod(i: int, classes: int) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pod-{i}", "namespace": "default", "uid": str(uuid.UUID(int=10**9 + i))},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "resources": {"requests": {"cpu": "100m", f"example.com/gpu-{i % classes}": "1"}},
                }
            ]
        },
    }


def place_among_replicas(p: Obj, i: int, groups: int) -> Obj:
    """Pod ``i`` of a placement stream: every third one places itself among its replicas, in turn
    with required anti-affinity per node to its group (``anti-<g>``) or a DoNotSchedule zone
    spread, maxSkew 1, of its group (``spread-<g>``), over ``groups`` groups of each; ``p`` is
    changed and returned."""
    if i % 3:
        return p
    k = i // 3
    app = f"{'anti' if k % 2 == 0 else 'spread'}-{(k // 2) % groups}"
    p["metadata"]["labels"] = {"app": app}
    selector = {"matchLabels": {"app": app}}
    if k % 2 == 0:
        term = {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}
        required = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        p["spec"]["affinity"] = {"podAntiAffinity": required}
    else:
        spread = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
        p["spec"]["topologySpreadConstraints"] = [{**spread, "labelSelector": selector}]
    return p


def taint_rule_costs(st: ClusterState) -> dict[str, float]:
    """Seconds to apply (and then remove) a rule on one pool, and one on every device."""
    pool = next(iter(st.devices.slices.values())).pool
    out: dict[str, float] = {}
    for label, selector in (("one_pool", {"pool": pool}), ("all_devices", {})):
        rule = {
            "kind": "DeviceTaintRule",
            "metadata": {"name": label},
            "spec": {"deviceSelector": selector, "taint": {"key": "bench", "effect": "NoSchedule"}},
        }
        t = time.perf_counter()
        st.apply("DeviceTaintRule", rule)
        out[label] = round(time.perf_counter() - t, 4)
        st.apply("DeviceTaintRule", rule, deleted=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--devices", type=int, default=10)
    ap.add_argument("--classes", type=int, default=25)
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--unique", action="store_true")
    ap.add_argument("--capacity", action="store_true")
    ap.add_argument("--cel-engine", choices=ENGINES, default=DEFAULT_ENGINE)
    args = ap.parse_args(argv)
    set_default_engine(args.cel_engine)

    t0 = time.perf_counter()
    st = build(args.nodes, args.devices, args.classes, args.unique, capacity=args.capacity)
    build_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    for k in range(args.classes):
        st.capacity.free(f"gpu-{k}")  # evaluates every class selector on every device once
    cold_s = time.perf_counter() - t0
    cel_stats = st.cel.stats()

    sched = Scheduler(st, "binpack")
    latencies: list[float] = []
    scheduled = 0
    t_all = time.perf_counter()
    for i in range(args.pods):
        p = pod(i, args.classes)
        t = time.perf_counter()
        d = sched.schedule(p)
        if d.status == SCHEDULED:
            sched.reserve(d)
            scheduled += 1
        latencies.append(time.perf_counter() - t)
    total = time.perf_counter() - t_all
    rules = taint_rule_costs(st)
    out = {
        "shape": {
            "nodes": args.nodes,
            "devices_per_node": args.devices,
            "classes": args.classes,
            "pods": args.pods,
            "unique_devices": args.unique,
            "device_capacity": args.capacity,
        },
        "decisions_per_second": round(args.pods / total, 1),
        "decision_p50_ms": round(percentile(latencies, 0.50) * 1000, 3),
        "decision_p99_ms": round(percentile(latencies, 0.99) * 1000, 3),
        "scheduled": scheduled,
        "cel_engine": args.cel_engine,
        "cel_cold_start_seconds": round(cold_s, 3),
        "cel_evaluations_cold": cel_stats.get("evaluations"),
        "build_seconds": round(build_s, 3),
        "taint_rule_apply_seconds": rules,
        "python": sys.version.split()[0],
    }
    print(json.dumps(out, indent=2))
    return 0 if scheduled == min(args.pods, args.nodes * args.devices) else 1


if __name__ == "__main__":
    sys.exit(main())
