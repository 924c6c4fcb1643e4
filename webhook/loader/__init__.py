"""Kubernetes manifests read from files: ``draxr plan``, ``draxr validate``, ``--snapshot``, the demo."""

from .documents import Loaded, LoadError, load_paths
from .workloads import WORKLOADS, expand_workloads, is_namespaced, object_uid

__all__ = [
    "WORKLOADS",
    "LoadError",
    "Loaded",
    "expand_workloads",
    "is_namespaced",
    "load_paths",
    "object_uid",
]
