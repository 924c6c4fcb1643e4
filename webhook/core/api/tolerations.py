"""Tolerations for the requests draxr writes for a class's extended resource (ahead of upstream).

Upstream's special claim carries no tolerations (KEP-5004 in 1.37), so a device with a
``NoSchedule`` or ``NoExecute`` taint can never serve a pod asking for ``example.com/gpu: 1``,
whatever the admin intends. A DeviceClass may name tolerations in the annotation
``draxr.io/extended-resource-tolerations``: a JSON list of ``DeviceToleration`` (resource.k8s.io/v1:
``key``, ``operator``, ``value``, ``effect``, ``tolerationSeconds``). draxr copies them onto every
request it writes for the class: the special claim's (native path) and the rewrite's templates'
(webhook and ``draxr convert``); the allocator honours request tolerations as upstream's does.

Validated as upstream validates a request's tolerations (``validateDeviceToleration`` in
``pkg/apis/resource/validation/validation.go``, after the v1 defaulting of ``operator`` to
``Equal``), plus what the field's documentation only says: ``tolerationSeconds`` needs effect
``NoExecute`` (upstream ignores it otherwise; here it is refused with core's Toleration message),
and at most 16 (``DeviceTolerationsMaxLength``). NoExecute evictions still apply: the device taint
eviction controller evicts a pod whose claims do not tolerate a ``NoExecute`` taint, and one whose
toleration has ``tolerationSeconds`` that long after the taint was added.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from . import names
from .constants import EXTENDED_RESOURCE_TOLERATIONS_ANNOTATION
from .fielderrors import FieldError, Path, forbidden, invalid, not_supported, too_many, type_invalid
from .objects import Obj, annotations_of

TOLERATIONS_PATH: Final = Path("metadata", "annotations").key(EXTENDED_RESOURCE_TOLERATIONS_ANNOTATION)
#: ``DeviceTolerationsMaxLength``.
MAX_TOLERATIONS: Final = 16
#: ``validDeviceTolerationOperators``.
OPERATORS: Final = ("Equal", "Exists")
#: ``validDeviceTaintEffects``, as ``sets.List`` sorts them.
EFFECTS: Final = ("NoExecute", "NoSchedule", "None")
FIELDS: Final = ("key", "operator", "value", "effect", "tolerationSeconds")
#: Core's ``ValidateTolerations`` message for ``tolerationSeconds`` without ``NoExecute``.
MSG_SECONDS_NEED_NO_EXECUTE: Final = "effect must be 'NoExecute' when `tolerationSeconds` is set"
MSG_EXISTS_VALUE: Final = "must be empty for operator `Exists`"
MSG_NOT_JSON: Final = "must be a JSON list of DeviceTolerations"


def _defaulted(toleration: Obj) -> Obj:
    """The v1 API's defaulting: an empty ``operator`` is ``Equal``."""
    out = {k: v for k, v in toleration.items() if v is not None}
    if not out.get("operator"):
        out["operator"] = "Equal"
    return out


def _parsed(value: Any) -> tuple[list[Any] | None, str | None]:
    """The annotation's list, or why it is none."""
    if not isinstance(value, str):
        return None, "must be a string"
    try:
        body = json.loads(value)
    except ValueError as e:
        return None, f"{MSG_NOT_JSON}: {e}"
    if not isinstance(body, list):
        return None, MSG_NOT_JSON
    return body, None


def validate_toleration(toleration: Any, path: Path) -> list[FieldError]:
    """``validateDeviceToleration`` for one defaulted toleration, field by field in upstream's order."""
    if not isinstance(toleration, dict):
        return [type_invalid(path, toleration, "must be an object")]
    errors: list[FieldError] = [
        forbidden(path.child(str(k)), "unknown field (not in DeviceToleration)")
        for k in toleration
        if k not in FIELDS
    ]
    for k in ("key", "operator", "value", "effect"):
        if toleration.get(k) is not None and not isinstance(toleration[k], str):
            errors.append(type_invalid(path.child(k), toleration[k], "must be a string"))
    seconds = toleration.get("tolerationSeconds")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)):
        errors.append(type_invalid(path.child("tolerationSeconds"), seconds, "must be an integer"))
    if errors:
        return errors
    t = _defaulted(toleration)
    key, op, value, effect = t.get("key", ""), t["operator"], t.get("value", ""), t.get("effect", "")
    if key:
        errors.extend(invalid(path.child("key"), key, m) for m in names.is_qualified_name(key))
    if op == "Exists":
        if value:
            errors.append(invalid(path.child("value"), value, MSG_EXISTS_VALUE))
    elif op == "Equal":
        errors.extend(invalid(path.child("value"), value, m) for m in names.is_valid_label_value(value))
    else:
        errors.append(not_supported(path.child("operator"), op, OPERATORS))
    if effect and effect not in EFFECTS:
        errors.append(not_supported(path.child("effect"), effect, EFFECTS))
    if seconds is not None and effect != "NoExecute":
        errors.append(invalid(path.child("effect"), effect, MSG_SECONDS_NEED_NO_EXECUTE))
    return errors


def validate_class_tolerations(device_class: Any) -> list[FieldError]:
    """The class's ``draxr.io/extended-resource-tolerations`` (none: no errors)."""
    annotations = annotations_of(device_class)
    if EXTENDED_RESOURCE_TOLERATIONS_ANNOTATION not in annotations:
        return []
    raw = annotations[EXTENDED_RESOURCE_TOLERATIONS_ANNOTATION]
    body, why = _parsed(raw)
    if body is None:
        return [invalid(TOLERATIONS_PATH, raw, why or MSG_NOT_JSON)]
    errors: list[FieldError] = []
    if len(body) > MAX_TOLERATIONS:
        errors.append(too_many(TOLERATIONS_PATH, len(body), MAX_TOLERATIONS))
    for i, toleration in enumerate(body):
        errors.extend(validate_toleration(toleration, TOLERATIONS_PATH.index(i)))
    return errors


def class_tolerations(device_class: Obj | None) -> list[Obj]:
    """The class's tolerations, defaulted, for the requests draxr writes; none when the annotation
    is absent or invalid (the DeviceClass hook refuses an invalid one; one stored before draxr
    checked it is ignored, as ``validate_class_tolerations`` reports)."""
    raw = annotations_of(device_class).get(EXTENDED_RESOURCE_TOLERATIONS_ANNOTATION)
    if raw is None or validate_class_tolerations(device_class):
        return []
    body, _ = _parsed(raw)
    return [_defaulted(t) for t in body or []]


def tolerations_key(tolerations: Sequence[Obj]) -> str:
    """Canonical JSON of a list of tolerations ("" for none): equal lists, equal keys."""
    if not tolerations:
        return ""
    return json.dumps(list(tolerations), sort_keys=True, separators=(",", ":"))
