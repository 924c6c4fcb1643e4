"""Real nodes on containerd, contained: each node in its own network namespace, joined to a bridge of
the row on the host; containerd in that namespace and in private mount and pid namespaces, so its
mounts, its shims and their containers end with it.

    with RowNetwork(nodes=1) as net, ControlPlane("1.37", advertise_address=net.host_ip, ...) as cp, \\
            Nodes(cp, [NodeSpec("a")], workdir=w, runtime="containerd", real=RealNodeConfig(bins, net)):
        ...  # pods get IPs in net.pod_cidr(0), reachable from the host

Layout of a row with base ``10.244.X.0/24`` (X picked unused on the host): the bridge has ``.1`` (the
API server's advertise address), node ``i`` has ``.(10+i)``; node ``i``'s pods are in
``10.(246+i).X.0/24``, routed on the host through the node's address. Nothing is written to the host's
/run, /var/lib or /etc: containerd's root, state, CNI state and CDI specs are under the node's directory.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from . import oci
from .launcher import ControlPlaneError, find_node_tools
from .lifecycle import Lifecycle
from .runtime_bins import RuntimeBinaries, find_runtime

#: The images every node imports; pods use them with ``imagePullPolicy: Never``.
PAUSE_IMAGE = "draxr.invalid/e2e/pause:3.10"
WORKLOAD_IMAGE = "draxr.invalid/e2e/busybox:1"
MAX_NODES = 8


@dataclass(frozen=True)
class NodeBinaries:
    """Every binary a containerd node runs: the release's runtime (build.sh's cache, runtime_bins),
    the static busybox the workload image is made of (Debian's busybox-static) and draxr's DRA driver
    built from this checkout's sources (an older one writes no CDI specs)."""

    runtime: RuntimeBinaries
    busybox: Path
    dradriver: Path

    @property
    def containerd(self) -> Path:
        return self.runtime.containerd

    @property
    def ctr(self) -> Path:
        return self.runtime.ctr

    @property
    def shim(self) -> Path:
        return self.runtime.shim

    @property
    def runc(self) -> Path:
        return self.runtime.runc

    @property
    def cni_dir(self) -> Path:
        return self.runtime.cni_dir

    @property
    def pause(self) -> Path:
        return self.runtime.pause

    @property
    def kube_proxy(self) -> Path:
        return self.runtime.kube_proxy


def find_node_binaries(version: str = "1.37") -> NodeBinaries | str:
    """A containerd node's binaries for a release in RUNTIME_RELEASES, or what is missing."""
    runtime = find_runtime(version)
    if isinstance(runtime, str):
        return runtime
    busybox = shutil.which("busybox")
    if busybox is None:
        return (
            "busybox is not installed: `apt-get install busybox-static` (.ci/runtime-packages.sh installs it)"
        )
    tools = find_node_tools()
    if isinstance(tools, str):
        return tools
    return NodeBinaries(runtime, Path(busybox), tools.dradriver)


def _run(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ControlPlaneError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def _host_nets() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    out = []
    for line in _run("ip", "-o", "-4", "addr").splitlines() + _run("ip", "-4", "route").splitlines():
        for word in line.split():
            with contextlib.suppress(ValueError):
                if "/" in word or word[0].isdigit():
                    out.append(ipaddress.ip_network(word, strict=False))
    return out


class RowNetwork(Lifecycle):
    """A row's bridge on the host and one network namespace per node (each held by a process, so it
    ends with it), joined by veth pairs; routes on the host to each node's pod CIDR."""

    def __init__(self, nodes: int = 1) -> None:
        if not 1 <= nodes <= MAX_NODES:
            raise ValueError(f"RowNetwork takes 1 to {MAX_NODES} nodes")
        self.count = nodes
        #: Row-unique prefix of every host link name (at most 15 characters with suffixes).
        self.prefix = "dx" + secrets.token_hex(3)
        self.bridge = self.prefix + "br"
        self.base = self._free_base()
        self._holders: list[subprocess.Popen[bytes]] = []

    def _free_base(self) -> int:
        """The first subnet number no host address or route uses and no other live row reserved: rows
        of two runs at once (two CI clones, a developer beside CI) pick their subnets before either
        adds its bridge, so the host's tables alone cannot keep them apart."""
        used = _host_nets()
        for x in range(10, 250):
            wanted = [ipaddress.ip_network(f"10.244.{x}.0/24")]
            wanted += [ipaddress.ip_network(f"10.{246 + i}.{x}.0/24") for i in range(self.count)]
            if not any(w.overlaps(u) for w in wanted for u in used if u.prefixlen > 0) and _reserve(x):
                return x
        raise ControlPlaneError("no free 10.244.x.0/24 for a row network")

    @property
    def host_ip(self) -> str:
        return f"10.244.{self.base}.1"

    def node_ip(self, i: int) -> str:
        return f"10.244.{self.base}.{10 + i}"

    def pod_cidr(self, i: int) -> str:
        return f"10.{246 + i}.{self.base}.0/24"

    def holder_pid(self, i: int) -> int:
        return self._holders[i].pid

    def netns(self, i: int) -> list[str]:
        """The argv prefix that runs a command in node ``i``'s network namespace."""
        return ["nsenter", f"--net=/proc/{self.holder_pid(i)}/ns/net", "--"]

    def start(self) -> None:
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        _run("ip", "addr", "add", f"{self.host_ip}/24", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")
        for i in range(self.count):
            holder = subprocess.Popen(
                ["unshare", "--net", "--", "sleep", "infinity"],
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            self._holders.append(holder)
            ns = f"/proc/{holder.pid}/ns/net"
            # unshare execs sleep once the namespace exists: wait until the pid's netns differs.
            for _ in range(200):
                if os.readlink(ns) != os.readlink("/proc/self/ns/net"):
                    break
                subprocess.run(["sleep", "0.01"], check=False)
            host_end = f"{self.prefix}h{i}"
            _run(
                "ip",
                "link",
                "add",
                host_end,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                str(holder.pid),
            )
            _run("ip", "link", "set", host_end, "master", self.bridge, "up")
            inside = self.netns(i)
            _run(*inside, "ip", "link", "set", "lo", "up")
            _run(*inside, "ip", "addr", "add", f"{self.node_ip(i)}/24", "dev", "eth0")
            _run(*inside, "ip", "link", "set", "eth0", "up")
            _run(*inside, "ip", "route", "add", "default", "via", self.host_ip)
            _run("ip", "route", "add", self.pod_cidr(i), "via", self.node_ip(i))

    def stop(self) -> None:
        for i, holder in enumerate(self._holders):
            with contextlib.suppress(ControlPlaneError):
                _run("ip", "route", "del", self.pod_cidr(i))
            with contextlib.suppress(ControlPlaneError):
                _run("ip", "link", "del", f"{self.prefix}h{i}")
            holder.kill()
            holder.wait()
        self._holders = []
        with contextlib.suppress(ControlPlaneError):
            _run("ip", "link", "del", self.bridge)
        _release(self.base)


#: One file per subnet number a live row holds, naming its process (a dead process's file is stale).
RESERVATIONS = Path(tempfile.gettempdir()) / "draxr-row-networks"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _reserve(base: int) -> bool:
    """Claims ``base`` for this process (O_EXCL: of two processes asking at once, one wins); a
    reservation left by a process that is gone is taken over."""
    path = RESERVATIONS / str(base)
    for _ in range(3):
        RESERVATIONS.mkdir(exist_ok=True)
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                holder = int(path.read_text() or "0")
            except (OSError, ValueError):
                return False
            if holder == 0 or _alive(holder):
                return False
            path.unlink(missing_ok=True)  # stale: its process is gone
            continue
        except FileNotFoundError:  # the directory was removed by a row that just stopped
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        return True
    return False


def _release(base: int) -> None:
    (RESERVATIONS / str(base)).unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # other rows still hold theirs
        RESERVATIONS.rmdir()


@dataclass(frozen=True)
class HostNetState:
    """What a row could leave on the host: links, network namespaces, routes, mount points, firewall
    rules. Compared by lines that name the row (its prefix, its run directory, its subnets), so other
    work on the machine does not count."""

    lines: tuple[str, ...]

    @classmethod
    def now(cls) -> HostNetState:
        out: list[str] = []
        out += ["link " + line for line in _run("ip", "-o", "link").splitlines()]
        out += ["route " + line for line in _run("ip", "-4", "route").splitlines()]
        out += ["mount " + line for line in Path("/proc/self/mountinfo").read_text().splitlines()]
        for tool in (("iptables-save",), ("nft", "list", "ruleset")):
            if shutil.which(tool[0]):
                with contextlib.suppress(ControlPlaneError):
                    out += [f"{tool[0]} " + line for line in _run(*tool).splitlines()]
        out += [f"cgroup {d}" for d in sorted(runtime_cgroups())]
        if Path("/run/netns").is_dir():
            out += ["netns " + n for n in os.listdir("/run/netns")]
        return cls(tuple(out))

    def leftovers(self, markers: Sequence[str]) -> list[str]:
        """Lines naming one of ``markers`` that exist now and did not before."""
        before = set(self.lines)
        return [
            line
            for line in HostNetState.now().lines
            if line not in before and any(m in line for m in markers)
        ]


# -- one containerd node --------------------------------------------------------------------------------


def containerd_config(node: Path, bins: NodeBinaries, cdi_dir: Path, snapshotter: str) -> str:
    """containerd 2.x configuration (version 3) for one node: everything under ``node``."""
    return f"""version = 3
root = "{node / "ctrd"}"
state = "{node / "cst"}"
[grpc]
  address = "{node / "c.sock"}"
[ttrpc]
  address = "{node / "c.sock.ttrpc"}"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "{snapshotter}"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{PAUSE_IMAGE}"
[plugins."io.containerd.cri.v1.runtime"]
  enable_cdi = true
  cdi_spec_dirs = ["{cdi_dir}"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "{bins.runc}"
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["{bins.cni_dir}"]
    conf_dir = "{node / "cni"}"
[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
"""


def cni_config(node: Path, pod_cidr: str) -> str:
    """bridge + host-local (state under the node) + portmap; the pods' gateway is the node."""
    gateway = str(next(ipaddress.ip_network(pod_cidr).hosts()))
    return json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": "draxr-e2e",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": "cni0",
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "dataDir": str(node / "cni-state"),
                        "ranges": [[{"subnet": pod_cidr, "gateway": gateway}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        },
        indent=2,
    )


def overlay_works(scratch: Path) -> bool:
    """Whether an overlay mount works here (in a throwaway mount namespace)."""
    for d in ("l", "u", "w", "m"):
        (scratch / d).mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            "mount",
            "-t",
            "overlay",
            "overlay",
            "-o",
            f"lowerdir={scratch / 'l'},upperdir={scratch / 'u'},workdir={scratch / 'w'}",
            str(scratch / "m"),
        ],
        capture_output=True,
        check=False,
    )
    shutil.rmtree(scratch, ignore_errors=True)
    return done.returncode == 0


def containerd_argv(netns: list[str], config: Path, bins: NodeBinaries, kubelet_root: Path) -> list[str]:
    """containerd in the node's network namespace and in new mount and pid namespaces: a tmpfs over
    /run (the shims' sockets go to /run/containerd/s), so every mount it or a shim makes ends with
    it; as pid 1 of its pid namespace its death kills the shims and containers too. The kubelet's
    root directory is a shared mount there: the kubelet runs in a namespace made from this one
    (kubelet_mount_ns) and the tmpfs it mounts for a pod's secret and service-account volumes must
    reach containerd, else a container gets their empty mount point (no token, no in-cluster
    config)."""
    root = shlex.quote(str(kubelet_root))
    script = (
        "set -e\nmount -t tmpfs -o mode=0755,size=64m draxr-e2e-run /run\n"
        f'mount --bind {root} {root}\nmount --make-shared {root}\nexec "$@"'
    )
    return [
        *netns,
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "--pid",
        "--fork",
        "--kill-child",
        "--mount-proc",
        "--",
        "/bin/sh",
        "-c",
        script,
        "containerd",
        str(bins.containerd),
        f"--config={config}",
    ]


def kubelet_mount_ns(containerd_pid: int) -> list[str]:
    """The argv prefix entering a containerd's mount namespace (``unshare`` made it before forking
    containerd, so ``containerd_argv``'s top pid is in it): the kubelet's Containment namespace made
    from there, with propagation unchanged, shares the root directory's mounts with containerd."""
    return ["nsenter", f"--mount=/proc/{containerd_pid}/ns/mnt", "--"]


def runtime_env(bins: NodeBinaries) -> dict[str, str]:
    """containerd finds its shim on PATH."""
    path = os.pathsep.join(
        dict.fromkeys([str(bins.shim.parent), str(bins.runc.parent), os.environ.get("PATH", "")])
    )
    return {**os.environ, "PATH": path}


def build_images(bins: NodeBinaries, into: Path) -> list[Path]:
    """The pause and workload images as OCI archives in ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    return [
        oci.write_archive(oci.pause_image(bins.pause, PAUSE_IMAGE), into / "pause.tar"),
        oci.write_archive(oci.busybox_image(bins.busybox, WORKLOAD_IMAGE), into / "busybox.tar"),
    ]


def import_images(bins: NodeBinaries, socket: Path, archives: Sequence[Path], snapshotter: str) -> None:
    for archive in archives:
        _run(
            str(bins.ctr),
            f"--address={socket}",
            "-n",
            "k8s.io",
            "images",
            "import",
            f"--snapshotter={snapshotter}",
            str(archive),
        )


def tag_image(bins: NodeBinaries, socket: Path, source: str, target: str) -> None:
    """``target`` names the image ``source`` names (a second tag of the same image: an upgrade to
    it rolls every pod without building anything)."""
    _run(str(bins.ctr), f"--address={socket}", "-n", "k8s.io", "images", "tag", "--force", source, target)


@dataclass(frozen=True)
class RealNodeConfig:
    """What Nodes(runtime="containerd") needs besides the control plane: the binaries and the row's
    network (the control plane advertises ``net.host_ip``). ``images``: more image archives (OCI or
    docker-archive, e2e/images' tarballs) every node imports besides the pause and workload images."""

    bins: NodeBinaries
    net: RowNetwork
    images: tuple[Path, ...] = ()


CGROUPS = Path("/sys/fs/cgroup")
#: containerd's CRI puts a container of a pod with no cgroup parent (the kubelet's cgroupsPerQOS is off)
#: at /k8s.io/<id> in every hierarchy; runc leaves the empty directories when containerd is killed.
CRI_CGROUP = "k8s.io"


def runtime_cgroups() -> set[Path]:
    """The CRI's cgroup directories (every hierarchy's k8s.io and what is in it)."""
    out: set[Path] = set()
    for top in CGROUPS.glob(f"*/{CRI_CGROUP}"):
        out.add(top)
        out.update(d for d in top.rglob("*") if d.is_dir())
    return out


def remove_cgroups(before: set[Path]) -> list[str]:
    """Removes the CRI cgroup directories that did not exist in ``before``, deepest first; a cgroup
    with processes (another row's live container) refuses rmdir and stays. Returns what stays."""
    stays = []
    for d in sorted(runtime_cgroups() - before, key=lambda p: len(p.parts), reverse=True):
        try:
            d.rmdir()
        except FileNotFoundError:
            pass
        except OSError as e:
            stays.append(f"{d}: {e.strerror}")
    return stays


def scratch_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="draxr-ov-", dir="/tmp"))


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
