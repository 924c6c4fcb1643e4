"""Real kubelets for a ControlPlane: each Node is a kubelet of the control plane's release with its own
fake container runtime (``fakecri``), its DRA drivers (``dradriver``) and optionally a device plugin
(``deviceplugin``), joined as ``system:node:<name>`` (group ``system:nodes``) so the node authorizer and
NodeRestriction see a real node.

    with ControlPlane("1.37", controllers=NODE_CONTROLLERS) as cp, Nodes(cp, [NodeSpec("a")], workdir=w):
        ...  # pods bound to "a" run; cdi_log has one JSON line per container created

Per node: the runtime on ``<run>/<node>/cri.sock``; the kubelet (``--root-dir <run>/<node>/root``) in a
private mount namespace (``host.Containment``: the host's tunables and /var/lib/kubelet,
/var/log/containers are per-node files there); the driver ``gpu.example.com`` publishing its GPUs as
pool ``<node>``, and one driver per ``test_drivers`` name that publishes nothing and prepares what the
scenarios' own ResourceSlices hold. ``<run>`` is a short directory under /tmp (unix socket paths are
limited to 108 bytes); logs, the CDI log and the prepare log are in ``workdir``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import realnode
from .host import Containment, HostState
from .launcher import (
    ControlPlane,
    ControlPlaneError,
    NodeTools,
    Proc,
    User,
    _gates_flag,
    find_node_tools,
    free_port,
    log_tail,
    spawn,
    wait_until,
)
from .lifecycle import Lifecycle

Obj = dict[str, Any]

#: The KEP example's driver (examples/kep-5004): its DeviceClass gpu.example.com selects it.
DRIVER = "gpu.example.com"
#: The extended resource the device plugin advertises and the KEP example's DeviceClass maps.
EXTENDED_RESOURCE = "example.com/gpu"
#: The scenarios' driver (e2e/target.py): they publish its slices themselves.
TEST_DRIVERS = ("e2e.draxr.io",)
#: vendor/class of the CDI device IDs: the DRA driver's, the scenarios' driver's, the device plugin's.
CDI_KIND = "draxr.e2e/gpu"
TEST_CDI_KIND = "draxr.e2e/test"
DEVICE_PLUGIN_CDI_KIND = "draxr.e2e/dp-gpu"
#: The drivers' identity: a client certificate in a group that DRIVER_RBAC grants what a DRA
#: driver's service account gets (read claims, manage ResourceSlices, read Nodes).
DRIVER_USER = User("draxr-e2e-dra-driver", ("draxr-e2e:dra-drivers",))
#: kube-controller-manager's controllers a cluster with kubelets needs besides the launcher's: the
#: node lifecycle controller lifts the not-ready taint of a Ready node, the root CA publisher writes
#: the kube-root-ca.crt ConfigMap that every pod's service-account volume mounts.
NODE_CONTROLLERS = ("node-lifecycle-controller", "root-ca-certificate-publisher-controller")
#: Pods per kubelet (the default 110 is less than the 200-pod scenario puts on two nodes).
MAX_PODS = 250


@dataclass(frozen=True)
class NodeSpec:
    """One Node: its name, the GPUs its DRA driver publishes, and how many devices of
    EXTENDED_RESOURCE a device plugin advertises there (0: no device plugin)."""

    name: str
    gpus: int = 8
    device_plugin: int = 0
    #: The DRA driver's devices as a JSON list of resource.k8s.io/v1 Devices (default: ``gpus`` GPUs
    #: gpu-0.. with attributes model, index, numa, pcieRoot and capacity memory).
    devices: str | None = None
    #: Devices attachable-0.. the driver publishes besides, each with a binding condition
    #: (``<driver>/Attached``), a failure condition (``<driver>/AttachFailed``) and ``bindsToNode``
    #: (KEP-5007): a test flips them through the claim's ``status.devices``.
    attachable: int = 0
    #: Labels the kubelet registers its Node with (``--node-labels``).
    labels: tuple[tuple[str, str], ...] = ()


class Nodes(Lifecycle):
    """The Nodes of ``specs`` on a running ControlPlane, as a context manager."""

    def __init__(
        self,
        cp: ControlPlane,
        specs: Sequence[NodeSpec],
        *,
        workdir: Path,
        gates: Mapping[str, bool] | None = None,
        test_drivers: Sequence[str] = TEST_DRIVERS,
        kubelet: Path | None = None,
        start_timeout: float = 120.0,
        stop_timeout: float = 15.0,
        runtime: str = "fake",
        real: realnode.RealNodeConfig | None = None,
    ) -> None:
        if runtime not in ("fake", "containerd"):
            raise ValueError(f"runtime must be 'fake' or 'containerd', not {runtime!r}")
        if runtime == "containerd" and real is None:
            raise ValueError("runtime='containerd' needs real=RealNodeConfig(binaries, row network)")
        if real is not None and len(specs) > real.net.count:
            raise ValueError(f"the row network has {real.net.count} node slots for {len(specs)} nodes")
        tools = find_node_tools()
        if isinstance(tools, str) and real is None:
            raise ControlPlaneError(tools)
        if isinstance(tools, str):
            assert real is not None
            tools = NodeTools(Path("/nonexistent"), real.bins.dradriver, Path("/nonexistent"))
        elif real is not None:
            tools = NodeTools(tools.fakecri, real.bins.dradriver, tools.deviceplugin)
        self.runtime = runtime
        self.real = real if runtime == "containerd" else None
        if not specs or len({s.name for s in specs}) != len(specs):
            raise ValueError("Nodes needs one or more specs with distinct names")
        self.tools = tools
        self.cp = cp
        self.specs = list(specs)
        self.workdir = Path(workdir)
        self.gates = dict(gates if gates is not None else cp.gates)
        self.test_drivers = tuple(test_drivers)
        #: The kubelet binary (default: the control plane's release); upgrade_kubelet changes a node's.
        self.kubelet = kubelet if kubelet is not None else cp.binaries.kubelet
        self._kubelet_argv: dict[str, list[str]] = {}
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.cdi_log = self.workdir / "cdi.jsonl"
        self.prepare_log = self.workdir / "prepare.jsonl"
        self._run: Path | None = None
        self._snapshotter: str | None = None
        self._cgroups: set[Path] | None = None
        self._images: list[Path] | None = None
        #: Each containerd node's top pid (realnode.kubelet_mount_ns: its kubelet's mount namespace).
        self._containerd_pids: dict[str, int] = {}
        self._procs: list[Proc] = []
        self._host: HostState | None = None
        #: What the safety net had to put back after stop() (empty when the containment held).
        self.host_repairs: list[str] = []

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.specs]

    # -- lifecycle ---------------------------------------------------------------------------------------

    def start(self) -> None:
        self.launch()
        self.wait_ready()

    def launch(self) -> None:
        """Starts every node's processes without waiting for them (wait_ready does), so a caller can
        do other work while the kubelets register."""
        self._host = HostState.now()
        self._cgroups = realnode.runtime_cgroups() if self.real is not None else None
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.cdi_log.touch()
        self.prepare_log.touch()
        self._run = Path(tempfile.mkdtemp(prefix="draxr-n-", dir="/tmp"))
        self._driver_rbac()
        driver_kubeconfig = self.cp.add_user("dra-driver", DRIVER_USER)
        for spec in self.specs:
            self._start_node(spec, driver_kubeconfig)

    def wait_ready(self) -> None:
        for spec in self.specs:
            self._wait_node(spec)

    def stop_kubelet(self, name: str) -> None:
        """Stops one node's kubelet (its runtime, drivers and device plugin keep running, as on a
        node whose kubelet is being upgraded): SIGTERM, SIGKILL after ``stop_timeout``."""
        [proc] = [p for p in self._procs if p.name == f"{name}-kubelet"]
        self._terminate(proc)
        self._procs.remove(proc)

    def restart_driver(self, name: str, gpus: int | None = None) -> None:
        """Node ``name``'s DRA driver stopped and started again, publishing ``gpus`` GPUs (fewer than
        before: a device gone from its slice; None: as many as before), as its DaemonSet would
        restart it; returns once the kubelet registered it again."""
        [spec] = [s for s in self.specs if s.name == name]
        [proc] = [p for p in self._procs if p.name == f"{name}-{DRIVER}"]
        assert isinstance(proc.popen.args, list)  # spawn() gets a list
        argv = [str(a) for a in proc.popen.args]
        if gpus is not None:
            argv = [a for a in argv if not a.startswith("--gpus=")] + [f"--gpus={gpus}"]
        self._terminate(proc)
        self._procs.remove(proc)
        ready = self._node_dir(spec) / f"ready-{DRIVER}"
        ready.unlink(missing_ok=True)
        self._spawn(proc.name, argv, self._node_dir(spec))
        wait_until(
            f"{DRIVER} on {name} not registered again", ready.exists, self.start_timeout, alive=self.dead
        )

    def tag_image(self, source: str, target: str) -> None:
        """Every node's containerd also names its image ``source`` as ``target``."""
        assert self.real is not None, "tag_image needs the containerd runtime"
        for spec in self.specs:
            realnode.tag_image(self.real.bins, self._node_dir(spec) / "c.sock", source, target)

    def set_gates(self, gates: Mapping[str, bool]) -> None:
        """The feature gates each kubelet starts with from now on (start_kubelet)."""
        self.gates = dict(gates)
        for name, argv in self._kubelet_argv.items():
            kept = [a for a in argv if not a.startswith("--feature-gates=")]
            self._kubelet_argv[name] = kept + (
                ["--feature-gates=" + _gates_flag(self.gates)] if self.gates else []
            )

    def start_kubelet(self, name: str, kubelet: Path, version: str) -> None:
        """Starts a stopped node's kubelet again from ``kubelet`` (another release: an upgrade), with the
        same root directory, config and identity, and waits until the Node reports ``version`` and is
        ready with its devices (the drivers register again with the new kubelet)."""
        [spec] = [s for s in self.specs if s.name == name]
        argv = [str(kubelet), *self._kubelet_argv[name][1:]]
        self._kubelet_argv[name] = argv
        node = self._node_dir(spec)
        exited_proxy = self._forget_exited_kube_proxy(spec) if self.real is not None else False
        admin = self.cp.client()
        # A deleted Node took its ResourceSlices with it (their owner): once the kubelet registered
        # it anew, the driver starts again and publishes under the new Node, as a DaemonSet's pod
        # would be recreated.
        node_deleted = admin.get(f"/api/v1/nodes/{name}")[0] == 404
        self._spawn(f"{name}-kubelet", self._kubelet_command(spec, argv), node)

        def reports() -> bool:
            status, body = admin.get(f"/api/v1/nodes/{name}")
            return status == 200 and body["status"]["nodeInfo"]["kubeletVersion"] == version

        wait_until(
            f"node {name} does not report kubelet {version}", reports, self.start_timeout, alive=self.dead
        )
        if exited_proxy:
            self._start_kube_proxy(spec)
        if node_deleted:
            self.restart_driver(name)
        self._wait_node(spec)

    def stop(self) -> None:
        """SIGTERM to each process group (device plugins and drivers, then kubelets, then runtimes),
        SIGKILL after ``stop_timeout``; then the host is compared with its state before start() and
        repaired (``host_repairs``), and the run directory removed."""
        for proc in reversed(self._procs):
            self._terminate(proc)
        self._procs = []
        if self._host is not None:
            self.host_repairs = self._host.restore()
            self._host = None
        if self._cgroups is not None:
            self.host_repairs += [f"cgroup kept: {c}" for c in realnode.remove_cgroups(self._cgroups)]
            self._cgroups = None
        if self._run is not None:
            shutil.rmtree(self._run, ignore_errors=True)
            self._run = None
        self._images = None

    def _terminate(self, proc: Proc) -> None:
        """SIGTERM to the process group, SIGKILL after ``stop_timeout``."""
        self._signal(proc, signal.SIGTERM)
        try:
            proc.popen.wait(self.stop_timeout)
        except subprocess.TimeoutExpired:
            self._signal(proc, signal.SIGKILL)
            proc.popen.wait(self.stop_timeout)

    @staticmethod
    def _signal(proc: Proc, sig: int) -> None:
        """Signals the process group the process leads (a kubelet's mount helpers with it)."""
        if proc.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.popen.pid, sig)

    def logs(self, lines: int = 40) -> str:
        return "\n".join(f"----- {p.name} ({p.log}) -----\n{log_tail(p.log, lines)}" for p in self._procs)

    def dead(self) -> str | None:
        """Which node process has exited, with its log's tail, or None while all run."""
        for p in self._procs:
            code = p.popen.poll()
            if code is not None:
                return f"{p.name} exited with {code}; the end of {p.log}:\n{log_tail(p.log)}"
        return None

    # -- pieces ------------------------------------------------------------------------------------------

    def _spawn(self, name: str, argv: list[str], cwd: Path) -> Proc:
        """Starts ``argv`` in ``cwd`` (its node's directory: a process that removes relative paths
        removes nothing of the logs), in a process group of its own, logging to ``<workdir>/<name>.log``."""
        proc = spawn(name, argv, self.workdir, cwd, own_group=True)
        self._procs.append(proc)
        return proc

    def _driver_rbac(self) -> None:
        admin = self.cp.client()
        role = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": DRIVER_USER.name},
            "rules": [
                {
                    "apiGroups": ["resource.k8s.io"],
                    "resources": ["resourceclaims"],
                    "verbs": ["get", "list", "watch"],
                },
                {
                    "apiGroups": ["resource.k8s.io"],
                    "resources": ["resourceslices"],
                    "verbs": [
                        "get",
                        "list",
                        "watch",
                        "create",
                        "update",
                        "patch",
                        "delete",
                        "deletecollection",
                    ],
                },
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
            ],
        }
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": DRIVER_USER.name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": DRIVER_USER.name,
            },
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": DRIVER_USER.groups[0]}
            ],
        }
        for path, body in (
            ("/apis/rbac.authorization.k8s.io/v1/clusterroles", role),
            ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding),
        ):
            status, answer = admin.post(path, body)
            if status != 201:
                raise ControlPlaneError(f"cannot create {body['kind']} {DRIVER_USER.name}: {status} {answer}")

    def _node_dir(self, spec: NodeSpec) -> Path:
        assert self._run is not None
        return self._run / spec.name

    def _start_node(self, spec: NodeSpec, driver_kubeconfig: Path) -> None:
        node = self._node_dir(spec)
        root = node / "root"
        containment = Containment(node)
        containment.prepare()
        for d in (root, node / "pod-logs", node / "kubelet-pki"):
            d.mkdir(parents=True, exist_ok=True)
        kubeconfig = self.cp.add_user(
            f"node-{spec.name}", User(f"system:node:{spec.name}", ("system:nodes",))
        )
        if self.real is not None:
            socket = self._start_containerd(spec)
            kubeconfig = self._node_kubeconfig(kubeconfig)
            driver_kubeconfig = self._node_kubeconfig(driver_kubeconfig)
        else:
            socket = node / "cri.sock"
            runtime = self._spawn(
                f"{spec.name}-fakecri",
                [
                    str(self.tools.fakecri),
                    f"--socket={socket}",
                    f"--cdi-log={self.cdi_log}",
                    f"--kubeconfig={kubeconfig}",
                ],
                node,
            )
            wait_until(
                f"the fake runtime of {spec.name} did not listen",
                socket.exists,
                self.start_timeout,
                alive=lambda: self.dead() if runtime.popen.poll() is not None else None,
            )
        config = node / "kubelet.json"
        config.write_text(json.dumps(self._kubelet_config(spec, socket), indent=2) + "\n")
        argv = [
            str(self.kubelet),
            f"--config={config}",
            f"--root-dir={root}",
            f"--cert-dir={node / 'kubelet-pki'}",
            f"--kubeconfig={kubeconfig}",
            f"--hostname-override={spec.name}",
            "--v=2",
        ]
        if self.gates:
            argv.append("--feature-gates=" + _gates_flag(self.gates))
        if spec.labels:
            argv.append("--node-labels=" + ",".join(f"{k}={v}" for k, v in spec.labels))
        if self.real is not None:
            argv.append(f"--node-ip={self.real.net.node_ip(self.specs.index(spec))}")
        self._kubelet_argv[spec.name] = argv
        self._spawn(f"{spec.name}-kubelet", self._kubelet_command(spec, argv), node)
        if self.real is not None:
            self._start_kube_proxy(spec)
        drivers = [(DRIVER, CDI_KIND, True)] + [(d, TEST_CDI_KIND, False) for d in self.test_drivers]
        for driver, kind, publish in drivers:
            argv = [
                str(self.tools.dradriver),
                f"--node-name={spec.name}",
                f"--driver-name={driver}",
                f"--kubeconfig={driver_kubeconfig}",
                f"--registry-dir={root / 'plugins_registry'}",
                f"--plugin-dir={root / 'plugins' / driver}",
                f"--cdi-kind={kind}",
                f"--publish={'true' if publish else 'false'}",
                f"--gpus={spec.gpus}",
                f"--prepare-log={self.prepare_log}",
                f"--ready-file={node / ('ready-' + driver)}",
            ]
            if publish and spec.devices is not None:
                argv.append(f"--devices={spec.devices}")
            if publish and spec.attachable:
                argv.append(f"--attachable={spec.attachable}")
            if self.real is not None:
                argv.append(f"--cdi-dir={node / 'cdi'}")
            self._spawn(f"{spec.name}-{driver}", argv, node)
        if spec.device_plugin:
            self._spawn(
                f"{spec.name}-deviceplugin",
                [
                    str(self.tools.deviceplugin),
                    f"--node-name={spec.name}",
                    f"--resource={EXTENDED_RESOURCE}",
                    f"--count={spec.device_plugin}",
                    f"--dir={containment.host_dir(Path('/var/lib/kubelet')) / 'device-plugins'}",
                    f"--cdi-kind={DEVICE_PLUGIN_CDI_KIND}",
                    f"--ready-file={node / 'ready-deviceplugin'}",
                    *([f"--cdi-dir={node / 'cdi'}"] if self.real is not None else []),
                ],
                node,
            )

    def _kubelet_config(self, spec: NodeSpec, socket: Path) -> Obj:
        """What a kubelet needs to run as root on cgroup v1 without systemd, on loopback ports."""
        endpoint = f"unix://{socket}"
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "failCgroupV1": False,
            "failSwapOn": False,
            "cgroupsPerQOS": False,
            "enforceNodeAllocatable": [],
            "cgroupDriver": "cgroupfs",
            "containerRuntimeEndpoint": endpoint,
            "imageServiceEndpoint": endpoint,
            "localStorageCapacityIsolation": False,
            "evictionHard": {"memory.available": "1Mi"},
            "address": "127.0.0.1",
            "port": free_port(),
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": free_port(),
            # The kubelet's own API is on loopback only; nobody but the test machine reaches it.
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "podLogsDir": str(self._node_dir(spec) / "pod-logs"),
            "maxPods": MAX_PODS,
            "serializeImagePulls": False,
            "resolvConf": "",
        }
        if self.real is not None:
            # In the node's own network namespace: the API server reaches it (logs, exec) at the node
            # IP; only the host can route there, so it serves anonymously as on loopback.
            config["address"] = self.real.net.node_ip(self.specs.index(spec))
            config["authentication"] = {"anonymous": {"enabled": True}, "webhook": {"enabled": False}}
        return config

    def _kubelet_command(self, spec: NodeSpec, argv: list[str]) -> list[str]:
        """The kubelet's command line, contained: on a containerd node inside the node's network
        namespace and containerd's mount namespace (so a restarted kubelet sees what its first one
        saw), else in a mount namespace of its own."""
        containment = Containment(self._node_dir(spec))
        if self.real is None:
            return containment.namespaced(argv)
        return self._in_node(
            spec,
            [
                *realnode.kubelet_mount_ns(self._containerd_pids[spec.name]),
                *containment.namespaced(argv, shared_from_parent=True),
            ],
        )

    # -- containerd nodes --------------------------------------------------------------------------------

    def _in_node(self, spec: NodeSpec, argv: list[str]) -> list[str]:
        """``argv`` in the node's network namespace (a containerd node), else unchanged."""
        if self.real is None:
            return argv
        return [*self.real.net.netns(self.specs.index(spec)), *argv]

    def _node_kubeconfig(self, kubeconfig: Path) -> Path:
        """A copy of ``kubeconfig`` naming the API server by the row bridge's address (a node's
        loopback is its own)."""
        assert self.real is not None
        config = json.loads(kubeconfig.read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = f"https://{self.real.net.host_ip}:{self.cp.port}"
        out = kubeconfig.with_name(kubeconfig.stem + "-node.kubeconfig")
        out.write_text(json.dumps(config, indent=2) + "\n")
        return out

    def _forget_exited_kube_proxy(self, spec: NodeSpec) -> bool:
        """Whether the node's kube-proxy has exited (it does when its Node is deleted: "Node is being
        deleted"); if so it is forgotten, to be started again once the kubelet has registered the Node
        anew, as its DaemonSet would."""
        [proxy] = [p for p in self._procs if p.name == f"{spec.name}-kube-proxy"]
        if proxy.popen.poll() is None:
            return False
        self._procs.remove(proxy)
        return True

    def _start_kube_proxy(self, spec: NodeSpec) -> None:
        """kube-proxy (iptables mode) in the node's network namespace, as ``system:kube-proxy`` (the
        default system:node-proxier binding): its rules and net.* sysctls live and die there; the
        conntrack settings that would write global sysctls are off."""
        assert self.real is not None
        node = self._node_dir(spec)
        key = f"proxy-{spec.name}"  # started again after its Node was deleted: the same identity
        issued = self.cp.kubeconfig_path(key) if key in self.cp.users else None
        kubeconfig = self._node_kubeconfig(issued or self.cp.add_user(key, User("system:kube-proxy", ())))
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig)},
            "mode": "iptables",
            "hostnameOverride": spec.name,
            "clusterCIDR": self.real.net.pod_cidr(self.specs.index(spec)),
            "conntrack": {"maxPerCore": 0, "min": 0},
            "healthzBindAddress": "127.0.0.1:10256",  # the node's own loopback
            "metricsBindAddress": "127.0.0.1:10249",
            "oomScoreAdj": 0,  # lowering it needs CAP_SYS_RESOURCE
        }
        path = node / "kube-proxy.json"
        path.write_text(json.dumps(config, indent=2) + "\n")
        argv = [str(self.real.bins.kube_proxy), f"--config={path}", "--v=2"]
        self._spawn(f"{spec.name}-kube-proxy", self._in_node(spec, argv), node)

    def _start_containerd(self, spec: NodeSpec) -> Path:
        """containerd for one node (realnode.containerd_argv), its CNI config and the row's images
        imported; returns its socket."""
        assert self.real is not None
        assert self._run is not None
        bins, net = self.real.bins, self.real.net
        index = self.specs.index(spec)
        node = self._node_dir(spec)
        for d in ("cni", "cdi", "cni-state"):
            (node / d).mkdir(parents=True, exist_ok=True)
        (node / "cni" / "10-draxr.conflist").write_text(realnode.cni_config(node, net.pod_cidr(index)) + "\n")
        if self._snapshotter is None:
            self._snapshotter = "overlayfs" if realnode.overlay_works(self._run / "ov") else "native"
        config = node / "containerd.toml"
        config.write_text(realnode.containerd_config(node, bins, node / "cdi", self._snapshotter))
        socket = node / "c.sock"
        argv = realnode.containerd_argv(net.netns(index), config, bins, node / "root")
        proc = spawn(
            f"{spec.name}-containerd",
            argv,
            self.workdir,
            node,
            own_group=True,
            env=realnode.runtime_env(bins),
        )
        self._procs.append(proc)
        self._containerd_pids[spec.name] = proc.popen.pid
        wait_until(
            f"containerd of {spec.name} did not listen",
            socket.exists,
            self.start_timeout,
            alive=lambda: self.dead() if proc.popen.poll() is not None else None,
        )
        if self._images is None:
            self._images = [*realnode.build_images(bins, self._run / "images"), *self.real.images]
        realnode.import_images(bins, socket, self._images, self._snapshotter)
        return socket

    def _wait_node(self, spec: NodeSpec) -> None:
        """Ready (and untainted), its drivers registered, its GPUs and attachable devices published,
        the device plugin's devices in allocatable."""
        admin = self.cp.client()
        node = self._node_dir(spec)
        last: list[str] = ["nothing yet"]

        def ready() -> bool:
            for name in [DRIVER, *self.test_drivers] + (["deviceplugin"] if spec.device_plugin else []):
                if not (node / f"ready-{name}").exists():
                    last[0] = f"{name} is not registered with the kubelet"
                    return False
            status, body = admin.get(f"/api/v1/nodes/{spec.name}")
            if status != 200:
                last[0] = f"GET node: {status} {body.get('message', '')}"
                return False
            conditions = {c["type"]: c for c in (body.get("status") or {}).get("conditions") or []}
            if (conditions.get("Ready") or {}).get("status") != "True":
                last[0] = f"not Ready: {conditions.get('Ready')}"
                return False
            taints = (body.get("spec") or {}).get("taints") or []
            if taints:
                last[0] = f"Ready but tainted: {taints}"
                return False
            allocatable = (body.get("status") or {}).get("allocatable") or {}
            if spec.device_plugin and allocatable.get(EXTENDED_RESOURCE) != str(spec.device_plugin):
                last[0] = f"allocatable {EXTENDED_RESOURCE}: {allocatable.get(EXTENDED_RESOURCE)}"
                return False
            status, body = admin.get(
                "/apis/resource.k8s.io/v1/resourceslices",
                fieldSelector=f"spec.nodeName={spec.name},spec.driver={DRIVER}",
            )
            published = sum(len(s["spec"].get("devices") or []) for s in body.get("items") or [])
            want = (
                len(json.loads(spec.devices)) if spec.devices is not None else spec.gpus
            ) + spec.attachable
            if status != 200 or published != want:
                last[0] = f"{published} of {want} devices published ({status})"
                return False
            return True

        wait_until(
            f"node {spec.name} did not become ready",
            ready,
            self.start_timeout,
            alive=self.dead,
            detail=lambda: f"last: {last[0]}\n{self.logs(15)}",
        )
