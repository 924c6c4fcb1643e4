"""A real Kubernetes control plane on loopback for tests: etcd + kube-apiserver, optionally
kube-controller-manager and kube-scheduler, no kubelet (what controller-runtime's envtest runs).

The binaries come from ``make controlplane`` (``e2e/controlplane/build.sh``), which builds them from Go
modules at the versions pinned in ``versions.env`` into ``e2e/controlplane/.cache/bin/``.

    with ControlPlane(version="1.35", gates={"DRAExtendedResource": True}) as cp:
        status, body = cp.client("dev").get("/apis/resource.k8s.io/v1/deviceclasses")

Every process listens on 127.0.0.1 only, on ports picked free at start. The apiserver serves HTTPS only,
with a CA, serving certificate, service-account key and one client certificate per user generated for
this run (see ``USERS``); ``kubeconfig_path(user)`` points kubectl or a client library at it.
"""

from __future__ import annotations

import ctypes
import datetime
import hashlib
import http.client
import ipaddress
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

HERE = Path(__file__).resolve().parent
VERSIONS_FILE = HERE / "versions.env"
CACHE_ENV = "DRAXR_CONTROLPLANE_CACHE"

Obj = dict[str, Any]


@dataclass(frozen=True)
class User:
    """A client identity: its certificate's CN is the user name and its O entries the groups."""

    name: str
    groups: tuple[str, ...] = ()


#: The identities every control plane issues certificates (and bearer tokens) for, by key.
USERS: Mapping[str, User] = {
    "admin": User("draxr-e2e-admin", ("system:masters",)),
    "dev": User("dev", ("developers",)),
    "worker": User(
        "system:serviceaccount:draxr-system:draxr-worker",
        ("system:serviceaccounts", "system:serviceaccounts:draxr-system"),
    ),
    "webhook": User(
        "system:serviceaccount:draxr-system:draxr-webhook",
        ("system:serviceaccounts", "system:serviceaccounts:draxr-system"),
    ),
}

#: kube-scheduler's identity: the user name a cluster's kube-scheduler has, which draxr's hooks allow
#: to write special claims and pod mappings (``--allowed-writers``); ``system:masters`` spares the rows
#: each release's RBAC bootstrap for it.
KUBE_SCHEDULER = User("system:kube-scheduler", ("system:masters",))

#: kube-controller-manager's controllers when ``controllers=True``: claims from templates, owner-based
#: garbage collection, namespace deletion, and each namespace's ``default`` ServiceAccount (which the
#: ServiceAccount admission plugin requires before it admits a pod).
DEFAULT_CONTROLLERS = (
    "resourceclaim-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
)

#: Beta API versions are off by default; 1.35 and 1.36 both serve resource.k8s.io v1beta1 and v1beta2.
DEFAULT_RUNTIME_CONFIG: Mapping[str, str] = {
    "resource.k8s.io/v1beta1": "true",
    "resource.k8s.io/v1beta2": "true",
}

#: What build.sh builds for every Kubernetes release.
KUBE_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet")

SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"  # allocated from only: nothing is ever sent there


class ControlPlaneError(RuntimeError):
    """A control plane process failed to start or to become ready; the message has its log's tail."""


def read_versions(path: Path = VERSIONS_FILE) -> dict[str, str]:
    """versions.env as a dict: ``KEY=value`` lines, ``#`` comments."""
    out: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip().strip("\"'")
    return out


def kube_version(version: str) -> str:
    """The pinned patch release for ``"1.35"`` (a full ``"1.35.4"`` must be the pinned one)."""
    parts = version.removeprefix("v").split(".")
    key = "KUBE_" + "_".join(parts[:2])
    pinned = read_versions().get(key)
    if pinned is None:
        raise ValueError(f"no Kubernetes {version} in {VERSIONS_FILE.name} (no {key})")
    if len(parts) > 2 and ".".join(parts) != pinned:
        raise ValueError(f"Kubernetes {version} is not the pinned {pinned} ({VERSIONS_FILE.name})")
    return pinned


def cache_dir() -> Path:
    """Where build.sh caches binaries: outside the clone, shared by every clone on the machine."""
    if env := os.environ.get(CACHE_ENV):
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "draxr" / "controlplane"


def source_key(module_dir: Path, recipe: str) -> str:
    """build.sh's cache key of a Go module's build (its ``source_key``, byte for byte): BUILD_RECIPE,
    go.mod, go.sum and the module's own Go sources but its tests, in C-locale path order."""
    files = []
    for root, _, names in os.walk(module_dir):
        for name in names:
            if name in ("go.mod", "go.sum") or (name.endswith(".go") and not name.endswith("_test.go")):
                files.append("./" + str((Path(root) / name).relative_to(module_dir)))
    digest = hashlib.sha256(f"draxr-controlplane recipe={recipe}\n".encode())
    for rel in sorted(files):
        digest.update(f"== {rel}\n".encode())
        digest.update((module_dir / rel).read_bytes())
    return digest.hexdigest()[:16]


def _built(prefix: str, module: str, names: Sequence[str]) -> Path | str:
    """The cache directory ``bin/<prefix>-<key>-go<version>`` holding every binary in ``names`` (the
    newest, if several Go versions built it), or why there is none."""
    try:
        recipe = read_versions()["BUILD_RECIPE"]
        key = source_key(HERE / "go" / module, recipe)
    except (OSError, KeyError) as e:
        return f"cannot compute the cache key of go/{module}: {e}"
    found = [
        d
        for d in (cache_dir() / "bin").glob(f"{prefix}-{key}-go*")
        if all(os.access(d / n, os.X_OK) for n in names)
    ]
    if not found:
        return (
            f"{', '.join(names)} of go/{module} (key {key}) not built in {cache_dir() / 'bin'}: "
            "run `make controlplane`"
        )
    return max(found, key=lambda d: d.stat().st_mtime)


@dataclass(frozen=True)
class Binaries:
    version: str  # "1.35.4"
    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kubelet: Path


def find_binaries(version: str) -> Binaries | str:
    """The cached binaries for a Kubernetes minor (``"1.35"``), or why they are missing."""
    try:
        kube = kube_version(version)
        etcd_version = read_versions()["ETCD"]
    except (OSError, KeyError, ValueError) as e:
        return f"cannot read the pinned versions: {e}"
    etcd_dir = _built(f"etcd-v{etcd_version}", "etcd", ["etcd"])
    minor = ".".join(kube.split(".")[:2])
    kube_dir = _built(f"k8s-v{kube}", f"k8s-{minor}", KUBE_BINARIES)
    if isinstance(etcd_dir, str):
        return f"the control plane for Kubernetes v{kube} is not built: {etcd_dir}"
    if isinstance(kube_dir, str):
        return f"the control plane for Kubernetes v{kube} is not built: {kube_dir}"
    return Binaries(
        version=kube,
        etcd=etcd_dir / "etcd",
        kube_apiserver=kube_dir / "kube-apiserver",
        kube_controller_manager=kube_dir / "kube-controller-manager",
        kube_scheduler=kube_dir / "kube-scheduler",
        kubelet=kube_dir / "kubelet",
    )


@dataclass(frozen=True)
class NodeTools:
    """draxr's own node parts (go/nodes): the fake container runtime, the DRA driver, the device plugin."""

    fakecri: Path
    dradriver: Path
    deviceplugin: Path


def find_node_tools() -> NodeTools | str:
    """The cached node parts, or why they are missing."""
    found = _built("nodes", "nodes", ("fakecri", "dradriver", "deviceplugin"))
    if isinstance(found, str):
        return f"the node parts are not built: {found}"
    return NodeTools(found / "fakecri", found / "dradriver", found / "deviceplugin")


def find_cel_oracle() -> Path | str:
    """The cached CEL oracle (go/celoracle: upstream's DRA CEL compiler as the scheduler calls it),
    or why it is missing."""
    found = _built("celoracle", "celoracle", ("celoracle",))
    if isinstance(found, str):
        return f"the CEL oracle is not built: {found}"
    return found / "celoracle"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# ---------------------------------------------------------------------------------------------------------
# Certificates


def _write_key(path: Path, key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


@dataclass
class _CA:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @classmethod
    def new(cls, name: str) -> _CA:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(key, cert)

    def issue(
        self,
        common_name: str,
        *,
        organizations: Iterable[str] = (),
        server: bool = False,
        dns_names: Sequence[str] = (),
        ips: Sequence[str] = (),
    ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        now = datetime.datetime.now(datetime.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
            )
        )
        if dns_names or ips:
            names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
            names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return key, builder.sign(self.key, hashes.SHA256())


# ---------------------------------------------------------------------------------------------------------
# A small typed HTTPS client: JSON in, (status, JSON) out.


class Client:
    """Speaks to the apiserver as one user: by the client certificate in ``context``, or by a bearer
    ``token``. Each call opens a connection."""

    def __init__(
        self,
        host: str,
        port: int,
        context: ssl.SSLContext,
        *,
        token: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.host, self.port, self.context, self.timeout = host, port, context, timeout
        self.token = token

    def request(
        self,
        method: str,
        path: str,
        body: Obj | list[Any] | None = None,
        *,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
    ) -> tuple[int, Obj]:
        """The response status and its JSON body (``{}`` when empty, ``{"raw": text}`` when not JSON)."""
        if params:
            path += "?" + "&".join(f"{quote(k)}={quote(v)}" for k, v in params.items())
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=self.timeout)
        try:
            data = None if body is None else json.dumps(body).encode()
            headers = {"Accept": "application/json"}
            if self.token is not None:
                headers["Authorization"] = f"Bearer {self.token}"
            if data is not None:
                headers["Content-Type"] = content_type
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        if not raw:
            return resp.status, {}
        try:
            parsed = json.loads(raw)
        except ValueError:
            return resp.status, {"raw": raw.decode(errors="replace")}
        return resp.status, parsed if isinstance(parsed, dict) else {"items": parsed}

    def get(self, path: str, **params: str) -> tuple[int, Obj]:
        return self.request("GET", path, params=params)

    def post(self, path: str, body: Obj, **params: str) -> tuple[int, Obj]:
        return self.request("POST", path, body, params=params)

    def put(self, path: str, body: Obj, **params: str) -> tuple[int, Obj]:
        return self.request("PUT", path, body, params=params)

    def merge_patch(self, path: str, body: Obj, **params: str) -> tuple[int, Obj]:
        return self.request("PATCH", path, body, content_type="application/merge-patch+json", params=params)

    def delete(self, path: str, **params: str) -> tuple[int, Obj]:
        return self.request("DELETE", path, params=params)


# ---------------------------------------------------------------------------------------------------------
# Processes


_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when its parent dies (Linux), so nothing outlives a killed
    pytest. (Strictly: when the thread that started it ends; start control planes from a thread that
    outlives them, e.g. the main thread, as pytest fixtures do.) libc is loaded before the fork: a child of
    a threaded process must not take locks."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class Proc:
    """A process the test infrastructure started, and its log."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    #: Stopped on purpose (``kill``, ``restart_process``), to be started again: not a death.
    stopped: bool = False


def spawn(
    name: str,
    argv: list[str],
    workdir: Path,
    cwd: Path,
    *,
    own_group: bool = False,
    env: Mapping[str, str] | None = None,
) -> Proc:
    """Starts ``argv`` in ``cwd``, logging to ``<workdir>/<name>.log`` (the command line first); it
    dies with this process. ``own_group``: a process group of its own, stopped as one."""
    log = workdir / f"{name}.log"
    with log.open("ab") as out:
        out.write(f"$ {' '.join(argv)}\n".encode())
        out.flush()
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=own_group,
            preexec_fn=_die_with_parent,
            env=dict(env) if env is not None else None,
        )
    return Proc(name, popen, log)


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        return f"(no log: {e})"
    return "\n".join(text.splitlines()[-lines:])


def wait_until(
    what: str,
    check: Callable[[], bool],
    timeout: float,
    *,
    alive: Callable[[], str | None] | None = None,
    detail: Callable[[], str] | None = None,
) -> None:
    """Polls ``check`` (a bounded wait, backing off from 50 ms to 500 ms). Raises ControlPlaneError with
    ``alive()``'s message as soon as that reports a dead process, or on timeout with ``detail()``."""
    deadline = time.monotonic() + timeout
    interval = 0.05
    while True:
        if alive is not None and (dead := alive()) is not None:
            raise ControlPlaneError(f"{what}: {dead}")
        if check():
            return
        if time.monotonic() >= deadline:
            more = f"\n{detail()}" if detail is not None else ""
            raise ControlPlaneError(f"{what}: not within {timeout:.0f}s{more}")
        time.sleep(interval)  # a poll interval, not synchronisation: the loop re-checks the condition
        interval = min(interval * 2, 0.5)


WRITES = ["create", "update", "patch", "delete", "deletecollection"]
#: Every write once, when its response is complete: who (user, source IPs), what (verb, object), when
#: (requestReceivedTimestamp) and the answer's code; Lease writes with their bodies, so the Leases'
#: history (holder, duration) is in the same record. Reads are not logged.
AUDIT_POLICY: Obj = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived", "ResponseStarted", "Panic"],
    "rules": [
        {
            "level": "RequestResponse",
            "verbs": WRITES,
            "resources": [{"group": "coordination.k8s.io", "resources": ["leases"]}],
        },
        {"level": "Metadata", "verbs": WRITES},
        {"level": "None"},
    ],
}


class ControlPlane:
    """etcd + kube-apiserver (+ kube-controller-manager, + kube-scheduler) as a context manager.

    ``version``: ``"1.34"`` to ``"1.37"`` (the patch release is pinned in versions.env).
    ``gates``: ``--feature-gates`` for every component.
    ``controllers``: False (none), True (``DEFAULT_CONTROLLERS``) or kube-controller-manager's
    ``--controllers`` names.
    ``scheduler``: also run kube-scheduler, as ``system:kube-scheduler`` (``KUBE_SCHEDULER``).
    ``scheduler_args``: more kube-scheduler flags (``--kube-api-qps=1000``, say).
    ``controller_manager_args``: more kube-controller-manager flags (the same, say).
    ``runtime_config``: ``--runtime-config``; by default ``DEFAULT_RUNTIME_CONFIG`` (resource.k8s.io
    v1beta1 and v1beta2 on besides v1; v1alpha3 stays off).
    ``workdir``: certificates, kubeconfigs and one ``<process>.log`` each; a temporary directory when None
    (removed on a clean exit, kept when the block raised).
    ``advertise_address``: also serve on this host address (nodes in network namespaces reach the API
    there): the apiserver binds 0.0.0.0, the address is in its certificate and is the ``kubernetes``
    Service's endpoint; the host's clients keep using 127.0.0.1. None: loopback only.
    ``audit``: kube-apiserver writes an audit log of every write (``AUDIT_POLICY``) to
    ``<workdir>/audit.log``, read with ``audit_events()``: the API server's own record of who wrote
    what, from where and when.

    Faults of the real components (``kill``, ``start_again``, ``restart_process``, ``pause``,
    ``resume``): a restarted etcd keeps its data directory and ports, a restarted kube-apiserver its
    port, so every client and kubeconfig works again once it is ready.
    """

    def __init__(
        self,
        version: str = "1.36",
        *,
        gates: Mapping[str, bool] | None = None,
        controllers: bool | Sequence[str] = False,
        scheduler: bool = False,
        runtime_config: Mapping[str, str] | None = None,
        extra_apiserver_args: Sequence[str] = (),
        scheduler_args: Sequence[str] = (),
        controller_manager_args: Sequence[str] = (),
        workdir: Path | str | None = None,
        users: Mapping[str, User] = USERS,
        start_timeout: float = 120.0,
        stop_timeout: float = 15.0,
        advertise_address: str | None = None,
        audit: bool = False,
    ) -> None:
        found = find_binaries(version)
        if isinstance(found, str):
            raise ControlPlaneError(found)
        if "admin" not in users:
            raise ValueError("users must include 'admin' (the identity the control plane itself uses)")
        self.binaries = found
        self.version = found.version
        self.gates = dict(gates or {})
        if controllers is True:
            self.controllers: tuple[str, ...] = DEFAULT_CONTROLLERS
        elif controllers is False:
            self.controllers = ()
        else:
            self.controllers = tuple(controllers)
        self.scheduler = scheduler
        self.runtime_config = dict(runtime_config if runtime_config is not None else DEFAULT_RUNTIME_CONFIG)
        self.extra_apiserver_args = tuple(extra_apiserver_args)
        self.scheduler_args = tuple(scheduler_args)
        self.controller_manager_args = tuple(controller_manager_args)
        self.users = dict(users)
        self.advertise_address = str(ipaddress.ip_address(advertise_address)) if advertise_address else None
        self._tokens = {key: secrets.token_urlsafe(24) for key in self.users}
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="draxr-cp-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.audit = audit
        self._etcd_data: Path | None = None
        self._etcd_ports: tuple[int, int] | None = None
        self._ca: _CA | None = None
        self._procs: list[Proc] = []
        self.port = 0
        self.etcd_url = ""

    # -- public surface ----------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_path(self) -> Path:
        return self.workdir / "pki" / "ca.crt"

    def kubeconfig_path(self, user: str = "admin") -> Path:
        if user not in self.users:
            raise KeyError(f"no user {user!r} (known: {', '.join(self.users)})")
        return self.workdir / f"kubeconfig-{user}.json"

    def token(self, user: str = "admin") -> str:
        """The user's bearer token (``--token-auth-file``), for clients that do not do client certs."""
        if user not in self._tokens:
            raise KeyError(f"no user {user!r} with a token (known: {', '.join(self._tokens)})")
        return self._tokens[user]

    def cert_paths(self, user: str = "admin") -> tuple[Path, Path]:
        """(certificate, key) of a user's client certificate."""
        pki = self.workdir / "pki"
        return pki / f"{user}.crt", pki / f"{user}.key"

    def ssl_context(self, user: str = "admin") -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca_path))
        cert, key = self.cert_paths(user)
        ctx.load_cert_chain(str(cert), str(key))
        return ctx

    def client(self, user: str = "admin", *, by_token: bool = False) -> Client:
        """A client as ``user``: by its client certificate, or by its bearer token."""
        if by_token:
            ctx = ssl.create_default_context(cafile=str(self.ca_path))
            return Client("127.0.0.1", self.port, ctx, token=self.token(user))
        return Client("127.0.0.1", self.port, self.ssl_context(user))

    def running(self) -> list[str]:
        """The names of the processes that are running."""
        return [p.name for p in self._procs if p.popen.poll() is None]

    def logs(self, lines: int = 40) -> str:
        """The tail of every process's log, for a failure report."""
        return "\n".join(f"----- {p.name} ({p.log}) -----\n{log_tail(p.log, lines)}" for p in self._procs)

    # -- lifecycle ---------------------------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        try:
            self.start()
        except BaseException:
            self.stop(remove_workdir=False)
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop(remove_workdir=exc_type is None)

    def start(self) -> None:
        self._write_pki()
        self._start_etcd()
        self._start_apiserver()
        self._write_kubeconfigs()
        if self.controllers:
            self._start_controller_manager()
        if self.scheduler:
            self._start_scheduler()

    def stop(self, *, remove_workdir: bool = True) -> None:
        """SIGTERM every process (newest first), SIGKILL what is left after ``stop_timeout``."""
        for proc in reversed(self._procs):
            self._terminate(proc)
        if self._etcd_data is not None:
            shutil.rmtree(self._etcd_data, ignore_errors=True)
            self._etcd_data = None
        if remove_workdir and self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def restart(self, gates: Mapping[str, bool]) -> None:
        """Restarts kube-apiserver, kube-controller-manager and kube-scheduler with ``gates`` (the
        feature gates an admin flips): etcd and its data stay, the apiserver keeps its port, so every
        kubeconfig and client keeps working once it is ready again."""
        for proc in reversed(self._procs):
            if proc.name != "etcd":
                self._terminate(proc)
        self._procs = [p for p in self._procs if p.name == "etcd"]
        self.gates = dict(gates)
        self._start_apiserver()
        if self.controllers:
            self._start_controller_manager()
        if self.scheduler:
            self._start_scheduler()

    def process(self, name: str) -> Proc:
        """The running (or stopped) process ``name`` ("etcd", "kube-apiserver", ...)."""
        for proc in self._procs:
            if proc.name == name:
                return proc
        raise ControlPlaneError(f"no process {name!r}: {[p.name for p in self._procs]}")

    def kill(self, name: str) -> None:
        """SIGKILL ``name`` (a crash: no graceful shutdown) and wait until it is gone."""
        proc = self.process(name)
        proc.stopped = True
        if proc.popen.poll() is None:
            proc.popen.kill()
            proc.popen.wait(self.stop_timeout)

    def pause(self, name: str) -> None:
        """SIGSTOP ``name``: it holds its sockets and answers nothing (a stalled disk, a hung process)."""
        self.process(name).popen.send_signal(signal.SIGSTOP)

    def resume(self, name: str) -> None:
        self.process(name).popen.send_signal(signal.SIGCONT)

    def start_again(self, name: str) -> None:
        """Starts a killed ``name`` again, as it was (etcd's data and ports, the apiserver's port), and
        waits until it is healthy."""
        proc = self.process(name)
        if proc.popen.poll() is None:
            raise ControlPlaneError(f"{name} is still running (pid {proc.popen.pid})")
        self._procs.remove(proc)
        starters = {
            "etcd": self._start_etcd,
            "kube-apiserver": self._start_apiserver,
            "kube-controller-manager": self._start_controller_manager,
            "kube-scheduler": self._start_scheduler,
        }
        starters[name]()

    def restart_process(self, name: str) -> None:
        """A graceful restart of ``name`` alone (SIGTERM, then started again); the others keep running
        and must find it again themselves, as after a rollout of one component."""
        proc = self.process(name)
        proc.stopped = True
        self._terminate(proc)
        self.start_again(name)

    @property
    def audit_log(self) -> Path:
        return self.workdir / "audit.log"

    def audit_events(self) -> list[Obj]:
        """The audit log's events (``audit.k8s.io/v1`` Event objects), oldest first; [] before any."""
        try:
            lines = self.audit_log.read_text().splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in lines if line.strip()]

    # -- pieces ------------------------------------------------------------------------------------------

    def _terminate(self, proc: Proc) -> None:
        """SIGTERM, SIGKILL after ``stop_timeout`` (nothing for a process that has exited)."""
        if proc.popen.poll() is None:
            proc.popen.send_signal(signal.SIGTERM)
            try:
                proc.popen.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                proc.popen.kill()
                proc.popen.wait(self.stop_timeout)

    def _spawn(self, name: str, argv: list[str]) -> Proc:
        proc = spawn(name, argv, self.workdir, self.workdir)
        self._procs.append(proc)
        return proc

    def _dead(self) -> str | None:
        """Which process has exited, with its log's tail, or None while all run (one stopped on
        purpose to be started again is not a death: another thread may wait meanwhile)."""
        for p in list(self._procs):
            code = p.popen.poll()
            if code is not None and not p.stopped:
                return f"{p.name} exited with {code}; the end of {p.log}:\n{log_tail(p.log)}"
        return None

    def _write_pki(self) -> None:
        pki = self.workdir / "pki"
        pki.mkdir(parents=True, exist_ok=True)
        ca = self._ca = _CA.new("draxr-e2e-ca")
        _write_cert(pki / "ca.crt", ca.cert)
        _write_key(pki / "ca.key", ca.key)
        key, cert = ca.issue(
            "kube-apiserver",
            server=True,
            dns_names=["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"],
            ips=["127.0.0.1", "10.0.0.1", *([self.advertise_address] if self.advertise_address else [])],
        )
        _write_cert(pki / "apiserver.crt", cert)
        _write_key(pki / "apiserver.key", key)
        sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        _write_key(pki / "sa.key", sa_key)
        (pki / "sa.pub").write_bytes(
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        tokens = []
        for key_name, user in self.users.items():
            ukey, ucert = ca.issue(user.name, organizations=user.groups)
            _write_cert(pki / f"{key_name}.crt", ucert)
            _write_key(pki / f"{key_name}.key", ukey)
            groups = ",".join(user.groups)
            tokens.append(f'{self.token(key_name)},{user.name},{user.name},"{groups}"')
        (pki / "tokens.csv").write_text("\n".join(tokens) + "\n")
        (pki / "tokens.csv").chmod(0o600)

    def _start_etcd(self) -> None:
        # A restart keeps the ports kube-apiserver knows and the data it wrote.
        client_port, peer_port = self._etcd_ports = self._etcd_ports or (free_port(), free_port())
        if self._etcd_data is None:
            self._etcd_data = Path(tempfile.mkdtemp(prefix="draxr-etcd-"))
        self.etcd_url = f"http://127.0.0.1:{client_port}"
        peer = f"http://127.0.0.1:{peer_port}"
        self._spawn(
            "etcd",
            [
                str(self.binaries.etcd),
                "--name=e2e",
                f"--data-dir={self._etcd_data}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=e2e={peer}",
                "--unsafe-no-fsync",  # test data: nothing must survive a crash
                "--log-level=warn",
            ],
        )

        def healthy() -> bool:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", client_port, timeout=2)
                try:
                    conn.request("GET", "/health")
                    resp = conn.getresponse()
                    return resp.status == 200 and b'"health":"true"' in resp.read()
                finally:
                    conn.close()
            except OSError:
                return False

        wait_until("etcd did not become healthy", healthy, self.start_timeout, alive=self._dead)

    def _apiserver_argv(self) -> list[str]:
        pki = self.workdir / "pki"
        argv = [
            str(self.binaries.kube_apiserver),
            f"--etcd-servers={self.etcd_url}",
            f"--secure-port={self.port}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--token-auth-file={pki / 'tokens.csv'}",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            # Kubelets join with node identities: the node authorizer (with its graph of pods, claims and
            # the special claim a pod's status names) and the NodeRestriction admission plugin guard them.
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            "--allow-privileged=true",
            "--v=1",
        ]
        if self.advertise_address:
            argv += [
                "--bind-address=0.0.0.0",
                f"--advertise-address={self.advertise_address}",
                "--endpoint-reconciler-type=lease",
                # Nodes are named, not resolvable: logs and exec go to the kubelet's InternalIP.
                "--kubelet-preferred-address-types=InternalIP",
            ]
        else:
            argv += [
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                # The "kubernetes" Service's endpoints would be 127.0.0.1, which Endpoints validation
                # rejects.
                "--endpoint-reconciler-type=none",
            ]
        if self.gates:
            argv.append("--feature-gates=" + _gates_flag(self.gates))
        if self.runtime_config:
            argv.append("--runtime-config=" + ",".join(f"{k}={v}" for k, v in self.runtime_config.items()))
        if self.audit:
            policy = self.workdir / "audit-policy.yaml"
            policy.write_text(json.dumps(AUDIT_POLICY))
            argv += [
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-mode=blocking",  # an event is written before its response is sent
            ]
        argv += self.extra_apiserver_args
        return argv

    def _start_apiserver(self) -> None:
        self.port = self.port or free_port()  # a restart keeps the port the kubeconfigs name
        self._spawn("kube-apiserver", self._apiserver_argv())
        ctx = self.ssl_context("admin")
        last: list[str] = [""]

        def ready() -> bool:
            try:
                conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx, timeout=5)
                try:
                    conn.request("GET", "/readyz")
                    resp = conn.getresponse()
                    body = resp.read().decode(errors="replace")
                finally:
                    conn.close()
            except OSError as e:
                last[0] = str(e)
                return False
            last[0] = f"{resp.status} {body.strip()[:200]}"
            return resp.status == 200

        def detail() -> str:
            log = self.workdir / "kube-apiserver.log"
            return f"last /readyz: {last[0]}\nthe end of {log}:\n{log_tail(log)}"

        wait_until(
            "kube-apiserver did not become ready", ready, self.start_timeout, alive=self._dead, detail=detail
        )

    def _write_kubeconfigs(self) -> None:
        for user in self.users:
            self._write_kubeconfig(user)

    def _write_kubeconfig(self, user: str) -> None:
        cert, key = self.cert_paths(user)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "e2e",
                    "cluster": {"server": self.url, "certificate-authority": str(self.ca_path)},
                }
            ],
            "users": [{"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}],
            "contexts": [{"name": user, "context": {"cluster": "e2e", "user": user}}],
            "current-context": user,
        }
        self.kubeconfig_path(user).write_text(json.dumps(config, indent=2) + "\n")

    def add_user(self, key: str, user: User) -> Path:
        """Issues a client certificate for one more identity of a running control plane (a node's
        ``system:node:<name>``, a driver's) and returns its kubeconfig."""
        if self._ca is None or not self.port:
            raise ControlPlaneError("add_user needs a started control plane")
        if key in self.users:
            raise ValueError(f"user {key!r} exists")
        ukey, ucert = self._ca.issue(user.name, organizations=user.groups)
        cert, kpath = self.cert_paths(key)
        _write_cert(cert, ucert)
        _write_key(kpath, ukey)
        self.users[key] = user
        self._write_kubeconfig(key)
        return self.kubeconfig_path(key)

    def _start_controller_manager(self) -> None:
        pki = self.workdir / "pki"
        argv = [
            str(self.binaries.kube_controller_manager),
            f"--kubeconfig={self.kubeconfig_path('admin')}",
            f"--controllers={','.join(self.controllers)}",
            "--use-service-account-credentials=false",
            "--leader-elect=false",
            f"--root-ca-file={pki / 'ca.crt'}",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            "--v=2",
            *self.controller_manager_args,
        ]
        self._start_component("kube-controller-manager", argv)

    def _start_scheduler(self) -> None:
        if "kube-scheduler" not in self.users:
            self.add_user("kube-scheduler", KUBE_SCHEDULER)
        argv = [
            str(self.binaries.kube_scheduler),
            f"--kubeconfig={self.kubeconfig_path('kube-scheduler')}",
            "--leader-elect=false",
            "--v=2",
            *self.scheduler_args,
        ]
        self._start_component("kube-scheduler", argv)

    def _start_component(self, name: str, argv: list[str]) -> None:
        """Starts a component serving /healthz on a loopback port (self-signed, in its own cert dir; the
        path is always allowed without credentials) and waits until it answers 200."""
        port = free_port()
        argv += [
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.workdir / (name + '-certs')}",
        ]
        if self.gates:
            argv.append("--feature-gates=" + _gates_flag(self.gates))
        self._spawn(name, argv)
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE

        def healthy() -> bool:
            try:
                conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=5)
                try:
                    conn.request("GET", "/healthz")
                    resp = conn.getresponse()
                    resp.read()
                    return resp.status == 200
                finally:
                    conn.close()
            except OSError:
                return False

        log = self.workdir / f"{name}.log"
        wait_until(
            f"{name} did not become healthy",
            healthy,
            self.start_timeout,
            alive=self._dead,
            detail=lambda: f"the end of {log}:\n{log_tail(log)}",
        )

    def wait_for(
        self,
        what: str,
        check: Callable[[], bool],
        timeout: float = 60.0,
        *,
        detail: Callable[[], str] | None = None,
    ) -> None:
        """A bounded poll that also fails, with the log's tail, as soon as a control plane process dies;
        on timeout ``detail()`` says what was last seen."""
        wait_until(what, check, timeout, alive=self._dead, detail=detail)


def _gates_flag(gates: Mapping[str, bool]) -> str:
    return ",".join(f"{k}={'true' if v else 'false'}" for k, v in sorted(gates.items()))
