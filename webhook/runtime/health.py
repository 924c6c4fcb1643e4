"""``/healthz``, ``/readyz`` and ``/metrics``, shared by the webhook and the worker-only server, and the
metrics every ``draxr serve`` exports whatever it runs: ``draxr_build_info``, the process's own
(CPU, memory, file descriptors, Python's garbage collector) and the size of its caches."""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterator, Sequence
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

from ..kube.cache import ClusterCache

BUILD_INFO = "draxr_build_info"
CACHE_OBJECTS = "draxr_cache_objects"


def version() -> str:
    """draxr's version as installed (``unknown`` when run from sources that were never installed)."""
    try:
        return metadata.version("draxr")
    except metadata.PackageNotFoundError:
        return "unknown"


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
