"""An admission barrier: a validating webhook served by the test process that holds the requests it
matches until the test releases them, so a scenario can stop draxr's worker at an exact step.

    with AdmissionBarrier(target, "resourceclaims/status") as barrier:
        target.pod("doomed", ...)
        held = barrier.wait_held()   # the worker's claim status write is in flight, held here
        ...                          # act while the worker is mid-allocation
        barrier.release()            # the held writes go on (allowed)

It is registered for the target's namespace only (``namespaceSelector``), with
``failurePolicy: Fail`` and the longest timeout the API allows (30 s); it holds a request at most
``HOLD_LIMIT`` seconds, then allows it. Dry-run requests pass at once: a dry-run probe tells when the
API server has picked the configuration up. Only where the API server can call back into this process
(the emulator, the local control plane: ``Target.local``).
"""

from __future__ import annotations

import json
import ssl
import tempfile
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from webhook.core.api.objects import Obj
from webhook.install.certs import ensure_certs, load_ca_bundle
from webhook.kube.client import ApiError
from webhook.kube.resources import RESOURCE_CLAIMS, Resource

from .target import Target

#: The longest a request is held (kube-apiserver gives up on the webhook after 30 s).
HOLD_LIMIT = 25.0
VALIDATING = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    False,
)


class AdmissionBarrier:
    def __init__(self, target: Target, resource: str, operations: tuple[str, ...] = ("UPDATE",)) -> None:
        """``resource``: ``plural[/subresource]`` in ``resource.k8s.io`` or the core group."""
        if not target.local:
            raise ValueError(f"the API server of target {target.name} cannot call back into this process")
        self.target = target
        self.resource = resource
        self.operations = operations
        self.name = f"draxr-e2e-barrier-{uuid.uuid4().hex[:6]}"
        self._tmp = tempfile.TemporaryDirectory(prefix="draxr-barrier-")
        self._lock = threading.Lock()
        self._held: list[Obj] = []
        self._held_event = threading.Event()
        self._released = threading.Event()
        self._probed = threading.Event()
        self._server: ThreadingHTTPServer | None = None

    # -- the test's side --------------------------------------------------------------------------------

    def wait_held(self, timeout: float = 30.0) -> Obj:
        """The first held AdmissionReview request, once one arrives."""
        if not self._held_event.wait(timeout):
            raise TimeoutError(f"no {self.resource} request reached the barrier within {timeout}s")
        with self._lock:
            return self._held[0]

    def release(self) -> None:
        """Allow every held request, and every later one at once."""
        self._released.set()

    # -- lifecycle --------------------------------------------------------------------------------------

    def __enter__(self) -> AdmissionBarrier:
        try:
            self._start()
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop()

    def _start(self) -> None:
        certs = Path(self._tmp.name)
        ensure_certs(certs, "barrier", "e2e", extra_ips=["127.0.0.1"])
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(certs / "tls.crt"), str(certs / "tls.key"))
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._server.socket = ctx.wrap_socket(self._server.socket, server_side=True)
        threading.Thread(target=self._server.serve_forever, daemon=True, name=self.name).start()
        plural, _, sub = self.resource.partition("/")
        group = "resource.k8s.io" if plural.startswith("resource") or plural == "deviceclasses" else ""
        self.target.admin.create(
            VALIDATING,
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": self.name},
                "webhooks": [
                    {
                        "name": "barrier.e2e.draxr.io",
                        "clientConfig": {
                            "url": f"https://127.0.0.1:{self._server.server_address[1]}/hold",
                            "caBundle": load_ca_bundle(certs / "ca.crt"),
                        },
                        "rules": [
                            {
                                "operations": list(self.operations),
                                "apiGroups": [group],
                                "apiVersions": ["v1"],
                                "resources": [self.resource],
                                "scope": "Namespaced",
                            }
                        ],
                        "namespaceSelector": {
                            "matchLabels": {"kubernetes.io/metadata.name": self.target.namespace}
                        },
                        "failurePolicy": "Fail",
                        "sideEffects": "None",
                        "timeoutSeconds": 30,
                        "admissionReviewVersions": ["v1"],
                    }
                ],
            },
        )
        if plural == "resourceclaims":
            self._probe_claims(sub)

    def _probe_claims(self, sub: str) -> None:
        """Dry-run writes of a plain claim until the barrier sees one (the apiserver has the config)."""
        probe = self.target.create(
            "resourceclaims",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": f"{self.name}-probe"},
                "spec": {"devices": {"requests": []}},
            },
        )
        client = self.target.admin
        for _ in range(200):
            if "UPDATE" in self.operations:
                path = RESOURCE_CLAIMS.path(self.target.namespace, probe["metadata"]["name"], sub or None)
                client.request("update", path, query=[("dryRun", "All")], body=probe, resource=self.resource)
            else:
                body = {**probe, "metadata": {"name": f"{self.name}-dry"}}
                client.create(RESOURCE_CLAIMS, body, self.target.namespace, dry_run=True)
            if self._probed.wait(0.05):
                break
        else:
            raise TimeoutError(f"the API server never called the barrier {self.name}")
        client.delete(RESOURCE_CLAIMS, probe["metadata"]["name"], self.target.namespace)

    def _stop(self) -> None:
        self._released.set()
        try:
            self.target.admin.delete(VALIDATING, self.name)
        except ApiError as e:
            if not e.not_found:
                raise
        finally:
            if self._server is not None:
                self._server.shutdown()
                self._server.server_close()
            self._tmp.cleanup()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        barrier = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                review = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                request: Obj = review.get("request") or {}
                if request.get("dryRun"):
                    barrier._probed.set()
                else:
                    with barrier._lock:
                        barrier._held.append(request)
                    barrier._held_event.set()
                    barrier._released.wait(HOLD_LIMIT)
                answer = {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "response": {"uid": request.get("uid", ""), "allowed": True},
                }
                data = json.dumps(answer).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the API server gave up (its client went away): nothing to answer

        return Handler
