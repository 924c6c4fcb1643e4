"""How kube-apiserver trusts the webhook: with cert-manager, its injection and no Secret of draxr's."""

from __future__ import annotations

from webhook.install.manifests import render


def test_cert_manager_variant() -> None:
    objs = render(cert_manager=True)
    assert {o["kind"] for o in objs} >= {"Issuer", "Certificate"}
    assert not [o for o in objs if o["kind"] == "Secret"]
    for cfg in [o for o in objs if o["kind"].endswith("WebhookConfiguration")]:
        assert cfg["metadata"]["annotations"] == {
            "cert-manager.io/inject-ca-from": "draxr-system/draxr-webhook"
        }
        assert all("caBundle" not in h["clientConfig"] for h in cfg["webhooks"])
