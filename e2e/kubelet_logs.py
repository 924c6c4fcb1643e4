"""Reading what the local rows' node parts record (e2e/controlplane/README.md, "The fake container
runtime" and "The DRA driver"): the CDI log, one line per container the kubelets created, and the
prepare log, one line per NodePrepareResources or NodeUnprepareResources call of a DRA driver."""

from __future__ import annotations

import json
from pathlib import Path

from webhook.core.api.objects import Obj


def _lines(path: Path) -> list[Obj]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def cdi_records(path: Path, namespace: str, pod: str) -> list[Obj]:
    """The pod's containers as created, in order: ``{namespace, pod, container, cdi_devices}``."""
    return [r for r in _lines(path) if r["namespace"] == namespace and r["pod"] == pod]


def prepared_twice(path: Path) -> list[str]:
    """Each claim a driver was asked to prepare while it was prepared already (no unprepare in
    between), one line each: what "nothing is prepared twice" asserts empty."""
    prepared: set[tuple[str, str]] = set()
    twice: list[str] = []
    for record in _lines(path):
        for claim in record["claims"]:
            key = (record["driver"], claim["uid"])
            if record["op"] == "unprepare":
                prepared.discard(key)
            elif "error" not in claim:
                if key in prepared:
                    twice.append(
                        f"{record['driver']} on {record['node']}: {claim['namespace']}/{claim['name']}"
                    )
                prepared.add(key)
    return twice
