"""The apiserver gate detector (kube/gates.py) against the API emulator: a dry-run probe, nothing
stored, the answer following the gate, and what stands in when the probe fails."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from e2e.emulator import Emulator
from webhook.kube.client import KubeClient
from webhook.kube.gates import ApiserverGate

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
