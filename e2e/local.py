"""draxr installed on the local control plane (``e2e/controlplane``): the Kubernetes side of
``make e2e-local``.

``LocalCluster(ROWS["1.36-default"])`` starts etcd + kube-apiserver + kube-controller-manager (the
resourceclaim, garbage-collector, namespace, serviceaccount, deployment and replicaset controllers),
then installs draxr the
way an operator would, except that nothing runs in pods (there is no kubelet):

1. ``draxr manifests`` renders the Namespace and the RBAC; the real ``kubectl apply`` applies them;
2. ``draxr certs --ip 127.0.0.1`` makes the webhook's CA and serving certificate;
3. ``draxr serve --no-worker`` (the webhook, as ``system:serviceaccount:draxr-system:draxr-webhook``)
   and two ``draxr serve --no-webhook`` (the workers, as ``...:draxr-worker``, leader elected with
   short timings) run as subprocesses on loopback, ``--mode auto`` (the default) with a short
   template grace and gate probe interval, plus the row's flags; each ``/readyz`` is waited for;
4. ``draxr manifests --webhook-url https://127.0.0.1:<port>`` renders the webhook configurations
   (no kube-proxy, so no Service IP could route), applied with ``kubectl``; a dry-run probe waits
   until the apiserver calls the hooks;
5. plain Node objects with a Ready status and allocatable cpu/memory/pods stand in for kubelets (and
   without the ``not-ready`` taint the apiserver puts on new Nodes, which no controller lifts here).

The e2e scenarios reach it through the admin kubeconfig like any real cluster (``cluster_target``),
and kill or restart draxr's processes through ``LocalProcesses``. ``stop()`` tears everything down.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from .controlplane.launcher import (
    DEFAULT_CONTROLLERS,
    Client,
    ControlPlane,
    _die_with_parent,
    free_port,
    log_tail,
    wait_until,
)
from .target import loopback_get

NAMESPACE = "draxr-system"
LEASE = "draxr-worker"
#: Leader election for the local workers: lease duration, renew deadline, retry period (seconds).
LEASE_TIMINGS = (1.5, 1.0, 0.2)
NODES = ("e2e-node-a", "e2e-node-b")
NODE_ALLOCATABLE = {"cpu": "16", "memory": "64Gi", "pods": "110"}
RBAC_KINDS = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
START_TIMEOUT = 60.0
#: kube-controller-manager's controllers on the rows: the launcher's (claims from templates, garbage
#: collection, namespaces, ServiceAccounts) and the Deployment scenario's.
CONTROLLERS = (*DEFAULT_CONTROLLERS, "deployment-controller", "replicaset-controller")
#: kube-controller-manager's client is limited to 20 requests/s by default: 200 pods in rewrite mode
#: cost it ~1000 writes (claims from templates, then their release and deletion), 50 s of waiting.
CONTROLLER_MANAGER_ARGS = ("--kube-api-qps=1000", "--kube-api-burst=1000")
#: kube-scheduler's client, where it runs, as fast as kube-controller-manager's.
SCHEDULER_ARGS = ("--kube-api-qps=1000", "--kube-api-burst=1000")
#: ``draxr serve`` flags of every row, for the tests: an unused template of the rewrite goes after 1 s
#: (the scenarios wait for it), the apiserver gate is probed every 5 s. ``--mode`` stays ``auto``.
DRAXR_FLAGS = ("--template-grace", "1", "--gate-probe-interval", "5")

Obj = dict[str, Any]


@dataclass(frozen=True)
class Row:
    """One line of the e2e matrix: a Kubernetes release and its feature gates."""

    name: str
    version: str
    gates: Mapping[str, bool] = field(default_factory=dict)
    #: The apiserver keeps DeviceClass.spec.extendedResourceName and pod
    #: status.extendedResourceClaimStatus (DRAExtendedResource on), so draxr (``--mode auto``) takes
    #: the native path and the row runs test_e2e.py; otherwise draxr rewrites pods into DRA claims
    #: and the row runs test_gate_off.py. test_rewrite.py runs on every row.
    native: bool = True
    #: More ``draxr serve`` flags for the row's processes.
    draxr_flags: tuple[str, ...] = ()
    #: kube-scheduler runs beside draxr (built for 1.36 only; e2e/test_coexistence.py).
    scheduler: bool = False


ROWS: dict[str, Row] = {
    row.name: row
    for row in (
        # No kube-scheduler runs (none is built for 1.35): rewritten pods, which keep their
        # schedulerName by default, are sent to draxr's worker.
        Row(
            "1.35-gate-off",
            "1.35",
            {"DRAExtendedResource": False},
            native=False,
            draxr_flags=("--route=always",),
        ),
        Row("1.35-gate-on", "1.35", {"DRAExtendedResource": True}),
        Row("1.36-default", "1.36"),
    )
}


class LocalError(RuntimeError):
    """draxr could not be installed on the local control plane; the message says why."""


def draxr_argv(*args: str) -> list[str]:
    """``draxr <args>`` from this interpreter's environment (the checkout's venv)."""
    return [sys.executable, "-m", "webhook", *args]


def _run(argv: Sequence[str], *, stdin: str = "", timeout: float = 60.0) -> str:
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise LocalError(f"{' '.join(argv[:4])} ... failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


# ---------------------------------------------------------------------------------------------------------
# draxr's processes


@dataclass
class DraxrProcess:
    """One ``draxr serve`` subprocess: its flags, log file and readiness probe."""

    name: str
    args: list[str]
    log: Path
    port: int
    https_ca: Path | None = None  # the webhook serves HTTPS; a worker-only process plain HTTP
    popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = draxr_argv("serve", "--host", "127.0.0.1", "--port", str(self.port), *self.args)
        with self.log.open("ab") as out:
            out.write(f"$ {' '.join(argv)}\n".encode())
            out.flush()
            self.popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.log.parent,
                preexec_fn=_die_with_parent,
            )

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def get(self, path: str) -> tuple[int, str]:
        return loopback_get(self.port, path, ca=self.https_ca)

    def ready(self) -> bool:
        try:
            return self.get("/readyz")[0] == 200
        except OSError:
            return False

    def dead(self) -> str | None:
        if self.popen is not None and (code := self.popen.poll()) is not None:
            return f"{self.name} exited with {code}; the end of {self.log}:\n{log_tail(self.log)}"
        return None

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        wait_until(
            f"{self.name} did not become ready",
            self.ready,
            timeout,
            alive=self.dead,
            detail=lambda: f"the end of {self.log}:\n{log_tail(self.log)}",
        )

    def kill(self) -> None:
        """SIGKILL: no lease release, no cleanup writes, in-flight requests cut off."""
        if self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait(15)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (a graceful shutdown, the lease released), SIGKILL after ``timeout``."""
        if self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()


class LocalProcesses:
    """draxr's processes on the local control plane, for the scenarios that kill and restart them
    (the ``Processes`` capability of ``e2e.target.Target``)."""

    def __init__(self, procs: Sequence[DraxrProcess], admin: Client, lease: tuple[float, float, float]):
        self.procs = {p.name: p for p in procs}
        self.admin = admin
        self.lease = lease

    def workers(self) -> list[str]:
        return [n for n in self.procs if n.startswith("worker")]

    def holder(self) -> str:
        status, body = self.admin.get(f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{LEASE}")
        if status != 200:
            return ""
        return str((body.get("spec") or {}).get("holderIdentity") or "")

    def leader(self, timeout: float = 10.0) -> str:
        """The worker holding the Lease; waits (bounded) until a live one does."""
        found: list[str] = []

        def held() -> bool:
            found[:] = [self.holder()]
            return found[0] in self.procs and self.procs[found[0]].alive

        wait_until("no live worker holds the Lease", held, timeout, detail=lambda: f"holder: {found}")
        return found[0]

    def kill(self, name: str) -> None:
        self.procs[name].kill()

    def restart(self, name: str) -> None:
        proc = self.procs[name]
        proc.kill()
        if proc.https_ca is None:
            proc.port = free_port()
        proc.start()
        proc.wait_ready()

    def restore(self) -> None:
        """Start again every process that is not running (after a scenario killed some)."""
        for name, proc in self.procs.items():
            if not proc.alive:
                self.restart(name)

    def logs(self, lines: int = 40) -> str:
        return "\n".join(
            f"----- {p.name} (pid {p.popen.pid if p.popen else '-'}, {p.log}) -----\n{log_tail(p.log, lines)}"
            for p in self.procs.values()
        )

    def webhook_get(self, path: str) -> tuple[int, str]:
        return self.procs["webhook"].get(path)

    def stop(self) -> None:
        for proc in reversed(list(self.procs.values())):
            proc.stop()


# ---------------------------------------------------------------------------------------------------------
# The cluster


class LocalCluster:
    """A control plane of one matrix row with draxr installed (see the module docstring)."""

    def __init__(self, row: Row, workdir: Path, *, workers: int = 2) -> None:
        self.row = row
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.n_workers = workers
        # runtime_config={}: the release's default API versions (resource.k8s.io/v1 only), as a
        # cluster installed with defaults serves them.
        self.cp = ControlPlane(
            row.version,
            gates=row.gates,
            controllers=CONTROLLERS,
            controller_manager_args=CONTROLLER_MANAGER_ARGS,
            scheduler=row.scheduler,
            scheduler_args=SCHEDULER_ARGS,
            runtime_config={},
            workdir=self.workdir / "controlplane",
        )
        self.certs = self.workdir / "certs"
        self.processes: LocalProcesses | None = None
        self.kubectl = shutil.which("kubectl") or ""

    # -- lifecycle ------------------------------------------------------------------------------------

    def __enter__(self) -> LocalCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        if not self.kubectl:
            raise LocalError(
                "no kubectl on PATH: `.ci/kubectl.sh` fetches Debian's kubectl 1.36 into .ci/bin"
            )
        self.cp.start()
        self._apply(self._manifests("--cert-manager"), RBAC_KINDS)  # RBAC only: no certificates made here
        _run(draxr_argv("certs", "--out", str(self.certs), "--namespace", NAMESPACE, "--ip", "127.0.0.1"))
        self.processes = LocalProcesses(self._start_draxr(), self.cp.client(), LEASE_TIMINGS)
        webhook = self.processes.procs["webhook"]
        self._apply(
            self._manifests("--ca-bundle", str(self.certs / "ca.crt"), "--webhook-url", self.webhook_url),
            WEBHOOK_KINDS,
        )
        self._wait_for_hooks(webhook)
        self._nodes()

    def stop(self) -> None:
        if self.processes is not None:
            self.processes.stop()
        self.cp.stop(remove_workdir=False)

    # -- pieces ---------------------------------------------------------------------------------------

    @property
    def kubeconfig(self) -> Path:
        """The cluster admin's kubeconfig: what the e2e scenarios get, as for any real cluster."""
        return self.cp.kubeconfig_path("admin")

    @property
    def webhook_url(self) -> str:
        assert self.processes is not None
        return f"https://127.0.0.1:{self.processes.procs['webhook'].port}"

    def _manifests(self, *args: str) -> list[Obj]:
        out = _run(draxr_argv("manifests", "--namespace", NAMESPACE, *args))
        return [o for o in yaml.safe_load_all(out) if o]

    def _apply(self, objects: list[Obj], kinds: Sequence[str]) -> None:
        chosen = [o for o in objects if o["kind"] in kinds]
        if {o["kind"] for o in chosen} != set(kinds):
            raise LocalError(f"draxr manifests rendered {sorted({o['kind'] for o in chosen})}, not {kinds}")
        _run(
            [self.kubectl, "--kubeconfig", str(self.kubeconfig), "apply", "-f", "-"],
            stdin=yaml.safe_dump_all(chosen),
        )

    def _start_draxr(self) -> list[DraxrProcess]:
        webhook = DraxrProcess(
            "webhook",
            [
                "--no-worker",
                "--cert-dir",
                str(self.certs),
                "--kubeconfig",
                str(self.cp.kubeconfig_path("webhook")),
                "--namespace",
                NAMESPACE,
                *DRAXR_FLAGS,
                *self.row.draxr_flags,
            ],
            self.workdir / "draxr-webhook.log",
            free_port(),
            https_ca=self.certs / "ca.crt",
        )
        lease, renew, retry = LEASE_TIMINGS
        workers = [
            DraxrProcess(
                f"worker-{i}",
                [
                    "--no-webhook",
                    "--kubeconfig",
                    str(self.cp.kubeconfig_path("worker")),
                    "--namespace",
                    NAMESPACE,
                    "--identity",
                    f"worker-{i}",
                    "--leader-elect-lease-duration",
                    str(lease),
                    "--leader-elect-renew-deadline",
                    str(renew),
                    "--leader-elect-retry-period",
                    str(retry),
                    "--qps",
                    "1000",
                    "--burst",
                    "1000",
                    *DRAXR_FLAGS,
                    *self.row.draxr_flags,
                ],
                self.workdir / f"draxr-worker-{i}.log",
                free_port(),
            )
            for i in range(self.n_workers)
        ]
        procs = [webhook, *workers]
        for p in procs:
            p.start()
        for p in procs:
            p.wait_ready()
        return procs

    def _wait_for_hooks(self, webhook: DraxrProcess) -> None:
        """Configurations reach the apiserver's admission chain through an informer: probe with a dry
        run the validating hook denies (a forged special claim) until it does."""
        admin = self.cp.client()
        claim = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "name": "draxr-e2e-probe",
                "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
            },
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "probe"}}]}},
        }
        last: list[str] = [""]

        def denied() -> bool:
            status, body = admin.post(
                "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", claim, dryRun="All"
            )
            last[0] = f"{status} {body.get('message', '')}"
            return 'admission webhook "resourceclaims.validate.draxr.io" denied' in str(body.get("message"))

        wait_until(
            "the apiserver does not call draxr's webhook",
            denied,
            START_TIMEOUT,
            alive=webhook.dead,
            detail=lambda: f"last answer: {last[0]}",
        )

    def _nodes(self) -> None:
        """Nodes without kubelets: created, then their status patched (Ready, allocatable)."""
        admin = self.cp.client()
        for name in NODES:
            status, body = admin.post(
                "/api/v1/nodes",
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                },
            )
            if status != 201:
                raise LocalError(f"cannot create Node {name}: {status} {body.get('message')}")
            node_status = {
                "capacity": NODE_ALLOCATABLE,
                "allocatable": NODE_ALLOCATABLE,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "no kubelet: a Node object for draxr's e2e",
                    }
                ],
            }
            status, body = admin.merge_patch(f"/api/v1/nodes/{name}/status", {"status": node_status})
            if status != 200:
                raise LocalError(f"cannot set the status of Node {name}: {status} {body.get('message')}")
            # The TaintNodesByCondition admission plugin taints every new Node
            # node.kubernetes.io/not-ready:NoSchedule; the node lifecycle controller would lift it once
            # the Ready condition holds. That controller watches kubelet heartbeats, so it does not run.
            status, body = admin.merge_patch(f"/api/v1/nodes/{name}", {"spec": {"taints": None}})
            if status != 200 or (body.get("spec") or {}).get("taints"):
                raise LocalError(f"cannot lift the taints of Node {name}: {status} {body}")

    def logs(self, lines: int = 40) -> str:
        """draxr's log tails, then the control plane's."""
        parts = [self.processes.logs(lines)] if self.processes is not None else []
        parts.append(self.cp.logs(lines))
        return "\n".join(parts)


def unavailable(row: Row) -> str | None:
    """Why ``row`` cannot run here (no binaries, no kubectl), or None."""
    from .controlplane.launcher import find_binaries

    found = find_binaries(row.version)
    if isinstance(found, str):
        return found
    if shutil.which("kubectl") is None:
        return "no kubectl on PATH: `.ci/kubectl.sh` fetches Debian's kubectl 1.36 into .ci/bin"
    return None


def _main() -> int:
    """``python -m e2e.local [row]``: start a row, print how to reach it, wait for Ctrl-C."""
    row = ROWS[sys.argv[1] if len(sys.argv) > 1 else "1.36-default"]
    workdir = Path(os.environ.get("TMPDIR", "/tmp")) / f"draxr-local-{row.name}-{os.getpid()}"
    with LocalCluster(row, workdir) as cluster:
        print(json.dumps({"row": row.name, "kubeconfig": str(cluster.kubeconfig), "logs": str(workdir)}))
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(_main())
