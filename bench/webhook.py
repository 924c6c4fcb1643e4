"""Admission webhook benchmark: ``POST /mutate/pods`` over TLS with keep-alive, one uvicorn worker.

The server runs in its own process (the webhook as ``draxr serve --no-worker`` runs it: the real
app, ``ReloadingTLS``, a snapshot cache of ``--nodes`` nodes with ``--devices`` GPUs each). The load
generator is this process: an open-loop schedule at fixed offered rates (latency measured from each
request's *scheduled* start, so a stalled server cannot hide its queueing: no coordinated omission),
then a closed loop with ``--connections`` connections sending back to back (saturation). Requests go
over persistent TLS connections written by hand (asyncio streams), which keeps the client's cost far
below the server's. The pod is a realistic ~5 KB Deployment pod asking for ``example.com/gpu``.

    python bench/webhook.py [--rates 200,1000] [--seconds 10] [--connections 16] [--unique]
                            [--device-plugin] [--rewrite]

    python bench/webhook.py --large-pods 12 [--large-bytes 2600000] [--probe-rate 20] [--seconds 10]

``--unique`` makes every pod's spec distinct, defeating the webhook's cache of fit answers.
``--device-plugin`` is the webhook's slow path: no DeviceClass maps the name (the nodes advertise
it, as device plugins do) and the cache is fed by informers from an API emulator running in the
server process, so every admission waits for a fresh DeviceClass list (shared by concurrent
admissions) before it leaves the pod alone. The emulator shares the server's CPU; a real API
server would not, so this is the pessimistic case.
``--rewrite`` answers as rewrite mode does (kube-apiserver without ``DRAExtendedResource``): every
pod becomes one with DRA claims from draxr's templates (a larger JSONPatch).
``--large-pods N`` is the hostile case instead: N connections send ~``--large-bytes`` pods (the
realistic pod with its container repeated; ``--large-kind invalid``: every copy asks for half a
GPU, and the pods go to ``/validate/pods`` to be denied) back to back, while an open-loop schedule at
``--probe-rate`` per second sends the small review and, separately, ``GET /healthz``; latencies of
both probes count from their scheduled start, against the apiserver's webhook timeout.
Prints JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import dataclasses
import json
import multiprocessing as mp
import os
import shutil
import socket
import ssl
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    # Run as a script, this file's directory comes first on sys.path, and this file's name would
    # shadow the ``webhook`` package.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    sys.path.insert(0, os.path.dirname(_here))

from bench.common import percentile
from webhook.core.api.objects import Obj

PATH = "/mutate/pods"
GPU = "example.com/gpu"


# --- the cluster and the pod ---------------------------------------------------------------------


def cluster(nodes: int, devices: int) -> list[Obj]:
    objs: list[Obj] = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu.example.com", "creationTimestamp": "2025-01-01T00:00:00Z"},
            "spec": {
                "extendedResourceName": GPU,
                "selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}],
            },
        }
    ]
    for n in range(nodes):
        name = f"node-{n:04d}"
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "zone": f"z{n % 3}"}},
                "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}},
            }
        )
        objs.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{name}-gpus"},
                "spec": {
                    "driver": "gpu.example.com",
                    "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": [
                        {"name": f"gpu-{d}", "attributes": {"index": {"int": d}, "model": {"string": "X100"}}}
                        for d in range(devices)
                    ],
                },
            }
        )
    return objs


def realistic_pod(i: int = 0, unique: bool = False) -> Obj:
    """A Deployment's pod as the apiserver hands it to a mutating webhook (~5 KB of JSON)."""
    env = [{"name": f"SETTING_{k}", "value": f"value-{k}-" + "x" * 24} for k in range(32)]
    if unique:
        env.append({"name": "REQUEST_INDEX", "value": str(i)})
    container = {
        "name": "trainer",
        "image": "registry.example.com/ml/trainer:2025.06.1@sha256:" + "a" * 64,
        "command": ["python", "-m", "trainer"],
        "args": ["--epochs=10", "--batch-size=64", "--data=/data"],
        "env": env,
        "ports": [{"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
        "resources": {
            "requests": {"cpu": "2", "memory": "8Gi", GPU: "1"},
            "limits": {"memory": "8Gi", GPU: "1"},
        },
        "volumeMounts": [
            {"name": "data", "mountPath": "/data", "readOnly": True},
            {"name": "kube-api-access-abcde", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"},
        ],
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 9090}, "periodSeconds": 10},
        "livenessProbe": {"httpGet": {"path": "/live", "port": 9090}, "periodSeconds": 20},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "trainer-7d9f8c6b5-",
            "namespace": "ml",
            "labels": {"app": "trainer", "pod-template-hash": "7d9f8c6b5", "team": "research"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2025-06-01T10:00:00Z"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "trainer-7d9f8c6b5",
                    "uid": "0b6f5c3e-8a61-4d2c-9a51-3f1e1f0c2b7a",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "containers": [container],
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "datasets"}},
                {
                    "name": "kube-api-access-abcde",
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {
                                "configMap": {
                                    "name": "kube-root-ca.crt",
                                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                }
                            },
                        ]
                    },
                },
            ],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["z0", "z1", "z2"]}
                                ]
                            }
                        ]
                    }
                }
            },
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "trainer",
            "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "fsGroup": 2000},
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


def review_body(i: int, unique: bool) -> bytes:
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": f"00000000-0000-4000-8000-{i:012d}",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "",
            "namespace": "ml",
            "operation": "CREATE",
            "userInfo": {
                "username": "system:serviceaccount:kube-system:replicaset-controller",
                "uid": "5a1f0d9e-0000-4000-8000-000000000001",
                "groups": [
                    "system:serviceaccounts",
                    "system:serviceaccounts:kube-system",
                    "system:authenticated",
                ],
            },
            "object": realistic_pod(i, unique),
            "oldObject": None,
            "dryRun": False,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        },
    }
    return json.dumps(review, separators=(",", ":")).encode()


# --- the server process --------------------------------------------------------------------------


def device_plugin_cluster(nodes: int, devices: int) -> list[Obj]:
    """The same nodes advertising the GPUs through a device plugin; no DeviceClass, no slices."""
    objs = [o for o in cluster(nodes, devices) if o["kind"] == "Node"]
    for node in objs:
        node["status"]["allocatable"][GPU] = str(devices)
    return objs


def informer_cache(objs: list[Obj]) -> Any:
    """A cache fed by list+watch from an in-process API emulator holding ``objs``."""
    from e2e.emulator import Emulator
    from webhook.kube.cache import WEBHOOK_KINDS, ClusterCache
    from webhook.kube.client import KubeClient

    em = Emulator().start()
    for obj in objs:
        created = em.create("nodes", obj)
        created["status"] = obj["status"]
        em.update_status("nodes", created)
    cache = ClusterCache()
    cache.start(KubeClient(em.api_client()), WEBHOOK_KINDS)
    if not cache.wait_synced(WEBHOOK_KINDS, 60):
        raise SystemExit("the informers did not sync")
    return cache


def serve(
    cert_dir: str,
    sock: socket.socket,
    nodes: int,
    devices: int,
    device_plugin: bool,
    settings: dict[str, int] | None = None,
    switch_interval: float | None = None,
    rewrite: bool = False,
) -> None:
    if switch_interval is not None:
        sys.setswitchinterval(switch_interval)
    from webhook.admission import AdmissionConfig
    from webhook.kube.cache import ClusterCache
    from webhook.runtime.apps import webhook_app
    from webhook.runtime.tls import ReloadingTLS, uvicorn_server

    if device_plugin:
        cache = informer_cache(device_plugin_cluster(nodes, devices))
    else:
        cache = ClusterCache.from_objects(cluster(nodes, devices))
    # The pod mounts a PVC, which draxr's worker does not place yet (core/scheduling/unsupported.py):
    # it is left to kube-scheduler with a warning, not denied, so that the figures stay comparable.
    config = AdmissionConfig(unsupported_pods="default-scheduler")
    if settings:  # (without any, the bench also runs against older trees: PYTHONPATH=<tree>)
        config = dataclasses.replace(
            config,
            review_threads=settings.get("review_threads", config.review_threads),
            inline_review_bytes=settings.get("inline_review_bytes", config.inline_review_bytes),
            max_large_reviews=settings.get("max_large_reviews", config.max_large_reviews),
        )
    # --rewrite: kube-apiserver without DRAExtendedResource, so every pod is rewritten into claims
    app = webhook_app(cache, config, None, lambda: False) if rewrite else webhook_app(cache, config)
    server = uvicorn_server(
        app,
        ReloadingTLS(cert_dir),
        host="127.0.0.1",
        port=0,
        log_config=None,
        access_log=False,
        lifespan="off",
    )
    server.run(sockets=[sock])


# --- the load generator --------------------------------------------------------------------------


class Connection:
    """One persistent TLS connection speaking just enough HTTP/1.1."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int, ctx: ssl.SSLContext) -> Connection:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=ctx, server_hostname="localhost"
        )
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(reader, writer)

    async def post(self, body: bytes) -> bytes:
        status, payload = await self.request("POST", PATH, body)
        if status != 200:
            raise RuntimeError(f"HTTP {status}: {payload[:200]!r}")
        return payload

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\n"
        if body:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        self.writer.write((head + "\r\n").encode() + body)
        headers = await self.reader.readuntil(b"\r\n\r\n")
        status = int(headers.split(b" ", 2)[1])
        length = 0
        for line in headers.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


def summary(latencies: list[float], elapsed: float, offered: float | None, errors: int) -> Obj:
    out: Obj = {
        "offered_rps": offered,
        "achieved_rps": round(len(latencies) / elapsed, 1),
        "requests": len(latencies),
        "errors": errors,
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 3),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 3),
        "max_ms": round(max(latencies) * 1000, 3) if latencies else None,
    }
    if offered is None:
        del out["offered_rps"]
    return out


async def open_loop(
    port: int, ctx: ssl.SSLContext, bodies: list[bytes], rate: float, seconds: float, connections: int
) -> Obj:
    pool: asyncio.Queue[Connection] = asyncio.Queue()
    for _ in range(connections):
        pool.put_nowait(await Connection.open(port, ctx))
    latencies: list[float] = []
    errors = 0
    total = int(rate * seconds)

    async def one(i: int, scheduled: float) -> None:
        nonlocal errors
        conn = await pool.get()
        try:
            await conn.post(bodies[i % len(bodies)])
            latencies.append(time.perf_counter() - scheduled)
        except Exception:
            errors += 1
        finally:
            pool.put_nowait(conn)

    start = time.perf_counter() + 0.05
    tasks = []
    for i in range(total):
        scheduled = start + i / rate
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i, scheduled)))
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - start
    while not pool.empty():
        pool.get_nowait().close()
    return summary(latencies, elapsed, rate, errors)


async def closed_loop(
    port: int, ctx: ssl.SSLContext, bodies: list[bytes], seconds: float, connections: int
) -> Obj:
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds

    async def worker(k: int) -> None:
        nonlocal errors
        conn = await Connection.open(port, ctx)
        i = k
        while time.perf_counter() < deadline:
            t = time.perf_counter()
            try:
                await conn.post(bodies[i % len(bodies)])
                latencies.append(time.perf_counter() - t)
            except Exception:
                errors += 1
            i += connections
        conn.close()

    start = time.perf_counter()
    await asyncio.gather(*(worker(k) for k in range(connections)))
    return summary(latencies, time.perf_counter() - start, None, errors)


def large_body(target: int, invalid: bool) -> bytes:
    """A review of the realistic pod whose container is repeated until the body is ~``target`` bytes.

    ``invalid``: every container asks for half a GPU, so each one adds two field errors.
    """
    review = json.loads(review_body(0, False))
    pod = review["request"]["object"]
    template = pod["spec"]["containers"][0]
    copies = max(1, target // len(json.dumps(template, separators=(",", ":"))))
    containers = []
    for k in range(copies):
        c = json.loads(json.dumps(template))
        c["name"] = f"trainer-{k}"
        if invalid:
            c["resources"] = {"requests": {"cpu": "1", GPU: "0.5"}, "limits": {GPU: "0.5"}}
        elif k:  # one GPU for the pod, as a real one would ask
            c["resources"] = {"requests": {"cpu": "1", "memory": "1Gi"}}
        containers.append(c)
    pod["spec"]["containers"] = containers
    return json.dumps(review, separators=(",", ":")).encode()


async def under_large_load(
    port: int,
    ctx: ssl.SSLContext,
    small: bytes,
    large: tuple[str, bytes],
    pods: int,
    seconds: float,
    rate: float,
) -> Obj:
    """Small reviews and /healthz at ``rate`` per second while ``pods`` connections send ``large``.

    Every connection is open before the load starts: the probes measure requests, not handshakes.
    """
    heavy_conns = [await Connection.open(port, ctx) for _ in range(pods)]
    pools: list[asyncio.Queue[Connection]] = []
    for _ in range(2):
        pool: asyncio.Queue[Connection] = asyncio.Queue()
        for _ in range(8):
            pool.put_nowait(await Connection.open(port, ctx))
        pools.append(pool)
    large_latencies: list[float] = []
    large_status: dict[str, int] = {}
    deadline = time.perf_counter() + seconds

    async def heavy(conn: Connection) -> None:
        try:
            while time.perf_counter() < deadline:
                t = time.perf_counter()
                try:
                    status, _ = await conn.request("POST", *large)
                except (OSError, asyncio.IncompleteReadError):
                    large_status["disconnected"] = large_status.get("disconnected", 0) + 1
                    conn.close()
                    conn = await Connection.open(port, ctx)
                    continue
                large_latencies.append(time.perf_counter() - t)
                large_status[str(status)] = large_status.get(str(status), 0) + 1
        finally:
            conn.close()

    async def probe(pool: asyncio.Queue[Connection], method: str, path: str, body: bytes) -> Obj:
        latencies: list[float] = []
        errors = 0

        async def one(scheduled: float) -> None:
            nonlocal errors
            conn = await pool.get()
            try:
                status, _ = await conn.request(method, path, body)
                if status == 200:
                    latencies.append(time.perf_counter() - scheduled)
                else:
                    errors += 1
            except Exception:
                errors += 1
            finally:
                pool.put_nowait(conn)

        start = time.perf_counter() + 0.5  # after the large pods are on their way
        tasks = []
        i = 0
        while (scheduled := start + i / rate) < deadline:
            delay = scheduled - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(scheduled)))
            i += 1
        await asyncio.gather(*tasks)
        while not pool.empty():
            pool.get_nowait().close()
        out = summary(latencies, seconds, rate, errors)
        out["sent"] = i
        out["over_3s"] = sum(1 for x in latencies if x > 3.0)
        return out

    results = await asyncio.gather(
        probe(pools[0], "POST", PATH, small),
        probe(pools[1], "GET", "/healthz", b""),
        *(heavy(c) for c in heavy_conns),
    )
    large_summary = summary(large_latencies, seconds, None, 0)
    del large_summary["errors"]
    large_summary["status"] = large_status
    return {"small_review": results[0], "healthz": results[1], "large_pods": large_summary}


async def check_answer(port: int, ctx: ssl.SSLContext, body: bytes) -> Obj:
    conn = await Connection.open(port, ctx)
    try:
        answer: Obj = json.loads(await conn.post(body))["response"]
    finally:
        conn.close()
    return answer


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rates", default="200,1000", help="offered loads, requests per second")
    ap.add_argument("--seconds", type=float, default=10.0, help="duration of each phase")
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--unique", action="store_true", help="a distinct pod spec per request")
    ap.add_argument(
        "--device-plugin",
        action="store_true",
        help="no DeviceClass maps the name: every admission waits for a fresh DeviceClass list",
    )
    ap.add_argument("--large-pods", type=int, default=0, help="connections sending large pods (load mode)")
    ap.add_argument("--large-bytes", type=int, default=2_600_000, help="size of each large review")
    ap.add_argument(
        "--large-kind",
        choices=("valid", "invalid"),
        default="valid",
        help="valid: mutated (/mutate/pods); invalid: two field errors per container (/validate/pods)",
    )
    ap.add_argument("--review-threads", type=int, help="the server's AdmissionConfig.review_threads")
    ap.add_argument(
        "--inline-review-bytes", type=int, help="the server's AdmissionConfig.inline_review_bytes"
    )
    ap.add_argument("--max-large-reviews", type=int, help="the server's AdmissionConfig.max_large_reviews")
    ap.add_argument("--switch-interval", type=float, help="the server's sys.setswitchinterval (seconds)")
    ap.add_argument("--probe-rate", type=float, default=20.0, help="small reviews (and /healthz) per second")
    ap.add_argument(
        "--rewrite",
        action="store_true",
        help="the apiserver's DRAExtendedResource off: every pod is rewritten into DRA claims (rewrite mode)",
    )
    args = ap.parse_args(argv)

    from webhook.identity.pki import CA_CERT
    from webhook.install.certs import ensure_certs

    cert_dir = Path(tempfile.mkdtemp(prefix="draxr-bench-"))
    ensure_certs(cert_dir, "draxr-webhook", "draxr-system")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(256)
    port = sock.getsockname()[1]
    settings = {
        key: value
        for key, value in (
            ("review_threads", args.review_threads),
            ("inline_review_bytes", args.inline_review_bytes),
            ("max_large_reviews", args.max_large_reviews),
        )
        if value is not None
    }
    proc = mp.get_context("fork").Process(
        target=serve,
        args=(
            str(cert_dir),
            sock,
            args.nodes,
            args.devices,
            args.device_plugin,
            settings,
            args.switch_interval,
            args.rewrite,
        ),
        daemon=True,
    )
    proc.start()
    ctx = ssl.create_default_context(cafile=str(cert_dir / CA_CERT))
    bodies = [review_body(i, args.unique) for i in range(1000 if args.unique else 1)]
    try:
        answer = asyncio.run(check_answer(port, ctx, bodies[0]))  # connects once the server listens
        if answer.get("allowed") is not True or ("patch" in answer) == args.device_plugin:
            raise SystemExit(f"unexpected answer from the webhook: {answer}")
        rewritten = "resourceClaims" in base64.b64decode(answer.get("patch", "")).decode()
        if rewritten != args.rewrite:
            raise SystemExit(f"expected {'a' if args.rewrite else 'no'} rewrite, got: {answer}")
        asyncio.run(closed_loop(port, ctx, bodies, 2.0, args.connections))  # warm-up
        if args.large_pods:
            invalid = args.large_kind == "invalid"
            large = ("/validate/pods" if invalid else PATH, large_body(args.large_bytes, invalid))
            load = asyncio.run(
                under_large_load(port, ctx, bodies[0], large, args.large_pods, args.seconds, args.probe_rate)
            )
            results_large: Obj = {
                "mode": "large-pods",
                "large_connections": args.large_pods,
                "server_settings": settings,
                "large_kind": args.large_kind,
                "large_path": large[0],
                "large_review_bytes": len(large[1]),
                "small_review_bytes": len(bodies[0]),
                "probe_rate": args.probe_rate,
                "seconds": args.seconds,
                "cpus": os.cpu_count(),
                **load,
            }
            json.dump(results_large, sys.stdout, indent=2)
            print()
            return 0
        results: Obj = {
            "endpoint": PATH,
            "pod_bytes": len(json.dumps(realistic_pod(0, args.unique))),
            "review_bytes": len(bodies[0]),
            "cluster": {"nodes": args.nodes, "devices_per_node": args.devices},
            "unique_pods": args.unique,
            "device_plugin": args.device_plugin,
            "rewrite": args.rewrite,
            "connections": args.connections,
            "seconds_per_phase": args.seconds,
            "cpus": os.cpu_count(),
            "warnings": answer.get("warnings", []),
            "fixed_rate": [],
        }
        for rate in (float(r) for r in args.rates.split(",") if r):
            results["fixed_rate"].append(
                asyncio.run(open_loop(port, ctx, bodies, rate, args.seconds, args.connections))
            )
        results["saturation"] = asyncio.run(closed_loop(port, ctx, bodies, args.seconds, args.connections))
    finally:
        proc.terminate()
        proc.join(10)
        sock.close()
        shutil.rmtree(cert_dir, ignore_errors=True)  # the webhook's key goes with the run
    json.dump(results, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
