"""Crash-loop benchmark: a worker killed every round while pods come and go, through the API
emulator and the real ``kubernetes`` client.

One node with ``--devices`` GPUs, kept full. Each round starts a fresh worker process state (a new
``Process``: cache, informers), creates the pods
that replace those deleted while no worker ran, and measures from the worker's start until every
pod is bound; then kills the worker (no lease release, no cleanup writes) and deletes half the pods.
The replacements can only bind once the worker has repaired the special claims of the deleted pods
(repair at cache sync and on leadership). Prints JSON: per round, start-to-all-bound seconds, and at
the end the devices still held by absent pods (must be 0). With ``--leader-elect`` a new process
waits for the killed leader's lease to expire (15 s) before it may write, as kube-scheduler does.

    python bench/crashloop.py [--rounds 10] [--devices 4] [--leader-elect]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

if __name__ == "__main__":
    # Run as a script, bench/ comes first on sys.path and bench/webhook.py would shadow the package.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    sys.path.insert(0, os.path.dirname(_here))

from bench.common import WORKER, gpu_class, gpu_node, gpu_pod, held_by_absent, worker_namespace
from e2e.emulator import Emulator
from webhook.runtime.serve import Process, ServeOptions


def setup(em: Emulator, devices: int) -> None:
    worker_namespace(em)
    gpu_class(em)
    gpu_node(em, "n", [{"name": f"gpu-{d}"} for d in range(devices)])


def all_bound(em: Emulator, names: list[str]) -> bool:
    return all(em.get("pods", n, "default")["spec"].get("nodeName") for n in names)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument(
        "--leader-elect",
        action="store_true",
        help="elect a leader (production lease 15/10/2 s): a killed leader's lease must expire first",
    )
    args = ap.parse_args(argv)
    rounds: list[dict[str, float]] = []
    with (
        Emulator(tokens={"w": (WORKER, ["system:serviceaccounts"])}) as em,
        tempfile.TemporaryDirectory() as tmp,
    ):
        setup(em, args.devices)
        kubeconfig = em.kubeconfig(Path(tmp) / "kubeconfig", token="w")
        alive: list[str] = []
        for r in range(args.rounds):
            held_before = held_by_absent(em)
            proc = Process(
                ServeOptions(
                    webhook=False,
                    kubeconfig=str(kubeconfig),
                    identity=f"w{r}",
                    leader_elect=args.leader_elect,
                    qps=1000,
                    burst=2000,
                )
            )
            started = time.monotonic()
            proc.start_background()
            want = [f"r{r}-{i}" for i in range(args.devices - len(alive))]
            for name in want:
                em.create("pods", gpu_pod(name))
            names = alive + want
            em.wait_for(partial(all_bound, em, names), 60, f"round {r}: not every pod bound")
            rounds.append(
                {
                    "round": r,
                    "devices_held_by_absent_pods_at_start": held_before,
                    "replacements": len(want),
                    "start_to_all_bound_seconds": round(time.monotonic() - started, 3),
                }
            )
            alive = names
            proc.kill()
            for name in alive[: args.devices // 2]:
                em.delete("pods", name, "default")
            alive = alive[args.devices // 2 :]
        last = Process(
            ServeOptions(
                webhook=False, kubeconfig=str(kubeconfig), identity="last", leader_elect=args.leader_elect
            )
        )
        started = time.monotonic()
        last.start_background()
        em.wait_for(lambda: held_by_absent(em) == 0, 60, "devices still held by absent pods")
        repaired = time.monotonic() - started
        last.stop()
    times = sorted(x["start_to_all_bound_seconds"] for x in rounds)
    print(
        json.dumps(
            {
                "shape": {
                    "devices": args.devices,
                    "rounds": args.rounds,
                    "leader_election": "15/10/2 s (production)" if args.leader_elect else "off",
                },
                "start_to_all_bound_seconds": {
                    "max": times[-1],
                    "p50": times[len(times) // 2],
                    "min": times[0],
                },
                "final_repair_seconds": round(repaired, 3),
                "devices_held_by_absent_pods_at_end": 0,
                "rounds": rounds,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
