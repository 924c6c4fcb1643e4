"""What kube-controller-manager's resourceclaim controller makes for one pod, made on request.

The API emulator runs no controllers. Where a scenario on it (the demo with the gate off, the gate
switch) needs the claims a cluster's controller would make from a pod's ResourceClaimTemplates, it
calls :func:`make_claims` at the moment the controller would act, as one more API client. Everything
else that needs the controller runs on the real control plane (``e2e/local.py``).

The claims and the pod's record of them are core's (``webhook/core/paths/templateclaims.py``),
the same functions ``draxr plan`` uses; ``e2e/controlplane/test_controlplane.py`` asserts their shape
on the real controller.
"""

from __future__ import annotations

from collections.abc import Callable

from webhook.core.api.objects import Obj, name, namespace
from webhook.core.paths.templateclaims import claim_from_template, claim_statuses, template_pod_claims
from webhook.kube.client import KubeClient
from webhook.kube.resources import BY_PLURAL, PODS


def make_claims(client: KubeClient, pod: Obj, template: Callable[[str], Obj]) -> list[Obj]:
    """Create the claims of ``pod``'s templates (``template(name)`` returns one, waiting for it if
    need be: draxr's worker makes its templates on first sight of a pod) and name them in the pod's
    status. Returns the claims."""
    ns, pod_name = namespace(pod), name(pod)
    claims = [
        client.create(
            BY_PLURAL["resourceclaims"],
            claim_from_template(pod, pod_claim, template(str(pod_claim["resourceClaimTemplateName"]))),
            ns,
        )
        for pod_claim in template_pod_claims(pod)
    ]
    if claims:
        patch = {"status": {"resourceClaimStatuses": claim_statuses(pod, claims)}}
        client.patch(PODS, pod_name, patch, namespace=ns, subresource="status")
    return claims
