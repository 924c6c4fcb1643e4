"""``--route``: which pods the webhook hands to draxr's scheduler, through ``spec.schedulerName``.

The scheduler name is the one field the webhook can set for good: it cannot change after creation.
Only pods that consume devices of a class draxr manages are routed (``consumed.py``: one allocator
per device pool), whatever their path (native, rewritten, or their own claims): ``default-only``
takes those meant for the default scheduler, ``always`` all of them, ``never`` leaves the field
alone. ``--unsupported-pods`` says what becomes of such a pod when it uses a feature draxr's worker
does not implement (``core/scheduling/unsupported.py``): ``deny`` refuses it (the default: left to
kube-scheduler, two allocators would share the pool), ``default-scheduler`` leaves it there.

Here "route" means only these settings; the pure settings are kept apart from the webhook's
configuration so that ``draxr convert`` builds the same patch without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from ..api.constants import DEFAULT_SCHEDULER_NAME
from ..api.objects import Obj, spec
from .consumed import EVERY_CLASS, ManagedClasses

Route = Literal["default-only", "always", "never"]
UnsupportedPods = Literal["deny", "default-scheduler"]
UNSUPPORTED_PODS: Final = ("deny", "default-scheduler")

#: kube-scheduler's name, the one a pod gets when it names none.
DEFAULT_SCHEDULER: Final = "default-scheduler"


@dataclass(frozen=True, slots=True)
class Routing:
    """``--route``, ``--scheduler-name``, ``--managed-classes`` and ``--unsupported-pods``: what the
    pod patches need of the webhook's settings."""

    route: Route = "default-only"
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    managed: ManagedClasses = EVERY_CLASS
    unsupported: UnsupportedPods = "deny"


def wants_route(pod: Obj, routing: Routing) -> bool:
    """A pod that consumes managed devices gets draxr's scheduler name (per ``--route``)."""
    current = spec(pod).get("schedulerName")
    if routing.route == "always":
        return current != routing.scheduler_name
    if routing.route == "default-only":
        return current in (None, "", DEFAULT_SCHEDULER)
    return False
