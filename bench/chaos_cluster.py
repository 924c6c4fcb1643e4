"""Faults of the real components under the deployed draxr: the 1.37 chart row (real control plane,
kubelets on containerd, draxr's image installed by its chart, 2 + 2 replicas) with a stream of
extended-resource pods coming and going (``e2e/chartrow/stream.py``: one every 0.5 s, at most six
alive, the oldest bound one deleted), while the faults of ``e2e/chartrow/faults.py`` run one after
another: etcd killed and started again, etcd paused past the request timeout, kube-apiserver
restarted twice, the worker leader's pod cut from the API server past its lease (in its network
namespace), a DRA driver restarted with one device gone from its slice for a while; then two at once
(the leader cut while kube-apiserver restarts).

``--short`` runs that sequence once (CI); the long form repeats it for ``--minutes`` (30). At the end
the stream stops and every pod it made must be bound; the run prints one JSON object: the counts
(``double_allocated``, ``freed_under_running_pod``, ``leaked_devices``, ``bound_twice``,
``failed_admissions``, ``fenced_writes``, from the objects and kube-apiserver's audit log), each
fault with what it found (a claim allocated a device gone from its slice) and the seconds from its
end to the stream's next bound pod, and pods bound per second before, during and after the faults.
Exits 1 if a count is not 0, a fault found something or a pod was never bound.

    python bench/chaos_cluster.py [--short] [--minutes 30]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    # Run as a script, bench/ comes first on sys.path and bench/webhook.py would shadow the package.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    sys.path.insert(0, os.path.dirname(_here))

from bench.audit import fenced_writes
from e2e.chart import NAMESPACE
from e2e.chartrow.faults import COUNTS, FAULTS, WORKER_SA, apiserver_restarted_twice, counts, leader_cut_while
from e2e.chartrow.row import ChartRow, started_row
from e2e.chartrow.stream import Stream
from e2e.local import ROWS, unavailable
from webhook.identity.names import LEASE

NS = "chaos"
QUIET_SECONDS = 20.0  # the stream alone before the first fault and after the last


def _both(row: ChartRow) -> list[str]:
    """The leader cut while kube-apiserver restarts twice."""
    return leader_cut_while(row, apiserver_restarted_twice)


SEQUENCE = [*FAULTS.items(), ("the leader cut while kube-apiserver restarts twice", _both)]


def _rate(bound: list[float], start: float, end: float) -> float:
    return round(sum(start <= t < end for t in bound) / max(end - start, 1e-9), 2)


def run(row: ChartRow, short: bool, minutes: float) -> dict[str, Any]:
    row.namespace(NS)
    stream = Stream(row.cluster.cp.client(), NS, "chaos", limit=1_000_000).start()
    faults: list[dict[str, Any]] = []
    t0 = time.monotonic()
    threading.Event().wait(QUIET_SECONDS)  # the stream alone: the rate before
    first = time.monotonic()
    try:
        while True:
            for name, fault in SEQUENCE:
                began = time.monotonic()
                findings = fault(row)
                faults.append(
                    {"fault": name, "findings": findings, "began": began, "ended": time.monotonic()}
                )
            if short or time.monotonic() - first >= minutes * 60:
                break
        last = time.monotonic()
        threading.Event().wait(QUIET_SECONDS)  # the rate after
    finally:
        stream.stop()
    end = time.monotonic()
    row.cluster.cp.wait_for(
        "pods of the stream never bound",
        lambda: stream.unbound() == [],
        180,
        detail=lambda: f"unbound: {stream.unbound()}",
    )
    bound = sorted(stream.bound.values())
    for f in faults:
        after = [t for t in bound if t >= f["ended"]]
        f["recovery_seconds"] = round(after[0] - f["ended"], 2) if after else None
        f["seconds"] = round(f.pop("ended") - f.pop("began"), 1)
    recoveries = [f["recovery_seconds"] for f in faults if f["recovery_seconds"] is not None]
    events = row.cluster.cp.audit_events()
    return {
        **counts(row, [NS], len(stream.failed)),
        "fenced_writes_seen": fenced_writes(events, NAMESPACE, LEASE, WORKER_SA)[:20],
        "unbound": stream.unbound(),
        "pods_created": len(stream.created),
        "pods_bound": len(bound),
        "faults": faults,
        "recovery_seconds_median": statistics.median(recoveries) if recoveries else None,
        "pods_per_second": {
            "before": _rate(bound, t0, first),
            "during": _rate(bound, first, last),
            "after": _rate(bound, last, end),
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--short", action="store_true", help="the sequence once (CI)")
    ap.add_argument("--minutes", type=float, default=30.0, help="the long form's length")
    args = ap.parse_args(argv)
    if args.minutes <= 0:
        print("chaos_cluster: --minutes must be more than 0", file=sys.stderr)
        return 2
    if (reason := unavailable(ROWS["1.37"], "chart")) is not None:
        print(f"chaos_cluster: {reason}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="draxr-chaos-") as tmp, started_row("1.37", Path(tmp)) as row:
        result = {"bench": "chaos_cluster", "short": args.short, **run(row, args.short, args.minutes)}
    print(json.dumps(result))
    found = [f for fault in result["faults"] for f in fault["findings"]]
    return 0 if all(result[k] == 0 for k in COUNTS) and not result["unbound"] and not found else 1


if __name__ == "__main__":
    sys.exit(main())
