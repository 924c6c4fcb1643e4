"""What the benchmarks share: the worker's identity, its namespace, a DRA device class backing an
extended resource, and ready nodes each with one ResourceSlice of GPUs (for those that drive the
worker through the API emulator); a claim's allocation results and the devices held by pods that
are gone; the command line of a worker process; percentiles; a process's memory and CPU from /proc;
a free loopback port."""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

from e2e.emulator import Emulator
from webhook.core.api.objects import Obj

WORKER = "system:serviceaccount:draxr-system:draxr-worker"
WRITES = ("create", "update", "patch", "delete")
DRIVER = "gpu.example.com"


def worker_namespace(em: Emulator) -> None:
    em.create("namespaces", {"metadata": {"name": "draxr-system"}})


def gpu_class(
    em: Emulator,
    name: str = DRIVER,
    resource: str = "example.com/gpu",
    expression: str = f'device.driver == "{DRIVER}"',
) -> None:
    """A DeviceClass named ``name`` that backs the extended resource ``resource``."""
    em.create(
        "deviceclasses",
        {
            "metadata": {"name": name},
            "spec": {"extendedResourceName": resource, "selectors": [{"cel": {"expression": expression}}]},
        },
    )


def gpu_node(em: Emulator, name: str, devices: list[Obj]) -> None:
    """A Ready node ``name`` and its one ResourceSlice ``<name>-gpus`` of ``devices``."""
    node = em.create("nodes", {"metadata": {"name": name}})
    node["status"] = {
        "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    em.update_status("nodes", node)
    em.create(
        "resourceslices",
        {
            "metadata": {"name": f"{name}-gpus"},
            "spec": {
                "driver": DRIVER,
                "nodeName": name,
                "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            },
        },
    )


def gpu_pod(name: str) -> Obj:
    """A pod for the draxr scheduler asking for one ``example.com/gpu``."""
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "draxr",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"example.com/gpu": "1"}}}],
        },
    }


def results(claim: Obj) -> list[Obj]:
    """A claim's allocation results (none while unallocated)."""
    return list(((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", []))


def held_by_absent(em: Emulator, namespace: str = "default") -> int:
    """Devices allocated to claims none of whose owner pods exists any more: a leak once the
    worker has had the time to release them."""
    pods = {p["metadata"]["uid"] for p in em.list("pods", namespace)}
    return sum(
        len(results(c))
        for c in em.list("resourceclaims", namespace)
        if not any(o.get("uid") in pods for o in c["metadata"].get("ownerReferences") or [])
    )


def serve_argv(*flags: str) -> list[str]:
    """``draxr serve`` as a worker alone (no webhook, no leader election), with ``flags``."""
    return [sys.executable, "-m", "webhook", "serve", "--no-webhook", "--no-leader-elect", *flags]


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) by rank; NaN when there are no values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def memory_kib(pid: int | str = "self") -> dict[str, int]:
    """Resident set size now (``VmRSS``) and at its peak (``VmHWM``), in KiB."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def memory_mib(pid: int | str = "self") -> dict[str, float]:
    """``memory_kib`` in MiB, to one decimal."""
    return {key: round(kib / 1024, 1) for key, kib in memory_kib(pid).items()}


def cpu_seconds(pid: int | str = "self") -> float:
    """User plus system CPU seconds a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def int_list(text: str) -> list[int]:
    """An option's integers separated by commas (``--seeds``, ``--floor-threads``)."""
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be integers separated by commas, not {text!r}") from None
