"""Kubernetes manifests read from files: ``draxr plan``, ``draxr validate``, ``draxr convert``,
``--snapshot``, the demo; ``roundtrip`` edits YAML files keeping their comments (``draxr convert``)."""

from .documents import STDIN, STDIN_SOURCE, Loaded, LoadError, input_files, load_paths, load_text, read_input
from .workloads import (
    FROM_CLAIM_TEMPLATE,
    POD_TEMPLATES,
    WORKLOADS,
    expand_workloads,
    is_namespaced,
    object_uid,
    template_path,
    template_pod,
    with_identity,
)

__all__ = [
    "FROM_CLAIM_TEMPLATE",
    "POD_TEMPLATES",
    "STDIN",
    "STDIN_SOURCE",
    "WORKLOADS",
    "LoadError",
    "Loaded",
    "expand_workloads",
    "input_files",
    "is_namespaced",
    "load_paths",
    "load_text",
    "object_uid",
    "read_input",
    "template_path",
    "template_pod",
    "with_identity",
]
