"""``/healthz``, ``/readyz`` and ``/metrics``, shared by the webhook and the worker-only server; the
metrics every ``draxr serve`` exports whatever it runs (``draxr_build_info``, the process's own:
CPU, memory, file descriptors, Python's garbage collector; the size of its caches); and the guard
that keeps a webhook that is not ready from answering admission reviews.

Ready means: the informers of the ready kinds have synced and, for the webhook, the certificate it
presents is valid now. Until then ``/readyz`` answers 503 with the reasons (the Service sends it no
traffic) and, in ``draxr serve``, every hook answers HTTP 503 too: a caller that reaches the webhook
anyway (``clientConfig.url``, an endpoint not yet removed) gets its ``failurePolicy``, never a
verdict computed from a half-filled cache.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata

from prometheus_client import (
    CollectorRegistry,
    Gauge,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..kube.cache import ClusterCache

BUILD_INFO = "draxr_build_info"
CACHE_OBJECTS = "draxr_cache_objects"


def version() -> str:
    """draxr's version as installed (``unknown`` when run from sources that were never installed)."""
    try:
        return metadata.version("draxr")
    except metadata.PackageNotFoundError:
        return "unknown"


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
        out = not_synced(self.cache, self.kinds)
        if self.certificate is not None:
            problem = self.certificate()
            if problem:
                out.append(problem)
        return out

    def lines(self) -> list[str]:
        return [line for detail in self.details for line in detail()]


def not_synced(cache: ClusterCache, kinds: Sequence[str]) -> list[str]:
    """One line per kind whose cache has not synced: ``<Kind> cache not synced``, and why its last
    list failed when one did."""
    return [
        f"{kind} cache not synced: {error}" if error else f"{kind} cache not synced"
        for kind, error in cache.unsynced(kinds)
    ]


def health_routes(registry: CollectorRegistry, ready: Readiness) -> list[BaseRoute]:
    """``/readyz`` answers from ``ready`` (always live while serving)."""

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


class CacheCollector(Collector):
    """``draxr_cache_objects{kind}``: the objects each informer holds, at scrape time."""

    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(CACHE_OBJECTS, "Objects in draxr's informer caches", labels=["kind"])
        for kind, informer in sorted(self.cache.informers.items()):
            family.add_metric([kind], len(informer))
        yield family


def register_process_metrics(
    registry: CollectorRegistry, cache: ClusterCache, *, components: str, cel_engine: str
) -> None:
    """``draxr_build_info``, the process and Python collectors, and the caches' sizes.

    ``components``: what this process runs (``webhook``, ``worker`` or ``webhook+worker``).
    """
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    info = Gauge(
        BUILD_INFO,
        "Always 1; the labels say which draxr runs: version, Python, components, CEL engine",
        ["version", "python", "components", "cel_engine"],
        registry=registry,
    )
    info.labels(version(), platform.python_version(), components, cel_engine).set(1)
    registry.register(CacheCollector(cache))


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
