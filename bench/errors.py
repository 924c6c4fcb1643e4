"""Denials with very many field errors: how long one review takes and how big its answer is.

Two hostile shapes, each just under the 3 MiB request body limit, reviewed in process through the
webhook's own request handling (``admission.app.answer``: decode, check, hook, encode):

* ``status``: a pod status UPDATE by the worker whose ``status.extendedResourceClaimStatus`` has
  ``--mappings`` request mappings, each naming a container the pod does not have (one
  ``Invalid`` error per mapping, every message distinct);
* ``containers``: a pod CREATE with ``--containers`` containers, each asking for half a
  DRA-backed ``example.com/gpu`` in its requests and its limits (two ``Invalid`` errors per
  container).

    python bench/errors.py [--mappings 28000] [--containers 19000] [--repeat 3]

Prints JSON: the body size, the best wall time of ``--repeat`` runs, the response size and how
many causes and message bytes it carries.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

if __name__ == "__main__":
    # Run as a script, bench/ comes first on sys.path and bench/webhook.py would shadow the package.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]

from webhook.admission import AdmissionConfig
from webhook.admission.app import ENDPOINTS, Endpoint, answer
from webhook.admission.context import Context
from webhook.core.api.objects import Obj
from webhook.kube.cache import ClusterCache

GPU = "example.com/gpu"
WORKER = "system:serviceaccount:draxr-system:draxr-worker"


def cluster() -> list[Obj]:
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu.example.com", "creationTimestamp": "2025-01-01T00:00:00Z"},
            "spec": {"extendedResourceName": GPU},
        }
    ]


def review(obj: Obj, operation: str, old: Obj | None = None, sub_resource: str = "") -> bytes:
    request: Obj = {
        "uid": "00000000-0000-4000-8000-000000000001",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "name": "p",
        "namespace": "default",
        "operation": operation,
        "userInfo": {"username": WORKER},
        "object": obj,
        "oldObject": old,
    }
    if sub_resource:
        request["subResource"] = sub_resource
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return json.dumps(body, separators=(",", ":")).encode()


def pod(containers: list[Obj]) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "pod-uid"},
        "spec": {"containers": containers},
    }


def status_shape(mappings: int) -> bytes:
    old = pod([{"name": "c", "image": "x", "resources": {"requests": {GPU: "1"}}}])
    new = json.loads(json.dumps(old))
    new["status"] = {
        "extendedResourceClaimStatus": {
            "resourceClaimName": "p-extended-resources-abcde",
            "requestMappings": [
                {"containerName": f"c{i}", "resourceName": GPU, "requestName": "r"} for i in range(mappings)
            ],
        }
    }
    return review(new, "UPDATE", old, "status")


def containers_shape(containers: int) -> bytes:
    half = {GPU: "0.5"}
    cs = [
        {"name": f"c{i}", "image": "x", "resources": {"requests": half, "limits": half}}
        for i in range(containers)
    ]
    return review(pod(cs), "CREATE")


def measure(endpoint: Endpoint, ctx: Context, body: bytes, repeat: int) -> Obj:
    best = float("inf")
    result = None
    for _ in range(repeat):
        started = time.perf_counter()
        result = answer(endpoint, ctx, body)
        best = min(best, time.perf_counter() - started)
    assert result is not None
    out: Obj = {
        "request_bytes": len(body),
        "seconds": round(best, 3),
        "http_status": result.code,
        "response_bytes": len(result.body),
    }
    if result.code == 200:
        status = json.loads(result.body)["response"].get("status") or {}
        out["causes"] = len((status.get("details") or {}).get("causes") or [])
        out["message_bytes"] = len(status.get("message", "").encode())
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--mappings", type=int, default=28_000)
    ap.add_argument("--containers", type=int, default=19_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    ctx = Context.build(ClusterCache.from_objects(cluster()), AdmissionConfig())
    validate = next(e for e in ENDPOINTS if e.path == "/validate/pods")
    mutate = next(e for e in ENDPOINTS if e.path == "/mutate/pods")
    results: Obj = {
        "status_mappings": {"mappings": args.mappings}
        | measure(validate, ctx, status_shape(args.mappings), args.repeat),
        "containers_validate": {"containers": args.containers}
        | measure(validate, ctx, containers_shape(args.containers), args.repeat),
        "containers_mutate": {"containers": args.containers}
        | measure(mutate, ctx, containers_shape(args.containers), args.repeat),
    }
    json.dump(results, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
