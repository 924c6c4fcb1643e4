"""``manifests/`` is what the renderer writes (with the kustomization and the chart's matchConditions), and
``kubectl kustomize`` builds the same objects from it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from webhook.core.api.objects import Obj
from webhook.install.files import defaults
from webhook.install.manifests import render

ROOT = Path(__file__).resolve().parents[2]


KUBECTL = shutil.which("kubectl")


def test_manifests_directory_matches_the_renderer() -> None:
    for name, text in defaults().items():
        assert (ROOT / "manifests" / name).read_text() == text, (
            f"manifests/{name} is stale: run `make manifests`"
        )
    files = [ROOT / "manifests" / n for n in defaults() if n.endswith(".yaml") and "/" not in n]
    on_disk = [
        o
        for f in sorted(files)
        for o in yaml.safe_load_all(f.read_text())
        if o.get("kind") != "Kustomization"
    ]
    assert sorted((o["kind"], o["metadata"]["name"]) for o in on_disk) == sorted(
        (o["kind"], o["metadata"]["name"]) for o in render(cert_manager=True)
    )
    text = "".join(f.read_text() for f in files)
    assert "Secret" not in {o["kind"] for o in on_disk}  # never a key, never an empty Secret
    assert "PRIVATE KEY" not in text
    for f in files:
        first, second = f.read_text().splitlines()[:2]
        assert first.startswith("# `draxr manifests --cert-manager`")
        assert not second.startswith("#")


@pytest.mark.skipif(
    KUBECTL is None and os.environ.get("CI") != "true",
    reason="no kubectl on PATH (`.ci/kubectl.sh` fetches it into .ci/bin)",
)
def test_kubectl_kustomize_renders_the_checked_in_manifests() -> None:
    assert KUBECTL is not None, "CI=true: kubectl is required (.ci/kubectl.sh)"
    done = subprocess.run(
        [KUBECTL, "kustomize", str(ROOT / "manifests")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    built = [o for o in yaml.safe_load_all(done.stdout) if o]

    def key(o: Obj) -> tuple[str, str, str]:
        return (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])

    assert sorted(built, key=key) == sorted(render(cert_manager=True), key=key)
