"""A pod's effective requests (``resourcehelper.PodRequests``): long-lived containers add up, init
containers run next to the sidecars started before them, the larger wins, plus pod-level requests
and overhead; requests default from limits as API defaulting does."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.core.podfactory import container, pod
from webhook.core.api.objects import Obj
from webhook.core.api.podresources import (
    container_requests,
    container_units,
    containers,
    iter_requests,
    pod_requests,
    raw_requests,
    to_units,
)
from webhook.core.api.quantity import Quantity

GPU = "example.com/gpu"


def limited(name: str, requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None) -> Obj:
    c: Obj = {"name": name, "resources": {}}
    if requests is not None:
        c["resources"]["requests"] = requests
    if limits is not None:
        c["resources"]["limits"] = limits
    return c


# -- containers -----------------------------------------------------------------------------------


def test_containers_index_init_containers_first_and_mark_sidecars() -> None:
    p = pod("p", [container("main")], init=[container("setup"), container("side", sidecar=True)])
    refs = containers(p)
    assert [(r.index, r.name, r.init, r.sidecar, r.long_lived) for r in refs] == [
        (0, "setup", True, False, False),
        (1, "side", True, True, True),
        (2, "main", False, False, True),
    ]


def test_malformed_containers_keep_their_index() -> None:
    p: Obj = {"spec": {"initContainers": ["junk"], "containers": ["junk", container("main")]}}
    assert [(r.index, r.name, r.init) for r in containers(p)] == [
        (0, "", True),
        (1, "", False),
        (2, "main", False),
    ]


# -- requests of one container ----------------------------------------------------------------------


def test_limits_default_missing_requests() -> None:
    c = limited("c", requests={"cpu": "1"}, limits={"cpu": "2", "memory": "1Gi"})
    assert raw_requests(c) == {"cpu": "1", "memory": "1Gi"}
    assert raw_requests(limited("c", limits={GPU: 1})) == {GPU: 1}
    assert raw_requests(limited("c", requests={"cpu": "1"})) == {"cpu": "1"}


def test_unparseable_requests_are_ignored() -> None:
    c = limited("c", requests={"cpu": "fast", "memory": "1Gi", GPU: [1]})
    assert container_requests(c) == {"memory": Quantity.parse("1Gi")}


# -- pod_requests ------------------------------------------------------------------------------------


def test_regular_containers_add_up_in_scheduler_units() -> None:
    p = pod(
        "p", [container("a", {"cpu": "250m", "memory": "1.5", GPU: 1}), container("b", {"cpu": "1", GPU: 2})]
    )
    assert pod_requests(p) == {"cpu": 1250, "memory": 2, GPU: 3}  # cpu in millicores, the rest rounded up


def test_the_largest_init_container_wins_over_a_smaller_sum() -> None:
    p = pod("p", [container("main", {"cpu": "1", "memory": "4Gi"})], init=[container("setup", {"cpu": "3"})])
    assert pod_requests(p) == {"cpu": 3000, "memory": 4 * 2**30}


def test_a_smaller_init_container_does_not_add() -> None:
    p = pod(
        "p",
        [container("a", {"cpu": "1"}), container("b", {"cpu": "1"})],
        init=[container("i", {"cpu": "1500m"})],
    )
    assert pod_requests(p) == {"cpu": 2000}


def test_sidecars_add_to_the_long_lived_sum_and_to_later_init_containers() -> None:
    p = pod(
        "p",
        [container("main", {"cpu": "1"})],
        init=[container("side", {"cpu": "1"}, sidecar=True), container("late", {"cpu": "2"})],
    )
    assert pod_requests(p) == {"cpu": 3000}  # late runs next to side: 2 + 1 > side + main


def test_an_init_container_before_a_sidecar_runs_alone() -> None:
    p = pod(
        "p",
        [container("main", {"cpu": "1"})],
        init=[container("early", {"cpu": "2"}), container("side", {"cpu": "1"}, sidecar=True)],
    )
    assert pod_requests(p) == {"cpu": 2000}


def test_overhead_is_added_after_the_max() -> None:
    p = pod(
        "p",
        [container("c", {"cpu": "1"})],
        init=[container("i", {"cpu": "2"})],
        overhead={"cpu": "250m", "memory": "64Mi", "bad": "?"},
    )
    assert pod_requests(p) == {"cpu": 2250, "memory": 64 * 2**20}


def test_pod_level_requests_replace_cpu_and_memory_only() -> None:
    p = pod(
        "p",
        [container("c", {"cpu": "1", "memory": "1Gi", GPU: 1})],
        resources={"requests": {"cpu": "4", "memory": "2Gi", GPU: 8}},
        overhead={"cpu": "100m"},
    )
    assert pod_requests(p) == {"cpu": 4100, "memory": 2 * 2**30, GPU: 1}


def test_requests_default_from_limits_in_pod_requests() -> None:
    p = pod("p", [limited("c", limits={"cpu": "2", GPU: 1})])
    assert pod_requests(p) == {"cpu": 2000, GPU: 1}


def test_a_pod_without_requests_requests_nothing() -> None:
    assert pod_requests(pod("p", [container("c")])) == {}
    assert pod_requests({"spec": {}}) == {}


# -- iter_requests -----------------------------------------------------------------------------------


def test_iter_requests_yields_requests_then_limits_per_container_in_index_order() -> None:
    p = pod(
        "p",
        [limited("main", requests={"cpu": "1"}, limits={"cpu": "x"})],
        init=[limited("setup", requests={GPU: 1})],
    )
    got = [(ref.index, ref.name, key, value) for ref, key, value in iter_requests(p)]
    assert got == [(0, "setup", GPU, 1), (1, "main", "cpu", "1"), (1, "main", "cpu", "x")]


@pytest.mark.parametrize("resources", [None, {}, {"requests": None}, "junk"])
def test_iter_requests_skips_containers_without_resources(resources: Any) -> None:
    c: Obj = {"name": "c"}
    if resources is not None:
        c["resources"] = resources
    assert list(iter_requests(pod("p", [c]))) == []


_VALUES = st.one_of(
    st.sampled_from(["1", "500m", "4Gi", "1e3", "0", "-1", "x", "", "1.5", "0.1m"]),
    st.integers(-3, 3),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False, width=16),
    st.none(),
    st.lists(st.integers(), max_size=1),
)


@given(st.dictionaries(st.sampled_from(["cpu", "memory", "example.com/gpu"]), _VALUES, max_size=3))
def test_container_units_are_the_parsed_requests_in_units_cached_or_not(requests: dict[str, Any]) -> None:
    """The memo of parsed values answers what parsing gives, the first time and the next (True is
    not 1 to it, an unhashable value is parsed, not cached)."""
    c: Obj = {"name": "c", "resources": {"requests": requests}}
    expected = {k: to_units(k, q) for k, q in container_requests(c).items()}
    assert container_units(c) == expected
    assert container_units(c) == expected
