"""Faults of the real components under the deployed draxr, for the chart row's tests and
``bench/chaos_cluster.py``: etcd killed or paused, kube-apiserver restarted, the worker leader's pod
cut from the API server in its own network namespace; and what a run is judged by, counted from
the API server's audit log and the objects themselves."""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from bench.audit import bound_twice, fenced_writes
from webhook.identity.names import LEASE
from webhook.kube.leader import LeaderElection

from ..chart import NAMESPACE, WORKER_SA
from ..controlplane.launcher import ControlPlaneError
from ..controlplane.nodes import DRIVER
from .failover import leader
from .overload import another_tenant_saturating_its_level
from .procs import pod_processes
from .row import ChartRow
from .stream import create

Obj = dict[str, Any]
#: Longer than draxr's request timeout (30 s): its writes in flight end without an answer.
PAUSE_SECONDS = 35.0


def _hold(seconds: float) -> None:
    threading.Event().wait(max(seconds, 0.0))  # the fault's length itself, not a synchronisation


def apiserver_restarted_twice(row: ChartRow) -> list[str]:
    for _ in range(2):
        row.cluster.cp.restart_process("kube-apiserver")
    return []


def etcd_killed_and_started_again(row: ChartRow) -> list[str]:
    row.cluster.cp.kill("etcd")
    row.cluster.cp.start_again("etcd")
    return []


def etcd_paused_past_the_request_timeout(row: ChartRow) -> list[str]:
    """Whether a write in flight happened is known only once etcd runs again."""
    cp = row.cluster.cp
    cp.pause("etcd")
    try:
        _hold(PAUSE_SECONDS)
    finally:
        cp.resume("etcd")
    return []


@contextmanager
def cut_from_the_api(row: ChartRow, pod: str) -> Iterator[None]:
    """Every packet from ``pod`` to the API server dropped in the pod's own network namespace (a
    blackhole route to the ``kubernetes`` Service): its process runs on, its writes and Lease
    renewals fail. The route goes again on leaving (with the namespace, if the pod went)."""
    service = row.get("-n", "default", "service", "kubernetes")["spec"]["clusterIP"]
    [proc] = pod_processes({pod}).values()
    netns = ["nsenter", f"--net={proc}/ns/net", "--", "ip", "route"]
    subprocess.run([*netns, "add", "blackhole", f"{service}/32"], check=True, capture_output=True)
    try:
        yield
    finally:
        subprocess.run([*netns, "del", "blackhole", f"{service}/32"], check=False, capture_output=True)


def leader_cut_past_its_lease(row: ChartRow) -> list[str]:
    """The leader's pod cut for twice the lease duration: the follower takes the Lease over; the
    cut leader stops writing before its Lease expires (fencing), which the audit log shows."""
    return leader_cut_while(row, lambda _: [])


def leader_cut_while(row: ChartRow, fault: Callable[[ChartRow], list[str]]) -> list[str]:
    """The leader's pod cut while ``fault`` runs, and at least twice the lease duration."""
    t0 = time.monotonic()
    with cut_from_the_api(row, leader(row)["metadata"]["name"]):
        findings = fault(row)
        _hold(2 * LeaderElection().lease_duration - (time.monotonic() - t0))
    return findings


def _holders(row: ChartRow, node: str, device: str) -> set[str]:
    """Claims (namespace/name) whose allocation holds ``device`` of ``node``'s pool."""
    out = set()
    for claim in row.get("resourceclaims", "-A")["items"]:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for r in (allocation.get("devices") or {}).get("results") or []:
            if r.get("driver") == DRIVER and r.get("pool") == node and r.get("device") == device:
                out.add(f"{claim['metadata']['namespace']}/{claim['metadata']['name']}")
    return out


def _published(row: ChartRow, node: str) -> set[str]:
    slices = row.get("resourceslices")["items"]
    return {
        d["name"]
        for s in slices
        if s["spec"].get("driver") == DRIVER and s["spec"].get("nodeName") == node
        for d in s["spec"].get("devices") or []
    }


def driver_restarted_with_a_device_gone(row: ChartRow) -> list[str]:
    """The first node's DRA driver restarted publishing one GPU less, for a while, then restarted
    with all again. Found: a claim allocated the gone GPU while it was not in the slice."""
    nodes = row.cluster.nodes
    assert nodes is not None
    node = nodes.specs[0]
    gone = f"gpu-{node.gpus - 1}"
    nodes.restart_driver(node.name, node.gpus - 1)
    row.cluster.cp.wait_for(
        f"{gone} still in {node.name}'s slice", lambda: gone not in _published(row, node.name), 60
    )
    # Claims that hold it now were allocated while it was published (until the new driver's slice
    # replaced the old one, the stopped driver's still listed it).
    before = _holders(row, node.name, gone)
    _hold(DRIVER_GONE_SECONDS)
    found = sorted(_holders(row, node.name, gone) - before)
    nodes.restart_driver(node.name, node.gpus)
    row.cluster.cp.wait_for(
        f"{gone} not back in {node.name}'s slice", lambda: gone in _published(row, node.name), 60
    )
    return [f"claim {c} allocated {node.name}/{gone} while it was gone from the slice" for c in found]


#: How long a device stays gone from its slice while the stream runs.
DRIVER_GONE_SECONDS = 20.0

FAULTS: dict[str, Callable[[ChartRow], list[str]]] = {
    "kube-apiserver restarted twice": apiserver_restarted_twice,
    "etcd killed and started again": etcd_killed_and_started_again,
    "etcd paused past the request timeout": etcd_paused_past_the_request_timeout,
    "the worker leader cut from the API server past its lease": leader_cut_past_its_lease,
    "a DRA driver restarted with a device gone": driver_restarted_with_a_device_gone,
    "another tenant saturating the API server": another_tenant_saturating_its_level,
}


#: What a fault run is judged by, each 0 when nothing went wrong.
COUNTS = (
    "double_allocated",
    "freed_under_running_pod",
    "leaked_devices",
    "bound_twice",
    "failed_admissions",
    "fenced_writes",
)


def _claim_counts(row: ChartRow, namespaces: list[str]) -> tuple[int, int]:
    """Special claims of bound pods not allocated and reserved for them; allocated claims whose
    consumers are all gone."""
    freed = leaked = 0
    for ns in namespaces:
        pods = {p["metadata"]["uid"]: p for p in row.get("-n", ns, "pods")["items"]}
        claims = {c["metadata"]["name"]: c for c in row.get("-n", ns, "resourceclaims")["items"]}
        for pod in pods.values():
            held = (pod.get("status") or {}).get("extendedResourceClaimStatus")
            if not pod["spec"].get("nodeName") or pod["metadata"].get("deletionTimestamp") or not held:
                continue
            status = (claims.get(held["resourceClaimName"]) or {}).get("status") or {}
            reserved = {r.get("uid") for r in status.get("reservedFor") or []}
            if not status.get("allocation") or pod["metadata"]["uid"] not in reserved:
                freed += 1
        for claim in claims.values():
            status = claim.get("status") or {}
            reserved = {r.get("uid") for r in status.get("reservedFor") or []}
            if status.get("allocation") and reserved and not reserved & set(pods):
                leaked += 1
    return freed, leaked


def counts(
    row: ChartRow, namespaces: list[str], failed_admissions: int = 0, settle: float = 60.0
) -> dict[str, int]:
    """The ``COUNTS`` of a run whose pods are in ``namespaces``: devices in two claims, claims freed
    under a bound pod, devices leaked (counted once the worker had ``settle`` seconds to release
    the claims of pods deleted last), pods bound twice, ``failed_admissions``, fenced writes."""
    found = [(0, 0)]

    def released() -> bool:
        found[0] = _claim_counts(row, namespaces)
        return found[0][1] == 0

    with contextlib.suppress(ControlPlaneError):  # still leaked after ``settle``: counted below
        row.cluster.cp.wait_for("claims of deleted pods not released", released, settle)
    freed, leaked = found[0]
    events = row.cluster.cp.audit_events()
    report = json.loads(row.kubectl("draxr", "status", "--draxr-namespace", NAMESPACE, "-o", "json"))
    return {
        "double_allocated": len(report["doubleAllocated"]),
        "freed_under_running_pod": freed,
        "leaked_devices": leaked,
        "bound_twice": len(bound_twice(events)),
        "failed_admissions": failed_admissions,
        "fenced_writes": len(fenced_writes(events, NAMESPACE, LEASE, WORKER_SA)),
    }


def create_until_answered(row: ChartRow, namespace: str, name: str, refused: list[str]) -> None:
    """Creates ``stream_pod(name)`` as a user would through a fault (``stream.create``: tried again
    while the API server does not answer); a failed admission goes to ``refused``."""
    client = row.cluster.cp.client()
    client.timeout = 10.0
    answers: list[str] = []
    retried: list[str] = []

    def answered() -> bool:
        answer = create(client, namespace, name, retried)
        if answer is not None:
            answers.append(answer)
        return answer is not None

    row.cluster.cp.wait_for(
        f"pod {name} never created",
        answered,
        120,
        detail=lambda: f"{len(retried)} attempts; the last answer: {retried[-1] if retried else None}",
    )
    refused += [f"{name}: {a}" for a in answers if a]


def wait_all_bound(row: ChartRow, namespace: str, names: list[str], why: str, timeout: float) -> None:
    """Every pod of ``names`` (the namespace's only pods) bound, within ``timeout``."""

    def all_bound() -> bool:
        pods = row.get("-n", namespace, "pods")["items"]
        return len(pods) == len(names) and all(p["spec"].get("nodeName") for p in pods)

    def unbound() -> str:
        pods = row.get("-n", namespace, "pods")["items"]
        have = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods}
        waiting = sorted(n for n, node in have.items() if not node)
        return f"missing: {sorted(set(names) - set(have))}; unbound: {waiting}"

    row.cluster.cp.wait_for(f"pods not bound {why}", all_bound, timeout, detail=unbound)


def nothing_wrong(row: ChartRow, namespaces: list[str], failed_admissions: int = 0) -> None:
    """Every count 0 (``counts``), or the run's counts in the failure, with the pods bound twice
    and the fenced writes named."""
    found = counts(row, namespaces, failed_admissions)
    if found != dict.fromkeys(COUNTS, 0):
        events = row.cluster.cp.audit_events()
        writes = fenced_writes(events, NAMESPACE, LEASE, WORKER_SA)
        raise AssertionError(f"{found}; bound twice: {bound_twice(events)}; fenced writes: {writes}")
