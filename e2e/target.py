"""Where the e2e scenarios run: the emulator sandbox, or a real cluster with draxr installed (one named
by DRAXR_E2E_KUBECONFIG, or the local control plane of ``e2e/local.py``).

All are driven the same way, through the official client over HTTP and, for dry runs, kubectl.
On a real cluster the suite creates its own namespace, DeviceClasses and ResourceSlices for a test
driver (``e2e.draxr.io``) and removes everything afterwards. On a cluster of your own no kubelet
plugin prepares those devices (pods get bound, then deleted); on the local rows every node runs a DRA
driver of that name that prepares them, so the pods run.

Where the suite runs draxr's processes itself (the emulator sandbox, the local control plane) the
Target also has ``processes``: the scenarios that kill a worker, or read draxr's ``/readyz`` and
``/metrics``, use it.

``Target.native``: the apiserver keeps the KEP-5004 fields (``DRAExtendedResource`` on), so draxr
(``--mode auto``) takes the native path; otherwise it rewrites pods into DRA claims.
"""

from __future__ import annotations

import http.client
import os
import shutil
import ssl
import subprocess
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest

from webhook.core.api.objects import Obj
from webhook.kube.client import ApiError, KubeClient
from webhook.kube.resources import BY_PLURAL, NAMESPACES, NODES, Resource, pod_groups

#: What the scenarios read that draxr itself never does.
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", True)
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", True)
REPLICA_SETS = Resource("apps", "v1", "replicasets", "ReplicaSet", True)
CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap", True)
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False)
RESOURCES = {
    **BY_PLURAL,
    **{r.plural: r for r in (SERVICE_ACCOUNTS, DEPLOYMENTS, REPLICA_SETS, CONFIG_MAPS, PRIORITY_CLASSES)},
    "podgroups": pod_groups("v1beta1"),
}
DRIVER = "e2e.draxr.io"
KUBECONFIG_ENV = "DRAXR_E2E_KUBECONFIG"
#: Leader election on the emulator: short, so failover takes seconds (the defaults are proven
#: with a controlled clock in tests/scenarios/worker/test_resilience.py).
EMULATOR_LEASE = (1.5, 1.0, 0.2)
GATE = "DRAExtendedResource"
#: ``draxr serve`` options on every emulator target: an unused template of the rewrite goes after
#: 1 s, the apiserver gate is probed every 0.5 s (the gate switch scenario flips it). Mode: auto.
EMULATOR_OPTIONS: Mapping[str, Any] = {"template_grace": 1.0, "gate_probe_interval": 0.5}


@dataclass(frozen=True)
class EmulatorTarget:
    """An emulator target: the emulated apiserver's ``DRAExtendedResource`` and more serve options."""

    gate: bool
    options: Mapping[str, Any] = field(default_factory=dict)


EMULATORS: dict[str, EmulatorTarget] = {
    "emulator": EmulatorTarget(gate=True),
    # No scheduler runs: rewritten pods, which keep their schedulerName by default, go to draxr's
    # worker (--route=always). The local gate-off rows run kube-scheduler instead.
    "emulator-gate-off": EmulatorTarget(gate=False, options={"route": "always"}),
}


class Processes(Protocol):
    """draxr's worker replicas, where the suite runs them: kill one (no lease release, no cleanup
    writes), start it again, find the leader."""

    #: Leader election's lease duration, renew deadline and retry period, in seconds.
    lease: tuple[float, float, float]

    def workers(self) -> list[str]:
        """Every worker replica's name (its leader-election identity)."""
        ...

    def leader(self, timeout: float = 10.0) -> str:
        """The replica holding the Lease, once a live one does (bounded wait)."""
        ...

    def kill(self, name: str) -> None:
        """The replica dies at once: no lease release, no cleanup writes."""
        ...

    def restart(self, name: str) -> None:
        """Start the replica again; returns once it is ready (its caches synced)."""
        ...

    def restore(self) -> None:
        """Start again every replica a scenario killed."""
        ...

    def logs(self, lines: int = 40) -> str:
        """The tail of each process's log, for a failure report."""
        ...

    def webhook_get(self, path: str) -> tuple[int, str]:
        """GET ``path`` (``/readyz``, ``/metrics``) from draxr's webhook: status and body."""
        ...


class EmulatorProcesses:
    """The sandbox's ``draxr serve`` replicas as ``Processes``: ``draxr-0`` (webhook and worker, started
    with the sandbox) and ``draxr-1`` (a second worker, started on first use). Killing ``draxr-0``
    kills its worker only: the webhook keeps serving, as it would from its own Deployment."""

    def __init__(self, box: Any) -> None:
        self.box = box
        self.lease: tuple[float, float, float] = box.lease
        self._procs: dict[str, Any] = {"draxr-0": box.processes[0]}
        self._dead: set[str] = set()

    def _standby(self) -> None:
        if "draxr-1" not in self._procs:
            self._procs["draxr-1"] = self.box.serve("draxr-1")

    def workers(self) -> list[str]:
        self._standby()
        return list(self._procs)

    def leader(self, timeout: float = 10.0) -> str:
        self._standby()
        holder: str = self.box.em.wait_for(
            lambda: (h := self.box.leader()) in self._procs and h not in self._dead and h,
            timeout,
            "a live replica holds the Lease",
        )
        return holder

    def kill(self, name: str) -> None:
        # In a thread: stopping waits for the binding pool, whose write may be held by a test's
        # admission barrier. The leader stops at once, so the replica writes nothing more once its
        # in-flight request returns (its binder checks leadership before every write).
        killer = threading.Thread(target=self._procs[name].kill_worker, daemon=True, name=f"kill-{name}")
        killer.start()
        killer.join(timeout=1.0)
        self._dead.add(name)

    def restart(self, name: str) -> None:
        if name not in self._dead:
            self.kill(name)
        self._procs[name] = self.box.serve(name)  # the sandbox stops it with the others
        self._dead.discard(name)

    def restore(self) -> None:
        for name in sorted(self._dead):
            self.restart(name)

    def logs(self, lines: int = 40) -> str:
        return "(the emulator's replicas run in the test process: see the captured log)"

    def webhook_get(self, path: str) -> tuple[int, str]:
        # The certificate names the webhook's Service, not 127.0.0.1: the CA is checked, the name not.
        return loopback_get(
            self.box.port, path, ca=self.box.certs / "ca.crt", check_hostname=False, timeout=10
        )


def loopback_get(
    port: int, path: str, *, ca: Path | None = None, check_hostname: bool = True, timeout: float = 5
) -> tuple[int, str]:
    """GET ``path`` from a server on 127.0.0.1 (HTTPS trusting ``ca`` when given): status and body."""
    conn: http.client.HTTPConnection
    if ca is not None:
        ctx = ssl.create_default_context(cafile=str(ca))
        ctx.check_hostname = check_hostname
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=timeout)
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode(errors="replace")
    finally:
        conn.close()


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
    #: draxr's worker replicas, where the suite runs them (None on a cluster it only reaches).
    processes: Processes | None = None
    #: The API server runs on this machine and can call webhooks served on 127.0.0.1 by the test
    #: process (e2e/barrier.py).
    local: bool = False
    #: The apiserver keeps the KEP-5004 fields: draxr takes the native path (else it rewrites).
    native: bool = True
    #: As draxr's worker (an allowed writer of ``status.extendedResourceClaimStatus``), where the
    #: suite has its credentials (None on a cluster it only reaches).
    writer: KubeClient | None = None
    #: Where the suite runs the kubelets (the local rows): the fake runtimes' CDI log (one JSON line
    #: per container created: namespace, pod, container, cdi_devices) and the DRA drivers' prepare log.
    cdi_log: Path | None = None
    prepare_log: Path | None = None

    @property
    def ext(self) -> str:
        """The extended resource name this run's DeviceClass maps."""
        return f"e2e-{self.run_id}.draxr.io/gpu"

    def class_name(self, suffix: str = "gpu") -> str:
        return f"{suffix}.e2e-{self.run_id}.draxr.io"

    def require_controllers(self, what: str) -> None:
        """Skip on the emulator, which runs no kube-controller-manager: ``what`` it would do (claims
        from templates, a Deployment's pods) happens on the real control plane (``make e2e-local``)."""
        if self.sandbox is not None:
            pytest.skip(f"the emulator runs no kube-controller-manager ({what}): make e2e-local runs this")

    # -- objects --------------------------------------------------------------------------------

    def create(self, plural: str, obj: Obj, *, as_user: bool = False) -> Obj:
        res = RESOURCES[plural]
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

    def slice(
        self, node: str, devices: int, fields: Obj | None = None, attributes: Sequence[Obj] = ()
    ) -> Obj:
        """A slice of this run's test driver on ``node``: ``devices`` devices ``dev-<i>``, each with
        more ``fields`` (capacity, taints, ...) when given, and device ``i`` with the attributes
        ``attributes[i]`` besides its run's."""
        run = {"run": {"string": self.run_id}}
        more = list(attributes) + [{}] * (devices - len(attributes))
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
                        {
                            "name": f"dev-{i}",
                            "attributes": {**run, **more[i]},
                            **(fields or {}),
                        }
                        for i in range(devices)
                    ],
                },
            },
        )

    def pod(self, name: str, requests: Obj, *, lifecycle: Obj | None = None, **spec: Any) -> Obj:
        """A pod of one container ``c`` asking for ``requests`` (and limits), with more pod ``spec``
        fields and the container's ``lifecycle`` hooks."""
        container: Obj = {
            "name": "c",
            "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": requests, "limits": requests},
        }
        if lifecycle is not None:
            container["lifecycle"] = lifecycle
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {"containers": [container], "terminationGracePeriodSeconds": 0, **spec},
        }
        return self.create("pods", body, as_user=True)

    def objects(self, plural: str) -> list[Obj]:
        res = RESOURCES[plural]
        items: list[Obj] = self.admin.list(res, self.namespace if res.namespaced else None).get("items") or []
        return items

    def wait(
        self,
        plural: str,
        predicate: Callable[[list[Obj]], Any],
        timeout: float = 30.0,
        *,
        namespace: str | None = None,
    ) -> Any:
        """List, then watch until ``predicate(items)`` is truthy (no polling sleeps). ``namespace``:
        another than the test's."""
        import time

        res = RESOURCES[plural]
        ns = (namespace or self.namespace) if res.namespaced else None
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

    def setup(self, *, service_account: bool = True) -> None:
        """A namespace of this run's own. ``service_account``: wait for its ``default``
        ServiceAccount, which kube-controller-manager creates a moment after the namespace and
        without which the ServiceAccount admission plugin refuses every pod (403)."""
        self.namespace = f"draxr-e2e-{self.run_id}"
        self.admin.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}}
        )
        if service_account:
            self.wait("serviceaccounts", lambda sas: any(s["metadata"]["name"] == "default" for s in sas))

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


def emulator_target(name: str = "emulator") -> Target:
    from .emulator.sandbox import Sandbox

    spec = EMULATORS[name]
    box = Sandbox(
        lease=EMULATOR_LEASE,
        feature_gates={GATE: spec.gate},
        **{**EMULATOR_OPTIONS, **spec.options},
    ).start()
    nodes = ["e2e-node-a", "e2e-node-b"]
    for n in nodes:
        node = box.em.create("nodes", {"metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}}})
        node["status"] = {
            "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        }
        box.em.update_status("nodes", node)
    t = Target(name, box.admin, box.dev, box.kubeconfig("dev"), nodes, sandbox=box)
    t.processes = EmulatorProcesses(box)
    t.writer = KubeClient.from_config(str(box.kubeconfig("worker")))
    t.local = True
    t.native = spec.gate
    # The emulator admits pods without a ServiceAccount (e2e/README.md, "The emulator and the real
    # apiserver").
    t.setup(service_account=False)
    return t


def cluster_target(path: str | None = None, name: str = "cluster") -> Target | str:
    """A Target on the cluster named by ``path`` (by default DRAXR_E2E_KUBECONFIG), or why there is
    none."""
    path = path or os.environ.get(KUBECONFIG_ENV)
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
    t = Target(name, client, client, Path(path), nodes[:2])
    t.native = apiserver_keeps_fields(client)
    t.setup()
    return t


def apiserver_keeps_fields(client: KubeClient) -> bool:
    """Whether the apiserver keeps ``DeviceClass.spec.extendedResourceName`` (a dry-run create, as
    draxr's own probe does: nothing is stored)."""
    answer = client.create(
        BY_PLURAL["deviceclasses"],
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": f"draxr-e2e-probe-{uuid.uuid4().hex[:8]}"},
            "spec": {"extendedResourceName": "e2e.draxr.io/probe"},
        },
        dry_run=True,
    )
    return bool((answer.get("spec") or {}).get("extendedResourceName"))
