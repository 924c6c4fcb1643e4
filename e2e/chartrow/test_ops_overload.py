"""draxr without its own priority level, in the level another tenant saturates (``overload.py``):
the API server refuses some of the worker's writes with 429; each is retried after its
``Retry-After`` and nothing is lost: every pod bound once, every refused write of a claim, a pod or a
binding done afterwards, nothing wrong by any count. (With its level, the same load refuses draxr
nothing: the fault ``another tenant saturating the API server`` of ``faults.py``.)"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from ..chart import WORKER_SA
from .faults import create_until_answered, nothing_wrong, wait_all_bound
from .overload import refused_writes, squeezed, tenant, without_draxr_flow_schema
from .row import ChartRow

NS = "overload"
#: Writes whose loss would strand a pod; Events may be dropped under load (as kube-scheduler's are).
KEPT = {"resourceclaims", "pods", "bindings"}


def _target(event: dict[str, Any]) -> tuple[str, ...]:
    ref = event.get("objectRef") or {}
    return tuple(str(ref.get(k) or "") for k in ("resource", "namespace", "name", "subresource"))


def _code(event: dict[str, Any]) -> int:
    return int((event.get("responseStatus") or {}).get("code", 500))


def test_in_a_saturated_level_every_429_is_retried_and_nothing_is_lost(row: ChartRow) -> None:
    row.namespace(NS)
    load = tenant(row)
    names = [f"squeezed-{uuid.uuid4().hex[:6]}-{i}" for i in range(8)]
    refused_admissions: list[str] = []
    since = time.time()
    with without_draxr_flow_schema(row), squeezed(row):
        load.start()
        try:
            for name in names:
                create_until_answered(row, NS, name, refused_admissions)
            assert refused_admissions == []
            wait_all_bound(row, NS, names, "in the saturated level", 300)
        finally:
            load.stop()
    seconds = round(time.time() - since, 1)
    assert load.refused > 0, load.answers  # the level was saturated
    events = row.cluster.cp.audit_events()
    refused = refused_writes(events, WORKER_SA, since)
    assert refused, "the worker was never refused: nothing here was retried"
    mine = [e for e in events if e.get("user", {}).get("username") == WORKER_SA]
    # each refused write of a claim, pod or binding done by a later write to the same object
    done = [(_target(e), e["requestReceivedTimestamp"]) for e in mine if _code(e) < 400]
    kept = [(_target(e), e["requestReceivedTimestamp"]) for e in refused if _target(e)[0] in KEPT]
    lost = [t for t, at in kept if t[2] and not any(d == t and later > at for d, later in done)]
    print(json.dumps({"tenant_answers": load.answers, "worker_refused": len(refused), "seconds": seconds}))
    assert lost == []
    nothing_wrong(row, [NS])
