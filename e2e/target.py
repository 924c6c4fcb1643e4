"""Where the e2e scenarios run: the emulator sandbox, or a real cluster with draxr installed.

Both are driven the same way, through the official client over HTTP and, for dry runs, kubectl.
On a real cluster the suite creates its own namespace, DeviceClasses and ResourceSlices for a test
driver (``e2e.draxr.io``, devices that no kubelet plugin will ever prepare: pods get bound, then
deleted) and removes everything afterwards.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webhook.core.objects import Obj
from webhook.kube.client import ApiError, KubeClient
from webhook.kube.resources import BY_PLURAL, NAMESPACES, NODES, Resource

DRIVER = "e2e.draxr.io"
KUBECONFIG_ENV = "DRAXR_E2E_KUBECONFIG"
#: Leader election on the emulator: short, so failover takes seconds (the defaults are proven
#: with a controlled clock in tests/worker/test_resilience.py).
EMULATOR_LEASE = (1.5, 1.0, 0.2)


@dataclass
class Target:
    name: str
    admin: KubeClient
    user: KubeClient
    kubeconfig: Path  # for kubectl, as the user
    nodes: list[str]
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    namespace: str = ""
    created: list[tuple[Resource, str, str | None]] = field(default_factory=list)
    sandbox: Any = None

    @property
    def ext(self) -> str:
        """The extended resource name this run's DeviceClass maps."""
        return f"e2e-{self.run_id}.draxr.io/gpu"

    def class_name(self, suffix: str = "gpu") -> str:
        return f"{suffix}.e2e-{self.run_id}.draxr.io"

    # -- objects --------------------------------------------------------------------------------

    def create(self, plural: str, obj: Obj, *, as_user: bool = False) -> Obj:
        res = BY_PLURAL[plural]
        ns = self.namespace if res.namespaced else None
        created = (self.user if as_user else self.admin).create(res, obj, ns)
        if not as_user or plural != "pods":
            self.created.append((res, created["metadata"]["name"], ns))
        return created

    def device_class(self, suffix: str = "gpu", ext: str | None = None, created_first: bool = True) -> Obj:
        return self.create(
            "deviceclasses",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": self.class_name(suffix)},
                "spec": {
                    "extendedResourceName": ext or self.ext,
                    "selectors": [
                        {
                            "cel": {
                                "expression": f'device.driver == "{DRIVER}" && '
                                f'device.attributes["{DRIVER}"].run == "{self.run_id}"'
                            }
                        }
                    ],
                },
            },
        )

    def slice(self, node: str, devices: int) -> Obj:
        return self.create(
            "resourceslices",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-e2e-{self.run_id}"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": node,
                    "pool": {"name": f"{node}-e2e-{self.run_id}", "generation": 1, "resourceSliceCount": 1},
                    "devices": [
                        {"name": f"dev-{i}", "attributes": {"run": {"string": self.run_id}}}
                        for i in range(devices)
                    ],
                },
            },
        )

    def pod(self, name: str, requests: Obj, **spec: Any) -> Obj:
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": requests, "limits": requests},
                    }
                ],
                "terminationGracePeriodSeconds": 0,
                **spec,
            },
        }
        return self.create("pods", body, as_user=True)

    def objects(self, plural: str) -> list[Obj]:
        res = BY_PLURAL[plural]
        items: list[Obj] = self.admin.list(res, self.namespace if res.namespaced else None).get("items") or []
        return items

    def wait(self, plural: str, predicate: Callable[[list[Obj]], Any], timeout: float = 30.0) -> Any:
        """List, then watch until ``predicate(items)`` is truthy (no polling sleeps)."""
        import time

        res = BY_PLURAL[plural]
        ns = self.namespace if res.namespaced else None
        deadline = time.monotonic() + timeout
        while True:
            listing = self.admin.list(res, ns)
            items = {i["metadata"]["name"]: i for i in listing.get("items") or []}
            result = predicate(list(items.values()))
            if result:
                return result
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{plural}: condition not met within {timeout}s")
            stream = self.admin.watch(
                res,
                str(listing["metadata"]["resourceVersion"]),
                timeout_seconds=max(1, int(min(remaining, 10))),
                namespace=ns,
            )
            for event in stream:
                obj = event.get("object") or {}
                if event.get("type") == "BOOKMARK":
                    continue
                n = (obj.get("metadata") or {}).get("name")
                if event.get("type") == "DELETED":
                    items.pop(n, None)
                elif n:
                    items[n] = obj
                result = predicate(list(items.values()))
                if result or time.monotonic() > deadline:
                    stream.close()
                    break
            if result:
                return result

    # -- kubectl --------------------------------------------------------------------------------

    def kubectl(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        exe = shutil.which("kubectl")
        assert exe is not None
        return subprocess.run(
            [exe, "--kubeconfig", str(self.kubeconfig), "-n", self.namespace, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    # -- setup and teardown ---------------------------------------------------------------------

    def setup(self) -> None:
        self.namespace = f"draxr-e2e-{self.run_id}"
        self.admin.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}}
        )

    def teardown(self) -> None:
        for res, name, ns in reversed(self.created):
            try:
                self.admin.delete(res, name, ns)
            except ApiError as e:
                if not e.not_found:
                    raise
        try:
            self.admin.delete(NAMESPACES, self.namespace)
        except ApiError as e:
            if not e.not_found:
                raise


def emulator_target() -> Target:
    from webhook.emulator.sandbox import Sandbox

    box = Sandbox(lease=EMULATOR_LEASE).start()
    nodes = ["e2e-node-a", "e2e-node-b"]
    for n in nodes:
        node = box.em.create("nodes", {"metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}}})
        node["status"] = {
            "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        }
        box.em.update_status("nodes", node)
    t = Target("emulator", box.admin, box.dev, box.kubeconfig("dev"), nodes, sandbox=box)
    t.setup()
    return t


def cluster_target() -> Target | str:
    """A Target on the cluster named by DRAXR_E2E_KUBECONFIG, or why there is none."""
    path = os.environ.get(KUBECONFIG_ENV)
    if not path:
        return (
            f"{KUBECONFIG_ENV} is not set: the real-cluster variant needs a Kubernetes >= 1.34 cluster "
            "with resource.k8s.io/v1 and draxr installed (`draxr manifests | kubectl apply -f -`)"
        )
    if not Path(path).is_file():
        return f"{KUBECONFIG_ENV}={path} does not exist"
    client = KubeClient.from_config(path)
    try:
        nodes = [
            n["metadata"]["name"]
            for n in client.list(NODES).get("items") or []
            if not (n.get("spec") or {}).get("unschedulable")
        ]
    except ApiError as e:
        return f"cannot list nodes with {path}: {e}"
    if not nodes:
        return "the cluster has no schedulable node"
    t = Target("cluster", client, client, Path(path), nodes[:2])
    t.setup()
    return t
