"""What kube-controller-manager's resourceclaim controller makes for one pod, made on request.

The API emulator runs no controllers. Where a scenario on it (the demo with the gate off, the gate
switch) needs the claims a cluster's controller would make from a pod's ResourceClaimTemplates, it
calls :func:`make_claims` at the moment the controller would act, as one more API client. Everything
else that needs the controller runs on the real control plane (``e2e/local.py``).

Upstream (``handleClaim``): per ``spec.resourceClaims[]`` entry naming a template, a claim
``generateName: <pod>-<pod claim>-`` with the template's labels, annotations and spec, the annotation
``resource.kubernetes.io/pod-claim-name``, the pod as its controller owner (without
``blockOwnerDeletion``, as the real apiserver shows it); then the pod's
``status.resourceClaimStatuses`` names each. ``e2e/controlplane/test_controlplane.py`` asserts that
shape on the real controller.
"""

from __future__ import annotations

from collections.abc import Callable

from webhook.core.api.constants import POD_CLAIM_NAME_ANNOTATION
from webhook.core.api.objects import Obj, as_dict, as_list, name, namespace
from webhook.kube.client import KubeClient
from webhook.kube.resources import BY_PLURAL, PODS


def templates_of(pod: Obj) -> dict[str, str]:
    """Pod claim name -> the ResourceClaimTemplate it is made from."""
    out: dict[str, str] = {}
    for entry in as_list(as_dict(pod.get("spec")).get("resourceClaims")):
        claim, template = as_dict(entry).get("name"), as_dict(entry).get("resourceClaimTemplateName")
        if isinstance(claim, str) and isinstance(template, str):
            out[claim] = template
    return out


def make_claims(client: KubeClient, pod: Obj, template: Callable[[str], Obj]) -> list[Obj]:
    """Create the claims of ``pod``'s templates (``template(name)`` returns one, waiting for it if
    need be: draxr's worker makes its templates on first sight of a pod) and name them in the pod's
    status. Returns the claims."""
    ns, pod_name = namespace(pod), name(pod)
    claims: list[Obj] = []
    statuses: list[Obj] = []
    for claim_name, template_name in templates_of(pod).items():
        tmpl = as_dict(template(template_name).get("spec"))
        tmeta = as_dict(tmpl.get("metadata"))
        meta: Obj = {
            "generateName": f"{pod_name}-{claim_name}-",
            "annotations": {**as_dict(tmeta.get("annotations")), POD_CLAIM_NAME_ANNOTATION: claim_name},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod_name,
                    "uid": as_dict(pod.get("metadata")).get("uid"),
                    "controller": True,
                }
            ],
        }
        if as_dict(tmeta.get("labels")):
            meta["labels"] = as_dict(tmeta.get("labels"))
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta}
        claim = client.create(BY_PLURAL["resourceclaims"], {**body, "spec": as_dict(tmpl.get("spec"))}, ns)
        claims.append(claim)
        statuses.append({"name": claim_name, "resourceClaimName": name(claim)})
    if statuses:
        patch = {"status": {"resourceClaimStatuses": statuses}}
        client.patch(PODS, pod_name, patch, namespace=ns, subresource="status")
    return claims
