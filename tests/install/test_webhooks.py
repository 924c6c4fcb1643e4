"""The webhook configurations: every hook side-effect free, narrowed by matchConditions, kept away from
kube-system, draxr's namespace and opted-out namespaces, on its own path."""

from __future__ import annotations

from tests.install.builders import certificates
from webhook.install.manifests import render


def test_webhook_configurations() -> None:
    objs = {o["kind"]: o for o in render(certificates=certificates())}
    (mutating,) = objs["MutatingWebhookConfiguration"]["webhooks"]
    validating = objs["ValidatingWebhookConfiguration"]["webhooks"]
    for hook in [mutating, *validating]:
        assert hook["sideEffects"] == "None"
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["timeoutSeconds"] == 3
        assert hook["matchPolicy"] == "Equivalent"
        assert hook["matchConditions"]
        assert hook["failurePolicy"] == "Fail"  # every hook is narrowed by its matchConditions
    assert mutating["reinvocationPolicy"] == "IfNeeded"
    excluded, opted_out = mutating["namespaceSelector"]["matchExpressions"]
    assert excluded == {
        "key": "kubernetes.io/metadata.name",
        "operator": "NotIn",
        "values": ["kube-system", "draxr-system"],
    }
    assert opted_out == {"key": "draxr.io/opt-out", "operator": "NotIn", "values": ["true"]}
    assert {h["clientConfig"]["service"]["path"] for h in [mutating, *validating]} == {
        "/mutate/pods",
        "/validate/deviceclasses",
        "/validate/pods",
        "/validate/resourceclaims",
    }
