"""``draxr serve``'s settings: what runs, and each component's settings nested under it.

The components' settings classes live with the components (``kube/client.py``, ``kube/leader.py``,
``kube/gates.py``, ``admission/config.py``, ``worker/config.py``, ``runtime/tls.py``,
``runtime/logs.py``, and the server's here); ``ServeOptions`` nests them, as kopf's
``OperatorSettings`` nests its own, and names each setting by its flag as well.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any, Final

from ..admission.config import AdmissionConfig
from ..identity.names import DEFAULT_NAMESPACE, LEASE, WEBHOOK, WORKER
from ..kube.client import ClientConnection
from ..kube.gates import GateSettings
from ..kube.leader import LeaderElection
from ..worker.config import WorkerConfig
from .logs import LogSettings
from .timeouts import DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT
from .tls import TLSSettings


def default_writers(namespace: str = DEFAULT_NAMESPACE) -> list[str]:
    return [f"system:serviceaccount:{namespace}:{WORKER}", "system:kube-scheduler"]


@dataclass(frozen=True)
class ServerSettings:
    """The webhook's HTTPS server (the worker alone: plain HTTP for health and metrics)."""

    host: str = "0.0.0.0"
    port: int = 8443
    read_header_timeout: float = field(
        default=DEFAULT_HEADER_TIMEOUT,
        metadata={
            "help": "close a connection whose request line and headers take longer to arrive (slow clients)"
        },
    )
    read_body_timeout: float = field(
        default=DEFAULT_BODY_TIMEOUT,
        metadata={"help": "close a connection whose request body takes longer to arrive after its headers"},
    )


#: Each setting by its flat name, the flags' spelling (``draxr serve``'s, the emulator's sandbox's and
#: the benchmarks'), to where it lives: ``group.field``, or a field of ``ServeOptions`` itself. The
#: scheduler name is both the webhook's (routing) and the worker's (its pods).
FLAT: Final[Mapping[str, tuple[str, ...]]] = {
    "host": ("server.host",),
    "port": ("server.port",),
    "read_header_timeout": ("server.read_header_timeout",),
    "read_body_timeout": ("server.read_body_timeout",),
    "cert_dir": ("tls.cert_dir",),
    "cert_reload_interval": ("tls.reload_interval",),
    "rotate_certificates": ("tls.rotate",),
    "cert_validity": ("tls.validity",),
    "cert_renew_before": ("tls.renew_before",),
    "ca_validity": ("tls.ca_validity",),
    "kubeconfig": ("client.kubeconfig",),
    "qps": ("client.qps",),
    "burst": ("client.burst",),
    "leader_elect": ("leader_election.leader_elect",),
    "lease_namespace": ("namespace",),
    "lease_duration": ("leader_election.lease_duration",),
    "renew_deadline": ("leader_election.renew_deadline",),
    "retry_period": ("leader_election.retry_period",),
    "apiserver_gate": ("gate.setting",),
    "gate_probe_interval": ("gate.interval",),
    "scheduler_name": ("admission.scheduler_name", "scheduling.scheduler_name"),
    "route": ("admission.route",),
    "managed_classes": ("admission.managed_classes",),
    "unsupported_pods": ("admission.unsupported_pods",),
    "class_read_timeout": ("admission.class_read_seconds",),
    "allowed_writers": ("admission.allowed_writers",),
    "mode": ("admission.mode",),
    "force_rewrite": ("admission.force_rewrite",),
    "review_threads": ("admission.review_threads",),
    "max_large_reviews": ("admission.max_large_reviews",),
    "policy": ("scheduling.policy",),
    "percentage_of_nodes_to_score": ("scheduling.percentage_of_nodes_to_score",),
    "bind_workers": ("scheduling.bind_workers",),
    "orphan_interval": ("scheduling.orphan_interval",),
    "pod_initial_backoff": ("scheduling.initial_backoff",),
    "pod_max_backoff": ("scheduling.max_backoff",),
    "template_grace": ("scheduling.template_grace",),
    "volume_bind_timeout": ("scheduling.bind_timeout",),
    "binding_timeout": ("scheduling.binding_timeout",),
    "topology_aware_workload_scheduling": ("scheduling.topology_aware",),
    "gang_search_steps": ("scheduling.gang_search_steps",),
    "gang_two_phase_commit": ("scheduling.gang_two_phase_commit",),
    "log_level": ("logs.level",),
    "log_format": ("logs.format",),
}
#: Flat values in another shape than their field's (``--allowed-writers`` is a list).
_CONVERT: Final[Mapping[str, Callable[[Any], Any]]] = {"allowed_writers": frozenset}


@dataclass(init=False)
class ServeOptions:
    """What one ``draxr serve`` runs, and each component's settings nested under it (as kopf's
    ``OperatorSettings``). Every default is written once, in the component's own settings class;
    ``draxr serve``'s flags take theirs, and their help, from there (``setting``).

    Built whole (``ServeOptions(scheduling=WorkerConfig(policy="spread"))``) or one setting at a
    time by its flat name in ``FLAT`` (``ServeOptions(policy="spread", qps=200)``), which applies on
    top of the groups given.
    """

    #: Which components run (``--no-webhook``, ``--no-worker``).
    webhook: bool = True
    worker: bool = True
    snapshot: list[str] = field(
        default_factory=list,
        metadata={"help": "serve the webhook from manifest files instead of a cluster (with --no-worker)"},
    )
    #: draxr's namespace: its Lease, the mode Events, the certificates' Secrets, the default writers.
    namespace: str = field(
        default=DEFAULT_NAMESPACE, metadata={"help": "draxr's namespace (lease, default writers)"}
    )
    lease_name: str = LEASE
    deployment: str = field(default=WEBHOOK, metadata={"help": "draxr's webhook Deployment (mode Events)"})
    #: Leader election's identity and the Events' reporting instance ("": ``<hostname>_<pid>``).
    identity: str = field(default="", metadata={"help": "leader election identity (default: hostname_pid)"})
    #: CEL engine of the selectors (``--cel-engine``); None: the default (cel-python).
    cel_engine: str | None = None
    server: ServerSettings = field(default_factory=ServerSettings)
    tls: TLSSettings = field(default_factory=TLSSettings)
    client: ClientConnection = field(default_factory=ClientConnection)
    leader_election: LeaderElection = field(default_factory=LeaderElection)
    gate: GateSettings = field(default_factory=GateSettings)
    admission: AdmissionConfig = field(default_factory=AdmissionConfig)
    scheduling: WorkerConfig = field(default_factory=WorkerConfig)
    logs: LogSettings = field(default_factory=LogSettings)

    def __init__(self, **settings: Any) -> None:
        for f in fields(self):
            setattr(self, f.name, f.default if f.default_factory is MISSING else f.default_factory())
        names = {f.name for f in fields(self)}
        unknown = sorted(set(settings) - names - set(FLAT))
        if unknown:
            raise TypeError(f"ServeOptions() got an unexpected keyword argument {unknown[0]!r}")
        for name, value in settings.items():
            if name in names:
                setattr(self, name, value)
        for name, value in settings.items():
            if name in FLAT:
                self.set(name, value)

    def set(self, flat: str, value: Any) -> None:
        """One setting by its flat name (``FLAT``)."""
        value = _CONVERT.get(flat, _unchanged)(value)
        for path in FLAT[flat]:
            group, _, attr = path.partition(".")
            if attr:
                setattr(self, group, replace(getattr(self, group), **{attr: value}))
            else:
                setattr(self, group, value)

    def setting(self, name: str) -> tuple[Any, str | None]:
        """The value of a setting, by its flat name or a field of its own, and its help (the
        ``help`` metadata of the field that holds it)."""
        group, _, attr = (FLAT[name][0] if name in FLAT else name).partition(".")
        owner: Any = getattr(self, group) if attr else self
        held = attr or group
        (f,) = (f for f in fields(owner) if f.name == held)
        return getattr(owner, held), f.metadata.get("help")


def _unchanged(value: Any) -> Any:
    return value
