"""The claims kube-controller-manager's resourceclaim controller makes from a pod's templates.

The rewrite path (``rewrite.py``) gives a pod claims made from draxr's ResourceClaimTemplates; the
claims themselves are made by upstream's controller (``handleClaim`` in
``pkg/controller/resourceclaim/controller.go``), not by draxr. ``draxr plan`` has no controller, and
the API emulator runs none, so both make them here, as the controller does: per
``spec.resourceClaims[]`` entry naming a template, a claim with

* ``generateName: <pod>-<pod claim>-``, both parts shortened in proportion when the base would pass
  57 characters (then without the trailing hyphen, as upstream leaves it);
* the template's ``spec.metadata`` labels and annotations, plus
  ``resource.kubernetes.io/pod-claim-name: <pod claim>``;
* an ownerReference to the pod with ``controller: true`` and no ``blockOwnerDeletion`` (older
  releases set it; the current controller does not, as ``e2e/controlplane`` sees on a real one);
* the template's ``spec.spec`` as its spec;

then the pod's ``status.resourceClaimStatuses`` names each (sorted by pod claim, merged with the
entries already there). Pure: the caller creates the claim and writes the status.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

from ..api.constants import POD_CLAIM_NAME_ANNOTATION
from ..api.objects import Obj, as_dict, as_list, controller_ref, meta, name, namespace, status, uid

#: Upstream's room for a base name: a hyphen and 5 random characters still fit in 63.
MAX_BASE_LENGTH = 57


def claim_generate_name(pod_name: str, pod_claim: str) -> str:
    """``<pod>-<pod claim>-``; a longer base keeps a share of each part, not only the pod's."""
    generate = f"{pod_name}-{pod_claim}-"
    if len(generate) <= MAX_BASE_LENGTH:
        return generate
    pod_part = pod_name[: len(pod_name) * MAX_BASE_LENGTH // len(generate)]
    claim_part = pod_claim[: len(pod_claim) * MAX_BASE_LENGTH // len(generate)]
    return f"{pod_part}-{claim_part}"


def template_pod_claims(pod: Obj) -> list[Obj]:
    """The pod's ``spec.resourceClaims`` entries made from a template (the others name a claim)."""
    out = []
    for entry in as_list(as_dict(pod.get("spec")).get("resourceClaims")):
        entry = as_dict(entry)
        if isinstance(entry.get("name"), str) and isinstance(entry.get("resourceClaimTemplateName"), str):
            out.append(entry)
    return out


def claim_from_template(pod: Obj, pod_claim: Obj, template: Obj, *, claim_name: str | None = None) -> Obj:
    """The ResourceClaim the controller creates for ``pod_claim`` from ``template`` (a
    ResourceClaimTemplate). Without ``claim_name`` it is the POST body (the server generates the
    name); offline, ``claim_name`` names it."""
    tmeta = as_dict(as_dict(template.get("spec")).get("metadata"))
    metadata: Obj = {
        **({"name": claim_name} if claim_name else {}),
        "generateName": claim_generate_name(name(pod), str(pod_claim.get("name", ""))),
        "namespace": namespace(pod),
        "annotations": {
            **as_dict(tmeta.get("annotations")),
            POD_CLAIM_NAME_ANNOTATION: str(pod_claim.get("name", "")),
        },
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": name(pod), "uid": uid(pod), "controller": True}
        ],
    }
    if as_dict(tmeta.get("labels")):
        metadata["labels"] = dict(as_dict(tmeta.get("labels")))
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": metadata,
        "spec": copy.deepcopy(as_dict(as_dict(template.get("spec")).get("spec"))),
    }


def pod_claim_of(claim: Obj, pod: Obj) -> str | None:
    """The pod claim ``claim`` was made for, when the pod is its controller owner
    (``findPodResourceClaim``: a claim of the same name owned by another pod is not the pod's)."""
    owner = controller_ref(claim) or {}
    owned = (owner.get("apiVersion"), owner.get("kind"), owner.get("uid")) == ("v1", "Pod", uid(pod))
    made_for = as_dict(meta(claim).get("annotations")).get(POD_CLAIM_NAME_ANNOTATION)
    return made_for if owned and isinstance(made_for, str) else None


def claim_statuses(pod: Obj, claims: Iterable[Obj]) -> list[Obj]:
    """The pod's ``status.resourceClaimStatuses`` once the controller recorded ``claims``: the
    entries it holds (those naming a claim) merged with one per claim made for one of its template
    pod claims, sorted by pod claim name."""
    wanted = {str(pc["name"]) for pc in template_pod_claims(pod)}
    merged: dict[str, str] = {}
    for entry in as_list(status(pod).get("resourceClaimStatuses")):
        entry = as_dict(entry)
        if isinstance(entry.get("name"), str) and isinstance(entry.get("resourceClaimName"), str):
            merged[entry["name"]] = entry["resourceClaimName"]
    for claim in claims:
        made_for = pod_claim_of(claim, pod)
        if made_for in wanted:
            merged[str(made_for)] = name(claim)
    return [{"name": n, "resourceClaimName": merged[n]} for n in sorted(merged)]
