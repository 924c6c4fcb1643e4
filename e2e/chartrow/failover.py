"""The worker leader's pod force-deleted under a stream of pods, and how long until the follower
binds: measured from the API server's own record (the audit log's Binding writes and their source
address, ``bench/audit.py``), not from what a client happened to poll. Used by the chart row's scenario and by
``bench/chart_failover.py`` (the median of five)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from bench.audit import first_binding_after
from webhook.identity.names import LEASE

from ..chart import NAMESPACE, draxr_available
from .row import ChartRow
from .stream import Stream

Obj = dict[str, Any]


def leader(row: ChartRow) -> Obj:
    """The worker pod holding the Lease (once one does: a leader that stopped cleanly gave it up)."""
    holder = [""]

    def held() -> bool:
        holder[0] = row.get("-n", NAMESPACE, "lease", LEASE)["spec"].get("holderIdentity") or ""
        return holder[0] != ""

    row.cluster.cp.wait_for("no worker holds the Lease", held, 60)
    return row.get("-n", NAMESPACE, "pod", holder[0])


def available(row: ChartRow) -> bool:
    """Both of draxr's Deployments available, every replica ready."""
    return draxr_available(row.get("-n", NAMESPACE, "deployments")["items"])


def force_delete_leader(row: ChartRow, stream: Stream) -> float:
    """Deletes the leader's pod with ``--grace-period=0 --force`` while ``stream`` runs; returns the
    seconds until another worker bound a pod, once the Deployment has two ready replicas again."""
    cp = row.cluster.cp
    cp.wait_for(
        "the stream bound no pod before the fault",
        lambda: bool(stream.bound),
        120,
        detail=lambda: f"created {len(stream.created)}, failed {stream.failed[:3]}",
    )
    old = leader(row)
    old_ip = old["status"]["podIP"]
    since = dt.datetime.now(dt.UTC)
    row.kubectl("-n", NAMESPACE, "delete", "pod", old["metadata"]["name"], "--grace-period=0", "--force")
    found: list[dt.datetime] = []

    def bound_by_another() -> bool:
        at = first_binding_after(cp.audit_events(), stream.namespace, since, old_ip)
        if at is not None:
            found.append(at)
        return at is not None

    cp.wait_for("no other worker bound a pod after the leader's pod was deleted", bound_by_another, 120)
    cp.wait_for("draxr's Deployments not available again", lambda: available(row), 180)
    return (found[0] - since).total_seconds()
