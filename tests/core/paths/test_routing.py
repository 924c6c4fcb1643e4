"""``--route``: which pods get draxr as their scheduler, on the native path and on the rewrite."""

from __future__ import annotations

import pytest

from tests.core.podfactory import pod
from webhook.core.paths.routing import Route, Routing, routes_rewritten, wants_route

CASES = [  # route, the pod's schedulerName (None: unset), native routed, rewritten routed
    ("default-only", None, True, False),
    ("default-only", "", True, False),
    ("default-only", "default-scheduler", True, False),
    ("default-only", "volcano", False, False),
    ("default-only", "draxr", False, False),
    ("always", None, True, True),
    ("always", "volcano", True, True),
    ("always", "draxr", False, False),
    ("never", None, False, False),
    ("never", "default-scheduler", False, False),
]


@pytest.mark.parametrize(("route", "current", "native", "rewritten"), CASES)
def test_which_pods_are_routed(route: Route, current: str | None, native: bool, rewritten: bool) -> None:
    p = pod() if current is None else pod(schedulerName=current)
    routing = Routing(route)
    assert wants_route(p, routing) is native
    assert routes_rewritten(p, routing) is rewritten


def test_the_scheduler_name_is_routings_own() -> None:
    p = pod(schedulerName="draxr")
    assert wants_route(p, Routing("always", "my-draxr"))
    assert not wants_route(pod(schedulerName="my-draxr"), Routing("always", "my-draxr"))
