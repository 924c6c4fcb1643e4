"""Worker failover on the deployed draxr: the leader's pod force-deleted, ``--runs`` times, on the 1.37
chart row (real control plane, kubelets on containerd, draxr's image installed by its chart, 2 + 2
replicas), each time under a stream of extended-resource pods.

A run's figure is the time from the deletion to the first Binding another worker wrote, as
kube-apiserver's audit log records it (``e2e/chartrow/failover.py``); the next run starts once both
Deployments have two ready replicas again. Prints one JSON object: every run, their median, the
bound the chart row's scenario holds them to (lease duration + retry period + 5 s), and what the
audit log shows over all runs (pods bound twice, writes by a fenced worker); exits 1 if a run is
over the bound or either list is not empty.

    python bench/chart_failover.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

if __name__ == "__main__":
    # Run as a script, bench/ comes first on sys.path and bench/webhook.py would shadow the package.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    sys.path.insert(0, os.path.dirname(_here))

from bench.audit import bound_twice, fenced_writes
from e2e.chart import NAMESPACE
from e2e.chartrow.failover import force_delete_leader
from e2e.chartrow.row import started_row
from e2e.chartrow.stream import Stream
from e2e.local import ROWS, unavailable
from webhook.identity.names import LEASE
from webhook.kube.leader import LeaderElection

WORKER_SA = f"system:serviceaccount:{NAMESPACE}:draxr-worker"
NS = "failover"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    if args.runs < 1:
        print("chart_failover: --runs must be at least 1", file=sys.stderr)
        return 2
    if (reason := unavailable(ROWS["1.37"], "chart")) is not None:
        print(f"chart_failover: {reason}", file=sys.stderr)
        return 2
    election = LeaderElection()
    bound = election.lease_duration + election.retry_period + 5
    runs: list[float] = []
    with tempfile.TemporaryDirectory(prefix="draxr-failover-") as tmp, started_row("1.37", Path(tmp)) as row:
        row.namespace(NS)
        for _ in range(args.runs):
            stream = Stream(row.cluster.cp.client(), NS, f"failover-{uuid.uuid4().hex[:6]}").start()
            try:
                runs.append(round(force_delete_leader(row, stream), 2))
            finally:
                stream.stop()
            # The run's pods go, and with them their special claims: the next run has every device.
            row.kubectl("-n", NS, "delete", "pods", "--all", "--grace-period=0", "--force", timeout=120)
            row.cluster.cp.wait_for(
                "the stream's special claims not released",
                lambda: row.get("-n", NS, "resourceclaims")["items"] == [],
                120,
            )
        events = row.cluster.cp.audit_events()
        twice = bound_twice(events)
        fenced = fenced_writes(events, NAMESPACE, LEASE, WORKER_SA)
    result = {
        "bench": "chart_failover",
        "row": "1.37 chart (containerd)",
        "runs": runs,
        "median_seconds": statistics.median(runs),
        "bound_seconds": bound,
        "bound_twice": twice,
        "fenced_writes": fenced,
    }
    print(json.dumps(result))
    return 0 if max(runs) <= bound and not twice and not fenced else 1


if __name__ == "__main__":
    sys.exit(main())
