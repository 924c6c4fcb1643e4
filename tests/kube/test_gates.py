"""The apiserver gate detector (kube/gates.py) against the API emulator: a dry-run probe, nothing
stored, the answer following the gate, and what stands in when the probe fails."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from e2e.emulator import Emulator
from webhook.install.webhooks import webhook_configurations
from webhook.kube.client import ApiError, KubeClient
from webhook.kube.gates import ApiserverGate
from webhook.kube.resources import DEVICE_CLASSES
from webhook.kube.sharedgate import SharedGateRecord

GATE = "DRAExtendedResource"


@pytest.fixture
def em() -> Iterator[Emulator]:
    with Emulator(tokens={"t": ("draxr", ["system:serviceaccounts"])}) as e:
        yield e


def client(em: Emulator) -> KubeClient:
    return KubeClient(em.api_client("t"))


def test_the_probe_follows_the_gate_and_stores_nothing(em: Emulator) -> None:
    seen: list[tuple[bool, str]] = []
    gate = ApiserverGate(client(em), on_change=lambda on, source: seen.append((on, source)))
    assert gate.refresh() is True
    assert gate.source == "probe"
    em.set_feature_gate(GATE, False)
    assert gate.refresh() is False
    assert gate.refresh() is False  # no change, no call
    assert seen == [(True, "probe"), (False, "probe")]
    assert em.list("deviceclasses") == []
    assert [r.verb for r in em.requests() if r.resource == "deviceclasses"] == ["create"] * 3


def test_before_any_answer_the_server_version_stands_in(em: Emulator) -> None:
    em.inject(verbs="create", resource="deviceclasses", error=403)
    gate = ApiserverGate(client(em))
    assert gate.refresh() is False  # the emulator says v1.35: off by default
    assert gate.source.startswith("server version (probe failed:")


def test_a_failed_probe_keeps_the_last_answer(em: Emulator) -> None:
    """Found reviewing the detector for the e2e gate switch: a 1.35 apiserver with the gate on that
    failed one probe (a restart, a timeout) was taken for gate-off from its version, and pods were
    rewritten until the next probe."""
    gate = ApiserverGate(client(em))
    assert gate.refresh() is True
    em.inject(verbs="create", resource="deviceclasses", error=403)
    assert gate.refresh() is True
    assert gate.source.startswith("last probe (probe failed:")
    assert gate.refresh() is True  # still the last answer, not the version
    em.clear_faults()
    em.set_feature_gate(GATE, False)
    assert gate.refresh() is False
    assert gate.source == "probe"


def test_a_fixed_setting_never_probes(em: Emulator) -> None:
    for setting, expected in (("on", True), ("off", False)):
        gate = ApiserverGate(client(em), setting)  # type: ignore[arg-type]
        assert gate.refresh() is expected
        assert gate.source == f"--apiserver-gate={setting}"
    assert not [r for r in em.requests() if r.resource == "deviceclasses"]


def test_the_probe_reads_the_servers_release_too(em: Emulator) -> None:
    """Quota's rules for KEP-5004's objects changed by release (core/paths/quota.py)."""
    gate = ApiserverGate(client(em))
    assert gate.version == ""
    gate.refresh()
    assert gate.version == client(em).server_version() != ""
    fixed = ApiserverGate(client(em), "on").start()
    assert fixed.version == gate.version


# --- one answer for the cluster (kube/sharedgate.py) ----------------------------------------------------


class Wall:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def replica(em: Emulator, leads: bool, wall: Wall, name: str = "r") -> ApiserverGate:
    return ApiserverGate(
        client(em),
        shared=SharedGateRecord(client(em), "draxr-system"),
        publishes=lambda: leads,
        identity=name,
        wall=wall,
    )


def probes(em: Emulator) -> int:
    return sum(1 for r in em.requests() if r.resource == "deviceclasses" and r.verb == "create")


def test_the_workers_leader_publishes_and_every_replica_follows_it(em: Emulator) -> None:
    """Issue 23: each replica probed on its own clock, so for up to a probe interval replicas routed
    one ReplicaSet's pods differently. Now the leader's answer is every replica's."""
    wall = Wall()
    leader = replica(em, True, wall, "worker-0")
    readers = [replica(em, False, wall, f"webhook-{i}") for i in range(2)]
    assert leader.refresh() is True
    cm = em.get("configmaps", "draxr-apiserver-gate", "draxr-system")
    assert cm["data"] == {
        "apiserver": "on",
        "gitVersion": leader.version,
        "probedAt": "2026-11-01T00:00:00Z",
        "holder": "worker-0",
    }
    before = probes(em)
    assert [r.refresh() for r in readers] == [True, True]
    assert probes(em) == before  # they read, they do not probe
    assert readers[0].source == "shared by worker-0, probed 2026-11-01T00:00:00Z"
    assert readers[0].version == leader.version
    em.set_feature_gate(GATE, False)
    assert [r.refresh() for r in readers] == [True, True]  # the same answer everywhere until...
    wall.now += timedelta(seconds=300)
    assert leader.refresh() is False  # ... the leader's next probe
    assert [r.refresh() for r in readers] == [False, False]
    # followers read every 10 s (within one probe interval); the leader probes every interval
    assert (readers[0].next_wait(), leader.next_wait()) == (10.0, 300.0)


def test_a_missing_unreadable_or_stale_answer_makes_a_replica_probe_on_its_own(em: Emulator) -> None:
    wall = Wall()
    alone = replica(em, False, wall)
    assert alone.refresh() is True
    assert alone.source == "probe (no shared answer)"
    leader = replica(em, True, wall, "worker-0")
    leader.refresh()
    reader = replica(em, False, wall)
    wall.now += timedelta(seconds=2 * 300 + 61)  # the leader is gone: nobody probed for that long
    assert reader.refresh() is True
    assert reader.source == "probe (shared answer stale since 2026-11-01T00:00:00Z)"
    em.inject(verbs="get", resource="configmaps", error=403)  # no RBAC for it: as before
    denied = replica(em, False, wall)
    assert denied.refresh() is True
    assert denied.source.startswith("probe (shared answer unreadable: ")
    before = probes(em)
    assert denied.refresh() is True  # its own answer is recent: not probed again yet
    assert probes(em) == before


def test_the_probe_does_not_wait_for_draxrs_own_deviceclass_hook(em: Emulator) -> None:
    """At a cold start draxr's webhook is not serving yet: its DeviceClass hook (failurePolicy Fail)
    refuses a class that declares a name, but its matchConditions skip the probe's classes."""
    for cfg in webhook_configurations("draxr-system", "Y2E=", webhook_url="https://127.0.0.1:9"):
        em.create(cfg["kind"].lower() + "s", cfg)
    named = {"metadata": {"name": "gpu"}, "spec": {"extendedResourceName": "example.com/gpu"}}
    with pytest.raises(ApiError):
        client(em).create(DEVICE_CLASSES, named, dry_run=True)  # the hook is there, and unready
    gate = ApiserverGate(client(em))
    assert gate.refresh() is True
    assert gate.source == "probe"
