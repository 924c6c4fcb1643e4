"""What the benchmarks that drive the worker through the API emulator set up alike: the worker's
identity, its namespace, a DRA device class backing an extended resource, and ready nodes each
with one ResourceSlice of GPUs."""

from __future__ import annotations

from webhook.core.objects import Obj
from webhook.emulator import Emulator

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
