"""The admission webhook as a Starlette application (served over TLS by ``draxr serve``).

Every hook endpoint reads the body with a size limit, decodes and checks the AdmissionReview and
runs its hook on the event loop: hooks are pure and fast (microseconds to a millisecond; a thread
hop would cost more than the work and cut throughput by a third). The one answer that may have to
wait, a pod mapping naming a claim the informer has not delivered yet, is computed again in a
worker thread, so the loop never blocks on it. Nothing a client sends
can produce a 5xx: unusable requests get HTTP 400 with ``{"error": ...}``, and an unexpected failure
inside a hook is logged with its traceback and answered the same way, so the apiserver applies the
hook's ``failurePolicy`` and the next request is served as if nothing happened.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Final

from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..core.fielderrors import invalid_status
from ..core.messages import clip
from ..core.objects import name
from ..kube.cache import ClusterCache
from .blocking import MAY_BLOCK, WouldBlock
from .claims import review_claim
from .config import AdmissionConfig
from .context import Context
from .deviceclasses import review_device_class
from .metrics import AdmissionMetrics, metrics_for
from .mutate import mutate_pod
from .pods import review_pod
from .review import (
    AdmissionRequest,
    BadRequest,
    Expected,
    Verdict,
    decode_review,
    encode_error,
    encode_response,
    object_errors,
    operation_label,
    parse_request,
)

log = logging.getLogger("draxr.admission")

Hook = Callable[[AdmissionRequest, Context], Verdict]

RESOURCE_GROUP: Final = "resource.k8s.io"
#: resource.k8s.io versions that carry the KEP-5004 fields (a webhook may be sent any of them).
RESOURCE_VERSIONS: Final = frozenset({"v1", "v1beta1", "v1beta2"})
METHODS: Final = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
JSON: Final = "application/json"
MAX_ERROR_LENGTH: Final = 1000


@dataclass(frozen=True)
class Endpoint:
    path: str
    expected: Expected
    hook: Hook


ENDPOINTS: Final = (
    Endpoint(
        "/validate/deviceclasses",
        Expected(RESOURCE_GROUP, "deviceclasses", "DeviceClass", RESOURCE_VERSIONS),
        review_device_class,
    ),
    Endpoint(
        "/validate/pods",
        Expected("", "pods", "Pod", frozenset({"v1"}), frozenset({"", "status"})),
        review_pod,
    ),
    Endpoint(
        "/validate/resourceclaims",
        Expected(RESOURCE_GROUP, "resourceclaims", "ResourceClaim", RESOURCE_VERSIONS),
        review_claim,
    ),
    Endpoint("/mutate/pods", Expected("", "pods", "Pod", frozenset({"v1"})), mutate_pod),
)


@dataclass(frozen=True, slots=True)
class Answer:
    code: int
    body: bytes
    operation: str
    result: str


def _internal_error(exc: BaseException) -> bytes:
    return encode_error(clip(f"internal error: {type(exc).__name__}: {exc}", MAX_ERROR_LENGTH))


def answer(endpoint: Endpoint, ctx: Context, body: bytes) -> Answer:
    """The complete, synchronous handling of one request body: HTTP status, body and metric labels."""
    operation = "unknown"
    try:
        review = decode_review(body)
        operation = operation_label(review)
        req = parse_request(review, endpoint.expected)
        verdict = _verdict(endpoint, ctx, req)
    except BadRequest as e:
        return Answer(400, encode_error(str(e)), operation, "invalid_request")
    except WouldBlock:
        raise
    except Exception as e:  # a bug must cost one request, never the server
        log.exception("admission %s: internal error", endpoint.path)
        return Answer(400, _internal_error(e), operation, "error")
    result = "allowed" if verdict.allowed else "denied"
    return Answer(200, encode_response(req.uid, verdict), operation, result)


def answer_in_thread(endpoint: Endpoint, ctx: Context, body: bytes) -> Answer:
    """``answer`` where hooks may wait (run through the thread pool, never on the event loop)."""
    token = MAY_BLOCK.set(True)
    try:
        return answer(endpoint, ctx, body)
    finally:
        MAY_BLOCK.reset(token)


def _verdict(endpoint: Endpoint, ctx: Context, req: AdmissionRequest) -> Verdict:
    if req.obj is not None and req.operation in ("CREATE", "UPDATE"):
        errors = object_errors(req.obj, endpoint.expected.kind)
        if errors:
            kind, group = endpoint.expected.kind, endpoint.expected.group
            return Verdict.deny(invalid_status(kind, group, name(req.obj) or req.name, errors))
    return endpoint.hook(req, ctx)


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, refusing more than ``limit`` bytes without buffering them."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BadRequest(f"request body of {declared} bytes exceeds the limit of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BadRequest(f"request body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _hook_route(endpoint: Endpoint, ctx: Context, metrics: AdmissionMetrics) -> Route:
    limit = ctx.config.max_body_bytes

    async def handle(request: Request) -> Response:
        started = time.perf_counter()
        try:
            if request.method != "POST":
                message = f"method {request.method} not allowed; admission reviews are POSTed"
                result = Answer(405, encode_error(message), "unknown", "invalid_request")
            else:
                try:
                    body = await _read_body(request, limit)
                except BadRequest as e:
                    result = Answer(400, encode_error(str(e)), "unknown", "invalid_request")
                else:
                    try:
                        result = answer(endpoint, ctx, body)
                    except WouldBlock:
                        result = await run_in_threadpool(answer_in_thread, endpoint, ctx, body)
        except ClientDisconnect:
            result = Answer(400, encode_error("client disconnected"), "unknown", "invalid_request")
        except Exception as e:
            log.exception("admission %s: internal error", endpoint.path)
            result = Answer(400, _internal_error(e), "unknown", "error")
        metrics.observe(endpoint.path, result.operation, result.result, time.perf_counter() - started)
        return Response(result.body, status_code=result.code, media_type=JSON)

    return Route(endpoint.path, handle, methods=METHODS, name=endpoint.path)


def create_app(
    cache: ClusterCache,
    config: AdmissionConfig,
    registry: CollectorRegistry | None = None,
    extra_routes: Sequence[BaseRoute] = (),
    apiserver_gate: Callable[[], bool] | None = None,
) -> Starlette:
    """The four hooks (plus ``extra_routes``: the runtime adds health and metrics).
    ``apiserver_gate``: whether kube-apiserver keeps the KEP-5004 fields (default: it does)."""
    registry = registry if registry is not None else CollectorRegistry()
    metrics = metrics_for(registry)
    ctx = Context.build(cache, config, metrics.class_read)
    if apiserver_gate is not None:
        ctx = replace(ctx, apiserver_gate=apiserver_gate)
    routes: list[BaseRoute] = [_hook_route(ep, ctx, metrics) for ep in ENDPOINTS]
    routes += list(extra_routes)
    app = Starlette(routes=routes)
    app.state.admission = ctx
    return app
