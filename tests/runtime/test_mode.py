"""The cluster's mode told to operators: the gauge and an Event on draxr's Deployment, written
through the real client to the emulator, once at start and once per change."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from e2e.emulator import Emulator
from webhook.kube.cache import ClusterCache
from webhook.kube.client import KubeClient
from webhook.kube.gates import ApiserverGate
from webhook.runtime.mode import ModeReporter, mode_message, parse_mode_message

NS = "draxr-system"


@pytest.fixture
def em() -> Iterator[Emulator]:
    with Emulator(tokens={"admin": ("admin", ["system:masters"])}) as emulator:
        emulator.create("namespaces", {"metadata": {"name": NS}})
        yield emulator


def mode_events(em: Emulator) -> list[dict[str, Any]]:
    return [e for e in em.list("events", NS) if e.get("reason") in ("Mode", "ModeChanged")]


def test_the_mode_and_each_change_make_one_event_on_the_deployment(em: Emulator) -> None:
    client = KubeClient(em.api_client("admin"))
    registry = CollectorRegistry()
    gate = ApiserverGate(None, "on")
    reporter = ModeReporter(ClusterCache.from_objects([]), gate, "auto", registry, client=client)

    assert reporter.refresh() == "native"
    assert reporter.refresh() == "native"  # no change: no second Event
    [first] = mode_events(em)
    assert first["reason"] == "Mode"
    assert first["type"] == "Normal"
    assert first["involvedObject"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "draxr-webhook",
        "namespace": NS,
    }
    assert first["message"].startswith("draxr mode: native; mode: native (--mode=auto)")
    assert first["metadata"]["name"].startswith("draxr-webhook.")
    assert registry.get_sample_value("draxr_mode", {"mode": "native"}) == 1

    reporter.mode = "rewrite"
    assert reporter.refresh() == "rewrite"
    changed = [e for e in mode_events(em) if e["reason"] == "ModeChanged"]
    assert [e["message"].split(";")[0] for e in changed] == ["draxr mode: rewrite (was native)"]
    assert registry.get_sample_value("draxr_mode", {"mode": "native"}) == 0
    assert registry.get_sample_value("draxr_mode", {"mode": "rewrite"}) == 1


@pytest.mark.parametrize("before", [None, "native"])
def test_kubectl_draxr_reads_back_the_message_the_reporter_writes(before: str | None) -> None:
    why = "mode: rewrite (--mode=auto); apiserver DRAExtendedResource: off (--apiserver-gate=off)"
    assert parse_mode_message(mode_message("rewrite", before, why)) == ("rewrite", why)
    assert parse_mode_message("something else") is None
