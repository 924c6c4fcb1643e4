"""What a pod's author is told about its DRA-backed names: ``kubectl`` prints these warnings at
create time (and under ``--dry-run=server``); ``draxr convert`` and ``validate`` print them offline.

* a resource name several DeviceClasses declare: which one wins and why (upstream resolves the
  clash silently at scheduling time);
* a DRA-style extended resource that no class maps and no node advertises (a typo, or a driver
  that is not installed): the pod would stay Pending;
* the path the pod took when it is not the native one, and why;
* a ResourceQuota that limits a rewritten name but not its class's devices;
* a pod created with ``spec.nodeName`` on a node that does not advertise its names (left alone: no
  scheduler would allocate its devices).
* a feature draxr's worker does not implement, which keeps the pod with its scheduler, or the
  reason it is refused (``--unsupported-pods``).

The apiserver shows warnings verbatim; each is kept to ``MAX_WARNING_LENGTH`` characters (``clip``).
"""

from __future__ import annotations

from ..api.fielderrors import go_quote
from ..api.messages import clip
from ..api.objects import Obj, meta, name, parse_time
from ..scheduling.unsupported import Unsupported
from .choice import PathChoice
from .quota import class_quota_key

_PATH_TEXT = {
    "native": "extended resources from DRA devices",
    "rewrite": "rewritten into DRA claims",
    "device-plugin": "left to the device plugin",
    "none": "left alone",
}


def contention_warning(resource: str, contenders: list[Obj]) -> str | None:
    """``contenders`` as ``ClassResolver.contenders`` returns them: every declaring class, winner first."""
    if len(contenders) < 2:
        return None
    winner, runner_up = contenders[0], contenders[1]
    newer = parse_time(meta(winner).get("creationTimestamp")) > parse_time(
        meta(runner_up).get("creationTimestamp")
    )
    why = "newest creationTimestamp" if newer else "same creationTimestamp, smallest name"
    return clip(
        f"{resource} is declared by {len(contenders)} DeviceClasses; {go_quote(name(winner))} wins ({why})"
    )


def unserved_warning(resource: str) -> str:
    return clip(f"{resource}: no DeviceClass maps this name and no node advertises it")


def path_warning(names: list[str], choice: PathChoice) -> str:
    return clip(f"{', '.join(names)}: {_PATH_TEXT[choice.kind]} ({choice.why})")


def bound_node_warning(names: list[str], node: str) -> str:
    """A pod created with ``spec.nodeName`` on a node that does not advertise enough of ``names``:
    no scheduler allocates DRA devices for it (and a gated kubelet admits it without any)."""
    them = "it" if len(names) == 1 else "them"
    return clip(
        f"{', '.join(names)}: node {go_quote(node)} does not advertise {them}; "
        "a pod with spec.nodeName gets no DRA device"
    )


def quota_warning(resource: str, device_class: str) -> str:
    return clip(f"quota on {resource} does not limit rewritten pods; add {class_quota_key(device_class)}")


def _features(features: list[Unsupported]) -> str:
    return ", ".join(f.describe() for f in features)


def unsupported_warning(features: list[Unsupported], scheduler: object) -> str:
    """The pod stays with its scheduler (``--unsupported-pods=default-scheduler``)."""
    who = scheduler if isinstance(scheduler, str) and scheduler else "default-scheduler"
    return clip(f"left to {who}: draxr's worker lacks {_features(features)}")


def unsupported_denial(
    features: list[Unsupported], managed: list[str], scheduler_name: str, *, explicit: bool
) -> str:
    """Why a pod that uses ``features`` is refused: it names draxr's scheduler (``explicit``), or it
    consumes devices of ``managed`` classes, which only draxr allocates."""
    what = _features(features)
    if explicit:
        return (
            f"spec.schedulerName is {go_quote(scheduler_name)}, and draxr's worker does not implement "
            f"{what}: name a scheduler that does"
        )
    classes = ", ".join(go_quote(c) for c in managed) or "that its claims will name"
    return (
        f"draxr's worker does not implement {what}, and the pod consumes devices of DeviceClass "
        f"{classes}, which draxr allocates: another scheduler would allocate them beside draxr, two "
        "allocators sharing one pool (draxr serve --unsupported-pods=deny)"
    )
