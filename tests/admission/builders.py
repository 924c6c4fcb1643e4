"""AdmissionReviews and cluster objects for the admission tests."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

from webhook.core.api.constants import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from webhook.core.api.objects import Obj

from ..core.podfactory import container, device_class, gpus, node, pod, resource_slice

WORKER = "system:serviceaccount:draxr-system:draxr-worker"
SCHEDULER = "system:kube-scheduler"
USER = "alice"
GPU = "example.com/gpu"
GPU_CLASS = "gpu.example.com"

POD: tuple[str, str, str] = ("", "v1", "pods")
DEVICE_CLASS: tuple[str, str, str] = ("resource.k8s.io", "v1", "deviceclasses")
RESOURCE_CLAIM: tuple[str, str, str] = ("resource.k8s.io", "v1", "resourceclaims")
KINDS = {"pods": "Pod", "deviceclasses": "DeviceClass", "resourceclaims": "ResourceClaim"}

__all__ = ["container", "device_class", "gpus", "node", "pod", "resource_slice"]


def review(
    obj: Obj | None,
    *,
    operation: str = "CREATE",
    resource: tuple[str, str, str] = POD,
    sub_resource: str = "",
    old: Obj | None = None,
    user: str = USER,
    dry_run: bool = False,
    uid: str = "7c7a1c0e-0000-4000-8000-000000000001",
    namespace: str | None = None,
) -> Obj:
    """An AdmissionReview as kube-apiserver sends it."""
    group, version, plural = resource
    kind = {"group": group, "version": version, "kind": KINDS[plural]}
    source = obj if obj is not None else old
    meta = (source or {}).get("metadata") or {}
    request: Obj = {
        "uid": uid,
        "kind": kind,
        "resource": {"group": group, "version": version, "resource": plural},
        "requestKind": kind,
        "requestResource": {"group": group, "version": version, "resource": plural},
        "name": meta.get("name", ""),
        "operation": operation,
        "userInfo": {"username": user, "groups": ["system:authenticated"]},
        "object": copy.deepcopy(obj),
        "oldObject": copy.deepcopy(old),
        "dryRun": dry_run,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
    }
    if sub_resource:
        request["subResource"] = sub_resource
    ns = namespace if namespace is not None else meta.get("namespace")
    if ns:
        request["namespace"] = ns
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def gpu_pod(name: str = "p", count: Any = 1, *, resource: str = GPU, **spec: Any) -> Obj:
    return pod(name, [container("c", {"cpu": "100m", resource: count})], **spec)


def gpu_cluster(devices: int = 2, *, extended: str = GPU) -> list[Obj]:
    """One node whose GPUs are published by a DRA driver and a class mapping ``extended`` to them."""
    return [
        device_class(GPU_CLASS, extended, ['device.driver == "gpu.example.com"']),
        node("dra-node"),
        resource_slice("dra-node-gpus", gpus(devices), node_name="dra-node"),
    ]


def special_claim(
    name: str,
    owner: Obj,
    requests: list[Obj] | None = None,
    *,
    annotation: str | None = "true",
    namespace: str = "default",
) -> Obj:
    """An extended resource claim as the scheduler writes it, controlled by ``owner`` (a pod)."""
    meta: Obj = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "ownerReferences": [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
            }
        ],
    }
    if annotation is not None:
        meta["annotations"] = {EXTENDED_RESOURCE_CLAIM_ANNOTATION: annotation}
    if requests is None:
        requests = [
            {
                "name": "container-0-request-1",
                "exactly": {"deviceClassName": GPU_CLASS, "allocationMode": "ExactCount", "count": 1},
            }
        ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": {"devices": {"requests": requests}},
    }


def mapping(claim_name: str, request: str = "container-0-request-1", resource: str = GPU) -> Obj:
    return {
        "resourceClaimName": claim_name,
        "requestMappings": [{"containerName": "c", "resourceName": resource, "requestName": request}],
    }


def with_mapping(p: Obj, ercs: Obj | None) -> Obj:
    out = copy.deepcopy(p)
    out.setdefault("status", {})
    if ercs is None:
        out["status"].pop("extendedResourceClaimStatus", None)
    else:
        out["status"]["extendedResourceClaimStatus"] = ercs
    return out


def decode_patch(response: Obj) -> list[Obj]:
    assert response.get("patchType") == "JSONPatch"
    patch: list[Obj] = json.loads(base64.b64decode(response["patch"]))
    return patch


def causes(response: Obj) -> list[tuple[str, str, str]]:
    """(field, reason, message) of each cause of a denial."""
    return [
        (c.get("field", ""), c["reason"], c["message"])
        for c in response["status"]["details"].get("causes", [])
    ]
