"""``--route``: which pods the webhook hands to draxr's scheduler, through ``spec.schedulerName``.

The scheduler name is the one field the webhook can set for good: it cannot change after creation.
``default-only`` takes pods meant for the default scheduler, ``always`` every pod asking for a
DRA-backed name, ``never`` leaves the field alone. A native pod is routed per the setting; a
rewritten one only with ``always`` (any DRA-aware scheduler can place its claims).

Here "route" means only this setting; the pure settings are kept apart from the webhook's
configuration so that ``draxr convert`` builds the same patch without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from ..api.constants import DEFAULT_SCHEDULER_NAME
from ..api.objects import Obj, spec

Route = Literal["default-only", "always", "never"]

#: kube-scheduler's name, the one a pod gets when it names none.
DEFAULT_SCHEDULER: Final = "default-scheduler"


@dataclass(frozen=True, slots=True)
class Routing:
    """``--route`` and ``--scheduler-name``: what the pod patches need of the webhook's settings."""

    route: Route = "default-only"
    scheduler_name: str = DEFAULT_SCHEDULER_NAME


def wants_route(pod: Obj, routing: Routing) -> bool:
    """A native pod gets draxr's scheduler name (per ``--route``)."""
    current = spec(pod).get("schedulerName")
    if routing.route == "always":
        return current != routing.scheduler_name
    if routing.route == "default-only":
        return current in (None, "", DEFAULT_SCHEDULER)
    return False


def routes_rewritten(pod: Obj, routing: Routing) -> bool:
    """A rewritten pod gets draxr's scheduler name: only with ``--route=always``."""
    return routing.route == "always" and spec(pod).get("schedulerName") != routing.scheduler_name
