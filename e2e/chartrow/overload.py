"""Another tenant overloading the API server (API Priority and Fairness), for the chart row's fault
tests and the chaos sequence.

A ServiceAccount of another tenant lists every pod of the cluster from several threads at once. Its
requests fall into the catch-all ``service-accounts`` FlowSchema, priority level ``workload-low``,
which is squeezed for the fault (a few seats, no borrowing, one short queue), so the tenant is
refused with 429 most of the time: the API server is saturated for everyone in that level. draxr's
ServiceAccounts have a FlowSchema and level of their own (``webhook/install/flowcontrol.py``, shipped
by the chart), so its binds keep flowing; without them, draxr shares the squeezed level, and every
429 it gets must be retried after its ``Retry-After`` with nothing lost. What the API server
refused draxr is read from its audit log (every write, with its response code).
"""

from __future__ import annotations

import datetime as dt
import json
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from webhook.identity.names import FLOW_CONTROL

from ..chart import WORKER_SA
from ..controlplane.launcher import Client
from .row import ChartRow

Obj = dict[str, Any]
TENANT = "tenant"
LEVEL = "workload-low"
#: What ``workload-low`` becomes for the fault: a few seats of the server's 600, none borrowed,
#: one queue of one request, so a handful of concurrent lists saturate it.
SQUEEZED: Obj = {
    "nominalConcurrencyShares": 1,
    "lendablePercent": 0,
    "borrowingLimitPercent": 0,
    "limitResponse": {"type": "Queue", "queuing": {"queues": 1, "handSize": 1, "queueLengthLimit": 1}},
}
AUTOUPDATE = "apf.kubernetes.io/autoupdate-spec"
#: Threads of the tenant listing at once, and how long the load lasts.
THREADS = 8
LOAD_SECONDS = 30.0
RBAC = "rbac.authorization.k8s.io"
_RBAC = {
    "apiVersion": "v1",
    "kind": "List",
    "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TENANT}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": TENANT, "namespace": TENANT}},
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "draxr-e2e-tenant"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
        },
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "draxr-e2e-tenant"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "draxr-e2e-tenant"},
            "subjects": [{"kind": "ServiceAccount", "name": TENANT, "namespace": TENANT}],
        },
    ],
}


@dataclass
class Tenant:
    """``THREADS`` threads listing every pod of the cluster as the tenant's ServiceAccount until
    stopped; counts the answers by status (0: no answer)."""

    client: Client
    answers: dict[int, int] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Tenant:
        for i in range(THREADS):
            t = threading.Thread(target=self._list, name=f"tenant-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(60)
        assert not any(t.is_alive() for t in self._threads), "the tenant's load did not stop"

    def _list(self) -> None:
        while not self._stop.is_set():
            try:
                status, _ = self.client.get("/api/v1/pods")
            except OSError:
                status = 0
            with self._lock:
                self.answers[status] = self.answers.get(status, 0) + 1
            if status in (0, 429):
                self._stop.wait(0.05)  # load shaping: a refused tenant asks again at once, not in a spin

    @property
    def refused(self) -> int:
        return self.answers.get(429, 0)


def tenant(row: ChartRow) -> Tenant:
    """The tenant's ServiceAccount (allowed to read the cluster) and a client with its token."""
    row.kubectl("apply", "-f", "-", stdin=json.dumps(_RBAC))
    token = row.kubectl("-n", TENANT, "create", "token", TENANT, "--duration=1h").strip()
    cp = row.cluster.cp
    context = ssl.create_default_context(cafile=str(cp.ca_path))
    return Tenant(Client("127.0.0.1", cp.port, context, token=token, timeout=30.0))


@contextmanager
def squeezed(row: ChartRow) -> Iterator[None]:
    """``workload-low`` squeezed (``SQUEEZED``), its spec kept from the API server's own updates
    meanwhile; the level as it was afterwards, kept up to date again."""
    kept = row.get("prioritylevelconfiguration", LEVEL)
    patch = {"metadata": {"annotations": {AUTOUPDATE: "false"}}, "spec": {"limited": SQUEEZED}}
    row.kubectl("patch", "prioritylevelconfiguration", LEVEL, "--type=merge", "-p", json.dumps(patch))
    try:
        yield
    finally:
        current = row.get("prioritylevelconfiguration", LEVEL)
        restored = {**current, "spec": kept["spec"]}
        annotations = current["metadata"].get("annotations") or {}
        restored["metadata"]["annotations"] = {**annotations, AUTOUPDATE: "true"}
        row.kubectl("replace", "-f", "-", stdin=json.dumps(restored))


@contextmanager
def without_draxr_flow_schema(row: ChartRow) -> Iterator[None]:
    """draxr's FlowSchema deleted (its ServiceAccounts fall into ``service-accounts``, with the
    tenant), created again as it was afterwards."""
    kept = row.get("flowschema", FLOW_CONTROL)
    row.kubectl("delete", "flowschema", FLOW_CONTROL)
    try:
        yield
    finally:
        meta = {k: kept["metadata"][k] for k in ("name", "labels", "annotations") if k in kept["metadata"]}
        again = {**{k: kept[k] for k in ("apiVersion", "kind", "spec")}, "metadata": meta}
        row.kubectl("create", "-f", "-", stdin=json.dumps(again))


def refused_writes(events: list[Obj], user: str, since: float) -> list[Obj]:
    """Audit events of ``user``'s writes the API server answered 429, received at or after the Unix
    time ``since``."""
    out = []
    for e in events:
        if e.get("user", {}).get("username") != user or (e.get("responseStatus") or {}).get("code") != 429:
            continue
        received = _unix(str(e.get("requestReceivedTimestamp") or ""))
        if received is not None and received >= since:
            out.append(e)
    return out


def _unix(stamp: str) -> float | None:
    try:
        return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def another_tenant_saturating_its_level(row: ChartRow) -> list[str]:
    """The fault: the tenant's lists saturate ``workload-low`` for ``LOAD_SECONDS``. draxr, in its
    own level, must not be refused once; the tenant must have been (else nothing was saturated)."""
    load = tenant(row)
    since = time.time()
    with squeezed(row):
        load.start()
        try:
            threading.Event().wait(LOAD_SECONDS)  # the fault's length itself, not a synchronisation
        finally:
            load.stop()
    findings = []
    if load.refused == 0:
        findings.append(f"the tenant was never refused, workload-low was not saturated: {load.answers}")
    refused = refused_writes(row.cluster.cp.audit_events(), WORKER_SA, since)
    if refused:
        findings.append(f"draxr's worker was refused {len(refused)} writes in its own priority level")
    return findings
