"""``draxr serve``: the admission webhook and the allocation worker in one process.

``--no-worker`` runs only the webhook (its Deployment needs only read access); ``--no-webhook``
runs only the worker, with ``/healthz``, ``/readyz`` and ``/metrics`` served over plain HTTP.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import uvicorn
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette

from ..core.api.objects import Obj
from ..core.cel import SelectorEngine
from ..core.cluster.deviceclasses import explicit_name
from ..core.cluster.gates import binding_conditions_gate, parse_version
from ..core.cluster.state import ClusterState
from ..kube.cache import ALL_KINDS, WEBHOOK_KINDS, ClusterCache
from . import collector, logs
from .health import register_process_metrics, version
from .options import ServeOptions, default_writers
from .timeouts import deadline_protocol
from .tls import CertificateExpiry, CertWatcher, ReloadingTLS

if TYPE_CHECKING:  # imported where they are built: a webhook-only process loads no worker
    from ..kube.client import KubeClient
    from ..kube.gates import ApiserverGate
    from ..kube.leader import LeaderElector
    from ..worker.metrics import WorkerMetrics
    from ..worker.worker import Worker
    from .mode import ModeReporter
    from .rotation import CertRotator

log = logging.getLogger("draxr.serve")

#: Seconds between two looks at the caches while the worker waits for them to sync, and between
#: two log lines saying what it waits for.
SYNC_POLL = 0.2
SYNC_LOG_INTERVAL = 30.0

#: ``ServeOptions`` and ``default_writers`` are named here too: ``runtime.serve`` is where callers
#: have always found them.
__all__ = ["Process", "ServeOptions", "default_writers", "run"]


class Process:
    """Everything one ``draxr serve`` runs, startable and stoppable (tests and the demo use it).

    Built in steps, each its own method: the connection and caches, the apiserver gate, the worker
    side (worker, certificate rotation, Lease), the mode the webhook reports, the metrics. The TLS
    server comes later, with ``build_server``."""

    def __init__(self, opts: ServeOptions) -> None:
        if opts.snapshot and opts.worker:
            raise ValueError(
                "--snapshot serves a fixed set of objects; the worker needs a cluster (add --no-worker)"
            )
        self.opts = opts
        self.registry = CollectorRegistry()
        self.expiry = CertificateExpiry()
        self.registry.register(self.expiry)
        self.metrics = self._worker_metrics()
        self.client = self._client()
        self.cache = self._cache()
        self.address: tuple[str, int] = (opts.server.host, opts.server.port)
        self.server: uvicorn.Server | None = None
        self.tls: ReloadingTLS | None = None
        self._watcher: CertWatcher | None = None
        self._thread: threading.Thread | None = None
        self._announced = threading.Event()
        self._stopping = threading.Event()
        #: Set once the worker (and its Lease campaign) started: after every cache synced.
        self.worker_started = threading.Event()
        self._worker_gone = threading.Event()  # stopped or killed: it must not start any more
        self._worker_lock = threading.Lock()
        identity = opts.identity or f"{socket.gethostname()}_{os.getpid()}"
        self.mode: ModeReporter | None = None
        self.gate = self._gate(identity)
        self.leader: LeaderElector | None = None
        self.rotator: CertRotator | None = None
        #: What follows the Lease (or, without leader election, is told once it leads).
        self.on_leadership: Callable[[bool], None] | None = None
        self.worker = self._worker(identity) if opts.worker else None
        self.mode = self._mode() if opts.webhook else None
        register_process_metrics(
            self.registry,
            self.cache,
            components=self.components(),
            cel_engine=self.cache.state.cel.engine,
        )

    # -- the steps of construction --------------------------------------------------------------

    def _worker_metrics(self) -> WorkerMetrics | None:
        """The worker's metrics (also the API client's hook), registered first."""
        if not self.opts.worker:
            return None
        from ..worker.metrics import WorkerMetrics

        return WorkerMetrics(self.registry)

    def _client(self) -> KubeClient | None:
        """The API client of ``--kubeconfig`` (in-cluster without one); None for ``--snapshot``."""
        if self.opts.snapshot:
            return None
        from ..kube.client import KubeClient

        hook = self.metrics.api_hook if self.metrics is not None else None
        connection = self.opts.client
        return KubeClient.from_config(
            connection.kubeconfig, qps=connection.qps, burst=connection.burst, hook=hook
        )

    def _cache(self) -> ClusterCache:
        """The caches: fed by informers, or filled once from ``--snapshot``'s files."""
        if not self.opts.snapshot:
            return ClusterCache(self._state())
        from ..loader import expand_workloads, load_paths

        objects = expand_workloads([item.obj for item in load_paths(self.opts.snapshot)])
        return ClusterCache.from_objects(objects, self._state())

    def _gate(self, identity: str) -> ApiserverGate:
        """The apiserver's gate. The worker's leader probes it and publishes the answer; every other
        replica reads it (kube/sharedgate.py), so all report the same mode."""
        from ..identity.names import GATE_CONFIGMAP
        from ..kube.gates import ApiserverGate
        from ..kube.sharedgate import SharedGateRecord

        opts = self.opts
        return ApiserverGate(
            self.client,
            opts.gate.setting,
            interval=opts.gate.interval,
            on_change=self._gate_changed,
            shared=SharedGateRecord(self.client, opts.namespace, GATE_CONFIGMAP)
            if self.client is not None
            else None,
            publishes=self._publishes_gate,
            identity=identity,
            reads=opts.webhook,
        )

    def _worker(self, identity: str) -> Worker:
        """The worker, the certificate rotation its leader runs, and its Lease campaign."""
        from ..worker.metrics import CallbackCollector
        from ..worker.worker import Worker

        client, metrics = self.client, self.metrics
        # The worker needs a cluster (``--snapshot`` with it is refused above).
        assert client is not None
        assert metrics is not None
        worker = Worker(client, self.cache, replace(self.opts.scheduling, identity=identity), metrics)
        leadership: Callable[[bool], None] = worker.on_leadership
        if self.opts.tls.rotate:
            leadership = self._rotation(client, leadership)
        self.on_leadership = self._waking_the_gate(leadership)
        self.leader = self._elector(client, identity, self.on_leadership)
        worker.leader = self.leader
        self.registry.register(CallbackCollector(worker.queue.depth, self._device_gauges))
        return worker

    def _elector(
        self, client: KubeClient, identity: str, on_change: Callable[[bool], None]
    ) -> LeaderElector | None:
        """The Lease campaign; None without leader election (the only worker leads)."""
        election = self.opts.leader_election
        if not election.leader_elect:
            return None
        from ..kube.leader import LeaderElector

        # A client of its own (kube-scheduler's makeLeaderElectionConfig): a renewal never waits
        # behind the worker's writes, neither for a token nor for a connection. Renewals go one at a
        # time: one connection.
        return LeaderElector(
            client.with_own_connections(1),
            self.opts.namespace,
            self.opts.lease_name,
            identity,
            lease_duration=election.lease_duration,
            renew_deadline=election.renew_deadline,
            retry_period=election.retry_period,
            on_change=on_change,
        )

    def _mode(self) -> ModeReporter:
        """The mode the webhook reports (native or rewrite), refreshed when a kubelet's gate moves."""
        from .mode import ModeReporter

        opts = self.opts
        mode = ModeReporter(
            self.cache,
            self.gate,
            opts.admission.mode,
            self.registry,
            client=self.client,
            namespace=opts.namespace,
            deployment=opts.deployment,
        )

        def on_cluster_event(kind: str, _etype: str, _obj: Obj) -> None:
            if kind == "Node":  # the kubelets' gates are part of the mode
                mode.refresh()

        self.cache.subscribe(on_cluster_event)
        return mode

    def _waking_the_gate(self, leadership: Callable[[bool], None]) -> Callable[[bool], None]:
        """``leadership``, then, on leading, the gate refreshed at once: it publishes its answer."""

        def leading(now: bool) -> None:
            leadership(now)
            if now and self.gate is not None:
                self.gate.wake()

        return leading

    def _publishes_gate(self) -> bool:
        """This replica writes the cluster's gate answer: the worker's leader (or its only worker)."""
        return self.worker is not None and (self.leader is None or self.leader.is_leader())

    def components(self) -> str:
        """``webhook``, ``worker`` or ``webhook+worker``."""
        return "+".join(c for c, on in (("webhook", self.opts.webhook), ("worker", self.opts.worker)) if on)

    # -- the line at start ----------------------------------------------------------------------

    def startup_fields(self) -> dict[str, Any]:
        """What the start line says: version, mode, the names mapped to DeviceClasses, addresses."""
        host, port = self.address
        where = f"{host}:{port}"
        with self.cache.lock:
            resolver = self.cache.state.classes
            classes = resolver.classes()
            names = sorted({n for dc in classes if (n := explicit_name(dc)) is not None})
            mapped = {n: resolver.class_name(n) for n in names}
        worker = (
            (f"https://{where}" if self.opts.webhook else f"http://{where}") if self.opts.worker else "off"
        )
        fields: dict[str, Any] = {
            "version": version(),
            "mode": self.mode.current() if self.mode is not None else self.opts.admission.mode,
            "classes": len(classes),
            "mapped": mapped,
            "webhook": f"https://{where}" if self.opts.webhook else "off",
            "worker": worker,
            "synced": self.cache.synced(self.kinds()),
        }
        if self.opts.worker:
            fields["leader_election"] = (
                f"{self.opts.namespace}/{self.opts.lease_name}"
                if self.opts.leader_election.leader_elect
                else "off"
            )
        return fields

    def announce(self) -> None:
        """Log the start line once (``draxr started``)."""
        if self._announced.is_set():
            return
        self._announced.set()
        log.info("draxr started", extra=self.startup_fields())

    def announce_when_synced(self, timeout: float = 30.0) -> threading.Thread:
        """The start line, from a thread, once the caches have synced (or after ``timeout``
        seconds, saying ``synced=false``): the classes it names are then the cluster's."""

        def wait_then_announce() -> None:
            self.cache.wait_synced(self.kinds(), timeout)
            if not self._stopping.is_set():
                self.announce()

        thread = threading.Thread(target=wait_then_announce, name="announce", daemon=True)
        thread.start()
        return thread

    def _rotation(
        self, client: KubeClient, worker_leadership: Callable[[bool], None]
    ) -> Callable[[bool], None]:
        """The certificate rotator; the leadership callback that tells the worker and it."""
        from .rotation import CertRotator, RotationConfig

        tls = self.opts.tls
        config = RotationConfig(
            self.opts.namespace,
            validity=tls.validity,
            renew_before=tls.renew_before,
            ca_validity=tls.ca_validity,
        )

        def is_leader() -> bool:
            return self.leader is None or self.leader.is_leader()

        def write_window() -> float:
            return math.inf if self.leader is None else self.leader.write_window()

        rotator = CertRotator(client.fenced(is_leader, write_window), config, is_leader=is_leader)
        self.rotator = rotator
        self.expiry.track("ca", lambda: rotator.ca)

        def both(leading: bool) -> None:
            worker_leadership(leading)
            rotator.on_leadership(leading)

        return both

    def _gate_changed(self, _enabled: bool, _source: str) -> None:
        """A new answer about the apiserver: the mode follows it, and the release's defaults follow
        the version read with it (a leader-elected worker reads it first when it leads, after its
        worker started)."""
        if self.mode is not None:
            self.mode.refresh()
        self._follow_release()

    def _follow_release(self) -> None:
        """What the served release's kube-scheduler does by default, the engine does too:
        ``DRADeviceBindingConditions`` (on from 1.36) lets devices with binding conditions in, and
        selectors compile in that release's CEL environment (``core/cel/releases.py``)."""
        enabled = binding_conditions_gate(self.gate.version)
        with self.cache.lock:
            self.cache.state.set_binding_conditions(enabled)
            self.cache.state.set_cel_release(parse_version(self.gate.version))

    def _state(self) -> ClusterState:
        """The cluster state, with the CEL engine ``--cel-engine`` names."""
        return ClusterState(SelectorEngine(engine=self.opts.cel_engine))

    def _device_gauges(self) -> list[tuple[str, str, int, int]]:
        out: list[tuple[str, str, int, int]] = []
        with self.cache.lock:
            st = self.cache.state
            for dc in st.classes.classes():
                cls = str(dc["metadata"]["name"])
                free = st.capacity.free(cls)
                for node, total in sorted(st.capacity.total(cls).items()):
                    out.append((cls, node, free.get(node, 0), total - free.get(node, 0)))
        return out

    def kinds(self) -> Sequence[str]:
        return ALL_KINDS if self.opts.worker else WEBHOOK_KINDS

    def app(self) -> Starlette:
        if self.mode is not None:  # the webhook
            from .apps import WEBHOOK_READY_KINDS, webhook_app
            from .health import Readiness

            readiness = Readiness(self.cache, WEBHOOK_READY_KINDS, details=[self.mode.details])
            if self.worker is not None:
                readiness.details.append(self.worker_waits)
            tls = self.tls
            if tls is not None:
                readiness.certificate = tls.problem
                readiness.details.append(lambda: [tls.describe()])
            return webhook_app(
                self.cache,
                self.opts.admission,
                self.registry,
                self.gate,
                readiness=readiness,
                apiserver_version=lambda: self.gate.version,
            )
        from .apps import health_app

        return health_app(self.cache, self.registry, self.kinds())

    def start_background(self) -> None:
        """Informers, the apiserver gate probe, leader election and the worker (not the HTTP server)."""
        if self.client is not None:
            self.cache.start(self.client, self.kinds())
        if self.gate is not None:
            self.gate.start()
            self._follow_release()
        if self.mode is not None:
            self.mode.refresh()
        if self.worker is not None:
            threading.Thread(
                target=self._start_worker_when_synced, args=(self.worker,), name="worker-start", daemon=True
            ).start()

    def _start_worker_when_synced(self, worker: Worker) -> None:
        """The worker, its certificate rotation and its Lease campaign start once every kind the
        worker reads has synced, as kube-scheduler waits for every handler: a worker that scheduled
        with, say, no claims cached would give a running pod's device to another. It waits as long
        as it takes (the informers retry their lists with backoff), saying every 30 s what for."""
        kinds = self.kinds()
        next_log = time.monotonic() + SYNC_LOG_INTERVAL
        while not self.cache.wait_synced(kinds, timeout=SYNC_POLL):
            if self._worker_gone.is_set():
                return
            if time.monotonic() >= next_log:
                next_log = time.monotonic() + SYNC_LOG_INTERVAL
                log.warning(
                    "the worker waits for its caches", extra={"reason": "; ".join(self.worker_waits())}
                )
        collector.synced()
        with self._worker_lock:
            if self._worker_gone.is_set():
                return
            self._follow_release()
            worker.start()
            if self.rotator is not None:
                self.rotator.start()
            if self.leader is not None:
                self.leader.start()
            elif self.on_leadership is not None:  # always, beside a worker
                self.on_leadership(True)
            self.worker_started.set()

    def worker_waits(self) -> list[str]:
        """``/readyz``'s line while the worker waits for its caches (nothing once it runs)."""
        if self.worker is None or self.worker_started.is_set():
            return []
        from .health import not_synced

        waiting = not_synced(self.cache, self.kinds())
        return [f"worker not started: {'; '.join(waiting)}"] if waiting else []

    def _worker_ends(self) -> None:
        """The worker will never start (stop, kill): a start still waiting for the caches gives up."""
        self._worker_gone.set()
        with self._worker_lock:
            pass

    def stop(self) -> None:
        self._stopping.set()
        self._worker_ends()
        if self.server is not None:
            self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=15)
        if self._watcher is not None:
            self._watcher.stop()
        if self.rotator is not None:
            self.rotator.stop()
        if self.worker is not None:
            self.worker.stop()
        if self.leader is not None:
            self.leader.stop(release=True)
        if self.gate is not None:
            self.gate.stop()
        self.cache.stop()

    def kill_worker(self) -> None:
        """The worker dies (no lease release, no cleanup writes); the webhook keeps serving."""
        self._worker_ends()
        if self.leader is not None:
            self.leader.stop(release=False)
        if self.worker is not None:
            self.worker.stop()

    def kill(self) -> None:
        """Stop as if the process died: no lease release, no cleanup writes (tests, failover)."""
        self._worker_ends()
        if self.leader is not None:
            self.leader.stop(release=False)
        if self.rotator is not None:
            self.rotator.stop()
        if self.worker is not None:
            self.worker.stop()
        self.cache.stop()

    def build_server(self, sock: socket.socket | None = None) -> uvicorn.Server:
        kwargs: dict[str, Any] = {
            "host": self.opts.server.host,
            "port": self.opts.server.port,
            "log_config": None,
            "access_log": False,
            "timeout_graceful_shutdown": 10,
            "http": deadline_protocol(
                self.opts.server.read_header_timeout, self.opts.server.read_body_timeout
            ),
        }
        if self.opts.webhook:
            self.server = self._tls_server(kwargs)
        else:  # the worker alone: health and metrics over plain HTTP
            self.server = uvicorn.Server(uvicorn.Config(self.app(), **kwargs))
        return self.server

    def _tls_server(self, kwargs: dict[str, Any]) -> uvicorn.Server:
        """The webhook over TLS: the pair of ``--cert-dir``, reloaded when it rotates, its expiry
        a metric and its state a line of ``/readyz``."""
        from .tls import uvicorn_server

        tls = ReloadingTLS(self.opts.tls.cert_dir)
        self.tls = tls
        self.expiry.track("serving", lambda: tls.certificate)
        self._watcher = tls.start_watcher(self.opts.tls.reload_interval)
        return uvicorn_server(self.app(), tls, **kwargs)

    def serve_in_thread(self, sock: socket.socket) -> None:
        server = self.build_server()
        host, port = sock.getsockname()[:2]
        self.address = (str(host), int(port))
        self._thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="uvicorn"
        )
        self._thread.start()
        self.announce_when_synced()


def run(opts: ServeOptions) -> int:
    logs.setup(opts.logs.level, fmt=opts.logs.format)
    if not opts.webhook and not opts.worker:
        log.error("nothing to run: --no-webhook and --no-worker together")
        return 2
    try:
        proc = Process(opts)
    except Exception as e:  # configuration errors: no kubeconfig, unreadable snapshot, ...
        log.error("cannot start: %s", e)
        return 2
    try:
        proc.start_background()
        collector.settle()  # collector.synced() follows once the initial lists have synced
        server = proc.build_server()
        proc.announce_when_synced()
        server.run()  # returns on SIGTERM/SIGINT after a graceful shutdown
    except Exception as e:
        log.error("serve failed: %s: %s", type(e).__name__, e)
        return 1
    finally:
        proc.server = None
        proc.stop()
    return 0
