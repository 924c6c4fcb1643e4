"""A real uvicorn server over TLS on loopback and an HTTPS client that verifies the webhook's CA.

One server runs per test session; each test installs its own application (cluster cache, config,
metrics registry) behind it, so tests stay independent without paying a server start each.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.types import Receive, Scope, Send

from webhook.admission import AdmissionConfig
from webhook.core.api.objects import Obj
from webhook.identity.pki import CA_CERT
from webhook.install.certs import ensure_certs
from webhook.kube.cache import ClusterCache
from webhook.runtime.apps import webhook_app
from webhook.runtime.tls import ReloadingTLS, uvicorn_server

SERVICE, NAMESPACE = "draxr-webhook", "draxr-system"
TIMEOUT = 10.0


class AppSwitch:
    """An ASGI application that forwards to whichever app the current test installed."""

    def __init__(self) -> None:
        self.app: Starlette | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.app is not None, "no application installed"
        await self.app(scope, receive, send)


@dataclass
class Server:
    port: int
    cert_dir: Path
    tls: ReloadingTLS
    switch: AppSwitch
    thread: threading.Thread

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.cert_dir / CA_CERT)  # chain and hostname

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, verify=self.client_context(), timeout=TIMEOUT)


@contextlib.contextmanager
def serving(app: Any, cert_dir: Path) -> Iterator[Server]:
    """uvicorn on a pre-bound socket: clients may connect at once, the backlog holds them."""
    tls = ReloadingTLS(cert_dir)
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and a
    # socket made with proto 0 would add a 40 ms delayed-ACK stall to every response.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port: int = sock.getsockname()[1]
    server = uvicorn_server(
        app,
        tls,
        host="127.0.0.1",
        port=port,
        log_config=None,
        access_log=False,
        lifespan="off",
        timeout_keep_alive=60,
        timeout_graceful_shutdown=5,
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    switch = app if isinstance(app, AppSwitch) else AppSwitch()
    try:
        yield Server(port, cert_dir, tls, switch, thread)
    finally:
        server.should_exit = True
        thread.join(TIMEOUT)
        sock.close()
        assert not thread.is_alive(), "uvicorn did not shut down"


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    cert_dir = tmp_path_factory.mktemp("admission-certs")
    ensure_certs(cert_dir, SERVICE, NAMESPACE)
    with serving(AppSwitch(), cert_dir) as srv:
        yield srv


@dataclass
class Webhook:
    """The webhook under test: install an app on the shared server, then talk HTTPS to it."""

    server: Server
    client: httpx.Client
    cache: ClusterCache = field(default_factory=ClusterCache)
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def install(
        self,
        objects: Iterable[Obj] = (),
        *,
        config: AdmissionConfig | None = None,
        cache: ClusterCache | None = None,
        apiserver_gate: bool = True,
        apiserver_version: str = "",
    ) -> ClusterCache:
        """``apiserver_gate``: whether the apiserver keeps the KEP-5004 fields (rewrite when not);
        ``apiserver_version``: its ``/version`` (empty: unknown, the newest release's rules)."""
        self.cache = cache if cache is not None else ClusterCache.from_objects(list(objects))
        self.registry = CollectorRegistry()
        gate = (lambda: True) if apiserver_gate else (lambda: False)
        self.server.switch.app = webhook_app(
            self.cache,
            config or AdmissionConfig(),
            self.registry,
            gate,
            apiserver_version=lambda: apiserver_version,
        )
        return self.cache

    def post(self, path: str, body: Any) -> httpx.Response:
        if isinstance(body, bytes):
            return self.client.post(path, content=body, headers={"content-type": "application/json"})
        return self.client.post(path, json=body)

    def respond(self, path: str, review: Obj) -> Obj:
        """POST a review; assert a well-formed answer for the same uid; return ``response``."""
        resp = self.post(path, review)
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert body["apiVersion"] == "admission.k8s.io/v1"
        assert body["kind"] == "AdmissionReview"
        response: Obj = body["response"]
        assert response["uid"] == review["request"]["uid"]
        return response

    def error(self, path: str, body: Any, code: int = 400) -> str:
        resp = self.post(path, body)
        assert resp.status_code == code, resp.text
        message: str = resp.json()["error"]
        return message


@pytest.fixture
def webhook(server: Server) -> Iterator[Webhook]:
    with server.client() as client:
        hook = Webhook(server, client)
        hook.install()
        yield hook
