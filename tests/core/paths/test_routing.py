"""``--route``: which pods that consume devices draxr manages get draxr as their scheduler, on any
path (what they consume and the unsupported features: tests/core/paths/test_outcome.py)."""

from __future__ import annotations

import pytest

from tests.core.podfactory import pod
from webhook.core.paths.routing import Route, Routing, wants_route

CASES = [  # route, the pod's schedulerName (None: unset), routed
    ("default-only", None, True),
    ("default-only", "", True),
    ("default-only", "default-scheduler", True),
    ("default-only", "volcano", False),
    ("default-only", "draxr", False),
    ("always", None, True),
    ("always", "volcano", True),
    ("always", "draxr", False),
    ("never", None, False),
    ("never", "default-scheduler", False),
]


@pytest.mark.parametrize(("route", "current", "routed"), CASES)
def test_which_pods_are_routed(route: Route, current: str | None, routed: bool) -> None:
    p = pod() if current is None else pod(schedulerName=current)
    assert wants_route(p, Routing(route)) is routed


def test_the_scheduler_name_is_routings_own() -> None:
    p = pod(schedulerName="draxr")
    assert wants_route(p, Routing("always", "my-draxr"))
    assert not wants_route(pod(schedulerName="my-draxr"), Routing("always", "my-draxr"))
