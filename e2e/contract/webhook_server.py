"""A tiny admission webhook (Starlette + uvicorn over TLS, own CA) for the contract suite's admission
tests, which the emulator and a real kube-apiserver both call.

Each path has one fixed behaviour; every AdmissionReview received is logged per path.
``/probe/<kind>/<gen>`` is logged under ``/probe`` as ``{"kind", "gen"}``: the suite's way to see when a
real apiserver has picked up webhook configurations written before (``backend.Api.hooks_changed``).
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import ipaddress
import json
import socket
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

SERVICE_HOST = "hooks.webhook-test.svc"


@dataclass
class Tls:
    ca_pem: bytes
    cert_file: Path
    key_file: Path

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca_pem).decode()


def make_tls(directory: Path) -> Tls:
    """A CA and a server certificate for 127.0.0.1, localhost and the test service name."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "emulator-test-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, SERVICE_HOST)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.DNSName(SERVICE_HOST),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    cert_file, key_file = directory / "tls.crt", directory / "tls.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return Tls(ca.public_bytes(serialization.Encoding.PEM), cert_file, key_file)


def _patch(ops: list[dict[str, Any]]) -> str:
    return base64.b64encode(json.dumps(ops).encode()).decode()


def _label_ops(obj: dict[str, Any], key: str, value: str) -> list[dict[str, Any]]:
    labels = (obj.get("metadata") or {}).get("labels")
    if labels is None:
        return [{"op": "add", "path": "/metadata/labels", "value": {key: value}}]
    return [{"op": "add", "path": "/metadata/labels/" + key.replace("/", "~1"), "value": value}]


@dataclass
class WebhookServer:
    tls: Tls
    port: int
    reviews: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: Any = None
    thread: threading.Thread | None = None

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def log(self, path: str) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.reviews[path])

    def clear(self) -> None:
        with self.lock:
            self.reviews.clear()

    def stop(self) -> None:
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(10)


def _app(state: WebhookServer) -> Starlette:
    async def handle(request: Request) -> JSONResponse:
        path = request.url.path
        review = await request.json()
        req = review["request"]
        with state.lock:
            if path.startswith("/probe/"):
                state.reviews["/probe"].append(dict(request.path_params))
            else:
                state.reviews[path].append(req)
        response: dict[str, Any] = {"uid": req["uid"], "allowed": True}
        obj = req.get("object") or {}
        if path == "/mutate-label":
            response.update(patchType="JSONPatch", patch=_patch(_label_ops(obj, "mutated-by", "hook")))
        elif path == "/mutate-b":
            response.update(patchType="JSONPatch", patch=_patch(_label_ops(obj, "b", "set")))
        elif path == "/mutate-a":
            annotations = (obj.get("metadata") or {}).get("annotations")
            if annotations is None:
                ops = [{"op": "add", "path": "/metadata/annotations", "value": {"a": "seen"}}]
                response.update(patchType="JSONPatch", patch=_patch(ops))
        elif path == "/deny":
            response.update(
                allowed=False,
                status={
                    "code": 403,
                    "reason": "Forbidden",
                    "message": "no pods today",
                    "details": {"causes": [{"field": "spec", "message": "nope"}]},
                },
            )
        elif path == "/deny-plain":
            response.update(allowed=False, status={"message": "plain denial"})
        elif path == "/warn":
            response.update(warnings=["careful now", 'quoted "word"'])
        elif path == "/slow":
            await asyncio.sleep(3)
        elif path == "/bad-uid":
            response["uid"] = "not-the-uid"
        return JSONResponse(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
        )

    paths = [
        "/mutate-label",
        "/mutate-a",
        "/mutate-b",
        "/deny",
        "/deny-plain",
        "/warn",
        "/echo",
        "/slow",
        "/bad-uid",
        "/probe/{kind}/{gen}",
    ]
    return Starlette(routes=[Route(p, handle, methods=["POST"]) for p in paths])


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, ready: threading.Event) -> None:
        super().__init__(config)
        self._ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self._ready.set()


def start_webhook_server(directory: Path) -> WebhookServer:
    tls = make_tls(directory)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    state = WebhookServer(tls, sock.getsockname()[1])
    config = uvicorn.Config(
        _app(state),
        ssl_certfile=str(tls.cert_file),
        ssl_keyfile=str(tls.key_file),
        log_level="warning",
        lifespan="off",
    )
    ready = threading.Event()
    server = _Server(config, ready)
    state.server = server
    state.thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    state.thread.start()
    if not ready.wait(10):
        raise RuntimeError("webhook test server did not start")
    return state
