"""Chaos run (issue 20): two leader-elected workers (``draxr serve --no-webhook`` processes) against the
API emulator while the leader is killed, leases and claim status writes fail or stall, watches are
cut after a compaction (every informer relists), and StatefulSet pods are recreated under their names.

The cluster: ``--nodes`` nodes of ``--devices`` GPUs; a "StatefulSet" of ``--replicas`` pods
``web-<i>`` that are deleted and created again under the same name (a new uid), and ``--churn`` pods
of other names created and deleted, never more pods than GPUs. For ``--seconds`` the chaos runs:

- every ``--kill-every`` seconds the Lease holder gets SIGKILL (no release, no cleanup) and is
  started again at once;
- 503s on a share of Lease reads and writes, 503s and 0.2 s stalls on ResourceClaim status writes;
- every ``--compact-every`` seconds the watch history is compacted and every watch cut (410 on the
  restart: each informer relists).

Watched throughout, from the emulator's store: devices held by two claims at once, and claims freed
under a running pod (a bound, live pod whose mapping names a claim that is gone, unallocated or not
reserved for it, confirmed by reading the pod again). After the faults stop: every pod bound, devices
held by pods that no longer exist; then every pod deleted, devices still allocated. Prints JSON with
the counts; exit 1 when any of the three must-be-zero counts is not.

    python bench/chaos.py [--seconds 60] [--nodes 4] [--devices 4] [--replicas 6] [--churn 6]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    # Run as a script, bench/ comes first on sys.path and bench/webhook.py would shadow the package.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    sys.path.insert(0, os.path.dirname(_here))

from bench.common import WORKER, gpu_class, gpu_node, gpu_pod, held_by_absent, results, worker_namespace
from e2e.emulator import Emulator

Obj = dict[str, Any]
NS = "default"
LEASE = "draxr-worker"
#: Leader election of the two workers: lease duration, renew deadline, retry period (seconds).
TIMINGS = ("1.5", "1.0", "0.2")


class Workers:
    """The two worker processes; the Lease holder is killed and started again."""

    def __init__(self, kubeconfig: Path, logdir: Path) -> None:
        self.kubeconfig = kubeconfig
        self.logdir = logdir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.kills = 0

    def start(self, identity: str) -> None:
        lease, renew, retry = TIMINGS
        argv = [
            sys.executable,
            "-m",
            "webhook",
            "serve",
            "--no-webhook",
            f"--kubeconfig={self.kubeconfig}",
            "--namespace=draxr-system",
            f"--identity={identity}",
            f"--leader-elect-lease-duration={lease}",
            f"--leader-elect-renew-deadline={renew}",
            f"--leader-elect-retry-period={retry}",
            "--pod-max-backoff-seconds=1",
            "--port=0",
            "--log-level=warning",
        ]
        with (self.logdir / f"{identity}.log").open("ab") as log:
            self.procs[identity] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)

    def kill(self, identity: str) -> None:
        proc = self.procs.get(identity)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(15)
            self.kills += 1

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def exited(self) -> list[str]:
        """Workers that ended on their own (not killed here): a crash is a finding."""
        return [i for i, p in self.procs.items() if p.poll() is not None and p.returncode != -signal.SIGKILL]


def holder(em: Emulator) -> str | None:
    lease = em.find("leases", LEASE, "draxr-system")
    return None if lease is None else (lease.get("spec") or {}).get("holderIdentity")


class Watch:
    """The invariants, sampled from the emulator's store."""

    def __init__(self, em: Emulator) -> None:
        self.em = em
        self.doubled: set[tuple[str, str, str]] = set()
        self.freed_under_running: set[tuple[str, str]] = set()
        self.samples = 0

    def sample(self) -> None:
        self.samples += 1
        claims = {c["metadata"]["name"]: c for c in self.em.list("resourceclaims", NS)}
        seen: dict[tuple[str, str, str], str] = {}
        for cname, c in claims.items():
            for r in results(c):
                if r.get("shareID") or r.get("adminAccess"):
                    continue
                device = (r["driver"], r["pool"], r["device"])
                if device in seen and seen[device] != cname:
                    self.doubled.add(device)
                seen[device] = cname
        for pod in self.em.list("pods", NS):
            mapping = (pod.get("status") or {}).get("extendedResourceClaimStatus")
            if not pod["spec"].get("nodeName") or not mapping or pod["metadata"].get("deletionTimestamp"):
                continue
            claim = claims.get(mapping["resourceClaimName"])
            reserved = [r.get("uid") for r in ((claim or {}).get("status") or {}).get("reservedFor") or []]
            if claim is not None and results(claim) and pod["metadata"]["uid"] in reserved:
                continue
            # Confirm: the pod read after the claims is still this one, bound and live.
            again = self.em.find("pods", pod["metadata"]["name"], NS)
            same = again is not None and again["metadata"]["uid"] == pod["metadata"]["uid"]
            if same and again is not None and not again["metadata"].get("deletionTimestamp"):
                self.freed_under_running.add((pod["metadata"]["uid"], mapping["resourceClaimName"]))


def wait(what: str, check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            print(f"chaos: {what}: not within {timeout:g} s", file=sys.stderr)
            return False
        time.sleep(0.1)  # a poll interval: the loop re-checks the condition
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--replicas", type=int, default=6, help="StatefulSet pods recreated under their names")
    ap.add_argument("--churn", type=int, default=6, help="other pods created and deleted")
    ap.add_argument("--kill-every", type=float, default=5.0)
    ap.add_argument("--compact-every", type=float, default=4.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    if args.replicas + args.churn > args.nodes * args.devices:
        ap.error("--replicas plus --churn must not exceed the GPUs (every pod must be able to bind)")
    rnd = random.Random(args.seed)
    counts: dict[str, int] = {"recreated_under_same_name": 0, "created": 0, "deleted": 0, "compactions": 0}
    with (
        Emulator(tokens={"w": (WORKER, ["system:serviceaccounts"])}) as em,
        tempfile.TemporaryDirectory() as tmp,
    ):
        worker_namespace(em)
        gpu_class(em)
        for n in range(args.nodes):
            gpu_node(em, f"n{n}", [{"name": f"gpu-{d}"} for d in range(args.devices)])
        workers = Workers(em.kubeconfig(Path(tmp) / "kubeconfig", token="w"), Path(tmp))
        watch = Watch(em)
        stop = threading.Event()

        def sampler() -> None:
            while not stop.is_set():
                watch.sample()
                stop.wait(0.05)

        def create(name: str) -> None:
            em.create("pods", gpu_pod(name))
            counts["created"] += 1

        def delete(name: str) -> None:
            if em.find("pods", name, NS) is not None:
                em.delete("pods", name, NS)
                counts["deleted"] += 1

        try:
            workers.start("w0")
            workers.start("w1")
            for i in range(args.replicas):
                create(f"web-{i}")
            churn = [f"job-{i}" for i in range(args.churn)]
            for name in churn:
                create(name)
            wait("the first leader", lambda: holder(em) in workers.procs, 60)
            threading.Thread(target=sampler, daemon=True).start()
            em.inject(verbs=["get", "update"], resource="leases", error=503, probability=0.2)
            em.inject(verbs=["update", "patch"], resource="resourceclaims/status", error=503, probability=0.2)
            em.inject(
                verbs=["update", "patch"], resource="resourceclaims/status", latency=0.2, probability=0.3
            )
            started = time.monotonic()
            next_kill, next_compact, generation = args.kill_every, args.compact_every, 0
            while (elapsed := time.monotonic() - started) < args.seconds:
                if elapsed >= next_kill:
                    next_kill += args.kill_every
                    leader = holder(em)
                    if leader in workers.procs:
                        workers.kill(leader)
                        workers.start(leader)
                if elapsed >= next_compact:
                    next_compact += args.compact_every
                    em.compact()
                    em.drop_watches()
                    counts["compactions"] += 1
                # A StatefulSet pod recreated under its name (a new uid), or a churn pod replaced.
                if rnd.random() < 0.5:
                    name = f"web-{rnd.randrange(args.replicas)}"
                    delete(name)
                    create(name)
                    counts["recreated_under_same_name"] += 1
                elif churn:
                    generation += 1
                    old = churn.pop(rnd.randrange(len(churn)))
                    delete(old)
                    churn.append(f"job-g{generation}")
                    create(churn[-1])
                time.sleep(rnd.uniform(0.05, 0.4))  # the arrival process, not synchronisation
            em.clear_faults()
            faulted = sum(1 for r in em.requests() if r.code == 503)
            lists = sum(1 for r in em.requests() if r.verb == "list" and r.user == WORKER)
            live = [p["metadata"]["name"] for p in em.list("pods", NS)]
            settled = wait(
                "every pod bound after the faults",
                lambda: all(em.get("pods", n, NS)["spec"].get("nodeName") for n in live),
                120,
            )
            wait("no device held by an absent pod", lambda: held_by_absent(em) == 0, 60)
            stop.set()
            watch.sample()
            absent_held = held_by_absent(em)
            for name in live:
                delete(name)
            wait(
                "every claim released", lambda: not any(results(c) for c in em.list("resourceclaims", NS)), 60
            )
            leaked = sum(len(results(c)) for c in em.list("resourceclaims", NS))
            crashed = workers.exited()
        finally:
            stop.set()
            workers.stop()
    out = {
        "seconds": args.seconds,
        "shape": {
            "nodes": args.nodes,
            "devices": args.devices,
            "replicas": args.replicas,
            "churn": args.churn,
        },
        "leader_kills": workers.kills,
        "compactions_with_watches_cut": counts["compactions"],
        "requests_answered_503": faulted,
        "lists_by_the_workers_starts_and_relists": lists,
        "pods_created": counts["created"],
        "statefulset_pods_recreated_under_same_name": counts["recreated_under_same_name"],
        "samples": watch.samples,
        "all_pods_bound_after_faults": settled,
        "double_allocated_devices": len(watch.doubled),
        "claims_freed_under_a_running_pod": len(watch.freed_under_running),
        "devices_held_by_absent_pods_after_faults": absent_held,
        "devices_leaked_after_all_pods_left": leaked,
        "workers_crashed": crashed,
    }
    print(json.dumps(out, indent=2))
    bad = out["double_allocated_devices"] or out["claims_freed_under_a_running_pod"] or leaked or absent_held
    return 1 if bad or not settled or crashed else 0


if __name__ == "__main__":
    raise SystemExit(main())
