"""The Python API: an in-process Kubernetes API server for tests, ``make demo`` and benchmarks.

``with Emulator() as em:`` serves on ``em.url`` (127.0.0.1, ephemeral port) from a background
thread. Setup and assertions can use the store directly (``create``/``get``/``list``/``update``/
``patch``/``delete`` on plain dicts): writes take the same registry path as HTTP requests (with
admission when asked), reads return copies. ``wait_for`` blocks on store changes, not on sleeps.

It plays kube-apiserver alone: no kube-controller-manager runs beside it (no garbage collection, no
namespace cleanup, no claims from templates, no Deployments' pods). Tests that need those run on the
real control plane (``e2e/local.py``).
"""

from __future__ import annotations

import asyncio
import builtins
import random
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from webhook.core.api.objects import Obj

from .admission import AdmissionChain, ServiceMap, WebhookClient
from .auth import Authenticator, TokenSpec, UserInfo, authenticated
from .faults import FaultInjector, FaultRule, RequestRecord
from .features import FeatureGates
from .handler import ApiHandler
from .kubeconfig import api_client, write_kubeconfig
from .objmeta import jsoncopy
from .patching import ALIASES
from .registry import Registry, Request
from .resources import BUILTIN, ResourceIndex, ResourceType
from .selectors import combine, field_predicate, label_predicate
from .server import ServerThread
from .store import Store
from .strategy import NAMESPACE_NAME_LABEL

T = TypeVar("T")

#: The namespaces a fresh cluster has.
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
#: Who direct store writes act as (cluster-admin, like a test harness with admin credentials).
ADMIN = authenticated("system:admin", ("system:masters",))


class Emulator:
    """An in-process kube-apiserver stand-in; thread-safe; use as a context manager."""

    def __init__(
        self,
        *,
        tokens: Mapping[str, TokenSpec] | None = None,
        feature_gates: Mapping[str, bool] | None = None,
        services: Mapping[str, tuple[str, int]] | None = None,
        history_size: int = 2000,
        bookmark_interval: float = 5.0,
        watch_expired: str = "event",
        seed: int = 0,
        namespaces: Iterable[str] = DEFAULT_NAMESPACES,
        resources: Iterable[ResourceType] = BUILTIN,
        port: int = 0,
        release: str | None = None,
    ) -> None:
        if watch_expired not in ("event", "http"):
            raise ValueError(
                "watch_expired must be 'event' (ERROR event in a 200 stream) or 'http' (HTTP 410)"
            )
        self.index = ResourceIndex(resources)
        self.store = Store(history_size)
        self.gates = FeatureGates(feature_gates)
        self.services = ServiceMap(services)
        self.faults = FaultInjector(seed)
        self.authenticator = Authenticator(tokens)
        self.watch_expired = watch_expired
        self._bookmark_interval = bookmark_interval
        self._rng = random.Random(seed)
        self._webhooks = WebhookClient(self.services)
        admission = AdmissionChain(self._webhook_configs, self._namespace_labels, self._webhooks)
        self.registry = Registry(self.store, self.gates, admission, self._rng)
        self._handler: ApiHandler | None = None
        #: The release ``/version`` reports ("1.37"; None: discovery.VERSION's).
        self.release = release
        self._initial_namespaces = tuple(namespaces)
        self._server = ServerThread(self._build, self._shutdown, port=port)
        self.url = f"http://{self._server.host}:{self._server.port}"
        self._started = False

    # --- lifecycle ------------------------------------------------------------------------------

    def _build(self, loop: asyncio.AbstractEventLoop) -> ApiHandler:
        del loop  # the handler runs on it; nothing else does
        self._handler = ApiHandler(
            self.index,
            self.registry,
            self.authenticator,
            self.faults,
            address=lambda: f"{self._server.host}:{self._server.port}",
            bookmark_interval=self._bookmark_interval,
            watch_expired_as_http=lambda: self.watch_expired == "http",
            release=self.release,
        )
        return self._handler

    async def _shutdown(self) -> None:
        if self._handler is not None:
            self._handler.drop_watches(abort=True)
        await self._webhooks.close()

    def start(self) -> Emulator:
        if self._started:
            return self
        self._server.start()
        self._started = True
        for ns in self._initial_namespaces:
            self.create("namespaces", {"metadata": {"name": ns}})
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # --- clients --------------------------------------------------------------------------------

    def kubeconfig(self, path: str | Path, token: str | None = None, namespace: str = "default") -> Path:
        """Write a kubeconfig for kubectl and ``kubernetes.config.load_kube_config``."""
        return write_kubeconfig(path, self.url, token, namespace)

    def api_client(self, token: str | None = None) -> Any:
        """A ``kubernetes.client.ApiClient`` talking to this emulator (anonymous without a token)."""
        return api_client(self.url, token)

    def add_token(self, token: str, username: str, groups: Iterable[str] = ()) -> None:
        self.authenticator.add(token, (username, tuple(groups)))

    def set_service(self, namespace: str, name: str, address: str, port: int) -> None:
        """Where webhook service ``<name>.<namespace>.svc`` is dialled (TLS still checks that name)."""
        self.services.set(namespace, name, address, port)

    def set_feature_gate(self, name: str, enabled: bool) -> None:
        """Flip a gate of the running apiserver (``DRAExtendedResource``), as an upgrade or a
        restart with other ``--feature-gates`` would: requests from now on see the new value."""
        self.gates.set(name, enabled)

    # --- direct store access --------------------------------------------------------------------

    def _request(
        self,
        resource: str,
        name: str,
        namespace: str | None,
        *,
        subresource: str = "",
        admission: bool = False,
        dry_run: bool = False,
        user: UserInfo | None = None,
    ) -> Request:
        rt = self.index.resolve(resource)
        ns = (namespace or "default") if rt.namespaced else ""
        return Request(rt, ns, name, user or ADMIN, subresource, dry_run=dry_run, admission=admission)

    def _call(self, coro: Any) -> Any:
        if not self._started:
            coro.close()
            raise RuntimeError("the emulator is not started: use `with Emulator() as em:` or .start()")
        return jsoncopy(self._server.call(coro))

    def create(
        self,
        resource: str,
        obj: Obj,
        namespace: str | None = None,
        *,
        admission: bool = False,
        dry_run: bool = False,
        user: UserInfo | None = None,
    ) -> Obj:
        """Create ``obj`` (namespace from the argument, the object, or ``default``)."""
        body = jsoncopy(obj)
        ns = namespace or (body.get("metadata") or {}).get("namespace")
        req = self._request(resource, "", ns, admission=admission, dry_run=dry_run, user=user)
        return self._call(self.registry.create(req, body))  # type: ignore[no-any-return]

    def get(self, resource: str, name: str, namespace: str | None = None) -> Obj:
        """A copy of the stored object; ApiError 404 when it does not exist."""
        req = self._request(resource, name, namespace)
        return jsoncopy(self.registry.get(req))  # type: ignore[no-any-return]

    def find(self, resource: str, name: str, namespace: str | None = None) -> Obj | None:
        """Like :meth:`get` but None when missing."""
        req = self._request(resource, name, namespace)
        obj = self.store.get(req.rt.key, req.namespace, name)
        return None if obj is None else jsoncopy(obj)

    def list(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> builtins.list[Obj]:
        """Copies of the matching objects; ``namespace=None`` lists all namespaces."""
        rt = self.index.resolve(resource)
        pred = combine(label_predicate(label_selector), field_predicate(field_selector, rt.key))
        items, _ = self.store.select(rt.key, namespace if rt.namespaced else None)
        return [jsoncopy(o) for o in items if pred is None or pred(o)]

    def update(
        self,
        resource: str,
        obj: Obj,
        *,
        subresource: str = "",
        admission: bool = False,
        dry_run: bool = False,
        user: UserInfo | None = None,
    ) -> Obj:
        """PUT semantics: 409 when ``metadata.resourceVersion`` is stale, unconditional without one."""
        body = jsoncopy(obj)
        meta = body.get("metadata") or {}
        req = self._request(
            resource,
            str(meta.get("name", "")),
            meta.get("namespace"),
            subresource=subresource,
            admission=admission,
            dry_run=dry_run,
            user=user,
        )
        return self._call(self.registry.update(req, body))  # type: ignore[no-any-return]

    def update_status(self, resource: str, obj: Obj, **kwargs: Any) -> Obj:
        return self.update(resource, obj, subresource="status", **kwargs)

    def patch(
        self,
        resource: str,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        patch_type: str = "merge",
        subresource: str = "",
        admission: bool = False,
        dry_run: bool = False,
        user: UserInfo | None = None,
    ) -> Obj:
        """``patch_type``: merge, strategic, json, apply (or the full media type)."""
        media = ALIASES.get(patch_type, patch_type)
        req = self._request(
            resource,
            name,
            namespace,
            subresource=subresource,
            admission=admission,
            dry_run=dry_run,
            user=user,
        )
        return self._call(self.registry.patch(req, media, jsoncopy(patch)))  # type: ignore[no-any-return]

    def delete(
        self,
        resource: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: str | None = None,
        grace_period_seconds: int | None = None,
        preconditions: Mapping[str, str] | None = None,
        admission: bool = False,
        dry_run: bool = False,
        user: UserInfo | None = None,
    ) -> Obj:
        options: Obj = {}
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if preconditions:
            options["preconditions"] = dict(preconditions)
        req = self._request(resource, name, namespace, admission=admission, dry_run=dry_run, user=user)
        return self._call(self.registry.delete(req, options))  # type: ignore[no-any-return]

    def bind(self, name: str, node: str, namespace: str | None = None, *, admission: bool = False) -> Obj:
        """POST ``pods/binding`` for pod ``name``."""
        req = self._request("pods", name, namespace, subresource="binding", admission=admission)
        body = {"metadata": {"name": name}, "target": {"kind": "Node", "apiVersion": "v1", "name": node}}
        return self._call(self.registry.bind(req, body))  # type: ignore[no-any-return]

    # --- waiting --------------------------------------------------------------------------------

    def wait_for(self, predicate: Callable[[], T], timeout: float = 10.0, message: str = "") -> T:
        """Re-evaluate ``predicate`` after every store change until it returns a truthy value.

        The predicate runs without the store lock held, so it may call any read method.
        """
        deadline = time.monotonic() + timeout
        seen = self.store.version
        while True:
            result = predicate()
            if result:
                return result
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(message or f"condition not met within {timeout}s")
            seen = self.store.wait_changed(seen, remaining)

    # --- failure injection and the request log --------------------------------------------------

    def inject(self, **kwargs: Any) -> FaultRule:
        """Add a fault; see :meth:`FaultInjector.add` (verbs, resource, namespace, error, latency,
        probability, times, retry_after, message)."""
        return self.faults.add(**kwargs)

    def clear_faults(self) -> None:
        self.faults.clear()

    def drop_watches(self, abort: bool = True) -> int:
        """End every open watch: ``abort`` cuts the connections, otherwise they end like a timeout."""

        async def drop() -> int:
            return self._handler.drop_watches(abort) if self._handler is not None else 0

        return int(self._server.call(drop()))

    def open_watches(self) -> int:
        async def count() -> int:
            return len(self._handler.watches) if self._handler is not None else 0

        return int(self._server.call(count()))

    def compact(self) -> int:
        """Compact the watch history at the current resourceVersion (older watch starts get 410)."""
        return self.store.compact()

    @property
    def resource_version(self) -> int:
        return self.store.resource_version

    def requests(self) -> builtins.list[RequestRecord]:
        return self.faults.requests()

    def counts(self) -> dict[tuple[str, str], int]:
        return self.faults.counts()

    def writes(self, resource: str | None = None) -> int:
        return self.faults.writes(resource)

    def reset_requests(self) -> None:
        self.faults.reset_log()

    # --- admission helpers ----------------------------------------------------------------------

    def _webhook_configs(self, key: str) -> builtins.list[Obj]:
        return self.store.select(key, None)[0]

    def _namespace_labels(self, namespace: str) -> dict[str, Any]:
        ns = self.store.get("namespaces", "", namespace)
        if ns is None:
            return {NAMESPACE_NAME_LABEL: namespace}
        labels = ns["metadata"].get("labels")
        return dict(labels) if isinstance(labels, dict) else {NAMESPACE_NAME_LABEL: namespace}


__all__ = ["ADMIN", "DEFAULT_NAMESPACES", "Emulator"]
