"""The webhook behind an API server (the project's emulator): informer-fed cache, webhook
configurations with a ``caBundle`` and a Service, and ``dryRun=All`` answered exactly like the
real request."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import urllib3

from e2e.emulator import Emulator
from tests.admission.builders import (
    GPU,
    GPU_CLASS,
    WORKER,
    device_class,
    gpu_cluster,
    gpu_pod,
    mapping,
    special_claim,
)
from tests.admission.conftest import NAMESPACE, SERVICE, Webhook
from webhook.core.api.constants import DEVICE_CLASS_PREFIX, DRAXR_RESOURCES_ANNOTATION
from webhook.core.api.objects import Obj
from webhook.identity.pki import CA_CERT
from webhook.kube.cache import WEBHOOK_KINDS, ClusterCache
from webhook.kube.client import KubeClient

TOKENS = {"worker": (WORKER, ["system:serviceaccounts"]), "alice": ("alice", ["devs"])}
IMPLICIT = DEVICE_CLASS_PREFIX + GPU_CLASS


def _rule(group: str, resources: list[str], operations: list[str]) -> Obj:
    return {"operations": operations, "apiGroups": [group], "apiVersions": ["v1"], "resources": resources}


def _hook(name: str, path: str, port: int, ca: str, rule: Obj) -> Obj:
    return {
        "name": name,
        "clientConfig": {
            "service": {"namespace": NAMESPACE, "name": SERVICE, "path": path, "port": port},
            "caBundle": ca,
        },
        "rules": [rule],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "failurePolicy": "Fail",
        "timeoutSeconds": 10,
    }


@dataclass
class Cluster:
    em: Emulator
    cache: ClusterCache
    http: urllib3.PoolManager

    def call(self, method: str, path: str, body: Obj, *, token: str = "alice", dry_run: bool = False) -> Any:
        url = self.em.url + path + ("?dryRun=All" if dry_run else "")
        content_type = "application/merge-patch+json" if method == "PATCH" else "application/json"
        headers = {"Authorization": f"Bearer {token}", "Content-Type": content_type}
        return self.http.request(method, url, body=json.dumps(body).encode(), headers=headers)

    def seen(self, kind: str, name: str) -> threading.Event:
        """Set once the webhook's cache has received ``kind/name``."""
        event = threading.Event()

        def listener(k: str, _etype: str, obj: Obj) -> None:
            if k == kind and obj.get("metadata", {}).get("name") == name:
                event.set()

        self.cache.subscribe(listener)
        return event


@pytest.fixture
def cluster(webhook: Webhook) -> Iterator[Cluster]:
    server = webhook.server
    ca = base64.b64encode((server.cert_dir / CA_CERT).read_bytes()).decode()
    cache = ClusterCache()
    webhook.install(cache=cache)
    try:
        with Emulator(
            tokens=TOKENS, services={f"{SERVICE}.{NAMESPACE}.svc": ("127.0.0.1", server.port)}
        ) as em:
            for obj in gpu_cluster():
                em.create(
                    {"Node": "nodes", "DeviceClass": "deviceclasses"}.get(obj["kind"], "resourceslices"), obj
                )
            api = em.api_client("worker")
            cache.start(KubeClient(api), WEBHOOK_KINDS, min_backoff=0.05, max_backoff=0.2)
            assert cache.wait_synced(WEBHOOK_KINDS, timeout=10)
            port = server.port
            em.create(
                "mutatingwebhookconfigurations",
                {
                    "metadata": {"name": "draxr"},
                    "webhooks": [
                        _hook(
                            "pods.mutate.draxr.io", "/mutate/pods", port, ca, _rule("", ["pods"], ["CREATE"])
                        )
                    ],
                },
            )
            em.create(
                "validatingwebhookconfigurations",
                {
                    "metadata": {"name": "draxr"},
                    "webhooks": [
                        _hook(
                            "pods.validate.draxr.io",
                            "/validate/pods",
                            port,
                            ca,
                            _rule("", ["pods", "pods/status"], ["CREATE", "UPDATE"]),
                        ),
                        _hook(
                            "deviceclasses.validate.draxr.io",
                            "/validate/deviceclasses",
                            port,
                            ca,
                            _rule("resource.k8s.io", ["deviceclasses"], ["CREATE", "UPDATE"]),
                        ),
                        _hook(
                            "resourceclaims.validate.draxr.io",
                            "/validate/resourceclaims",
                            port,
                            ca,
                            _rule("resource.k8s.io", ["resourceclaims"], ["CREATE", "UPDATE"]),
                        ),
                    ],
                },
            )
            yield Cluster(em, cache, urllib3.PoolManager())
            api.close()
    finally:
        cache.stop()


def _same_answer(cluster: Cluster, method: str, path: str, body: Obj, token: str = "alice") -> Any:
    dry = cluster.call(method, path, body, token=token, dry_run=True)
    real = cluster.call(method, path, body, token=token)
    assert dry.status == real.status
    assert dry.headers.getlist("Warning") == real.headers.getlist("Warning")
    if dry.status >= 400:
        assert json.loads(dry.data) == json.loads(real.data)
    return real


def test_a_pod_is_mutated_alike_under_dry_run(cluster: Cluster) -> None:
    body = gpu_pod("big", 3)
    dry = cluster.call("POST", "/api/v1/namespaces/default/pods", body, dry_run=True)
    assert dry.status == 201
    assert cluster.em.find("pods", "big") is None
    real = cluster.call("POST", "/api/v1/namespaces/default/pods", body)
    assert real.status == 201
    assert (
        dry.headers.getlist("Warning")
        == real.headers.getlist("Warning")
        == ['299 - "no node can run this pod now: 0/1 nodes are available: 1 cannot allocate all claims."']
    )
    for resp in (dry, real):
        created = json.loads(resp.data)
        assert (
            created["metadata"]["annotations"][DRAXR_RESOURCES_ANNOTATION]
            == '{"example.com/gpu":"gpu.example.com"}'
        )
        assert created["spec"]["schedulerName"] == "draxr"


def test_a_fractional_implicit_request_is_denied_alike_under_dry_run(cluster: Cluster) -> None:
    real = _same_answer(
        cluster, "POST", "/api/v1/namespaces/default/pods", gpu_pod("p", "0.5", resource=IMPLICIT)
    )
    assert real.status == 422
    assert json.loads(real.data)["message"] == (
        'admission webhook "pods.validate.draxr.io" denied the request: Pod "p" is invalid: '
        f"spec.containers[0].resources.requests[{IMPLICIT}]: Invalid value: 500m: must be an integer"
    )


def test_a_duplicate_name_is_denied_once_the_cache_knows_the_holder(cluster: Cluster) -> None:
    seen = cluster.seen("DeviceClass", "gpu-b")
    path = "/apis/resource.k8s.io/v1/deviceclasses"
    assert cluster.call("POST", path, device_class("gpu-b", "example.com/tpu"), token="worker").status == 201
    assert seen.wait(10)
    real = _same_answer(cluster, "POST", path, device_class("gpu-c", "example.com/tpu"), token="worker")
    assert real.status == 422
    assert json.loads(real.data)["message"].endswith(
        'spec.extendedResourceName: Duplicate value: "example.com/tpu": '
        'already declared by DeviceClass "gpu-b"'
    )


def test_a_user_cannot_write_a_mapping_or_fake_a_claim(cluster: Cluster) -> None:
    created = json.loads(cluster.call("POST", "/api/v1/namespaces/default/pods", gpu_pod("p", 1)).data)
    status_path = "/api/v1/namespaces/default/pods/p/status"
    patch = {"status": {"extendedResourceClaimStatus": mapping("p-claim")}}
    real = _same_answer(cluster, "PATCH", status_path, patch)
    assert real.status == 403
    assert json.loads(real.data)["message"] == (
        'admission webhook "pods.validate.draxr.io" denied the request: pods "p" is forbidden: '
        "status.extendedResourceClaimStatus may only be written by the scheduler (draxr --allowed-writers), "
        'not by user "alice"'
    )
    claim = special_claim("p-claim", created)
    claims_path = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
    assert _same_answer(cluster, "POST", claims_path, claim).status == 403
    # The worker's own flow: claim first, then the mapping, once the webhook's cache has the claim.
    seen = cluster.seen("ResourceClaim", "p-claim")
    assert cluster.call("POST", claims_path, claim, token="worker").status == 201
    assert seen.wait(10)
    assert cluster.call("PATCH", status_path, patch, token="worker").status == 200
    assert GPU in json.dumps(cluster.em.get("pods", "p")["status"]["extendedResourceClaimStatus"])
