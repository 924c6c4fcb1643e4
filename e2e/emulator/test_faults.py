"""Failure injection and the request log."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from ..contract.support import pod, status_of
from . import Emulator
from .faults import FaultInjector


def test_next_n_conflicts_then_success(core: Any, emulator: Emulator) -> None:
    emulator.create("pods", pod("p"))
    rule = emulator.inject(verbs="patch", resource="pods", error=409, times=2)
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"a": "b"}}})
        body = status_of(err.value)
        assert err.value.status == 409
        assert body["message"].startswith(
            'Operation cannot be fulfilled on pods "p": the object has been modified'
        )
    assert core.patch_namespaced_pod(
        "p", "default", {"metadata": {"labels": {"a": "b"}}}
    ).metadata.labels == {"a": "b"}
    assert rule.hits == 2


def test_a_fault_can_let_the_first_matches_pass(core: Any, emulator: Emulator) -> None:
    emulator.create("pods", pod("p"))
    rule = emulator.inject(verbs="patch", resource="pods", error=500, times=1, skip=2)
    for i in range(2):
        core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"n": str(i)}}})
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"n": "2"}}})
    assert err.value.status == 500
    core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"n": "3"}}})
    assert rule.hits == 1


def test_faults_match_verbs_resources_and_subresources(core: Any, emulator: Emulator) -> None:
    emulator.create("pods", pod("p"))
    emulator.inject(verbs=["update", "patch"], resource="pods/status", error=500)
    core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"a": "b"}}})  # main resource untouched
    core.read_namespaced_pod("p", "default")
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod_status("p", "default", {"status": {"phase": "Running"}})
    assert err.value.status == 500
    assert status_of(err.value)["reason"] == "InternalError"
    emulator.clear_faults()
    assert (
        core.patch_namespaced_pod_status("p", "default", {"status": {"phase": "Running"}}).status.phase
        == "Running"
    )


def test_429_carries_retry_after_and_reads_are_retried(core: Any, emulator: Emulator) -> None:
    emulator.inject(verbs="create", resource="pods", error=429, retry_after=3, times=1)
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("default", pod("p"))
    assert err.value.status == 429
    assert (err.value.headers or {})["Retry-After"] == "3"
    body = status_of(err.value)
    assert body["reason"] == "TooManyRequests"
    assert body["details"] == {"retryAfterSeconds": 3}
    core.create_namespaced_pod("default", pod("p"))
    # urllib3 (under the official client) retries an idempotent GET after Retry-After.
    emulator.inject(verbs="get", resource="pods", error=429, retry_after=1, times=1)
    emulator.reset_requests()
    assert core.read_namespaced_pod("p", "default").metadata.name == "p"
    assert [r.code for r in emulator.requests()] == [429, 200]


def test_probability_is_seeded_and_reproducible() -> None:
    def draws(seed: int) -> list[bool]:
        inj = FaultInjector(seed)
        inj.add(verbs="create", error=500, probability=0.5)
        return [inj.fire("create", "", "pods", "default", "x") is not None for _ in range(50)]

    first = draws(7)
    assert first == draws(7)
    assert 5 < sum(first) < 45


def test_latency_is_injected(core: Any, emulator: Emulator) -> None:
    emulator.inject(verbs="list", resource="pods", latency=0.3, times=1)
    started = time.monotonic()
    core.list_namespaced_pod("default")
    assert time.monotonic() - started >= 0.3


def test_request_log_counts_writes_per_resource(core: Any, emulator: Emulator) -> None:
    emulator.reset_requests()
    core.create_namespaced_pod("default", pod("p"))
    core.patch_namespaced_pod_status("p", "default", {"status": {"phase": "Running"}})
    core.read_namespaced_pod("p", "default")
    core.delete_namespaced_pod("p", "default")
    counts = emulator.counts()
    assert counts[("create", "pods")] == 1
    assert counts[("patch", "pods/status")] == 1
    assert counts[("get", "pods")] == 1
    assert emulator.writes() == 3
    assert emulator.writes("pods") == 2
    records = emulator.requests()
    assert [r.code for r in records] == [201, 200, 200, 200]
    assert {r.user for r in records} == {"alice"}


def test_invalid_fault_rules_are_rejected(emulator: Emulator) -> None:
    with pytest.raises(ValueError, match="unknown verbs"):
        emulator.inject(verbs="explode", error=500)
    with pytest.raises(ValueError, match="needs an error"):
        emulator.inject(verbs="get")
    with pytest.raises(ValueError, match="probability"):
        emulator.inject(error=500, probability=2)
    with pytest.raises(ValueError, match="skip"):
        emulator.inject(error=500, skip=-1)
