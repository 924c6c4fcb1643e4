"""draxr installed on a local cluster of real Kubernetes components (``e2e/controlplane``): the
Kubernetes side of ``make e2e-local``.

``LocalCluster(ROWS["1.37"])`` starts etcd, kube-apiserver (node authorizer and NodeRestriction on),
kube-controller-manager (claims from templates, garbage collection, namespaces, ServiceAccounts,
Deployments, quota, node lifecycle, the root CA ConfigMap) and kube-scheduler of the row's release,
then installs draxr the way an operator would, except that draxr itself runs as subprocesses:

1. ``draxr manifests`` renders the Namespace, the RBAC and the flow control (FlowSchema and priority
   level); the real ``kubectl apply`` applies them;
2. ``draxr certs --ip 127.0.0.1`` makes the webhook's CA and serving certificate;
3. ``draxr serve --no-worker`` (the webhook, as ``system:serviceaccount:draxr-system:draxr-webhook``)
   and two ``draxr serve --no-webhook`` (the workers, as ``...:draxr-worker``, leader elected with
   short timings) run as subprocesses on loopback, ``--mode auto`` (the default) with a short
   template grace and gate probe interval, plus the row's flags; each ``/readyz`` is waited for;
4. ``draxr manifests --webhook-url https://127.0.0.1:<port>`` renders the webhook configurations
   (no kube-proxy, so no Service IP could route), applied with ``kubectl``; a dry-run probe waits
   until the apiserver calls the hooks;
5. two real kubelets of the row's release (``e2e/controlplane/nodes.py``; started right after the
   control plane, waited for here), each with a fake container runtime and the DRA driver
   ``gpu.example.com`` publishing 8 GPUs; ``e2e-node-b`` also runs a device plugin for
   ``example.com/gpu`` (KEP-5004's mixed cluster) and, where ``DRADeviceBindingConditions`` is on
   (1.36, 1.37), its driver also publishes ``Row.attachable`` devices with binding conditions. Pods
   really run: the runtime records each container's CDI devices in the row's CDI log;
6. the KEP example's DeviceClass (``examples/kep-5004/deviceclass.yaml``: ``gpu.example.com`` maps
   ``example.com/gpu``).

``LocalCluster(row, workdir, draxr="chart")`` installs draxr as a platform team does instead
(``e2e/chart.py``): the kubelets run on containerd in network namespaces joined by the row's bridge
(``e2e/controlplane/realnode.py``), draxr's image and the workload image from ``e2e/images`` are
imported on every node, and ``helm install`` of ``manifests/helm/draxr`` runs the chart's Deployments
(2 webhooks, 2 workers); kube-apiserver's ``--enable-aggregator-routing`` calls the hooks at the
Service's endpoints (pod IPs the host routes to), so no kube-proxy is needed on the host.

The e2e scenarios reach it through the admin kubeconfig like any real cluster (``cluster_target``),
and kill or restart draxr's processes through ``LocalProcesses``. ``stop()`` tears everything down and
says what the host safety net had to put back (``host_repairs``: nothing, when the kubelets'
containment held).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from webhook.core.cluster.gates import GATE_LABEL

from .chart import CHART_CONTROLLERS, DRAXR_MODES, ChartInstall, chart_unavailable
from .controlplane.launcher import (
    DEFAULT_CONTROLLERS,
    Client,
    ControlPlane,
    ControlPlaneError,
    _die_with_parent,
    free_port,
    log_tail,
    wait_until,
)
from .controlplane.lifecycle import Lifecycle
from .controlplane.nodes import DRIVER, EXTENDED_RESOURCE, NODE_CONTROLLERS, Nodes, NodeSpec
from .target import loopback_get

NAMESPACE = "draxr-system"
LEASE = "draxr-worker"
#: Leader election for the local workers: lease duration, renew deadline, retry period (seconds).
LEASE_TIMINGS = (1.5, 1.0, 0.2)
#: The row's Nodes: real kubelets with 8 GPUs each; the second also has a device plugin advertising
#: two example.com/gpu (a name with allocatable there is the device plugin's on that node).
NODES = (NodeSpec("e2e-node-a"), NodeSpec("e2e-node-b", device_plugin=2))
#: GATE_LABEL says whether a Node's kubelet has DRAExtendedResource on; without it draxr infers that
#: from the kubelet's version (on from 1.36).
GATE = "DRAExtendedResource"


#: The Node whose DRA driver also publishes the row's attachable devices (``Row.attachable``): the
#: device plugin's, where ``example.com/gpu`` is the device plugin's name (KEP-5004's mixed cluster),
#: so the KEP example's class, which selects every ``gpu.example.com`` device, never allocates them
#: for that name; only e2e/test_binding_conditions.py's class selects them.
ATTACHABLE_NODE = "e2e-node-b"


def row_nodes(row: Row) -> list[NodeSpec]:
    """NODES for a row, with the row's attachable devices on ATTACHABLE_NODE; where the row sets the
    gate by hand, labelled as an admin who did so labels them (GATE_LABEL), so draxr knows the
    kubelets' gate (1.35-gate-on: on, though 1.35's default is off)."""
    specs = [
        dataclasses.replace(spec, attachable=row.attachable) if spec.name == ATTACHABLE_NODE else spec
        for spec in NODES
    ]
    if GATE not in row.gates:
        return specs
    label = ((GATE_LABEL, "on" if row.gates[GATE] else "off"),)
    return [dataclasses.replace(spec, labels=spec.labels + label) for spec in specs]


#: The KEP example's DeviceClass (gpu.example.com maps example.com/gpu), installed on every row.
KEP_DEVICE_CLASS = Path(__file__).resolve().parents[1] / "examples" / "kep-5004" / "deviceclass.yaml"
KEP_DEVICE_CLASS_NAME = "gpu.example.com"
RBAC_KINDS = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
#: draxr's API Priority and Fairness level and FlowSchema, applied with the RBAC as an install does.
FLOW_CONTROL_KINDS = ("PriorityLevelConfiguration", "FlowSchema")
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
START_TIMEOUT = 60.0
#: kube-controller-manager's controllers on the rows: the launcher's (claims from templates, garbage
#: collection, namespaces, ServiceAccounts), the Deployment scenario's, quota, and what kubelets need
#: (the node lifecycle controller, the root CA ConfigMap).
CONTROLLERS = (
    *DEFAULT_CONTROLLERS,
    "deployment-controller",
    "replicaset-controller",
    "resourcequota-controller",
    *NODE_CONTROLLERS,
)
#: kube-controller-manager's client is limited to 20 requests/s by default: 200 pods in rewrite mode
#: cost it ~1000 writes (claims from templates, then their release and deletion), 50 s of waiting.
CONTROLLER_MANAGER_ARGS = ("--kube-api-qps=1000", "--kube-api-burst=1000")
#: kube-scheduler's client, where it runs, as fast as kube-controller-manager's.
SCHEDULER_ARGS = ("--kube-api-qps=1000", "--kube-api-burst=1000")
#: A DeviceClass label that leaves the class's devices to kube-scheduler (draxr manages the others).
UNMANAGED_LABEL = "e2e.draxr.io/kube-scheduler"
#: ``draxr serve`` flags of every row, for the tests: an unused template of the rewrite goes after 1 s
#: (the scenarios wait for it), the apiserver gate is probed every 5 s, every class without
#: UNMANAGED_LABEL is draxr's to allocate. ``--mode`` stays ``auto``.
DRAXR_FLAGS = (
    "--template-grace",
    "1",
    "--gate-probe-interval",
    "5",
    "--managed-classes",
    f"!{UNMANAGED_LABEL}",
)

#: Attachable devices on the rows where DRADeviceBindingConditions is on (Row.attachable).
ATTACHABLE = 2
#: The workers' ``--binding-timeout`` there (upstream's default is 600 s): a pod whose devices'
#: conditions are never set is released after it. Only e2e/test_binding_conditions.py's pods wait
#: for binding conditions (no other class selects the attachable devices), so no other scenario
#: notices it; 30 s leaves that module time to set a condition before the timeout.
BINDING_TIMEOUT = 30
BINDING_CONDITIONS_FLAGS = ("--binding-timeout", str(BINDING_TIMEOUT))

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
    #: Devices with binding conditions (KEP-5007) ATTACHABLE_NODE's DRA driver publishes besides its
    #: GPUs: only where ``DRADeviceBindingConditions`` is on (beta and on by default from 1.36; off in
    #: 1.34 and 1.35, where the apiserver drops the fields).
    attachable: int = 0
    #: ``--runtime-config`` beyond the release's default API versions.
    runtime_config: Mapping[str, str] = field(default_factory=dict)

    @property
    def gangs(self) -> bool:
        """Workload-aware scheduling is on: the apiserver serves PodGroups, kube-scheduler places
        them (``GenericWorkload``, beta and off by default in 1.37)."""
        return bool(self.gates.get("GenericWorkload")) and bool(self.runtime_config)


#: Workload-aware scheduling on 1.37: GenericWorkload (beta, off by default) with topology-aware
#: placement (alpha), and the API version kube-scheduler watches.
GANG_GATES: Mapping[str, bool] = {"GenericWorkload": True, "TopologyAwareWorkloadScheduling": True}
GANG_RUNTIME_CONFIG: Mapping[str, str] = {"scheduling.k8s.io/v1beta1": "true"}

ROWS: dict[str, Row] = {
    row.name: row
    for row in (
        # DRAExtendedResource is alpha and off in 1.34 and 1.35: draxr rewrites pods into claims,
        # which the row's kube-scheduler places.
        Row("1.34-gate-off", "1.34", {"DRAExtendedResource": False}, native=False),
        Row("1.35-gate-off", "1.35", {"DRAExtendedResource": False}, native=False),
        Row("1.35-gate-on", "1.35", {"DRAExtendedResource": True}),
        # Beta and on by default in 1.36; GA and locked on in 1.37 (not passed: it cannot be set).
        # DRADeviceBindingConditions is on in both: two attachable devices, a short binding timeout.
        Row("1.36-default", "1.36", draxr_flags=BINDING_CONDITIONS_FLAGS, attachable=ATTACHABLE),
        # Gangs (issue 33): PodGroups served (scheduling.k8s.io/v1beta1) and placed in one topology
        # domain, by kube-scheduler and by draxr alike.
        Row(
            "1.37",
            "1.37",
            GANG_GATES,
            draxr_flags=BINDING_CONDITIONS_FLAGS,
            attachable=ATTACHABLE,
            runtime_config=GANG_RUNTIME_CONFIG,
        ),
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


class LocalCluster(Lifecycle):
    """A control plane of one matrix row with draxr installed (see the module docstring)."""

    def __init__(
        self,
        row: Row,
        workdir: Path,
        *,
        workers: int = 2,
        webhooks: int = 1,
        nodes: Sequence[NodeSpec] | None = None,
        kubelet: Path | None = None,
        progress: Callable[[str], None] = lambda _: None,
        draxr: str = "processes",
    ) -> None:
        """``draxr``: ``processes`` (subprocesses on loopback, fake runtimes) or ``chart`` (the Helm
        chart on containerd nodes; see the module docstring); ``webhooks``: webhook replicas
        (``webhook``, ``webhook-1``, ...; the configurations call the first, every one reports the
        mode); ``nodes``: the Nodes (default ``row_nodes(row)``);
        ``kubelet``: the kubelets' binary (default: the row's release; an older one for an upgrade)."""
        self.row = row
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.n_workers = workers
        self.n_webhooks = webhooks
        self.node_specs = list(nodes) if nodes is not None else row_nodes(row)
        self.kubelet = kubelet
        if draxr not in DRAXR_MODES:
            raise ValueError(f"draxr must be one of {', '.join(DRAXR_MODES)}, not {draxr!r}")
        self.draxr = draxr
        #: The chart install (draxr="chart"): the row network, images and helm release.
        self.chart: ChartInstall | None = (
            ChartInstall(self.workdir, len(self.node_specs)) if draxr == "chart" else None
        )
        # The release's default API versions (resource.k8s.io/v1 only), as a cluster installed with
        # defaults serves them, and the row's own (PodGroups).
        self.cp = ControlPlane(
            row.version,
            gates=row.gates,
            controllers=(*CONTROLLERS, *(CHART_CONTROLLERS if self.chart is not None else ())),
            controller_manager_args=CONTROLLER_MANAGER_ARGS,
            scheduler=True,
            scheduler_args=SCHEDULER_ARGS,
            runtime_config=dict(row.runtime_config),
            workdir=self.workdir / "controlplane",
            **(self.chart.control_plane_args() if self.chart is not None else {}),
        )
        self.certs = self.workdir / "certs"
        self.processes: LocalProcesses | None = None
        self.nodes: Nodes | None = None
        self.kubectl = shutil.which("kubectl") or ""
        self.progress = progress
        #: What the host safety net put back when the row stopped (empty: the containment held).
        self.host_repairs: list[str] = []

    # -- lifecycle ------------------------------------------------------------------------------------

    def start(self) -> None:
        if not self.kubectl:
            raise LocalError(
                "no kubectl on PATH: `.ci/kubectl.sh` fetches Debian's kubectl 1.36 into .ci/bin"
            )
        if self.chart is not None:
            self._start_chart(self.chart)
            return
        self.progress(f"starting etcd and Kubernetes v{self.cp.version}'s control plane")
        self.cp.start()
        self.progress(
            f"starting {len(self.node_specs)} kubelets (fake runtimes, DRA drivers, device plugins)"
        )
        self.nodes = Nodes(
            self.cp,
            self.node_specs,
            workdir=self.workdir / "nodes",
            gates=self.row.gates,
            kubelet=self.kubelet,
        )
        self.nodes.launch()
        self.progress("installing draxr (RBAC, flow control, certificates, webhook, two workers)")
        # RBAC and flow control only: no certificates made here.
        self._apply(self._manifests("--cert-manager"), RBAC_KINDS + FLOW_CONTROL_KINDS)
        _run(draxr_argv("certs", "--out", str(self.certs), "--namespace", NAMESPACE, "--ip", "127.0.0.1"))
        self.processes = LocalProcesses(self._start_draxr(), self.cp.client(), LEASE_TIMINGS)
        webhook = self.processes.procs["webhook"]
        self._apply(
            self._manifests("--ca-bundle", str(self.certs / "ca.crt"), "--webhook-url", self.webhook_url),
            WEBHOOK_KINDS,
        )
        self._wait_for_hooks(webhook)
        self.progress("waiting for the nodes: Ready, drivers registered, devices published")
        self.nodes.wait_ready()
        self._kep_device_class()
        self.progress("ready")

    def _start_chart(self, chart: ChartInstall) -> None:
        self.progress("building or finding draxr's and the workload's images (e2e/images)")
        chart.prepare(self.progress)
        self.progress(f"starting the row network and Kubernetes v{self.cp.version}'s control plane")
        chart.net.start()
        self.cp.start()
        self.progress(f"starting {len(self.node_specs)} kubelets on containerd (images imported)")
        self.nodes = Nodes(
            self.cp,
            self.node_specs,
            workdir=self.workdir / "nodes",
            gates=self.row.gates,
            kubelet=self.kubelet,
            runtime="containerd",
            real=chart.node_config(),
        )
        self.nodes.launch()
        self.nodes.wait_ready()
        self.progress(f"helm install draxr ({chart.image})")
        chart.install(self.kubeconfig, self.kubectl, self.progress)
        self._wait_for_hooks(None)
        self._kep_device_class()
        self.progress("ready")

    def stop(self) -> None:
        if self.processes is not None:
            self.processes.stop()
        if self.nodes is not None:
            self.nodes.stop()
            self.host_repairs = self.nodes.host_repairs
        self.cp.stop(remove_workdir=False)
        if self.chart is not None:
            self.chart.net.stop()

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
        webhooks = [self._webhook(f"webhook-{i}" if i else "webhook") for i in range(self.n_webhooks)]
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
        procs = [*webhooks, *workers]
        for p in procs:
            p.start()
        for p in procs:
            p.wait_ready()
        return procs

    def _webhook(self, name: str) -> DraxrProcess:
        return DraxrProcess(
            name,
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
            self.workdir / f"draxr-{name}.log",
            free_port(),
            https_ca=self.certs / "ca.crt",
        )

    def _wait_for_hooks(self, webhook: DraxrProcess | None) -> None:
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
            alive=webhook.dead if webhook is not None else None,
            detail=lambda: f"last answer: {last[0]}",
        )

    def _kep_device_class(self) -> None:
        """examples/kep-5004/deviceclass.yaml, as an admin applies it (the field and the annotation)."""
        _run([self.kubectl, "--kubeconfig", str(self.kubeconfig), "apply", "-f", str(KEP_DEVICE_CLASS)])

    def logs(self, lines: int = 40) -> str:
        """draxr's log tails, then the nodes', then the control plane's."""
        parts = [self.processes.logs(lines)] if self.processes is not None else []
        if self.nodes is not None:
            parts.append(self.nodes.logs(lines))
        parts.append(self.cp.logs(lines))
        return "\n".join(parts)


def unavailable(row: Row, draxr: str = "processes") -> str | None:
    """Why ``row`` cannot run here (no binaries, no kubectl; for the chart: no runtime, image tools
    or helm), or None."""
    from .controlplane.launcher import find_binaries, find_node_tools

    for found in (find_binaries(row.version), find_node_tools()):
        if isinstance(found, str):
            return found
    if shutil.which("kubectl") is None:
        return "no kubectl on PATH: `.ci/kubectl.sh` fetches Debian's kubectl 1.36 into .ci/bin"
    if draxr == "chart":
        return chart_unavailable(row.version)
    return None


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _main(argv: Sequence[str]) -> int:
    """``python -m e2e.local [ROW] [--draxr processes|chart]``: start a row; once it is ready print
    one JSON line on stdout (how to reach it); run until SIGINT or SIGTERM, then tear it down.
    Progress goes to stderr."""
    parser = argparse.ArgumentParser(prog="python -m e2e.local")
    parser.add_argument("row", nargs="?", default="1.37")
    parser.add_argument("--draxr", choices=DRAXR_MODES, default="processes")
    args = parser.parse_args(argv)
    name = args.row
    if name not in ROWS:
        print(f"e2e.local: unknown row {name!r} (known: {', '.join(ROWS)})", file=sys.stderr)
        return 2
    row = ROWS[name]
    if (reason := unavailable(row, args.draxr)) is not None:
        print(f"e2e.local: {reason}", file=sys.stderr)
        return 1

    def progress(message: str) -> None:
        print(f"[e2e.local {row.name}] {message}", file=sys.stderr, flush=True)

    workdir = Path(tempfile.mkdtemp(prefix=f"draxr-local-{row.name}-"))
    for sig in (signal.SIGINT, signal.SIGTERM):  # SIGINT too: a background job starts with it ignored
        signal.signal(sig, _interrupt)
    cluster = LocalCluster(row, workdir, progress=progress, draxr=args.draxr)
    t0 = time.monotonic()
    try:
        with cluster:
            assert cluster.nodes is not None
            ready: dict[str, Any] = {
                "kubeconfig": str(cluster.kubeconfig),
                "cdi_log": str(cluster.nodes.cdi_log),
                "nodes": cluster.nodes.names,
                "driver": DRIVER,
                "device_class": KEP_DEVICE_CLASS_NAME,
                "extended_resource": EXTENDED_RESOURCE,
                "prepare_log": str(cluster.nodes.prepare_log),
                "logs": str(workdir),
            }
            if cluster.chart is not None:
                ready.update(cluster.chart.summary(), start_seconds=round(time.monotonic() - t0, 1))
            print(json.dumps(ready), flush=True)
            signal.pause()
    except KeyboardInterrupt:
        progress("stopping")
    except (LocalError, ControlPlaneError) as e:
        print(f"e2e.local: {row.name} did not start (logs in {workdir}): {e}", file=sys.stderr)
        return 1
    if cluster.host_repairs:
        progress(f"the host safety net had to repair: {'; '.join(cluster.host_repairs)}; logs in {workdir}")
        return 1
    shutil.rmtree(workdir, ignore_errors=True)
    progress("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
