"""Scale benchmark: 5,000 nodes x 8 devices, 25 classes, 10,000 pods arriving and departing.

Two parts, both in steady state (once ``--live`` pods run, every arrival is matched by the
departure of the oldest pod):

* **engine**: ``core.Scheduler`` on a ``ClusterState`` (the shape of ``bench/allocate.py``: class
  ``gpu-k`` selects the devices of type ``gpu-k``, pod ``i`` asks for ``example.com/gpu-{i mod 25}``).
  Each arrival is one decision (PreFilter, Filter, Score, allocation, Reserve); a departure releases
  the reservation. Reports decisions/s, p50/p99 per decision, and this process's RSS; also per
  CPU second of this process and the p99 of CPU time (the figures a loaded machine blurs least).
  ``--stream placement`` (engine only): nodes in ``--zones`` zones, and every third pod places
  itself among its replicas (pod placement, issue 21): in turn, required pod anti-affinity per node
  to the replicas of its group, or a DoNotSchedule zone spread (maxSkew 1) of its group's replicas,
  over ``--groups`` groups of each; decisions/s and p99 are also given for those pods alone.
* **worker**: ``draxr serve --no-webhook`` in its own process against the API emulator over real
  HTTP (the emulator in this process), the same pods created with up to ``--window`` unbound at
  a time, bound pods deleted as above. Reports pods bound/s, the worker's API writes per pod
  (special claim create and status, pod status, binding, event, and the cleanup of departed
  pods' claims), the worker process's RSS (``VmRSS`` at the end, ``VmHWM`` peak), the share of pods
  that got their ``Scheduled`` Event, and the CPU time per pod of the worker and of this process
  (the emulator and the pod driver).

``--resident-pods N`` puts N more pods in both parts' clusters before anything is measured: bound,
spread over the nodes, asking for CPU and memory only (what a big cluster's caches hold besides the
GPU pods; issue 35's scale is ``--nodes 10000 --resident-pods 100000``). The engine's
``build_seconds`` then include them; the worker's ``worker_start_to_first_bind_seconds`` is the time
from its process's start (lists, cache sync, index builds) to its first binding, and
``worker_cpu_seconds_to_first_bind`` the worker's own CPU in that time (the emulator, one Python
process serving every list, takes most of the rest: a real API server lists far faster).

The machine is shared and the numbers are noisy: compare runs made side by side.

    python bench/scale.py [--nodes 5000] [--devices 8] [--classes 25] [--pods 10000]
        [--worker-pods N] [--live N] [--skip-worker] [--skip-engine]
        [--percentage-of-nodes-to-score 0] [--stream plain|placement] [--zones 10] [--groups 50]
        [--resident-pods 0]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    # Run as a script, bench/ comes first on sys.path and bench/webhook.py would shadow the package.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    sys.path.insert(0, os.path.dirname(_here))

from bench.allocate import build, place_among_replicas, pod
from bench.common import (
    DRIVER,
    WORKER,
    WRITES,
    cpu_seconds,
    gpu_class,
    gpu_node,
    memory_mib,
    percentile,
    serve_argv,
    worker_namespace,
)
from e2e.emulator import Emulator
from webhook.core.api.objects import Obj
from webhook.core.cel import DEFAULT_ENGINE, ENGINES
from webhook.core.cel.backend import set_default_engine
from webhook.core.scheduling.framework import SCHEDULED, Decision
from webhook.core.scheduling.scheduler import Scheduler

# --- the engine ----------------------------------------------------------------------------------


def engine(args: argparse.Namespace) -> dict[str, Any]:
    capacity = args.nodes * args.devices
    set_default_engine(args.cel_engine)
    before = memory_mib()
    t0 = time.perf_counter()
    placement = args.stream == PLACEMENT
    st = build(args.nodes, args.devices, args.classes, unique=False, zones=args.zones if placement else 0)
    for j in range(args.resident_pods):
        st.apply("Pod", resident_pod(j, args.nodes))
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for k in range(args.classes):
        st.capacity.free(f"gpu-{k}")  # every class selector on every device once (the CEL cache)
    cold_s = time.perf_counter() - t0
    built = memory_mib()
    sched = Scheduler(st, "binpack", percentage_of_nodes_to_score=args.percentage_of_nodes_to_score)
    live_limit = args.live if args.live is not None else max(1, min(args.pods, capacity) // 2)
    live: deque[tuple[Decision, str]] = deque()
    latencies: list[float] = []
    cpu: list[float] = []  # this process's CPU time per decision: what a loaded machine does not blur
    placed: list[float] = []  # the pods with anti-affinity or a spread
    placed_cpu: list[float] = []
    scheduled = 0
    t_all = time.perf_counter()
    c_all = time.process_time()
    for i in range(args.pods):
        if len(live) >= live_limit:
            d, token = live.popleft()
            sched.unreserve(d, token)
        p = placement_pod(i, args.classes, args.groups) if placement else pod(i, args.classes)
        t = time.perf_counter()
        c = time.process_time()
        d = sched.schedule(p)
        if d.status == SCHEDULED:
            live.append((d, sched.reserve(d)))
            scheduled += 1
        latencies.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
        if placement and i % 3 == 0:
            placed.append(latencies[-1])
            placed_cpu.append(cpu[-1])
    total = time.perf_counter() - t_all
    total_cpu = time.process_time() - c_all
    after = memory_mib()
    extra: dict[str, Any] = {}
    if placement:
        extra = {
            "stream": PLACEMENT,
            "placement_pods": len(placed),
            "placement_decisions_per_second": round(len(placed) / sum(placed), 1) if placed else None,
            "placement_decision_p99_ms": round(percentile(placed, 0.99) * 1000, 3) if placed else None,
            "placement_decisions_per_cpu_second": round(len(placed) / sum(placed_cpu), 1)
            if placed and sum(placed_cpu)
            else None,
        }
    return {
        **extra,
        "decisions": args.pods,
        "scheduled": scheduled,
        "decisions_per_second": round(args.pods / total, 1),
        "decision_p50_ms": round(percentile(latencies, 0.50) * 1000, 3),
        "decision_p99_ms": round(percentile(latencies, 0.99) * 1000, 3),
        "decisions_per_cpu_second": round(args.pods / total_cpu, 1) if total_cpu else None,
        "decision_cpu_p99_ms": round(percentile(cpu, 0.99) * 1000, 3),
        "live_pods": live_limit,
        "resident_pods": args.resident_pods,
        "build_seconds": round(build_s, 2),
        "cel_cold_start_seconds": round(cold_s, 2),
        "rss_mb": after.get("VmRSS"),
        "rss_peak_mb": after.get("VmHWM"),
        "rss_of_the_cluster_state_mb": round(built["VmRSS"] - before["VmRSS"], 1),
        "rss_growth_while_deciding_mb": round(after["VmRSS"] - built["VmRSS"], 1),
    }


PLACEMENT = "placement"


def placement_pod(i: int, classes: int, groups: int) -> Obj:
    """``bench/allocate.py``'s pod ``i``, placing itself among its replicas every third time."""
    return place_among_replicas(pod(i, classes), i, groups)


def resident_pod(j: int, nodes: int) -> Obj:
    """Resident pod ``j``: bound to node ``j mod nodes`` before anything is measured, asking for CPU
    and memory alone (no device): what a big cluster's caches hold beside the GPU pods."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"resident-{j:06d}",
            "namespace": RESIDENTS,
            "uid": str(uuid.UUID(int=2 * 10**9 + j)),
            "labels": {"app": f"resident-{j % 100}"},
        },
        "spec": {
            "nodeName": f"node-{j % nodes:04d}",
            "containers": [
                {"name": "c", "image": "x", "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}
            ],
        },
        "status": {"phase": "Running"},
    }


#: The namespace of the resident pods.
RESIDENTS = "residents"


# --- the worker through the emulator -------------------------------------------------------------


def setup(em: Emulator, nodes: int, devices: int, classes: int) -> None:
    worker_namespace(em)
    for k in range(classes):
        gpu_class(em, f"gpu-{k}", f"example.com/gpu-{k}", f'device.attributes["{DRIVER}"].type == "gpu-{k}"')
    for n in range(nodes):
        devs = [
            {
                "name": f"gpu-{d}",
                "attributes": {
                    "type": {"string": f"gpu-{(n * devices + d) % classes}"},
                    "index": {"int": d},
                },
            }
            for d in range(devices)
        ]
        gpu_node(em, f"node-{n:04d}", devs)


def worker_pod(i: int, classes: int) -> Obj:
    return {
        "metadata": {"name": f"pod-{i:05d}", "namespace": "default"},
        "spec": {
            "schedulerName": "draxr",
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "resources": {"requests": {"cpu": "100m", f"example.com/gpu-{i % classes}": "1"}},
                }
            ],
        },
    }


def bound(em: Emulator, name: str) -> bool:
    p = em.find("pods", name, "default")
    return p is not None and bool(p["spec"].get("nodeName"))


def wait_bound(em: Emulator, name: str, timeout: float) -> None:
    deadline = time.perf_counter() + timeout
    while not bound(em, name):
        if time.perf_counter() > deadline:
            raise TimeoutError(f"{name} not bound within {timeout:g} s")
        time.sleep(0.005)


def scheduled_events(em: Emulator, pods: int) -> int:
    """How many of the measured pods (``pod-00000``..) got a ``Scheduled`` Event from the worker."""
    measured = {f"pod-{i:05d}" for i in range(pods)}
    return len(
        {
            e["involvedObject"]["name"]
            for e in em.list("events", "default")
            if e.get("reason") == "Scheduled" and e["involvedObject"].get("name") in measured
        }
    )


def worker(args: argparse.Namespace) -> dict[str, Any]:
    capacity = args.nodes * args.devices
    with (
        Emulator(tokens={"w": (WORKER, ["system:serviceaccounts"])}) as em,
        tempfile.TemporaryDirectory() as tmp,
    ):
        t0 = time.perf_counter()
        setup(em, args.nodes, args.devices, args.classes)
        if args.resident_pods:
            em.create(
                "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": RESIDENTS}}
            )
        for j in range(args.resident_pods):
            body = resident_pod(j, args.nodes)
            del body["metadata"]["uid"]
            em.create("pods", body)
        setup_s = time.perf_counter() - t0
        kubeconfig = em.kubeconfig(Path(tmp) / "kubeconfig", token="w")
        log = open(Path(tmp) / "worker.log", "wb")  # noqa: SIM115 (closed below)
        cmd = serve_argv(
            f"--kubeconfig={kubeconfig}",
            f"--qps={args.qps}",
            f"--burst={args.burst}",
            f"--percentage-of-nodes-to-score={args.percentage_of_nodes_to_score}",
            "--port=0",
            "--log-level=warning",
            f"--cel-engine={args.cel_engine}",
        )
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            # Ready when it has bound a first pod (its caches are synced by then).
            t1 = time.perf_counter()
            em.create("pods", worker_pod(99999, args.classes))
            wait_bound(em, "pod-99999", timeout=900)
            start_s = time.perf_counter() - t1
            start_cpu = cpu_seconds(proc.pid)
            em.delete("pods", "pod-99999", "default")
            ready_rss = memory_mib(proc.pid)
            em.reset_requests()
            live_limit = args.live if args.live is not None else max(1, min(args.worker_pods, capacity) // 2)
            live: deque[str] = deque()
            unbound: deque[str] = deque()
            t2 = time.perf_counter()
            worker_cpu, bench_cpu = cpu_seconds(proc.pid), cpu_seconds()
            for i in range(args.worker_pods):
                if proc.poll() is not None:
                    raise RuntimeError(f"the worker exited with {proc.returncode}")
                while len(unbound) >= args.window:
                    wait_bound(em, unbound.popleft(), timeout=120)
                if len(live) >= live_limit:
                    gone = live.popleft()
                    if unbound and unbound[0] == gone:  # a live limit below the window: bound before it goes
                        wait_bound(em, unbound.popleft(), timeout=120)
                    em.delete("pods", gone, "default")
                name = f"pod-{i:05d}"
                em.create("pods", worker_pod(i, args.classes))
                live.append(name)
                unbound.append(name)
            while unbound:
                wait_bound(em, unbound.popleft(), timeout=120)
            total = time.perf_counter() - t2
            worker_cpu, bench_cpu = cpu_seconds(proc.pid) - worker_cpu, cpu_seconds() - bench_cpu
            writes = sum(1 for r in em.requests() if r.user == WORKER and r.verb in WRITES and r.code < 400)
            end_rss = memory_mib(proc.pid)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()
        # After the worker's stop, which sends what its recorder still queued (bounded).
        scheduled = scheduled_events(em, args.worker_pods)
    return {
        "pods": args.worker_pods,
        "window": args.window,
        "live_pods": live_limit,
        "worker_pods_per_second": round(args.worker_pods / total, 1),
        "api_writes_per_pod_including_cleanup": round(writes / args.worker_pods, 2),
        "scheduled_events_per_pod": round(scheduled / args.worker_pods, 3),
        "worker_cpu_ms_per_pod": round(worker_cpu * 1000 / args.worker_pods, 2),
        "emulator_and_driver_cpu_ms_per_pod": round(bench_cpu * 1000 / args.worker_pods, 2),
        "worker_rss_mb": end_rss.get("VmRSS"),
        "worker_rss_peak_mb": end_rss.get("VmHWM"),
        "worker_rss_when_synced_mb": ready_rss.get("VmRSS"),
        "resident_pods": args.resident_pods,
        "emulator_setup_seconds": round(setup_s, 1),
        "worker_start_to_first_bind_seconds": round(start_s, 1),
        "worker_cpu_seconds_to_first_bind": round(start_cpu, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--classes", type=int, default=25)
    ap.add_argument("--pods", type=int, default=10000, help="arrivals through the engine")
    ap.add_argument("--worker-pods", type=int, default=None, help="arrivals through the worker (--pods)")
    ap.add_argument(
        "--live", type=int, default=None, help="pods running at once (default: half the part's pods)"
    )
    ap.add_argument("--window", type=int, default=64, help="the worker's unbound pods at most")
    ap.add_argument(
        "--resident-pods",
        type=int,
        default=0,
        help="pods bound before anything is measured, CPU and memory only (spread over the nodes)",
    )
    ap.add_argument("--percentage-of-nodes-to-score", type=int, default=0)
    ap.add_argument("--qps", type=float, default=5000.0)
    ap.add_argument("--burst", type=int, default=10000)
    ap.add_argument("--cel-engine", choices=ENGINES, default=DEFAULT_ENGINE)
    ap.add_argument("--skip-engine", action="store_true")
    ap.add_argument("--skip-worker", action="store_true")
    ap.add_argument(
        "--stream",
        choices=("plain", PLACEMENT),
        default="plain",
        help="placement: every third pod has required anti-affinity or a zone spread (engine only)",
    )
    ap.add_argument("--zones", type=int, default=10, help="zones of the nodes with --stream placement")
    ap.add_argument(
        "--groups", type=int, default=50, help="replica groups of each kind with --stream placement"
    )
    args = ap.parse_args(argv)
    if args.resident_pods < 0:
        ap.error(f"--resident-pods must be >= 0, not {args.resident_pods}")
    if args.worker_pods is None:
        args.worker_pods = args.pods
    out: dict[str, Any] = {
        "shape": {
            "nodes": args.nodes,
            "devices_per_node": args.devices,
            "classes": args.classes,
            "engine_pods": args.pods,
            "worker_pods": args.worker_pods,
            "percentage_of_nodes_to_score": args.percentage_of_nodes_to_score,
            "stream": args.stream,
        },
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
    }
    if not args.skip_engine:
        e = engine(args)
        out["engine"] = e
        out["decisions_per_second"] = e["decisions_per_second"]
        out["decision_p99_ms"] = e["decision_p99_ms"]
    if not args.skip_worker:
        w = worker(args)
        out["worker"] = w
        out["worker_pods_per_second"] = w["worker_pods_per_second"]
        out["worker_rss_mb"] = w["worker_rss_mb"]
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
