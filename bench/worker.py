"""End-to-end worker benchmark through the API emulator and the real ``kubernetes`` client.

100 nodes x 8 devices. Phase "fill": 800 pods created at once, each asking for one DRA-backed
``example.com/gpu``; measured until all are bound. Phase "steady": at half full (400 bound), pods
are replaced one for one (delete a bound pod, create a new one) to measure create-to-bound latency
under churn. Prints JSON: pods bound per second, p50/p99 create-to-bound latency, and API writes
per pod made by the worker (claim create, claim status, pod status, binding, event).

Native pods only: rewrite mode's pods need kube-controller-manager's resourceclaim controller (claims
from templates, their release), which the emulator does not run; e2e/local.py's gate-off row has it.

    python bench/worker.py [--nodes 100] [--devices 8] [--steady 400]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

if __name__ == "__main__":
    # Run as a script, bench/ comes first on sys.path and bench/webhook.py would shadow the package.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    sys.path.insert(0, os.path.dirname(_here))

from bench.common import WORKER, WRITES, gpu_class, gpu_node, gpu_pod, percentile, worker_namespace
from e2e.emulator import Emulator
from webhook.core.api.objects import Obj
from webhook.runtime.serve import Process, ServeOptions


def setup(em: Emulator, nodes: int, devices: int) -> None:
    worker_namespace(em)
    gpu_class(em)
    for n in range(nodes):
        gpu_node(
            em,
            f"node-{n:03d}",
            [{"name": f"gpu-{d}", "attributes": {"index": {"int": d}}} for d in range(devices)],
        )


def pod(name: str) -> Obj:
    return gpu_pod(name)


class Tracker:
    """Create and bound times per pod, from the emulator's own store changes."""

    def __init__(self, em: Emulator) -> None:
        self.em = em
        self.created: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.perf_counter()
            for p in self.em.list("pods", "default"):
                n = p["metadata"]["name"]
                if p["spec"].get("nodeName") and n not in self.bound and n in self.created:
                    self.bound[n] = now
            self._stop.wait(0.05)

    def create(self, name: str) -> None:
        self.created[name] = time.perf_counter()
        self.em.create("pods", pod(name))

    def wait(self, names: list[str], timeout: float) -> None:
        deadline = time.perf_counter() + timeout
        while not all(n in self.bound for n in names):
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{sum(n in self.bound for n in names)}/{len(names)} bound")
            time.sleep(0.01)

    def latencies(self, names: list[str]) -> list[float]:
        return sorted(self.bound[n] - self.created[n] for n in names)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def worker_writes(em: Emulator) -> int:
    return sum(1 for r in em.requests() if r.user == WORKER and r.verb in WRITES and r.code < 400)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--steady", type=int, default=400, help="replacements in the steady-state phase")
    ap.add_argument(
        "--qps",
        type=float,
        default=1000.0,
        help="the worker's client-side write limit (draxr serve defaults to 50, burst 100)",
    )
    ap.add_argument("--burst", type=int, default=2000)
    args = ap.parse_args(argv)
    total = args.nodes * args.devices
    with (
        Emulator(tokens={"w": (WORKER, ["system:serviceaccounts"])}) as em,
        tempfile.TemporaryDirectory() as tmp,
    ):
        setup(em, args.nodes, args.devices)
        kubeconfig = em.kubeconfig(Path(tmp) / "kubeconfig", token="w")
        proc = Process(
            ServeOptions(
                webhook=False, kubeconfig=str(kubeconfig), leader_elect=False, qps=args.qps, burst=args.burst
            )
        )
        proc.start_background()
        tracker = Tracker(em)
        try:
            em.reset_requests()
            fill = [f"fill-{i:04d}" for i in range(total)]
            t0 = time.perf_counter()
            for n in fill:
                tracker.create(n)
            tracker.wait(fill, timeout=600)
            fill_s = time.perf_counter() - t0
            fill_lat = tracker.latencies(fill)
            fill_writes = worker_writes(em)

            # Down to half full, then churn: replace one bound pod at a time, keeping ~8 in flight.
            for n in fill[total // 2 :]:
                em.delete("pods", n, "default")
            em.wait_for(lambda: len(em.list("resourceclaims", "default")) <= total // 2, 120)
            em.reset_requests()
            steady = [f"steady-{i:04d}" for i in range(args.steady)]
            victims = iter(fill[: total // 2])
            t1 = time.perf_counter()
            window = 8
            for i, n in enumerate(steady):
                em.delete("pods", next(victims), "default")
                tracker.create(n)
                if i >= window:
                    tracker.wait([steady[i - window]], timeout=60)
            tracker.wait(steady, timeout=300)
            steady_s = time.perf_counter() - t1
            steady_lat = tracker.latencies(steady)
            steady_writes = worker_writes(em)
        finally:
            tracker.stop()
            proc.stop()
    out = {
        "shape": {
            "nodes": args.nodes,
            "devices_per_node": args.devices,
            "client": "kubernetes (real HTTP)",
            "write_qps_limit": args.qps,
            "write_burst": args.burst,
            "mode": "native",
        },
        "fill": {
            "pods": total,
            "pods_bound_per_second": round(total / fill_s, 1),
            "create_to_bound_p50_ms": round(percentile(fill_lat, 0.5) * 1000, 1),
            "create_to_bound_p99_ms": round(percentile(fill_lat, 0.99) * 1000, 1),
            "api_writes_per_pod": round(fill_writes / total, 2),
        },
        "steady_half_full": {
            "pods": args.steady,
            "pods_bound_per_second": round(args.steady / steady_s, 1),
            "create_to_bound_p50_ms": round(percentile(steady_lat, 0.5) * 1000, 1),
            "create_to_bound_p99_ms": round(percentile(steady_lat, 0.99) * 1000, 1),
            "api_writes_per_pod_including_cleanup": round(steady_writes / args.steady, 2),
        },
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
