"""API errors as the apiserver reports them: a ``Status`` body with code, reason, message and details.

Every failure the emulator returns goes through :class:`ApiError`, so clients (the official Python
client, kubectl) see the same reasons and messages they would see from kube-apiserver.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The apiserver's optimistic-lock message (``storage.OptimisticLockErrorMsg``).
OPTIMISTIC_LOCK_MSG = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


@dataclass(frozen=True, slots=True)
class Cause:
    """One ``StatusCause``: a field error behind a 422 Invalid."""

    reason: str
    message: str
    field: str

    def as_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.message, "field": self.field}

    def render(self) -> str:
        """The ``field.Error`` text: ``<field>: <type>: <detail>``."""
        return f"{self.field}: {self.message}"


@dataclass(slots=True)
class ApiError(Exception):
    """A failed API request; :meth:`status` is the body the server sends."""

    code: int
    reason: str
    message: str
    details: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    #: Answered as plain text, not a Status: the apiserver's 404 outside every served API.
    plain: bool = False

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(name: str, group: str, kind: str, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = (
        {"name": name, "group": group, "kind": kind} if name else {"group": group, "kind": kind}
    )
    out.update(extra)
    return {k: v for k, v in out.items() if v != ""}


def group_resource(group: str, resource: str) -> str:
    """``schema.GroupResource.String()``: ``pods`` or ``resourceclaims.resource.k8s.io``."""
    return f"{resource}.{group}" if group else resource


def not_found(group: str, resource: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{group_resource(group, resource)} "{name}" not found',
        _details(name, group, resource),
    )


def already_exists(group: str, resource: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{group_resource(group, resource)} "{name}" already exists',
        _details(name, group, resource),
    )


def conflict(group: str, resource: str, name: str, why: str = OPTIMISTIC_LOCK_MSG) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {group_resource(group, resource)} "{name}": {why}',
        _details(name, group, resource),
    )


def forbidden_request(group: str, resource: str, name: str, why: str) -> ApiError:
    """``NewForbidden``: ``<resource> "<name>" is forbidden: <why>`` (no name: ``<resource> is ...``)."""
    gr = group_resource(group, resource)
    subject = f'{gr} "{name}"' if name else gr
    return ApiError(403, "Forbidden", f"{subject} is forbidden: {why}", _details(name, group, resource))


def invalid(group: str, kind: str, name: str, causes: list[Cause]) -> ApiError:
    """``NewInvalid``: ``<Kind> "<name>" is invalid: <errors>`` with one cause per field error."""
    rendered = [c.render() for c in causes]
    agg = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    qualified = f"{kind}.{group}" if group else kind
    return ApiError(
        422,
        "Invalid",
        f'{qualified} "{name}" is invalid: {agg}',
        _details(name, group, kind, causes=[c.as_dict() for c in causes]),
    )


def required(path: str, detail: str) -> Cause:
    return Cause("FieldValueRequired", f"Required value: {detail}" if detail else "Required value", path)


def invalid_value(path: str, value: Any, detail: str) -> Cause:
    shown = f'"{value}"' if isinstance(value, str) else _go_repr(value)
    return Cause("FieldValueInvalid", f"Invalid value: {shown}: {detail}", path)


def not_supported(path: str, value: Any, supported: str) -> Cause:
    shown = f'"{value}"' if isinstance(value, str) else _go_repr(value)
    return Cause("FieldValueNotSupported", f"Unsupported value: {shown}: supported values: {supported}", path)


def forbidden(path: str, detail: str) -> Cause:
    return Cause("FieldValueForbidden", f"Forbidden: {detail}", path)


def _go_repr(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return '"object"'


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def unprocessable(message: str) -> ApiError:
    """``NewGenericServerResponse(422)``: used for patches that cannot be applied."""
    return ApiError(422, "Invalid", message)


def gone(message: str) -> ApiError:
    """``NewResourceExpired``: a watch or list from a compacted resourceVersion."""
    return ApiError(410, "Expired", message)


def method_not_allowed(verb: str, resource: str) -> ApiError:
    return ApiError(
        405,
        "MethodNotAllowed",
        f"the server does not allow this method on the requested resource ({verb} {resource})",
    )


def unsupported_media_type(content_type: str, accepted: tuple[str, ...]) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(accepted)}",
        {"causes": [{"reason": "UnexpectedServerResponse", "message": content_type}]},
    )


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def too_many_requests(retry_after: int) -> ApiError:
    return ApiError(
        429,
        "TooManyRequests",
        "Too many requests, please try again later.",
        {"retryAfterSeconds": retry_after},
        {"Retry-After": str(retry_after)},
    )


def internal(message: str) -> ApiError:
    return ApiError(
        500,
        "InternalError",
        f"Internal error occurred: {message}",
        {"causes": [{"message": message}]},
    )


def endpoint_not_found() -> ApiError:
    """An unknown resource of a served group and version."""
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def page_not_found() -> ApiError:
    """Any other path the apiserver does not serve: Go's ``http.NotFound``, in plain text."""
    return ApiError(404, "NotFound", "404 page not found", plain=True)
