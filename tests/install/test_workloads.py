"""The Deployments: hardened, spread over nodes, probed, with resources and a PodDisruptionBudget each."""

from __future__ import annotations

from webhook.install.manifests import render
from webhook.install.workloads import PRE_STOP_SECONDS


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


def test_a_terminating_webhook_pod_keeps_answering_within_its_grace_period() -> None:
    """Only the webhook sleeps before SIGTERM (kube-apiserver learns late that it left the
    endpoints); the sleep fits in the default 30 s grace period with uvicorn's 10 s shutdown."""
    by_name = {o["metadata"]["name"]: o for o in render(cert_manager=True) if o["kind"] == "Deployment"}
    (webhook,) = by_name["draxr-webhook"]["spec"]["template"]["spec"]["containers"]
    (worker,) = by_name["draxr-worker"]["spec"]["template"]["spec"]["containers"]
    assert webhook["lifecycle"] == {"preStop": {"sleep": {"seconds": PRE_STOP_SECONDS}}}
    assert 0 < PRE_STOP_SECONDS <= 30 - 10
    assert "lifecycle" not in worker
