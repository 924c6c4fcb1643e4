"""A cluster in a box for worker tests: the API emulator, the real client, a draxr worker."""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from e2e.emulator import Emulator
from webhook.core.api.constants import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from webhook.core.api.objects import Obj
from webhook.kube.client import KubeClient
from webhook.runtime.serve import Process, ServeOptions

WORKER_USER = "system:serviceaccount:draxr-system:draxr-worker"
TOKENS = {"worker": (WORKER_USER, ["system:serviceaccounts"]), "user": ("alice", ["devs"])}
RESOURCE = {
    "Node": "nodes",
    "DeviceClass": "deviceclasses",
    "ResourceSlice": "resourceslices",
    "ResourceClaim": "resourceclaims",
    "Pod": "pods",
    "DeviceTaintRule": "devicetaintrules",
    "PodDisruptionBudget": "poddisruptionbudgets",
    "PodGroup": "podgroups",
}
GPU = "example.com/gpu"
T = TypeVar("T")


def poll(predicate: Callable[[], T], timeout: float = 10.0, message: str = "", interval: float = 0.02) -> T:
    """``predicate``'s first truthy value, asked every ``interval`` seconds, for what the emulator's
    store does not show (``Emulator.wait_for`` wakes on store changes only): a fault's hits, a
    process's state. TimeoutError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise TimeoutError(message or f"condition not met within {timeout}s")
        time.sleep(interval)


#: The first retry of a failed pod comes this fast in tests (1 s in production; doubles per attempt).
FAST_BACKOFF = 0.05


class Cluster:
    def __init__(self, em: Emulator, tmp: Path) -> None:
        self.em = em
        self.kubeconfig = em.kubeconfig(tmp / "kubeconfig", token="worker")
        self.processes: list[Process] = []

    # -- objects -------------------------------------------------------------------------------

    def apply(self, *objects: Obj) -> None:
        for o in objects:
            o = copy.deepcopy(o)
            res = RESOURCE[o["kind"]]
            status = o.pop("status", None)
            created = self.em.create(res, o)
            if status:
                created["status"] = status
                self.em.update_status(res, created)

    def pod(self, name: str, requests: dict[str, Any] | None = None, **spec: Any) -> Obj:
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "schedulerName": "draxr",
                "containers": [
                    {
                        "name": "c",
                        "image": "x",
                        "resources": {"requests": dict(requests if requests is not None else {GPU: 1})},
                    }
                ],
            },
        }
        body["spec"].update(spec)
        return self.em.create("pods", body)

    def pods(self) -> list[Obj]:
        return self.em.list("pods", "default")

    def claims(self, special_only: bool = True) -> list[Obj]:
        out = self.em.list("resourceclaims", None)
        if special_only:
            out = [
                c
                for c in out
                if (c["metadata"].get("annotations") or {}).get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true"
            ]
        return out

    def allocated(self) -> list[tuple[str, str, str]]:
        keys = []
        for c in self.claims(special_only=False):
            for r in ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", []):
                keys.append((r["driver"], r["pool"], r["device"]))
        return keys

    def bound(self) -> dict[str, str]:
        return {
            p["metadata"]["name"]: p["spec"]["nodeName"] for p in self.pods() if p["spec"].get("nodeName")
        }

    def wait_bound(self, n: int, timeout: float = 30.0) -> dict[str, str]:
        self.em.wait_for(lambda: len(self.bound()) >= n, timeout, f"{n} pods bound")
        return self.bound()

    def client(self, **kwargs: Any) -> KubeClient:
        """draxr's client, as the worker's service account."""
        return KubeClient(self.em.api_client("worker"), **kwargs)

    def snapshot(self) -> list[Obj]:
        """Every object the engine reads, as the API holds it now (for a static cache)."""
        out: list[Obj] = []
        for kind, res in RESOURCE.items():
            for o in self.em.list(res):
                out.append({**o, "kind": kind})
        return out

    def condition(self, pod_name: str) -> Obj | None:
        pod = self.em.get("pods", pod_name, "default")
        for c in (pod.get("status") or {}).get("conditions") or []:
            if c["type"] == "PodScheduled":
                return dict(c)
        return None

    # -- draxr ---------------------------------------------------------------------------------

    def worker(
        self,
        identity: str = "w1",
        *,
        leader_elect: bool = False,
        orphan_interval: float = 60.0,
        policy: str = "binpack",
        lease: tuple[float, float, float] | None = None,
        backoff: float = FAST_BACKOFF,
        max_backoff: float = 60.0,
        qps: float = 1000.0,
        volume_bind_timeout: float = 600.0,
        binding_timeout: float = 600.0,
        wait_started: bool = True,
        **more: Any,
    ) -> Process:
        lease_duration, renew_deadline, retry_period = lease or (15.0, 10.0, 2.0)
        opts = ServeOptions(
            webhook=False,
            kubeconfig=str(self.kubeconfig),
            leader_elect=leader_elect,
            identity=identity,
            orphan_interval=orphan_interval,
            policy=policy,
            lease_duration=lease_duration,
            renew_deadline=renew_deadline,
            retry_period=retry_period,
            pod_initial_backoff=backoff,
            pod_max_backoff=max_backoff,
            qps=qps,
            burst=int(qps),
            volume_bind_timeout=volume_bind_timeout,
            binding_timeout=binding_timeout,
            **more,
        )
        proc = Process(opts)
        proc.start_background()
        self.processes.append(proc)
        # The worker starts once its caches have synced: objects made after this return reach it
        # as watch events, in the order they were made (not in a list's order, by name).
        if wait_started and not proc.worker_started.wait(30):
            raise AssertionError(f"worker {identity} did not start: {proc.worker_waits()}")
        return proc

    def check_consistent(self) -> None:
        """The invariants every end state must satisfy."""
        allocated = self.allocated()
        assert len(allocated) == len(set(allocated)), "a device is in two claims"
        pods = {p["metadata"]["uid"]: p for p in self.pods()}
        for c in self.claims():
            owner = c["metadata"]["ownerReferences"][0]
            pod = pods.get(owner["uid"])
            assert pod is not None, f"orphaned special claim {c['metadata']['name']}"
            assert pod["spec"].get("nodeName"), f"special claim {c['metadata']['name']} for a pending pod"
            reserved = (c.get("status") or {}).get("reservedFor") or []
            assert [r["uid"] for r in reserved] == [owner["uid"]]
            erc = pod["status"]["extendedResourceClaimStatus"]
            assert erc["resourceClaimName"] == c["metadata"]["name"]
        owners = [c["metadata"]["ownerReferences"][0]["uid"] for c in self.claims()]
        assert len(owners) == len(set(owners)), "two special claims for one pod"


def node(name: str, allocatable: dict[str, Any] | None = None, labels: dict[str, str] | None = None) -> Obj:
    alloc = {"cpu": "32", "memory": "128Gi", "pods": "110", **(allocatable or {})}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "status": {"allocatable": alloc, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def pod_group(name: str, min_count: int | None, key: str | None = None) -> Obj:
    """A PodGroup: a gang of ``min_count`` (None: basic), all in one domain of ``key`` if given."""
    policy: Obj = {"gang": {"minCount": min_count}} if min_count is not None else {"basic": {}}
    spec: Obj = {"schedulingPolicy": policy}
    if key:
        spec["schedulingConstraints"] = {"topology": [{"key": key}]}
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def device_class(name: str = "gpu.example.com", ext: str | None = GPU) -> Obj:
    spec: Obj = {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}
    if ext:
        spec["extendedResourceName"] = ext
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def gpu_slice(node_name: str, count: int, prefix: str = "gpu") -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-{prefix}"},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": node_name,
            "pool": {"name": f"{node_name}-{prefix}", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"{prefix}-{i}", "attributes": {"index": {"int": i}}} for i in range(count)],
        },
    }


@contextlib.contextmanager
def cluster(tmp: Path, release: str | None = None) -> Iterator[Cluster]:
    """``release``: what the emulator's ``/version`` claims ("1.37"; None: its default, 1.35)."""
    with Emulator(tokens=TOKENS, bookmark_interval=0.5, release=release) as em:
        em.create("namespaces", {"metadata": {"name": "draxr-system"}})
        c = Cluster(em, tmp)
        try:
            yield c
        finally:
            for p in c.processes:
                p.stop()
