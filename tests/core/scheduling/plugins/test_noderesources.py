"""NodeResourcesFit's Filter: every insufficient resource, the pod count, names delegated to DRA skipped.
(Its scores, LeastAllocated and BalancedAllocation, are tested with the policy that uses them, in
``tests/core/scheduling/test_scoring.py``.)"""

from __future__ import annotations

from typing import Any

import pytest

from tests.core.podfactory import node
from webhook.core.cluster.nodeinfo import NodeInfo
from webhook.core.scheduling.plugins.noderesources import (
    filter_node,
    is_scalar,
)

fit_resources = filter_node


def loaded(allocatable: dict[str, Any], used: dict[str, int] | None = None, pods: int = 0) -> NodeInfo:
    n = node("n")
    n["status"]["allocatable"] = allocatable
    info = NodeInfo.of(n)
    for i in range(pods):
        info.add_pod(f"p{i}", dict(used or {}) if i == 0 else {}, [])
    return info


def test_everything_that_fits_exactly_fits() -> None:
    info = loaded(
        {"cpu": "2", "memory": "2Gi", "ephemeral-storage": "10Gi", "pods": "2"}, {"cpu": 1000}, pods=1
    )
    reqs = {"cpu": 1000, "memory": 2 * 2**30, "ephemeral-storage": 10 * 2**30}
    assert fit_resources(reqs, info, ()) == []


def test_every_insufficient_resource_is_reported_in_order() -> None:
    info = loaded(
        {"cpu": "2", "memory": "1Gi", "ephemeral-storage": "1Gi", "pods": "1", "example.com/a": 1},
        {"cpu": 1500},
        pods=1,
    )
    reqs = {"example.com/a": 2, "ephemeral-storage": 2 * 2**30, "memory": 2 * 2**30, "cpu": 1000}
    assert fit_resources(reqs, info, ()) == [
        "Too many pods",
        "Insufficient cpu",
        "Insufficient memory",
        "Insufficient ephemeral-storage",
        "Insufficient example.com/a",
    ]


def test_max_pods_defaults_to_110_without_a_pods_allocatable() -> None:
    assert fit_resources({}, loaded({"cpu": "1"}, pods=109), ()) == []
    assert fit_resources({}, loaded({"cpu": "1"}, pods=110), ()) == ["Too many pods"]


def test_requested_resources_of_other_pods_count() -> None:
    info = loaded({"cpu": "4", "pods": "10"}, {"cpu": 3500}, pods=1)
    assert fit_resources({"cpu": 500}, info, ()) == []
    assert fit_resources({"cpu": 501}, info, ()) == ["Insufficient cpu"]


@pytest.mark.parametrize("resource", ["example.com/foo", "hugepages-2Mi"])
def test_scalar_resources_are_checked_against_allocatable(resource: str) -> None:
    info = loaded({resource: 1})
    assert fit_resources({resource: 1}, info, ()) == []
    assert fit_resources({resource: 2}, info, ()) == [f"Insufficient {resource}"]
    assert fit_resources({resource: 1}, loaded({}), ()) == [f"Insufficient {resource}"]  # absent: 0


def test_delegated_names_zero_requests_and_unknown_native_names_are_skipped() -> None:
    info = loaded({"cpu": "0"})
    reqs = {"example.com/gpu": 4, "cpu": 0, "example.com/zero": 0, "foo": 10}
    assert fit_resources(reqs, info, {"example.com/gpu"}) == []
    assert fit_resources(reqs, info, ()) == ["Insufficient example.com/gpu"]


def test_is_scalar() -> None:
    assert is_scalar("example.com/gpu")
    assert is_scalar("hugepages-1Gi")
    assert not is_scalar("cpu")
    assert not is_scalar("memory")
