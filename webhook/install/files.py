"""Renderings as text and files: YAML documents, and ``manifests/`` as ``make manifests`` writes it.

``manifests/`` holds the cert-manager rendering with the defaults, one file per group of kinds, the
kustomization that applies them (``kubectl apply -k manifests/``) and the Helm chart's copy of the
hooks' ``matchConditions``; a test keeps every one of them equal to what this module writes.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from ..core.api.objects import Obj
from .chart import CHART_MATCH_CONDITIONS, chart_match_conditions
from .manifests import render


def dump(objects: list[Obj]) -> str:
    return yaml.safe_dump_all(objects, sort_keys=False, default_flow_style=False, width=120)


FILES = {
    "00-namespace.yaml": ("Namespace",),
    "10-rbac.yaml": ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"),
    "15-flowcontrol.yaml": ("PriorityLevelConfiguration", "FlowSchema"),
    "20-workloads.yaml": ("Deployment", "PodDisruptionBudget", "Service", "NetworkPolicy"),
    "25-certificates.yaml": ("Issuer", "Certificate", "Secret"),
    "30-webhooks.yaml": ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"),
}


def split(objects: list[Obj]) -> dict[str, list[Obj]]:
    """A rendering as it is kept in ``manifests/``, one file per group of kinds."""
    return {f: [o for o in objects if o["kind"] in kinds] for f, kinds in FILES.items()}


HEADER = (
    "# `draxr manifests --cert-manager` with the defaults (needs cert-manager; plain `draxr manifests` "
    "makes its own certificates); regenerate with `make manifests`.\n"
)

#: The kustomization that makes ``kubectl apply -k manifests/`` apply the files above.
KUSTOMIZATION = "kustomization.yaml"


def kustomization() -> str:
    body = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": list(FILES),
    }
    return HEADER + yaml.safe_dump(body, sort_keys=False, default_flow_style=False)


def defaults() -> dict[str, str]:
    """Every generated file under ``manifests/`` (relative path -> text)."""
    files = {name: HEADER + dump(objects) for name, objects in split(render(cert_manager=True)).items()}
    files[KUSTOMIZATION] = kustomization()
    files[str(CHART_MATCH_CONDITIONS)] = chart_match_conditions()
    return files


def write_defaults(directory: str | Path) -> None:
    for name, text in defaults().items():
        path = Path(directory) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
