"""Calls admission webhooks over HTTPS the way kube-apiserver does.

``clientConfig.url`` is dialled as written; ``clientConfig.service`` is dialled at the address the
emulator's service map gives for ``<name>.<namespace>.svc`` while TLS still verifies that DNS name
against ``caBundle``. One aiohttp session (keep-alive pool) per event loop; SSL contexts are cached
per CA bundle.
"""

from __future__ import annotations

import base64
import ssl
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from .. import codec

DEFAULT_TIMEOUT_SECONDS = 10


class CallError(Exception):
    """The webhook could not be called or answered badly: failurePolicy decides what happens."""


class ServiceMap:
    """``<name>.<namespace>.svc`` -> (address, port) on loopback, editable while serving."""

    def __init__(self, entries: Mapping[str, tuple[str, int]] | None = None) -> None:
        self._lock = threading.Lock()
        self._entries = dict(entries or {})

    def set(self, namespace: str, name: str, address: str, port: int) -> None:
        with self._lock:
            self._entries = {**self._entries, f"{name}.{namespace}.svc": (address, port)}

    def resolve(self, host: str) -> tuple[str, int] | None:
        with self._lock:
            return self._entries.get(host)


class WebhookClient:
    def __init__(self, services: ServiceMap) -> None:
        self._services = services
        self._session: aiohttp.ClientSession | None = None
        self._contexts: dict[str, ssl.SSLContext] = {}

    def _ssl_context(self, ca_bundle: Any) -> ssl.SSLContext:
        key = ca_bundle if isinstance(ca_bundle, str) else ""
        ctx = self._contexts.get(key)
        if ctx is None:
            if key:
                try:
                    pem = base64.b64decode(key, validate=True).decode("ascii")
                    ctx = ssl.create_default_context(cadata=pem)
                except (ValueError, ssl.SSLError) as exc:
                    raise CallError(f"invalid caBundle: {exc}") from None
            else:
                ctx = ssl.create_default_context()
            self._contexts[key] = ctx
        return ctx

    def target(self, client_config: Any) -> tuple[str, str | None, str]:
        """(URL to dial, TLS server name override, URL as the apiserver names it in errors)."""
        if not isinstance(client_config, dict):
            raise CallError("clientConfig is missing")
        url = client_config.get("url")
        if isinstance(url, str) and url:
            return url, None, url
        svc = client_config.get("service")
        if not isinstance(svc, dict) or not svc.get("name") or not svc.get("namespace"):
            raise CallError("clientConfig must set url or service")
        host = f"{svc['name']}.{svc['namespace']}.svc"
        port = int(svc.get("port") or 443)
        path = svc.get("path") or "/"
        shown = f"https://{host}:{port}{path}"
        resolved = self._services.resolve(host)
        if resolved is None:
            raise CallError(
                f'failed to call webhook: Post "{shown}": service {host} is not mapped to an address'
            )
        address, mapped_port = resolved
        return f"https://{address}:{mapped_port}{path}", host, shown

    async def call(self, webhook: Mapping[str, Any], review: dict[str, Any]) -> dict[str, Any]:
        """POST the AdmissionReview and return the decoded response review; CallError on any failure."""
        url, server_name, shown = self.target(webhook.get("clientConfig"))
        timeout = webhook.get("timeoutSeconds") or DEFAULT_TIMEOUT_SECONDS
        shown += f"?timeout={timeout}s"  # as the apiserver dials it, and names it in errors
        scheme = urlsplit(url).scheme
        if scheme != "https":
            raise CallError(f'failed to call webhook: Post "{shown}": webhook URL scheme must be https')
        ctx = self._ssl_context((webhook.get("clientConfig") or {}).get("caBundle"))
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64))
        body = codec.encode(review)
        try:
            async with self._session.post(
                url,
                data=body,
                headers={"Content-Type": "application/json", "Accept": "application/json"},
                ssl=ctx,
                server_hostname=server_name,
                timeout=aiohttp.ClientTimeout(total=float(timeout)),
            ) as resp:
                raw = await resp.read()
                status = resp.status
        except TimeoutError:
            raise CallError(f'failed to call webhook: Post "{shown}": context deadline exceeded') from None
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            raise CallError(f'failed to call webhook: Post "{shown}": {_go_error(exc, url)}') from None
        if status != 200:
            raise CallError(
                f"failed to call webhook: the server responded with the status code {status} "
                "but did not return more information"
            )
        try:
            decoded = codec.decode(raw)
        except (ValueError, RecursionError) as exc:
            raise CallError(f"received invalid webhook response: {exc}") from None
        if not isinstance(decoded, dict):
            raise CallError("received invalid webhook response: not an AdmissionReview")
        return decoded

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _go_error(exc: BaseException, url: str) -> str:
    """The words of Go's net/http for the failures tests provoke: an unknown CA, a refused dial."""
    if isinstance(exc, aiohttp.ClientConnectorCertificateError | ssl.SSLCertVerificationError):
        return "tls: failed to verify certificate: x509: certificate signed by unknown authority"
    if isinstance(exc, aiohttp.ClientConnectorError) and isinstance(exc.os_error, ConnectionRefusedError):
        return f"dial tcp {urlsplit(url).netloc}: connect: connection refused"
    return str(exc)
