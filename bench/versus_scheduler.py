"""kube-scheduler's own DRA extended-resource path against draxr's worker, on one real kube-apiserver.

Kubernetes 1.36 (DRAExtendedResource beta, on by default) from the local control plane
(e2e/controlplane; ``make controlplane``): etcd, kube-apiserver and kube-scheduler, no kubelet.
``--nodes`` Nodes (Ready, taints lifted) with ``--devices`` devices each: one DeviceClass
``gpu.example.com`` with ``extendedResourceName: example.com/gpu``, one ResourceSlice per node.
The same stream of ``--pods`` pods, each asking for ``example.com/gpu: 1``, is placed twice, each run
in a namespace of its own and the cluster cleaned in between:

- ``kube-scheduler``: pods with the default schedulerName; kube-scheduler's DynamicResources plugin
  creates, allocates and reserves the special claim, writes the pod's extendedResourceClaimStatus,
  binds. draxr does not run.
- ``draxr``: pods with ``schedulerName: draxr``; one ``draxr serve --no-webhook --no-leader-elect``
  subprocess (draxr's RBAC, the worker's identity) places them. kube-scheduler runs but ignores
  them.

Both clients get the same write limit (``--qps``, default 1000; kube-scheduler's own default is 50
with burst 100). Per run it prints: pods bound per second (first create to last binding, seen by a
watch), create-to-bound latency, API writes per pod by verb and resource (deltas of kube-apiserver's
``apiserver_request_total``, less the benchmark's own pod creations; writes the apiserver makes on its
own, such as its identity Lease, are listed apart), and whether every binding is valid: each bound pod
has exactly one special claim, allocated from a slice of its node, reserved for it, named by its
``status.extendedResourceClaimStatus``; no device is allocated twice.

    python bench/versus_scheduler.py [--nodes 500] [--devices 8] [--pods 1000] [--qps 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    # Run as a script, bench/ comes first on sys.path and bench/webhook.py would shadow the package.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    sys.path.insert(0, os.path.dirname(_here))

from bench.common import percentile, serve_argv
from e2e.controlplane.launcher import ControlPlane, _die_with_parent, free_port, log_tail, wait_until
from webhook.core.api.objects import Obj
from webhook.install.rbac import rbac
from webhook.kube.client import ApiError, KubeClient
from webhook.kube.resources import (
    DEVICE_CLASSES,
    EVENTS,
    NAMESPACES,
    NODES,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    Resource,
)

DRIVER = "gpu.example.com"
EXT = "example.com/gpu"
SPECIAL = "resource.kubernetes.io/extended-resource-claim"
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", True)
WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE", "APPLY")
#: Resources the placement writes (claims, pod status and binding, events); the rest is background.
PLACEMENT = ("pods", "resourceclaims", "events")
_SAMPLE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parallel(fn: Callable[[Any], Any], items: Iterable[Any], threads: int = 8) -> list[Any]:
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(fn, items))


# ---------------------------------------------------------------------------------------------------------
# The cluster


def setup(client: KubeClient, nodes: int, devices: int) -> list[str]:
    client.create(
        DEVICE_CLASSES,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": DRIVER},
            "spec": {
                "extendedResourceName": EXT,
                "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
            },
        },
    )
    names = [f"node-{n:03d}" for n in range(nodes)]

    def one(name: str) -> None:
        client.create(
            NODES,
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            },
        )
        allocatable = {"cpu": "64", "memory": "256Gi", "pods": "110"}
        client.patch(
            NODES,
            name,
            {
                "status": {
                    "capacity": allocatable,
                    "allocatable": allocatable,
                    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                }
            },
            subresource="status",
        )
        # TaintNodesByCondition put node.kubernetes.io/not-ready on the new Node; no controller lifts it.
        client.patch(NODES, name, {"spec": {"taints": None}})
        client.create(
            RESOURCE_SLICES,
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{name}-gpus"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": f"gpu-{i}"} for i in range(devices)],
                },
            },
        )

    parallel(one, names)
    return names


def namespace(client: KubeClient, name: str) -> None:
    client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    # The ServiceAccount admission plugin refuses pods until the namespace has its default account.
    client.create(
        SERVICE_ACCOUNTS,
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
        name,
    )


def pod(name: str, scheduler: str | None) -> Obj:
    spec: Obj = {
        "containers": [
            {
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {EXT: "1"}, "limits": {EXT: "1"}},
            }
        ],
        "terminationGracePeriodSeconds": 0,
    }
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def clean(client: KubeClient, ns: str) -> None:
    """Pods gone (grace 0: no kubelet), then each claim's finalizer removed and the claim deleted."""
    pods = client.list(PODS, ns).get("items") or []
    parallel(lambda p: client.delete(PODS, p["metadata"]["name"], ns), pods)

    def drop(claim: Obj) -> None:
        name = claim["metadata"]["name"]
        try:
            client.patch(RESOURCE_CLAIMS, name, {"metadata": {"finalizers": None}}, namespace=ns)
            client.delete(RESOURCE_CLAIMS, name, ns)
        except ApiError as e:
            if not e.not_found:
                raise

    parallel(drop, client.list(RESOURCE_CLAIMS, ns).get("items") or [])
    deadline = time.monotonic() + 60
    while client.list(RESOURCE_CLAIMS, ns).get("items") or client.list(PODS, ns).get("items"):
        if time.monotonic() > deadline:
            raise TimeoutError(f"namespace {ns} still holds pods or claims")
        time.sleep(0.2)  # a poll interval; the loop re-checks the condition


# ---------------------------------------------------------------------------------------------------------
# Measuring


def request_totals(client: KubeClient) -> Counter[tuple[str, str]]:
    """apiserver_request_total of write verbs by (verb, resource[/subresource])."""
    resp = client.api.call_api("GET", f"{client.api.configuration.host}/metrics", {"Accept": "text/plain"})
    text = resp.read().decode()
    out: Counter[tuple[str, str]] = Counter()
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if not m:
            continue
        labels = dict(_LABEL.findall(m.group("labels")))
        if labels.get("verb") not in WRITE_VERBS or labels.get("dry_run"):
            continue
        res = labels.get("resource", "")
        if labels.get("subresource"):
            res += "/" + labels["subresource"]
        out[(labels["verb"], res)] += int(float(m.group("value")))
    return out


class BindWatch:
    """Records when each pod of a namespace is first seen with spec.nodeName: list, then watch from the
    list's resourceVersion, and list and watch again when the apiserver ends the watch (it closes
    watchers that fall behind: "Forcing pods watcher close due to unresponsiveness")."""

    def __init__(self, client: KubeClient, ns: str) -> None:
        self.client, self.ns = client, ns
        self.bound: dict[str, float] = {}
        self.relists = 0
        self.error = ""
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._stream: Any = None
        self._rv = client.list(PODS, ns)["metadata"]["resourceVersion"]
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _seen(self, obj: Obj) -> None:
        name = (obj.get("metadata") or {}).get("name")
        if name and (obj.get("spec") or {}).get("nodeName") and name not in self.bound:
            with self._cond:
                self.bound[name] = time.monotonic()
                self._cond.notify_all()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._stream = self.client.watch(PODS, self._rv, namespace=self.ns, timeout_seconds=3600)
                for event in self._stream:
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        break
                    self._rv = (obj.get("metadata") or {}).get("resourceVersion") or self._rv
                    self._seen(obj)
                    if self._stop.is_set():
                        return
                if self._stop.is_set():
                    return
                self.relists += 1
                listing = self.client.list(PODS, self.ns)
                for obj in listing.get("items") or []:
                    self._seen(obj)
                self._rv = listing["metadata"]["resourceVersion"]
        except Exception as e:
            self.error = f"{type(e).__name__}: {e}"
            with self._cond:
                self._cond.notify_all()

    def wait(self, count: int, timeout: float) -> bool:
        with self._cond:
            self._cond.wait_for(lambda: len(self.bound) >= count or bool(self.error), timeout)
            if self.error:
                raise RuntimeError(f"watching pods failed: {self.error} ({len(self.bound)} bound)")
            return len(self.bound) >= count

    def stop(self) -> None:
        self._stop.set()
        if self._stream is not None:
            self._stream.close()


def validate(client: KubeClient, ns: str) -> Obj:
    """Every bound pod: exactly one special claim, allocated from its node's slice, reserved for it and
    named by its extendedResourceClaimStatus; no device allocated twice."""
    pods = client.list(PODS, ns).get("items") or []
    claims = client.list(RESOURCE_CLAIMS, ns).get("items") or []
    slices = {s["spec"]["pool"]["name"]: s["spec"]["nodeName"] for s in client.list(RESOURCE_SLICES)["items"]}
    by_owner: dict[str, list[Obj]] = {}
    for c in claims:
        if (c["metadata"].get("annotations") or {}).get(SPECIAL) != "true":
            continue
        for ref in c["metadata"].get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == "Pod":
                by_owner.setdefault(ref["uid"], []).append(c)
    problems: list[str] = []
    devices: Counter[tuple[str, str, str]] = Counter()
    bound = [p for p in pods if p["spec"].get("nodeName")]
    for p in bound:
        name, node, puid = p["metadata"]["name"], p["spec"]["nodeName"], p["metadata"]["uid"]
        mine = by_owner.get(puid, [])
        if len(mine) != 1:
            problems.append(f"{name}: {len(mine)} special claims")
            continue
        claim = mine[0]
        status = claim.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        if len(results) != 1:
            problems.append(f"{name}: claim allocates {len(results)} devices")
        for r in results:
            devices[(r["driver"], r["pool"], r["device"])] += 1
            if slices.get(r["pool"]) != node:
                problems.append(f"{name}: device {r['pool']}/{r['device']} is not on its node {node}")
        if [(x.get("resource"), x.get("name"), x.get("uid")) for x in status.get("reservedFor") or []] != [
            ("pods", name, puid)
        ]:
            problems.append(f"{name}: claim reservedFor {status.get('reservedFor')}")
        erc = (p.get("status") or {}).get("extendedResourceClaimStatus") or {}
        if erc.get("resourceClaimName") != claim["metadata"]["name"]:
            problems.append(f"{name}: extendedResourceClaimStatus names {erc.get('resourceClaimName')!r}")
    doubles = [k for k, n in devices.items() if n > 1]
    problems += [f"device {d} allocated {devices[d]} times" for d in doubles]
    return {
        "pods": len(pods),
        "bound": len(bound),
        "special_claims": sum(len(v) for v in by_owner.values()),
        "devices_allocated": sum(devices.values()),
        "double_allocated": len(doubles),
        "valid": not problems and len(bound) == len(pods),
        "problems": problems[:20],
    }


def run(client: KubeClient, ns: str, pods: int, scheduler: str | None, timeout: float) -> Obj:
    namespace(client, ns)
    watch = BindWatch(client, ns)
    before = request_totals(client)
    created: dict[str, float] = {}
    lock = threading.Lock()

    def make(i: int) -> None:
        name = f"p-{i:04d}"
        client.create(PODS, pod(name, scheduler), ns)
        with lock:
            created[name] = time.monotonic()

    start = time.monotonic()
    parallel(make, range(pods))
    created_at = time.monotonic()
    done = watch.wait(pods, timeout)
    end = max(watch.bound.values(), default=time.monotonic())
    watch.stop()
    after = request_totals(client)
    writes = after - before
    writes[("POST", "pods")] -= len(created)  # the benchmark's own
    writes = +writes
    placement = {f"{v} {r}": n for (v, r), n in sorted(writes.items()) if r.split("/")[0] in PLACEMENT}
    background = {f"{v} {r}": n for (v, r), n in sorted(writes.items()) if r.split("/")[0] not in PLACEMENT}
    per_pod = sum(placement.values()) / max(1, len(watch.bound))
    latencies = [watch.bound[n] - created[n] for n in watch.bound if n in created]
    result: Obj = {
        "pods": pods,
        "all_bound": done,
        "bound": len(watch.bound),
        "seconds": round(end - start, 2),
        "pods_bound_per_second": round(len(watch.bound) / (end - start), 1),
        "pods_created_per_second": round(pods / (created_at - start), 1),
        "pod_watch_relists": watch.relists,
        "create_to_bound_p50_ms": round(percentile(latencies, 0.5) * 1000, 1),
        "create_to_bound_p99_ms": round(percentile(latencies, 0.99) * 1000, 1),
        "writes_per_pod": round(per_pod, 2),
        "writes_per_pod_without_events": round(
            sum(n for k, n in placement.items() if "events" not in k) / max(1, len(watch.bound)), 2
        ),
        "placement_writes": placement,
        "background_writes": background,
        "events_by_reason": dict(
            Counter(str(e.get("reason")) for e in client.list(EVENTS, ns).get("items") or []).most_common()
        ),
        "validity": validate(client, ns),
    }
    clean(client, ns)
    return result


# ---------------------------------------------------------------------------------------------------------
# draxr's worker


class DraxrWorker:
    def __init__(self, cp: ControlPlane, workdir: Path, qps: int) -> None:
        self.port = free_port()
        self.log = workdir / "draxr-worker.log"
        argv = serve_argv(
            "--host=127.0.0.1",
            f"--port={self.port}",
            f"--kubeconfig={cp.kubeconfig_path('worker')}",
            f"--qps={qps}",
            f"--burst={qps}",
        )
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )

    def ready(self) -> bool:
        import http.client

        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
            conn.request("GET", "/readyz")
            return conn.getresponse().status == 200
        except OSError:
            return False

    def dead(self) -> str | None:
        code = self.popen.poll()
        return None if code is None else f"draxr exited with {code}:\n{log_tail(self.log)}"

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                self.popen.kill()


def install_rbac(client: KubeClient) -> None:
    namespace(client, "draxr-system")
    for obj in rbac("draxr-system"):
        plural = obj["kind"].lower() + "s"
        group, _, version = obj["apiVersion"].rpartition("/")
        res = Resource(group, version, plural, obj["kind"], "namespace" in obj["metadata"])
        client.create(res, obj, obj["metadata"].get("namespace"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument(
        "--qps", type=int, default=1000, help="write limit of kube-scheduler and of draxr's worker"
    )
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds a run may take to bind every pod")
    ap.add_argument("--only", choices=("kube-scheduler", "draxr"), help="run one side only")
    args = ap.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="draxr-versus-"))
    out: Obj = {
        "kubernetes": None,
        "shape": {"nodes": args.nodes, "devices_per_node": args.devices, "pods": args.pods, "qps": args.qps},
    }
    with ControlPlane(
        "1.36",
        scheduler=True,
        runtime_config={},
        scheduler_args=[f"--kube-api-qps={args.qps}", f"--kube-api-burst={args.qps}"],
        workdir=workdir / "controlplane",
    ) as cp:
        out["kubernetes"] = cp.version
        client = KubeClient.from_config(str(cp.kubeconfig_path("admin")), qps=100000, burst=100000)
        t = time.monotonic()
        setup(client, args.nodes, args.devices)
        out["setup_seconds"] = round(time.monotonic() - t, 1)
        if args.only in (None, "kube-scheduler"):
            out["kube-scheduler"] = run(client, "bench-kube-scheduler", args.pods, None, args.timeout)
        if args.only in (None, "draxr"):
            install_rbac(client)
            worker = DraxrWorker(cp, workdir, args.qps)
            try:
                wait_until("draxr's worker did not become ready", worker.ready, 120, alive=worker.dead)
                out["draxr"] = run(client, "bench-draxr", args.pods, "draxr", args.timeout)
            finally:
                worker.stop()
    print(json.dumps(out, indent=2))
    return 0 if all(out[k]["validity"]["valid"] for k in ("kube-scheduler", "draxr") if k in out) else 1


if __name__ == "__main__":
    sys.exit(main())
