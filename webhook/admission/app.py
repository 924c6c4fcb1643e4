"""The admission webhook as a Starlette application (served over TLS by ``draxr serve``).

Every hook endpoint reads the body with a size limit (the apiserver's own, 3 MiB), decodes and
checks the AdmissionReview and runs its hook. A small body (``inline_review_bytes``, 64 KiB: real
reviews are 5-20 KB) is answered on the event loop: hooks are pure and fast (microseconds to a
millisecond; a thread hop would cost more than the work and cut throughput by a third). A larger
one can take a hundred milliseconds of CPU and more (a 2.6 MB pod); it is answered on one of a few
review threads (``ReviewThreads``), so the loop goes on serving small reviews and health probes,
and at most ``max_large_reviews`` are in flight: more are refused at once with HTTP 429, before
their body is read. The one answer that may have to wait, a pod mapping naming a claim the
informer has not delivered yet, is computed again in a worker thread, so the loop never blocks on
it. Nothing a client sends
can produce a 5xx: unusable requests get HTTP 400 with ``{"error": ...}``, and an unexpected failure
inside a hook is logged with its traceback and answered the same way, so the apiserver applies the
hook's ``failurePolicy`` and the next request is served as if nothing happened.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Final

from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..core.api.fielderrors import invalid_status
from ..core.api.messages import clip
from ..core.api.objects import name
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


class ReviewThreads:
    """A few threads for large reviews, and the count of large reviews in flight.

    ``enter``/``leave`` run on the event loop only, so the count needs no lock. The pool starts
    its threads on first use and is shut down when the application is collected.
    """

    def __init__(self, threads: int, max_in_flight: int) -> None:
        self.threads = max(0, threads)  # 0: large reviews are answered on the loop too
        self.max_in_flight = max(1, max_in_flight)
        self.in_flight = 0
        self._pool: ThreadPoolExecutor | None = None

    def enter(self) -> bool:
        if self.in_flight >= self.max_in_flight:
            return False
        self.in_flight += 1
        return True

    def leave(self) -> None:
        self.in_flight -= 1

    async def answer(self, endpoint: Endpoint, ctx: Context, body: bytes) -> Answer:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="draxr-review")
        run = contextvars.copy_context().run
        return await asyncio.get_running_loop().run_in_executor(
            self._pool, run, answer_in_thread, endpoint, ctx, body
        )

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


class _TooMany(Exception):
    """More large reviews are in flight than allowed."""


class _Body:
    """A request body read with a size limit; past ``inline`` bytes it holds a large-review slot."""

    def __init__(self, request: Request, limit: int, inline: int, threads: ReviewThreads) -> None:
        self._request = request
        self._limit = limit
        self._inline = inline
        self._threads = threads
        self.large = False

    def _go_large(self) -> None:
        if not self.large:
            if not self._threads.enter():
                raise _TooMany
            self.large = True

    def give_back_slot(self) -> None:
        """Give back the large-review slot the body holds, if any (after its answer)."""
        if self.large:
            self._threads.leave()
            self.large = False

    async def read(self) -> bytes:
        """The body, refusing more than ``limit`` bytes without buffering them."""
        declared = self._request.headers.get("content-length")
        limit = self._limit
        if declared is not None and declared.isdigit():
            if int(declared) > limit:
                raise BadRequest(f"request body of {declared} bytes exceeds the limit of {limit} bytes")
            if int(declared) > self._inline:
                self._go_large()  # before a byte of it is read
        chunks: list[bytes] = []
        size = 0
        stream: AsyncIterator[bytes] = self._request.stream()
        async for chunk in stream:
            size += len(chunk)
            if size > limit:
                raise BadRequest(f"request body exceeds the limit of {limit} bytes")
            if size > self._inline:
                self._go_large()
            chunks.append(chunk)
        return b"".join(chunks)


def _too_many(threads: ReviewThreads) -> Answer:
    message = (
        f"too many large admission reviews in flight (at most {threads.max_in_flight}); "
        "the request was not read"
    )
    return Answer(429, encode_error(message), "unknown", "too_many_requests")


def _hook_route(endpoint: Endpoint, ctx: Context, metrics: AdmissionMetrics, threads: ReviewThreads) -> Route:
    config = ctx.config

    async def handle(request: Request) -> Response:
        started = time.perf_counter()
        body = _Body(request, config.max_body_bytes, config.inline_review_bytes, threads)
        try:
            if request.method != "POST":
                message = f"method {request.method} not allowed; admission reviews are POSTed"
                result = Answer(405, encode_error(message), "unknown", "invalid_request")
            else:
                try:
                    data = await body.read()
                except BadRequest as e:
                    result = Answer(400, encode_error(str(e)), "unknown", "invalid_request")
                except _TooMany:
                    result = _too_many(threads)
                else:
                    if body.large and threads.threads:
                        result = await threads.answer(endpoint, ctx, data)
                    else:
                        try:
                            result = answer(endpoint, ctx, data)
                        except WouldBlock:
                            result = await run_in_threadpool(answer_in_thread, endpoint, ctx, data)
        except ClientDisconnect:
            result = Answer(400, encode_error("client disconnected"), "unknown", "invalid_request")
        except Exception as e:
            log.exception("admission %s: internal error", endpoint.path)
            result = Answer(400, _internal_error(e), "unknown", "error")
        finally:
            body.give_back_slot()
        metrics.observe(endpoint.path, result.operation, result.result, time.perf_counter() - started)
        return Response(result.body, status_code=result.code, media_type=JSON)

    return Route(endpoint.path, handle, methods=METHODS, name=endpoint.path)


def create_app(
    cache: ClusterCache,
    config: AdmissionConfig,
    registry: CollectorRegistry | None = None,
    extra_routes: Sequence[BaseRoute] = (),
    apiserver_gate: Callable[[], bool] | None = None,
    apiserver_version: Callable[[], str] | None = None,
) -> Starlette:
    """The four hooks (plus ``extra_routes``: the runtime adds health and metrics).
    ``apiserver_gate``: whether kube-apiserver keeps the KEP-5004 fields (default: it does);
    ``apiserver_version``: its ``gitVersion``, whose release's quota rules apply (default: unknown,
    the newest release's)."""
    registry = registry if registry is not None else CollectorRegistry()
    metrics = metrics_for(registry)
    ctx = Context.build(cache, config, metrics.class_read, claim_reads=metrics.claim_read)
    if apiserver_gate is not None:
        ctx = replace(ctx, apiserver_gate=apiserver_gate)
    if apiserver_version is not None:
        ctx = replace(ctx, apiserver_version=apiserver_version)
    threads = ReviewThreads(config.review_threads, config.max_large_reviews)
    routes: list[BaseRoute] = [_hook_route(ep, ctx, metrics, threads) for ep in ENDPOINTS]
    routes += list(extra_routes)
    app = Starlette(routes=routes)
    app.state.admission = ctx
    app.state.review_threads = threads
    weakref.finalize(app, threads.shutdown)
    return app
