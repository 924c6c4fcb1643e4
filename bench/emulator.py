"""Benchmark of the in-process Kubernetes API emulator; prints one JSON document.

Measures what draxr's tests and worker benchmark lean on, with the client in the same process as
the server (as they run): sequential creates and updates over keep-alive HTTP, the official
client's create rate, watch event latency (write acknowledged -> event read by a watcher, with
extra watchers attached), and a worker-like pod cycle of five writes (pod create, claim create,
claim status, binding, pod status) while watches on pods and claims are open.

Usage: python bench/emulator.py [--pods N] [--watchers W]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from typing import Any

import urllib3
from kubernetes import client

if __name__ == "__main__":
    # Run as a script, bench/ comes first on sys.path and bench/webhook.py would shadow the package.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    sys.path.insert(0, os.path.dirname(_here))  # the source tree: the emulator is e2e/emulator

from e2e.emulator import Emulator

JSON = {"Content-Type": "application/json"}
MERGE = {"Content-Type": "application/merge-patch+json"}


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {
            "schedulerName": "draxr",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/app:1",
                    "resources": {"limits": {"example.com/gpu": "1"}},
                }
            ],
        },
    }


def _claim(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
    }


def _rate(n: int, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else float("inf")


def _check(resp: Any, *codes: int) -> None:
    if resp.status not in codes:
        raise RuntimeError(f"unexpected {resp.status}: {resp.data[:200]!r}")


def creates_and_updates(em: Emulator, n: int) -> dict[str, float]:
    http = urllib3.PoolManager(maxsize=4)
    base = f"{em.url}/api/v1/namespaces/default/pods"
    bodies = [json.dumps(_pod(f"c-{i}")).encode() for i in range(n)]
    t0 = time.perf_counter()
    for body in bodies:
        _check(http.request("POST", base, body=body, headers=JSON), 201)
    creates = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(n):
        body = json.dumps({"status": {"phase": "Running", "podIP": f"10.0.{i // 250}.{i % 250}"}}).encode()
        _check(http.request("PATCH", f"{base}/c-{i}/status", body=body, headers=MERGE), 200)
    patches = time.perf_counter() - t0
    current = [json.loads(http.request("GET", f"{base}/c-{i}").data) for i in range(n)]
    t0 = time.perf_counter()
    for obj in current:
        obj["metadata"]["labels"]["round"] = "2"
        _check(
            http.request(
                "PUT", f"{base}/{obj['metadata']['name']}", body=json.dumps(obj).encode(), headers=JSON
            ),
            200,
        )
    puts = time.perf_counter() - t0
    t0 = time.perf_counter()
    listed = json.loads(http.request("GET", base).data)
    list_seconds = time.perf_counter() - t0
    assert len(listed["items"]) == n
    return {
        "creates_per_s": _rate(n, creates),
        "status_patches_per_s": _rate(n, patches),
        "updates_per_s": _rate(n, puts),
        "list_ms_for_all_pods": round(list_seconds * 1000, 2),
    }


def official_client_creates(em: Emulator, n: int) -> float:
    api_client = em.api_client()
    api: Any = client.CoreV1Api(api_client)
    t0 = time.perf_counter()
    for i in range(n):
        api.create_namespaced_pod("official", _pod(f"k-{i}"))
    seconds = time.perf_counter() - t0
    api_client.close()
    return _rate(n, seconds)


class Watcher(threading.Thread):
    """Reads a raw watch stream and notes when each named object's event arrives."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.seen: dict[str, float] = {}
        self.cond = threading.Condition()
        self.ready = threading.Event()
        self.events = 0

    def run(self) -> None:
        http = urllib3.PoolManager()
        resp = http.request("GET", self.url, preload_content=False, timeout=urllib3.Timeout(read=None))
        self.ready.set()
        buf = b""
        try:
            for chunk in resp.stream(65536):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    event = json.loads(line)
                    now = time.perf_counter()
                    with self.cond:
                        self.events += 1
                        self.seen[event["object"]["metadata"].get("name", "")] = now
                        self.cond.notify_all()
        except Exception:  # the emulator drops the stream at the end of the run
            return

    def wait_for(self, name: str, timeout: float = 10.0) -> float:
        with self.cond:
            if not self.cond.wait_for(lambda: name in self.seen, timeout):
                raise TimeoutError(f"no watch event for {name}")
            return self.seen[name]


def watch_latency(em: Emulator, samples: int, extra_watchers: int) -> dict[str, float]:
    rv = em.resource_version
    url = f"{em.url}/api/v1/namespaces/latency/pods?watch=1&resourceVersion={rv}"
    watchers = [Watcher(url) for _ in range(1 + extra_watchers)]
    for w in watchers:
        w.start()
        w.ready.wait(5)
    em.wait_for(lambda: em.open_watches() >= len(watchers), 10)
    http = urllib3.PoolManager()
    base = f"{em.url}/api/v1/namespaces/latency/pods"
    latencies = []
    for i in range(samples):
        name = f"w-{i}"
        body = json.dumps(_pod(name)).encode()
        t0 = time.perf_counter()
        _check(http.request("POST", base, body=body, headers=JSON), 201)
        latencies.append(watchers[0].wait_for(name) - t0)
    for w in watchers[1:]:
        w.wait_for(f"w-{samples - 1}")
    latencies.sort()
    return {
        "watchers": len(watchers),
        "watch_latency_ms_p50": round(statistics.median(latencies) * 1000, 3),
        "watch_latency_ms_p99": round(latencies[int(len(latencies) * 0.99) - 1] * 1000, 3),
        "watch_latency_ms_max": round(latencies[-1] * 1000, 3),
    }


def worker_cycle(em: Emulator, pods: int) -> dict[str, float]:
    """Five writes per pod, as the allocation worker makes them, with two watches open."""
    rv = em.resource_version
    watchers = [
        Watcher(f"{em.url}/api/v1/namespaces/cycle/pods?watch=1&resourceVersion={rv}"),
        Watcher(
            f"{em.url}/apis/resource.k8s.io/v1/namespaces/cycle/resourceclaims?watch=1&resourceVersion={rv}"
        ),
    ]
    for w in watchers:
        w.start()
        w.ready.wait(5)
    em.wait_for(lambda: em.open_watches() >= 2, 10)
    http = urllib3.PoolManager()
    pods_url = f"{em.url}/api/v1/namespaces/cycle/pods"
    claims_url = f"{em.url}/apis/resource.k8s.io/v1/namespaces/cycle/resourceclaims"
    em.reset_requests()
    t0 = time.perf_counter()
    for i in range(pods):
        name = f"p-{i}"
        _check(http.request("POST", pods_url, body=json.dumps(_pod(name)).encode(), headers=JSON), 201)
        _check(http.request("POST", claims_url, body=json.dumps(_claim(name)).encode(), headers=JSON), 201)
        # Allocated and reserved in one write, as the worker's PreBind does (a reservation needs one).
        allocation = {"devices": {"results": [{"request": "r", "driver": "d", "pool": "n1", "device": name}]}}
        reserved = {
            "status": {
                "allocation": allocation,
                "reservedFor": [{"resource": "pods", "name": name, "uid": str(i)}],
            }
        }
        _check(
            http.request(
                "PATCH", f"{claims_url}/{name}/status", body=json.dumps(reserved).encode(), headers=MERGE
            ),
            200,
        )
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"kind": "Node", "name": "n1"},
        }
        _check(
            http.request(
                "POST", f"{pods_url}/{name}/binding", body=json.dumps(binding).encode(), headers=JSON
            ),
            201,
        )
        status = {
            "status": {
                "extendedResourceClaimStatus": {
                    "resourceClaimName": name,
                    "requestMappings": [
                        {
                            "containerName": "main",
                            "resourceName": "example.com/gpu",
                            "requestName": "container-0-request-0",
                        }
                    ],
                }
            }
        }
        _check(
            http.request(
                "PATCH", f"{pods_url}/{name}/status", body=json.dumps(status).encode(), headers=MERGE
            ),
            200,
        )
    seconds = time.perf_counter() - t0
    watchers[0].wait_for(f"p-{pods - 1}")
    return {
        "pods_per_s": _rate(pods, seconds),
        "writes_per_s": _rate(em.writes(), seconds),
        "writes_per_pod": em.writes() / pods,
        "watch_events_delivered": sum(w.events for w in watchers),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000, help="objects per phase (default 1000)")
    parser.add_argument("--watchers", type=int, default=4, help="extra watchers in the latency test")
    args = parser.parse_args()
    with Emulator() as em:
        result: dict[str, Any] = {"pods": args.pods}
        result.update(creates_and_updates(em, args.pods))
        result["official_client_creates_per_s"] = official_client_creates(em, max(1, args.pods // 4))
        result.update(watch_latency(em, max(1, args.pods // 4), args.watchers))
        result.update(worker_cycle(em, args.pods))
        em.drop_watches()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
