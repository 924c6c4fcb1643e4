"""Fragmentation benchmark: one seeded stream of GPU pods through the scheduling engine, once per policy.

The cluster: 64 nodes with 8 GPUs each on two PCIe roots of four (GPU i on root i // 4, and on NUMA
node i // 4: one root per socket), plus one NIC per root. DeviceClasses ``gpu.example.com``
(``example.com/gpu``) and ``nic.example.com`` (``example.com/nic``) both carry
``draxr.io/align-by: resource.kubernetes.io/pcieRoot``. Nodes have 128 cpu and 1Ti of memory; a pod
asks 12 cpu and 96Gi per GPU, so cpu and memory never run out before GPUs do.

The stream (``--seed``): pods arrive as a Poisson process (``--rate`` per tick), ask 1, 2, 4 or 8 GPUs
(50, 25, 15 and 10 %), a third of them also a NIC (two for an 8-GPU pod), and run for 20 to 200
ticks. With these figures the stream offers about 90 % of the cluster's GPUs. Each tick, finished pods
leave (their special claims go with them), new pods queue, and every waiting pod is tried once in
arrival order; a pod that waited ``--patience`` ticks gives up. A placed pod is bound at once: its
special claim and the bound pod enter the state as the worker's binding cycle would write them.

Every policy sees the same stream in the same process, after one unmeasured warm-up run. Per policy
the JSON says how many pods of each size were placed (``placed_by_size``) and gave up, which share of
the multi-GPU pods got GPUs on one root (``aligned_share``; over the 2- and 4-GPU pods, since eight
GPUs cannot share a root of four: ``aligned_share_all_multi`` counts the 8-GPU pods too), how many
GPU + NIC pods got their NIC on their GPUs' root, how many 8-GPU pods waited at least once while
eight GPUs were free cluster-wide (``eight_gpu_waits``), and decisions per second (``Scheduler.schedule``
plus Reserve, failed attempts included; binding and departures are not timed). The stream runs
``--rounds`` times per policy, the policies interleaved; every round must decide exactly as the first
(the engine is deterministic), and decisions per second is the median over rounds of the process CPU
time spent in those calls (CPU time, so that other processes on a shared machine do not count).

    python bench/fragmentation.py [--seed 13] [--ticks 1500] [--rate 1.75] [--patience 60] [--rounds 3]
"""

from __future__ import annotations

import argparse
import copy
import heapq
import json
import os
import random
import statistics
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

if __name__ == "__main__":
    # Run as a script, bench/ comes first on sys.path and bench/webhook.py would shadow the package.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]

from webhook.core.allocation.claims import (
    as_obj,
    deterministic_name,
    extended_resource_claim_status,
    generate_name,
    special_claim_after_prebind,
)
from webhook.core.allocation.policy import POLICIES
from webhook.core.api.alignment import ALIGN_BY_ANNOTATION
from webhook.core.api.objects import Obj
from webhook.core.cluster.state import ClusterState
from webhook.core.scheduling.framework import SCHEDULED
from webhook.core.scheduling.scheduler import Scheduler

NODES = 64
GPUS = 8
ROOT_SIZE = 4
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
SIZES = (1, 2, 4, 8)
WEIGHTS = (50, 25, 15, 10)
NIC_SHARE = 1 / 3
DURATION = (20, 200)


@dataclass(frozen=True, slots=True)
class Arrival:
    seq: int
    tick: int
    gpus: int
    nics: int
    duration: int


@dataclass
class Result:
    placed_by_size: dict[int, int] = field(default_factory=lambda: dict.fromkeys(SIZES, 0))
    gave_up_by_size: dict[int, int] = field(default_factory=lambda: dict.fromkeys(SIZES, 0))
    aligned: int = 0
    alignable: int = 0
    multi: int = 0
    nic_pods: int = 0
    nic_aligned: int = 0
    eight_gpu_waits: int = 0
    decisions: int = 0
    seconds: float = 0.0
    rates: list[float] = field(default_factory=list)  # decisions per CPU second, one per round
    outcomes: list[tuple[int, str | None]] = field(default_factory=list)  # (pod, node) per decision
    busy_gpu_ticks: int = 0
    ticks: int = 0

    @property
    def rate(self) -> float:
        return statistics.median(self.rates)

    def to_json(self) -> dict[str, Any]:
        return {
            "placed_by_size": {str(k): v for k, v in self.placed_by_size.items()},
            "gave_up_by_size": {str(k): v for k, v in self.gave_up_by_size.items()},
            "aligned_share": round(self.aligned / self.alignable, 4) if self.alignable else None,
            "aligned_share_all_multi": round(self.aligned / self.multi, 4) if self.multi else None,
            "gpu_nic_same_root_share": round(self.nic_aligned / self.nic_pods, 4) if self.nic_pods else None,
            "eight_gpu_waits": self.eight_gpu_waits,
            "decisions": self.decisions,
            "decisions_per_second": round(self.rate, 1),
            "decisions_per_second_rounds": [round(r, 1) for r in self.rates],
            "mean_gpu_utilisation": round(self.busy_gpu_ticks / (self.ticks * NODES * GPUS), 4),
        }


def root_name(i: int) -> str:
    return f"pci0000:{0x80 * i:02x}"


def device_class(kind: str) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {
            "name": f"{kind}.example.com",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": {ALIGN_BY_ANNOTATION: PCIE_ROOT},
        },
        "spec": {
            "extendedResourceName": f"example.com/{kind}",
            "selectors": [{"cel": {"expression": f'device.driver == "{kind}.example.com"'}}],
        },
    }


def device_slice(node: str, kind: str, devices: list[Obj]) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{kind}"},
        "spec": {
            "driver": f"{kind}.example.com",
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def build() -> ClusterState:
    st = ClusterState()
    st.apply("DeviceClass", device_class("gpu"))
    st.apply("DeviceClass", device_class("nic"))
    for n in range(NODES):
        node = f"node-{n:02d}"
        st.apply(
            "Node",
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": node, "labels": {"kubernetes.io/hostname": node}},
                "status": {"allocatable": {"cpu": "128", "memory": "1Ti", "pods": "110"}},
            },
        )
        gpus = [
            {
                "name": f"gpu-{i}",
                "attributes": {
                    PCIE_ROOT: {"string": root_name(i // ROOT_SIZE)},
                    "numaNode": {"int": i // ROOT_SIZE},
                    "index": {"int": i},
                },
            }
            for i in range(GPUS)
        ]
        nics = [
            {"name": f"nic-{r}", "attributes": {PCIE_ROOT: {"string": root_name(r)}, "numaNode": {"int": r}}}
            for r in range(GPUS // ROOT_SIZE)
        ]
        st.apply("ResourceSlice", device_slice(node, "gpu", gpus))
        st.apply("ResourceSlice", device_slice(node, "nic", nics))
    return st


def stream(seed: int, ticks: int, rate: float) -> list[Arrival]:
    rnd = random.Random(seed)
    out: list[Arrival] = []
    t = rnd.expovariate(rate)
    while t < ticks:
        gpus = rnd.choices(SIZES, WEIGHTS)[0]
        nics = (2 if gpus == 8 else 1) if rnd.random() < NIC_SHARE else 0
        out.append(Arrival(len(out), int(t), gpus, nics, rnd.randint(*DURATION)))
        t += rnd.expovariate(rate)
    return out


def pod_of(a: Arrival) -> Obj:
    requests: Obj = {"cpu": str(12 * a.gpus), "memory": f"{96 * a.gpus}Gi", "example.com/gpu": str(a.gpus)}
    if a.nics:
        requests["example.com/nic"] = str(a.nics)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"job-{a.seq}", "namespace": "default", "uid": str(uuid.UUID(int=a.seq + 1))},
        "spec": {"containers": [{"name": "main", "image": "x", "resources": {"requests": requests}}]},
    }


def _roots(results: list[Any], prefix: str) -> set[int]:
    return {int(r.device.name.split("-")[1]) // (ROOT_SIZE if prefix == "gpu" else 1) for r in results}


def free_gpus(st: ClusterState) -> int:
    return sum(st.capacity.free("gpu.example.com").values())


def run(policy: str, arrivals: list[Arrival], ticks: int, patience: int) -> Result:
    st = build()
    sched = Scheduler(st, policy)
    res = Result(ticks=ticks)
    by_tick: dict[int, list[Arrival]] = {}
    for a in arrivals:
        by_tick.setdefault(a.tick, []).append(a)
    pending: list[tuple[Arrival, Obj]] = []
    running: list[tuple[int, int, Obj, Obj | None]] = []  # (end, seq, bound pod, claim)
    waited: set[int] = set()
    busy = 0
    for tick in range(ticks):
        while running and running[0][0] <= tick:
            _, _, bound, claim = heapq.heappop(running)
            busy -= int(bound["spec"]["containers"][0]["resources"]["requests"]["example.com/gpu"])
            st.apply("Pod", bound, deleted=True)
            if claim is not None:
                st.apply("ResourceClaim", claim, deleted=True)
        pending.extend((a, pod_of(a)) for a in by_tick.get(tick, ()))
        still: list[tuple[Arrival, Obj]] = []
        for a, pod in pending:
            started = time.process_time()
            d = sched.schedule(pod)
            token = sched.reserve(d) if d.status == SCHEDULED else None
            res.seconds += time.process_time() - started
            res.decisions += 1
            res.outcomes.append((a.seq, d.node))
            if token is None or d.node is None:
                if a.gpus == 8 and a.seq not in waited and free_gpus(st) >= 8:
                    waited.add(a.seq)
                if tick - a.tick >= patience:
                    res.gave_up_by_size[a.gpus] += 1
                else:
                    still.append((a, pod))
                continue
            claim = None
            bound = copy.deepcopy(pod)
            bound["spec"]["nodeName"] = d.node
            if d.special is not None:
                name = deterministic_name(generate_name(pod), pod["metadata"]["uid"])
                claim = as_obj(special_claim_after_prebind(pod, d.requests, d.special, name, d.constraints))
                st.apply("ResourceClaim", claim)
                erc = extended_resource_claim_status(name, d.mappings)
                bound["status"] = {"extendedResourceClaimStatus": erc}
            st.apply("Pod", bound)
            st.unreserve(token)
            heapq.heappush(running, (tick + a.duration, a.seq, bound, claim))
            busy += a.gpus
            res.placed_by_size[a.gpus] += 1
            results = d.special.results if d.special is not None else []
            gpu_roots = _roots([r for r in results if r.device.name.startswith("gpu-")], "gpu")
            if a.gpus > 1:
                res.multi += 1
                res.aligned += len(gpu_roots) == 1
                if a.gpus <= ROOT_SIZE:
                    res.alignable += 1
            if a.nics == 1:
                res.nic_pods += 1
                nic_roots = _roots([r for r in results if r.device.name.startswith("nic-")], "nic")
                res.nic_aligned += len(gpu_roots | nic_roots) == 1
        pending = still
        res.busy_gpu_ticks += busy
    res.eight_gpu_waits = len(waited)
    res.rates.append(res.decisions / res.seconds)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--ticks", type=int, default=1500)
    ap.add_argument("--rate", type=float, default=1.75, help="mean pod arrivals per tick")
    ap.add_argument("--patience", type=int, default=60, help="ticks a pod waits before it gives up")
    ap.add_argument("--rounds", type=int, default=3, help="runs per policy (decisions/s is their median)")
    args = ap.parse_args(argv)
    arrivals = stream(args.seed, args.ticks, args.rate)
    warm = min(args.ticks, 150)
    run("upstream", stream(args.seed + 1, warm, args.rate), warm, args.patience)
    results: dict[str, Result] = {}
    for _ in range(max(args.rounds, 1)):
        for policy in POLICIES:
            r = run(policy, arrivals, args.ticks, args.patience)
            first = results.setdefault(policy, r)
            if first is not r:
                if r.outcomes != first.outcomes:
                    raise SystemExit(f"{policy}: a round decided differently from the first")
                first.rates.extend(r.rates)
    arrived = dict.fromkeys(SIZES, 0)
    for a in arrivals:
        arrived[a.gpus] += 1
    mean_gpus = sum(s * w for s, w in zip(SIZES, WEIGHTS, strict=True)) / sum(WEIGHTS)
    out = {
        "shape": {
            "nodes": NODES,
            "gpus_per_node": GPUS,
            "pcie_roots_per_node": GPUS // ROOT_SIZE,
            "nics_per_node": GPUS // ROOT_SIZE,
            "seed": args.seed,
            "ticks": args.ticks,
            "rate": args.rate,
            "patience": args.patience,
            "pods": len(arrivals),
            "arrived_by_size": {str(k): v for k, v in arrived.items()},
            "offered_gpu_load": round(args.rate * mean_gpus * sum(DURATION) / 2 / (NODES * GPUS), 3),
        },
        "policies": {p: r.to_json() for p, r in results.items()},
        "python": sys.version.split()[0],
    }
    b, u = results["binpack"], results["upstream"]
    out["binpack_vs_upstream"] = {
        "eight_gpu_placed_ratio": round(b.placed_by_size[8] / u.placed_by_size[8], 3)
        if u.placed_by_size[8]
        else None,
        "decisions_per_second_ratio": round(b.rate / u.rate, 3),
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
