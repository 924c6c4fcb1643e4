"""A complete draxr installation on the API emulator, for ``draxr demo`` and the e2e suite.

The emulator plays kube-apiserver; ``draxr serve`` (webhook and worker, or either) runs in this
process over real TLS with certificates made on the fly, and is registered through the webhook
configurations ``draxr manifests`` renders, with the Service resolved to the local port. Not for
production: it exists so that the whole system can be exercised with one command.
"""

from __future__ import annotations

import socket
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from webhook.identity.names import DEFAULT_NAMESPACE, WEBHOOK
from webhook.install.certs import ensure_certs, load_ca_bundle
from webhook.install.webhooks import webhook_configurations
from webhook.kube.client import KubeClient
from webhook.runtime.serve import Process, ServeOptions, default_writers

from . import Emulator

WORKER_USER = f"system:serviceaccount:{DEFAULT_NAMESPACE}:draxr-worker"
TOKENS = {
    "worker": (WORKER_USER, ["system:serviceaccounts"]),
    "admin": ("admin", ["system:masters"]),
    "dev": ("dev", ["developers"]),
}


class Sandbox:
    def __init__(
        self,
        *,
        leader_elect: bool = True,
        route: str = "default-only",
        class_read_timeout: float = 2.0,
        lease: tuple[float, float, float] = (15.0, 10.0, 2.0),
        feature_gates: Mapping[str, bool] | None = None,
        **options: Any,
    ) -> None:
        """``lease``: leader election's lease duration, renew deadline and retry period.
        ``feature_gates``: the emulated apiserver's (``DRAExtendedResource``). ``options``: more
        ``ServeOptions`` for every ``draxr serve`` (``mode``, ``template_grace``, ...)."""
        self.em = Emulator(tokens=TOKENS, feature_gates=feature_gates)
        self.options = options
        self._tmp = tempfile.TemporaryDirectory(prefix="draxr-sandbox-")
        self.dir = Path(self._tmp.name)
        self.certs = self.dir / "certs"
        self.leader_elect = leader_elect
        self.route = route
        self.class_read_timeout = class_read_timeout
        self.lease = lease
        self.processes: list[Process] = []
        self._sockets: list[socket.socket] = []
        self.port = 0

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> Sandbox:
        self.em.start()
        ensure_certs(self.certs, WEBHOOK, DEFAULT_NAMESPACE)
        self.em.create("namespaces", {"metadata": {"name": DEFAULT_NAMESPACE}})
        self.serve("draxr-0", webhook=True)
        self.em.set_service(DEFAULT_NAMESPACE, WEBHOOK, "127.0.0.1", self.port)
        for cfg in webhook_configurations(DEFAULT_NAMESPACE, load_ca_bundle(self.certs / "ca.crt")):
            plural = cfg["kind"].lower() + "s"
            self.admin.request(
                "create", f"/apis/admissionregistration.k8s.io/v1/{plural}", body=cfg, resource=plural
            )
        return self

    def serve(self, identity: str, *, webhook: bool = False, worker: bool = True) -> Process:
        """Another ``draxr serve`` (a second worker replica for failover, say)."""
        opts = ServeOptions(
            host="127.0.0.1",
            cert_dir=self.certs,
            webhook=webhook,
            worker=worker,
            kubeconfig=str(self.kubeconfig("worker")),
            leader_elect=self.leader_elect,
            identity=identity,
            allowed_writers=default_writers(),
            route=self.route,
            class_read_timeout=self.class_read_timeout,
            **self.options,
            lease_duration=self.lease[0],
            renew_deadline=self.lease[1],
            retry_period=self.lease[2],
        )
        proc = Process(opts)
        proc.start_background()
        sock = socket.socket(
            socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP
        )  # IPPROTO_TCP: asyncio sets TCP_NODELAY
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        self._sockets.append(sock)
        if webhook:
            self.port = sock.getsockname()[1]
        proc.serve_in_thread(sock)
        self.processes.append(proc)
        return proc

    def stop(self) -> None:
        for proc in self.processes:
            proc.stop()
        for sock in self._sockets:
            sock.close()
        self.em.stop()
        self._tmp.cleanup()

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- clients --------------------------------------------------------------------------------

    def kubeconfig(self, token: str) -> Path:
        return self.em.kubeconfig(self.dir / f"kubeconfig-{token}", token=token)

    def client(self, token: str) -> KubeClient:
        return KubeClient(self.em.api_client(token))

    @property
    def admin(self) -> KubeClient:
        return self.client("admin")

    @property
    def dev(self) -> KubeClient:
        return self.client("dev")

    @property
    def webhook(self) -> Process:
        return self.processes[0]

    def leader(self) -> str:
        lease: Any = self.em.find("leases", "draxr-worker", DEFAULT_NAMESPACE) or {}
        return str((lease.get("spec") or {}).get("holderIdentity") or "")
