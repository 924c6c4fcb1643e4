"""``/healthz``, ``/readyz`` and ``/metrics``, shared by the webhook and the worker-only server, and
the guard that keeps a webhook that is not ready from answering admission reviews.

Ready means: the informers of the ready kinds have synced and, for the webhook, the certificate it
presents is valid now. Until then ``/readyz`` answers 503 with the reasons (the Service sends it no
traffic) and, in ``draxr serve``, every hook answers HTTP 503 too: a caller that reaches the webhook
anyway (``clientConfig.url``, an endpoint not yet removed) gets its ``failurePolicy``, never a
verdict computed from a half-filled cache.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..kube.cache import ClusterCache


@dataclass
class Readiness:
    """What ``/readyz`` and the hook guard ask."""

    cache: ClusterCache
    kinds: Sequence[str]
    #: Why the served certificate cannot be trusted now (None when it can); None: no certificate.
    certificate: Callable[[], str | None] | None = None
    #: Lines ``/readyz`` adds after its verdict (the mode, the certificate).
    details: list[Callable[[], list[str]]] = field(default_factory=list)

    def problems(self) -> list[str]:
        out: list[str] = []
        if not self.cache.synced(self.kinds):
            out.append(f"{', '.join(self.kinds)} cache not synced")
        if self.certificate is not None:
            problem = self.certificate()
            if problem:
                out.append(problem)
        return out

    def lines(self) -> list[str]:
        return [line for detail in self.details for line in detail()]


def health_routes(
    cache: ClusterCache,
    registry: CollectorRegistry,
    ready_kinds: Sequence[str],
    details: Callable[[], list[str]] | None = None,
    readiness: Readiness | None = None,
) -> list[BaseRoute]:
    """Ready once the informers of ``ready_kinds`` have synced (always live while serving).
    ``details``: lines ``/readyz`` adds after its verdict. ``readiness``: the full check (with the
    certificate), instead of ``ready_kinds`` and ``details``."""
    ready = readiness or Readiness(cache, ready_kinds, details=[details] if details is not None else [])

    async def healthz(_: Request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(_: Request) -> Response:
        problems = ready.problems()
        if not problems:
            return PlainTextResponse("\n".join(["ok", *ready.lines()]))
        return PlainTextResponse("\n".join([*problems, *ready.lines()]), status_code=503)

    async def metrics(_: Request) -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return [Route("/healthz", healthz), Route("/readyz", readyz), Route("/metrics", metrics)]


#: The admission endpoints' path prefixes (admission/app.py).
HOOK_PREFIXES = ("/mutate/", "/validate/")


class NotReadyGuard:
    """ASGI middleware: while ``readiness`` has problems, admission endpoints answer HTTP 503
    ``{"error": "draxr webhook not ready: ..."}`` without reading the review; everything else passes."""

    def __init__(self, app: ASGIApp, readiness: Readiness) -> None:
        self.app = app
        self.readiness = readiness

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and str(scope.get("path", "")).startswith(HOOK_PREFIXES):
            problems = self.readiness.problems()
            if problems:
                body = json.dumps({"error": f"draxr webhook not ready: {'; '.join(problems)}"}).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 503,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"retry-after", b"1"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
