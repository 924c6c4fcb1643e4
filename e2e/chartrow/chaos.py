"""The chaos run on the chart row: a stream of extended-resource pods coming and going
(``stream.py``: one every 0.5 s, at most six alive, the oldest bound one deleted) while the faults
of ``faults.py`` run one after another (each once the nodes and draxr have recovered from the
last), then two at once (the worker leader cut while kube-apiserver restarts twice); judged by
``faults.counts``. ``bench/chaos_cluster.py`` runs it on a row of its own and prints the result;
``test_ops_sequence.py`` runs the sequence once in the package's row, last."""

from __future__ import annotations

import datetime as dt
import statistics
import threading
import time
from typing import Any

from bench.audit import fenced_writes
from webhook.identity.names import LEASE

from ..chart import NAMESPACE, WORKER_SA
from .failover import available
from .faults import FAULTS, apiserver_restarted_twice, counts, leader_cut_while
from .row import ChartRow
from .stream import Stream

NS = "chaos"
QUIET_SECONDS = 20.0  # the stream alone before the first fault and after the last


def _both(row: ChartRow) -> list[str]:
    """The leader cut while kube-apiserver restarts twice."""
    return leader_cut_while(row, apiserver_restarted_twice)


SEQUENCE = [*FAULTS.items(), ("the leader cut while kube-apiserver restarts twice", _both)]


def _rate(bound: list[float], start: float, end: float) -> float:
    return round(sum(start <= t < end for t in bound) / max(end - start, 1e-9), 2)


def _recovered(row: ChartRow, since: dt.datetime) -> None:
    """Every kubelet has renewed its node Lease after ``since`` and draxr is available again.
    Faults back to back without this add up: two outages of the control plane longer together than
    the node lifecycle controller's grace period mark every node NotReady, and with them every
    pod, the webhook's included (no endpoints: no admission anywhere, draxr or not)."""

    def renewed() -> bool:
        leases = row.get("-n", "kube-node-lease", "leases")["items"]
        times = [str(lease["spec"].get("renewTime") or "") for lease in leases]
        return bool(times) and all(
            t and dt.datetime.fromisoformat(t.replace("Z", "+00:00")) > since for t in times
        )

    row.cluster.cp.wait_for("a kubelet did not renew its node Lease after the fault", renewed, 120)
    row.cluster.cp.wait_for("draxr not available after the fault", lambda: available(row), 120)


def _why_unbound(row: ChartRow, names: list[str]) -> str:
    """Each unbound pod with what the scheduler last said of it, and how many devices claims hold."""
    pods = {p["metadata"]["name"]: p for p in row.get("-n", NS, "pods")["items"]}
    said = {
        n: [
            c.get("message") or c.get("reason")
            for c in (pods.get(n, {}).get("status") or {}).get("conditions") or []
            if c.get("type") == "PodScheduled"
        ]
        for n in names
    }
    held = sum(
        len((((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or [])
        for c in row.get("resourceclaims", "-A")["items"]
    )
    return f"unbound: {said}; devices held by claims: {held}"


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
                _recovered(row, dt.datetime.now(dt.UTC))
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
        detail=lambda: _why_unbound(row, stream.unbound()),
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
        "failed_admissions_seen": stream.failed[:20],
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
