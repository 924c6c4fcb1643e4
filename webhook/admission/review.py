"""``admission.k8s.io/v1`` AdmissionReview in and out, on plain dicts.

The kube-apiserver only ever sends well-formed reviews; anything else (bad JSON, wrong
apiVersion or kind, no ``request`` or ``request.uid``, a resource the endpoint does not serve,
wrong field types in the review itself) is answered with HTTP 400 (``BadRequest``), which makes
the apiserver apply the hook's ``failurePolicy`` instead of trusting a made-up answer.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Final

from ..core.api.fielderrors import FieldError
from ..core.api.messages import clip
from ..core.api.objectcheck import check_object
from ..core.api.objects import Obj
from ..core.api.versions import GROUP as RESOURCE_GROUP
from ..core.api.versions import to_v1

API_VERSION: Final = "admission.k8s.io/v1"
KIND: Final = "AdmissionReview"
OPERATIONS: Final = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})
#: Kubernetes objects of the kinds served here nest far less; deeper input is hostile and would
#: exhaust the recursion of copying, diffing and message formatting.
MAX_DEPTH: Final = 100


class BadRequest(Exception):
    """Not a usable AdmissionReview; ``str()`` is the message returned with HTTP 400."""


@dataclass(frozen=True, slots=True)
class Expected:
    """What one endpoint serves: group, resource, versions and sub-resources."""

    group: str
    resource: str
    kind: str
    versions: frozenset[str]
    subresources: frozenset[str] = frozenset({""})

    def describe(self) -> str:
        name = f"{self.resource}.{self.group}" if self.group else self.resource
        subs = sorted(s for s in self.subresources if s)
        return name + "".join(f", {name}/{s}" for s in subs)


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    """The fields of ``request`` the hooks use, type-checked."""

    uid: str
    operation: str
    group: str
    version: str
    resource: str
    sub_resource: str
    name: str
    namespace: str
    username: str
    obj: Obj | None
    old: Obj | None
    dry_run: bool


@dataclass(slots=True)
class Verdict:
    """One hook's answer: allowed or a ``metav1.Status``, an optional JSONPatch, warnings."""

    allowed: bool = True
    status: Obj | None = None
    patch: list[Obj] | None = None
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def deny(cls, status: Obj, warnings: list[str] | None = None) -> Verdict:
        return cls(False, status, None, list(warnings or []))


# --- decoding ------------------------------------------------------------------------------------


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _check_depth(value: dict[str, Any] | list[Any]) -> None:
    """Iteratively, so that the check itself cannot overflow: one level of containers at a time
    (what ``json.loads`` makes: plain dicts and lists; scalars are skipped)."""
    level: list[dict[str, Any] | list[Any]] = [value]
    depth = 0
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            raise BadRequest(f"request body nests deeper than {MAX_DEPTH} levels")
        below: list[Any] = []
        for item in level:
            children: Any = item.values() if type(item) is dict else item
            for child in children:
                kind = type(child)
                if kind is dict or kind is list:
                    below.append(child)
        level = below


def decode_review(body: bytes) -> Obj:
    """The AdmissionReview as a dict, with ``apiVersion`` and ``kind`` checked."""
    if not body:
        raise BadRequest("empty request body; expected an AdmissionReview")
    try:
        review = json.loads(body, parse_constant=_no_constant)
    except RecursionError:
        raise BadRequest("request body nests too deeply") from None
    except (ValueError, UnicodeDecodeError) as e:  # JSONDecodeError is a ValueError
        raise BadRequest(f"request body is not valid JSON: {e}") from None
    if not isinstance(review, dict):
        raise BadRequest(f"request body must be a JSON object, not {_type_name(review)}")
    _check_depth(review)
    api_version, kind = review.get("apiVersion"), review.get("kind")
    if api_version != API_VERSION or kind != KIND:
        raise BadRequest(
            f"expected apiVersion {API_VERSION!r} and kind {KIND!r}, got "
            f"apiVersion {_shown(api_version)} and kind {_shown(kind)}"
        )
    return review


def operation_label(review: Any) -> str:
    """The operation for metrics labels: one of ``OPERATIONS`` or ``unknown`` (never user text)."""
    request = review.get("request") if isinstance(review, dict) else None
    op = request.get("operation") if isinstance(request, dict) else None
    return op if isinstance(op, str) and op in OPERATIONS else "unknown"


def _type_name(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    if isinstance(value, int | float) and not isinstance(value, bool):
        return "a number"
    return names.get(type(value), type(value).__name__)


def _shown(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=True) if isinstance(value, str) else _type_name(value)
    return clip(text, limit)


def _string(request: Obj, key: str, *, required: bool = False) -> str:
    value = request.get(key)
    if value is None or (value == "" and not required):
        if required:
            raise BadRequest(f"request.{key} is required")
        return ""
    if not isinstance(value, str):
        raise BadRequest(f"request.{key} must be a string, not {_type_name(value)}")
    if required and not value:
        raise BadRequest(f"request.{key} is required")
    return value


def _object(request: Obj, key: str) -> Obj | None:
    value = request.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BadRequest(f"request.{key} must be an object or null, not {_type_name(value)}")
    return value


def _resource(request: Obj) -> tuple[str, str, str]:
    value = request.get("resource")
    if not isinstance(value, dict):
        raise BadRequest("request.resource is required (group, version, resource)")
    parts: list[str] = []
    for key in ("group", "version", "resource"):
        part = value.get(key, "")
        if part is None:
            part = ""
        if not isinstance(part, str):
            raise BadRequest(f"request.resource.{key} must be a string, not {_type_name(part)}")
        parts.append(part)
    return parts[0], parts[1], parts[2]


def _username(request: Obj) -> str:
    info = request.get("userInfo")
    if info is None:
        return ""
    if not isinstance(info, dict):
        raise BadRequest(f"request.userInfo must be an object, not {_type_name(info)}")
    username = info.get("username")
    if username is None:
        return ""
    if not isinstance(username, str):
        raise BadRequest(f"request.userInfo.username must be a string, not {_type_name(username)}")
    return username


def parse_request(review: Obj, expected: Expected) -> AdmissionRequest:
    """``review.request`` for an endpoint serving ``expected``; ``BadRequest`` when unusable."""
    request = review.get("request")
    if not isinstance(request, dict):
        raise BadRequest("request is required" if request is None else "request must be an object")
    uid = _string(request, "uid", required=True)
    operation = _string(request, "operation", required=True)
    if operation not in OPERATIONS:
        known = ", ".join(sorted(OPERATIONS))
        raise BadRequest(f"request.operation {_shown(operation)} is not one of {known}")
    group, version, resource = _resource(request)
    sub_resource = _string(request, "subResource")
    if (
        group != expected.group
        or resource != expected.resource
        or version not in expected.versions
        or sub_resource not in expected.subresources
    ):
        shown = f"{resource}.{group}" if group else resource
        shown += f"/{version}" + (f" (subresource {sub_resource})" if sub_resource else "")
        raise BadRequest(
            f"unexpected resource {_shown(shown)}; this endpoint serves {expected.describe()} "
            f"(versions {', '.join(sorted(expected.versions))})"
        )
    dry_run = request.get("dryRun", False)
    if dry_run is None:
        dry_run = False
    if not isinstance(dry_run, bool):
        raise BadRequest(f"request.dryRun must be a boolean, not {_type_name(dry_run)}")
    obj, old = _object(request, "object"), _object(request, "oldObject")
    if operation in ("CREATE", "UPDATE") and obj is None:
        raise BadRequest(f"request.object is required for {operation}")
    if operation == "UPDATE" and old is None:
        raise BadRequest("request.oldObject is required for UPDATE")
    for key, value in (("object", obj), ("oldObject", old)):
        kind = value.get("kind") if value is not None else None
        if kind is not None and kind != expected.kind:
            raise BadRequest(f"request.{key}.kind is {_shown(kind)}; this endpoint serves {expected.kind}")
    if expected.group == RESOURCE_GROUP:
        # The hooks read v1 whatever version was sent; they only validate, so the converted copies
        # never go back to the API server.
        obj = to_v1(obj) if obj is not None else None
        old = to_v1(old) if old is not None else None
    if old is not None:
        errors = object_errors(old, expected.kind)
        if errors:
            raise BadRequest(f"request.oldObject is not a valid {expected.kind}: {errors[0]}")
    return AdmissionRequest(
        uid=uid,
        operation=operation,
        group=group,
        version=version,
        resource=resource,
        sub_resource=sub_resource,
        name=_string(request, "name"),
        namespace=_string(request, "namespace"),
        username=_username(request),
        obj=obj,
        old=old,
        dry_run=dry_run,
    )


def object_errors(obj: Obj, kind: str) -> list[FieldError]:
    """Wrong types in the fields the engine reads (the API server would never send them)."""
    return check_object({**obj, "kind": kind})


# --- encoding ------------------------------------------------------------------------------------

#: The apiserver's warning recorder (``staging/src/k8s.io/apiserver/pkg/endpoints/filters/warning.go``):
#: past ``truncateAtTotalRunes`` of warning text, every warning is cut to ``truncateItemRunes``
#: and warnings that come after the total is reached are dropped.
TRUNCATE_AT_TOTAL_RUNES: Final = 4 * 1024
TRUNCATE_ITEM_RUNES: Final = 256


def truncate_warnings(
    warnings: list[str], total: int = TRUNCATE_AT_TOTAL_RUNES, item: int = TRUNCATE_ITEM_RUNES
) -> list[str]:
    """The warnings the apiserver would pass on: de-duplicated, then truncated as its recorder does
    (so a response never carries more than about 4 KiB of them, however many a pod provokes)."""
    kept: list[str] = []
    written = 0
    truncating = False
    seen: set[str] = set()
    for text in warnings:
        if not text or (truncating and written >= total):
            continue
        if text in seen:
            continue
        seen.add(text)
        if truncating:
            text = text[:item]
        if written + len(text) <= total or truncating:
            kept.append(text)
            written += len(text)
            continue
        # Over the limit: replay everything so far, and this one, truncated.
        truncating = True
        kept = [w[:item] for w in [*kept, text]]
        written = sum(len(w) for w in kept)
    return kept


def encode_response(uid: str, verdict: Verdict) -> bytes:
    """The AdmissionReview answer; ASCII-only JSON, so no input string can break the encoding."""
    response: Obj = {"uid": uid, "allowed": verdict.allowed}
    if verdict.status is not None:
        response["status"] = verdict.status
    if verdict.patch:
        patch = json.dumps(verdict.patch, ensure_ascii=True, separators=(",", ":")).encode("ascii")
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(patch).decode("ascii")
    if verdict.warnings:
        response["warnings"] = truncate_warnings(verdict.warnings)
    review = {"apiVersion": API_VERSION, "kind": KIND, "response": response}
    return json.dumps(review, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def encode_error(message: str) -> bytes:
    return json.dumps({"error": message}, ensure_ascii=True).encode("ascii")
