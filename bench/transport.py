"""Client CPU per API request: ``KubeClient`` on its transport against urllib3's pool, same server.

A minimal HTTP/1.1 server in a subprocess answers every request at once with a small pod (the
headers kube-apiserver sends, a ``Content-Length``), so what is measured is the client's own work:
this thread's CPU time per request (``time.thread_time``), the server's not counted. Three ways to
send the same GET of a pod and POST of a Binding:

- ``kubeclient``: ``KubeClient.get`` and ``KubeClient.create`` (headers, credentials, rate limiter,
  JSON, the transport): what the worker pays;
- ``urllib3``: the official client's urllib3 pool (``HTTPConnectionPool.urlopen``, one kept
  connection) with the same headers and body, decoded with the same codec: what the worker paid
  before the transport;
- ``socket``: the request written and its answer read on a plain socket with no parsing to speak
  of: the least a Python client can spend.

Prints JSON: microseconds of CPU and of wall time per request for each.

    python bench/transport.py [--requests 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

if __name__ == "__main__":
    # Run as a script, bench/ comes first on sys.path and bench/webhook.py would shadow the package.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    sys.path.insert(0, os.path.dirname(_here))

import kubernetes
import urllib3

from bench.common import free_port
from webhook.kube import codec
from webhook.kube.client import KubeClient, binding
from webhook.kube.resources import PODS

POD = codec.dumps(
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "0e6b9b4e", "resourceVersion": "12"},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Pending"},
    }
)
#: kube-apiserver's headers on a JSON answer (audit id, APF's uids, date), then the length.
ANSWER = (
    b"HTTP/1.1 200 OK\r\nAudit-Id: 0f0e7f4e-3a55-4b8a-9a3e-2b8c8d1f1a11\r\n"
    b"Cache-Control: no-cache, private\r\n"
    b"Content-Type: application/json\r\nX-Kubernetes-Pf-Flowschema-Uid: 5b0c\r\n"
    b"X-Kubernetes-Pf-Prioritylevel-Uid: 9d1e\r\nDate: Sun, 29 Nov 2026 14:00:00 GMT\r\n"
    b"Content-Length: %d\r\n\r\n" % len(POD)
) + POD


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    await reader.readexactly(int(line.split(b":")[1]))
            writer.write(ANSWER)
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


async def _serve(port: int) -> None:
    server = await asyncio.start_server(_answer, "127.0.0.1", port)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


def measure(fn: Callable[[], Any], n: int) -> dict[str, float]:
    for _ in range(min(200, n)):
        fn()
    cpu, wall = time.thread_time(), time.perf_counter()
    for _ in range(n):
        fn()
    return {
        "cpu_us_per_request": round((time.thread_time() - cpu) / n * 1e6, 1),
        "wall_us_per_request": round((time.perf_counter() - wall) / n * 1e6, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--requests", type=int, default=5000, help="requests of each kind and way")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # the server subprocess
    args = ap.parse_args(argv)
    if args.serve:
        asyncio.run(_serve(args.serve))
        return 0
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--serve", str(port)], stdout=subprocess.PIPE
    )
    try:
        assert server.stdout is not None
        assert server.stdout.readline().strip() == b"ready"
        configuration = kubernetes.client.Configuration(host=f"http://127.0.0.1:{port}")
        configuration.api_key = {"authorization": "token"}
        configuration.api_key_prefix = {"authorization": "Bearer"}
        client = KubeClient(kubernetes.client.ApiClient(configuration), qps=1e9, burst=10**9)
        body = binding("default", "p", "0e6b9b4e", "node-1")
        path = PODS.path("default", "p")
        headers = {
            "Accept": "application/json",
            "Content-Type": "application/json",
            "User-Agent": "draxr",
            "Authorization": "Bearer token",
        }
        pool = urllib3.HTTPConnectionPool("127.0.0.1", port, maxsize=1, retries=False)

        def pooled(method: str, url: str, data: bytes | None) -> Any:
            return codec.loads(pool.urlopen(method, url, body=data, headers=headers, redirect=False).data)

        plain = socket.create_connection(("127.0.0.1", port))
        plain.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def raw(method: str, url: str, data: bytes | None) -> Any:
            head = f"{method} {url} HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "".join(
                f"{k}: {v}\r\n" for k, v in headers.items()
            )
            if data is not None:
                head += f"Content-Length: {len(data)}\r\n"
            plain.sendall((head + "\r\n").encode() + (data or b""))
            got = b""
            while len(got) < len(ANSWER):
                got += plain.recv(65536)
            return codec.loads(got[got.index(b"\r\n\r\n") + 4 :])

        n = args.requests
        url = path + "/binding"
        result = {
            "requests": n,
            "get": {
                "kubeclient": measure(lambda: client.get(PODS, "p", "default"), n),
                "urllib3": measure(lambda: pooled("GET", path, None), n),
                "socket": measure(lambda: raw("GET", path, None), n),
            },
            "post": {
                "kubeclient": measure(lambda: client.bind("default", "p", "0e6b9b4e", "node-1"), n),
                "urllib3": measure(lambda: pooled("POST", url, codec.dumps(body)), n),
                "socket": measure(lambda: raw("POST", url, codec.dumps(body)), n),
            },
        }
        plain.close()
    finally:
        server.kill()
        server.wait()
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
