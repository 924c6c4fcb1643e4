"""What a pod's author is told about its DRA-backed names: ``kubectl`` prints these warnings at
create time (and under ``--dry-run=server``); ``draxr convert`` and ``validate`` print them offline.

* a resource name several DeviceClasses declare: which one wins and why (upstream resolves the
  clash silently at scheduling time);
* a DRA-style extended resource that no class maps and no node advertises (a typo, or a driver
  that is not installed): the pod would stay Pending;
* the path the pod took when it is not the native one, and why;
* a ResourceQuota that limits a rewritten name but not its class's devices.

The apiserver shows warnings verbatim; each is kept to ``MAX_WARNING_LENGTH`` characters (``clip``).
"""

from __future__ import annotations

from ..api.fielderrors import go_quote
from ..api.messages import clip
from ..api.objects import Obj, meta, name, parse_time
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


def quota_warning(resource: str, device_class: str) -> str:
    return clip(f"quota on {resource} does not limit rewritten pods; add {class_quota_key(device_class)}")
