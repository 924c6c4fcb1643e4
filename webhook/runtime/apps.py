"""The two HTTP applications ``draxr serve`` runs: the webhook (hooks, health, metrics; TLS) and,
for a worker-only process, health and metrics alone (plain HTTP)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from prometheus_client import CollectorRegistry
from starlette.applications import Starlette

from ..admission import AdmissionConfig, create_app
from ..kube.cache import ClusterCache
from .health import NotReadyGuard, Readiness, health_routes

#: The webhook is ready once it can resolve extended resource names.
WEBHOOK_READY_KINDS = ("DeviceClass",)


def webhook_app(
    cache: ClusterCache,
    config: AdmissionConfig,
    registry: CollectorRegistry | None = None,
    apiserver_gate: Callable[[], bool] | None = None,
    readiness: Readiness | None = None,
    apiserver_version: Callable[[], str] | None = None,
) -> Starlette:
    """``readiness``: ``draxr serve``'s full check (caches, certificate, the lines ``/readyz`` adds);
    with it, the hooks answer 503 until it passes. Without it ``/readyz`` reports the caches and the
    hooks always answer (tests, the demo's snapshot)."""
    registry = registry if registry is not None else CollectorRegistry()
    health = health_routes(registry, readiness or Readiness(cache, WEBHOOK_READY_KINDS))
    app = create_app(cache, config, registry, health, apiserver_gate, apiserver_version)
    if readiness is not None:
        app.add_middleware(NotReadyGuard, readiness=readiness)
    return app


def health_app(cache: ClusterCache, registry: CollectorRegistry, kinds: Sequence[str]) -> Starlette:
    return Starlette(routes=health_routes(registry, Readiness(cache, kinds)))
