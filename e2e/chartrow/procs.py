"""draxr's pods as the host sees them: a container's main process in ``/proc`` (its ids, mounts, open
files, network namespace)."""

from __future__ import annotations

import contextlib
from pathlib import Path


def pod_processes(pods: set[str]) -> dict[str, Path]:
    """The main process (``/proc/<pid>``) of each of ``pods`` (by the POD_NAME the chart sets), as
    the host sees it."""
    found: dict[str, Path] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            status = (proc / "status").read_text()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        names = {e[len(b"POD_NAME=") :].decode() for e in environ if e.startswith(b"POD_NAME=")}
        ppid = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("PPid:"))
        for name in names & pods:
            parent_env = Path(f"/proc/{ppid}/environ")
            with contextlib.suppress(OSError):
                if f"POD_NAME={name}".encode() in parent_env.read_bytes().split(b"\0"):
                    continue  # a child of the main process
            found[name] = proc
    return found
