"""The Deployments: hardened, spread over nodes, probed, with resources and a PodDisruptionBudget each."""

from __future__ import annotations

from webhook.install.manifests import render


def test_deployments_are_hardened_and_highly_available() -> None:
    deployments = [o for o in render(cert_manager=True) if o["kind"] == "Deployment"]
    assert {d["metadata"]["name"] for d in deployments} == {"draxr-webhook", "draxr-worker"}
    for d in deployments:
        spec = d["spec"]["template"]["spec"]
        assert d["spec"]["replicas"] >= 2
        assert spec["affinity"]["podAntiAffinity"]
        (c,) = spec["containers"]
        sc = c["securityContext"]
        assert sc["runAsNonRoot"] is True
        assert sc["readOnlyRootFilesystem"] is True
        assert sc["capabilities"] == {"drop": ["ALL"]}
        assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
        assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert c["resources"]["requests"]
        assert c["resources"]["limits"]
        assert spec["serviceAccountName"] == d["metadata"]["name"]
    pdbs = {o["metadata"]["name"] for o in render(cert_manager=True) if o["kind"] == "PodDisruptionBudget"}
    assert pdbs == {"draxr-webhook", "draxr-worker"}
