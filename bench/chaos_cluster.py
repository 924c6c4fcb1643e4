"""Faults of the real components under the deployed draxr: the 1.37 chart row (real control plane,
kubelets on containerd, draxr's image installed by its chart, 2 + 2 replicas) with a stream of
extended-resource pods coming and going (``e2e/chartrow/stream.py``: one every 0.5 s, at most six
alive, the oldest bound one deleted), while the faults of ``e2e/chartrow/faults.py`` run one after
another: etcd killed and started again, etcd paused past the request timeout, kube-apiserver
restarted twice, the worker leader's pod cut from the API server past its lease (in its network
namespace), a DRA driver restarted with one device gone from its slice for a while; then two at once
(the leader cut while kube-apiserver restarts). Each fault starts once every kubelet has renewed its
node Lease and draxr is available again (``e2e/chartrow/chaos.py``).

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
import sys
import tempfile
from pathlib import Path

if __name__ == "__main__":
    # Run as a script, bench/ comes first on sys.path and bench/webhook.py would shadow the package.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    sys.path.insert(0, os.path.dirname(_here))

from e2e.chartrow.chaos import run
from e2e.chartrow.faults import COUNTS
from e2e.chartrow.row import started_row
from e2e.local import ROWS, unavailable


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
