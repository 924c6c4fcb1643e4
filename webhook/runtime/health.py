"""``/healthz``, ``/readyz`` and ``/metrics``, shared by the webhook and the worker-only server."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from ..kube.cache import ClusterCache


def health_routes(
    cache: ClusterCache,
    registry: CollectorRegistry,
    ready_kinds: Sequence[str],
    details: Callable[[], list[str]] | None = None,
) -> list[BaseRoute]:
    """Ready once the informers of ``ready_kinds`` have synced (always live while serving).
    ``details``: lines ``/readyz`` adds after its verdict."""

    async def healthz(_: Request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(_: Request) -> Response:
        lines = details() if details is not None else []
        if cache.synced(ready_kinds):
            return PlainTextResponse("\n".join(["ok", *lines]))
        text = "\n".join([f"{', '.join(ready_kinds)} cache not synced", *lines])
        return PlainTextResponse(text, status_code=503)

    async def metrics(_: Request) -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return [Route("/healthz", healthz), Route("/readyz", readyz), Route("/metrics", metrics)]
