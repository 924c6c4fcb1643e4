"""Tiny builders for pod and cluster objects used across core tests."""

from __future__ import annotations

from typing import Any

from webhook.core.api.objects import Obj


def container(name: str, requests: dict[str, Any] | None = None, *, sidecar: bool = False) -> Obj:
    c: Obj = {"name": name, "image": "busybox"}
    if requests is not None:
        c["resources"] = {"requests": dict(requests)}
    if sidecar:
        c["restartPolicy"] = "Always"
    return c


def pod(
    name: str = "my-pod",
    containers: list[Obj] | None = None,
    init: list[Obj] | None = None,
    namespace: str = "default",
    uid: str | None = None,
    **spec: Any,
) -> Obj:
    s: Obj = {"containers": containers if containers is not None else [container("c")]}
    if init:
        s["initContainers"] = init
    s.update(spec)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}"},
        "spec": s,
    }


def node(
    name: str, allocatable: dict[str, Any] | None = None, labels: dict[str, str] | None = None, **spec: Any
) -> Obj:
    alloc = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    alloc.update(allocatable or {})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": dict(spec),
        "status": {"allocatable": alloc},
    }


def device_class(
    name: str,
    ext: str | None = None,
    selectors: list[str] | None = None,
    created: str = "2025-01-01T00:00:00Z",
    config: list[Obj] | None = None,
) -> Obj:
    spec: Obj = {}
    if ext:
        spec["extendedResourceName"] = ext
    if selectors:
        spec["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if config:
        spec["config"] = config
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name, "creationTimestamp": created},
        "spec": spec,
    }


def device(name: str, attributes: dict[str, Any] | None = None, **extra: Any) -> Obj:
    d: Obj = {"name": name}
    if attributes:
        d["attributes"] = attributes
    d.update(extra)
    return d


def resource_slice(
    name: str,
    devices: list[Obj],
    *,
    driver: str = "gpu.example.com",
    pool: str | None = None,
    node_name: str | None = None,
    generation: int = 1,
    count: int = 1,
    **spec: Any,
) -> Obj:
    s: Obj = {
        "driver": driver,
        "pool": {"name": pool or node_name or name, "generation": generation, "resourceSliceCount": count},
        "devices": devices,
    }
    if node_name:
        s["nodeName"] = node_name
    s.update(spec)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": s,
    }


def gpus(n: int, prefix: str = "gpu") -> list[Obj]:
    return [device(f"{prefix}-{i}", {"index": {"int": i}}) for i in range(n)]
