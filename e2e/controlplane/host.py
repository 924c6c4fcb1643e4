"""What a kubelet changes on its host whatever its flags, and how to leave the host as found.

A kubelet sets kernel tunables (``setupKernelTunables``: ``vm.overcommit_memory``, ``kernel.panic``,
``kernel.panic_on_oops``, ...) and creates ``/var/lib/kubelet/device-plugins/kubelet.sock`` and
``/var/log/containers`` even with another ``--root-dir``. ``namespaced`` runs it in a private mount
namespace where those files are bind mounts of per-node files and directories, so its writes land
there. ``HostState`` is the safety net: a snapshot before a row, compared and repaired after it.
"""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

PROC_SYS = Path("/proc/sys")
#: Every tunable the kubelet may write (pkg/kubelet/cm/container_manager_linux.go).
SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
#: Paths the kubelet creates whatever its root directory (the device manager's socket directory, the
#: legacy container log symlinks).
HOST_PATHS = (Path("/var/lib/kubelet"), Path("/var/log/containers"))


def read_sysctl(name: str) -> str:
    return (PROC_SYS / name).read_text().strip()


@dataclass(frozen=True)
class HostState:
    """The tunables' values and whether each host path exists."""

    sysctls: tuple[tuple[str, str], ...]
    paths: tuple[tuple[str, bool], ...]

    @classmethod
    def now(cls) -> HostState:
        return cls(
            tuple((s, read_sysctl(s)) for s in SYSCTLS),
            tuple((str(p), p.exists() or p.is_symlink()) for p in HOST_PATHS),
        )

    def differences(self, other: HostState) -> list[str]:
        """What differs in ``other``, one line each."""
        out = [
            f"{name.replace('/', '.')} is {b}, was {a}"
            for (name, a), (_, b) in zip(self.sysctls, other.sysctls, strict=True)
            if a != b
        ]
        out += [
            f"{path} {'exists' if b else 'is gone'}, it {'did' if a else 'did not'} before"
            for (path, a), (_, b) in zip(self.paths, other.paths, strict=True)
            if a != b
        ]
        return out

    def restore(self) -> list[str]:
        """Writes back every tunable that changed and removes each path that did not exist before;
        returns what it had to repair (nothing, when the containment held)."""
        repaired = self.differences(HostState.now())
        for name, value in self.sysctls:
            if read_sysctl(name) != value:
                (PROC_SYS / name).write_text(value + "\n")
        for path, existed in self.paths:
            p = Path(path)
            if not existed and (p.exists() or p.is_symlink()):
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    p.unlink(missing_ok=True)
        return repaired


@dataclass(frozen=True)
class Containment:
    """A node's private stand-ins for what the kubelet would change on the host: one regular file per
    tunable (starting at the host's value) and the directories bind-mounted over HOST_PATHS."""

    root: Path

    def sysctl_file(self, name: str) -> Path:
        return self.root / "sysctl" / name.replace("/", ".")

    def host_dir(self, path: Path) -> Path:
        """The per-node directory that ``path`` is inside the namespace."""
        return self.root / "host" / str(path).strip("/").replace("/", "-")

    def prepare(self) -> None:
        (self.root / "sysctl").mkdir(parents=True, exist_ok=True)
        for name in SYSCTLS:
            self.sysctl_file(name).write_text(read_sysctl(name) + "\n")
        for path in HOST_PATHS:
            self.host_dir(path).mkdir(parents=True, exist_ok=True)

    def namespaced(self, argv: Sequence[str], *, shared_from_parent: bool = False) -> list[str]:
        """``argv`` run in a private mount namespace (``unshare --mount --propagation private``): each
        tunable's file bind-mounted over /proc/sys/<name>, and each host path a bind mount of its
        per-node directory. Its parent (/var/lib, /var/log) becomes an empty tmpfs there, so no
        mount point has to be created on the host. ``exec`` keeps the pid: stopping the process ends
        the namespace and everything mounted in it. ``shared_from_parent``: made from a containerd's
        mount namespace (realnode.kubelet_mount_ns), with propagation unchanged so its shared mounts
        stay shared with containerd's, and a /proc of this process's pid namespace (that one's is
        containerd's)."""
        lines = ["set -e"]
        if shared_from_parent:
            lines.append("mount -t proc proc /proc")
        for name in SYSCTLS:
            lines.append(f"mount --bind {shlex.quote(str(self.sysctl_file(name)))} {PROC_SYS / name}")
        for parent in sorted({p.parent for p in HOST_PATHS}):
            lines.append(f"mount -t tmpfs -o mode=0755,size=16m draxr-e2e-node {parent}")
        for path in HOST_PATHS:
            lines.append(f"mkdir -p {path}")
            lines.append(f"mount --bind {shlex.quote(str(self.host_dir(path)))} {path}")
        lines.append('exec "$@"')
        script = "\n".join(lines)
        return [
            "unshare",
            "--mount",
            "--propagation",
            "unchanged" if shared_from_parent else "private",
            "--",
            "/bin/sh",
            "-c",
            script,
            "node",
            *argv,
        ]
