"""Client configuration for the emulator: a kubeconfig file (kubectl, ``config.load_kube_config``)
and a ready ``kubernetes.client.ApiClient``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def kubeconfig_document(server: str, token: str | None, namespace: str = "default") -> dict[str, Any]:
    user: dict[str, Any] = {"token": token} if token else {}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": "emulator", "cluster": {"server": server}}],
        "users": [{"name": "emulator-user", "user": user}],
        "contexts": [
            {
                "name": "emulator",
                "context": {"cluster": "emulator", "user": "emulator-user", "namespace": namespace},
            }
        ],
        "current-context": "emulator",
    }


def write_kubeconfig(path: str | Path, server: str, token: str | None, namespace: str = "default") -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(kubeconfig_document(server, token, namespace), sort_keys=False))
    target.chmod(0o600)
    return target


def api_client(server: str, token: str | None) -> Any:
    """A ``kubernetes.client.ApiClient`` for ``server`` (anonymous without a token)."""
    from kubernetes import client

    cfg = client.Configuration(host=server)
    if token:
        cfg.api_key = {"authorization": token}
        cfg.api_key_prefix = {"authorization": "Bearer"}
    return client.ApiClient(cfg)
