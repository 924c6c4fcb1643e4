"""draxr without its own priority level, in the level another tenant saturates (``overload.py``):
the API server refuses some of the worker's writes with 429; each is retried after its
``Retry-After`` and nothing is lost: every pod bound once, every refused write of a claim, a pod or a
binding done afterwards, nothing wrong by any count. (With its level, the same load refuses draxr
nothing: the fault ``another tenant saturating the API server`` of ``faults.py``.)"""

from __future__ import annotations

import json
import time
import uuid
from functools import partial

from ..chart import WORKER_SA
from .faults import nothing_wrong
from .overload import refused_writes, squeezed, tenant, without_draxr_flow_schema
from .row import ChartRow
from .stream import create

NS = "overload"
#: Writes whose loss would strand a pod; Events may be dropped under load (as kube-scheduler's are).
KEPT = {"resourceclaims", "pods", "bindings"}


def _target(event: dict[str, object]) -> tuple[str, ...]:
    ref = event.get("objectRef") or {}
    assert isinstance(ref, dict)
    return tuple(str(ref.get(k) or "") for k in ("resource", "namespace", "name", "subresource"))


def test_in_a_saturated_level_every_429_is_retried_and_nothing_is_lost(row: ChartRow) -> None:
    row.namespace(NS)
    load = tenant(row)
    client = row.cluster.cp.client()
    names = [f"squeezed-{uuid.uuid4().hex[:6]}-{i}" for i in range(8)]
    answers: dict[str, str] = {}

    def created(name: str) -> bool:
        answer = create(client, NS, name)  # None: not answered, or 429 (the admin is exempt: never)
        if answer is not None:
            answers[name] = answer
        return answer is not None

    since = time.time()
    with without_draxr_flow_schema(row), squeezed(row):
        load.start()
        try:
            for name in names:
                row.cluster.cp.wait_for(f"pod {name} never created", partial(created, name), 60)
            assert answers == dict.fromkeys(names, "")

            def all_bound() -> bool:
                pods = row.get("-n", NS, "pods")["items"]
                return len(pods) == len(names) and all(p["spec"].get("nodeName") for p in pods)

            row.cluster.cp.wait_for("pods not bound in the saturated level", all_bound, 300)
        finally:
            load.stop()
    seconds = round(time.time() - since, 1)
    assert load.refused > 0, load.answers  # the level was saturated
    events = row.cluster.cp.audit_events()
    refused = refused_writes(events, WORKER_SA, since)
    assert refused, "the worker was never refused: nothing here was retried"
    mine = [e for e in events if e.get("user", {}).get("username") == WORKER_SA]
    done = {_target(e) for e in mine if (e.get("responseStatus") or {}).get("code", 500) < 400}
    lost = [t for t in map(_target, refused) if t[0] in KEPT and t[2] and t not in done]
    print(json.dumps({"tenant_answers": load.answers, "worker_refused": len(refused), "seconds": seconds}))
    assert lost == []
    nothing_wrong(row, [NS])
