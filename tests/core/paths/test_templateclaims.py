"""The claims the resourceclaim controller makes from a pod's templates, and the pod's record of them."""

from __future__ import annotations

import copy

import kubernetes_validate

from tests.core.podfactory import pod
from webhook.core.api.constants import POD_CLAIM_NAME_ANNOTATION
from webhook.core.api.objects import Obj
from webhook.core.paths.rewrite import TemplateRef, template
from webhook.core.paths.templateclaims import (
    claim_from_template,
    claim_generate_name,
    claim_statuses,
    pod_claim_of,
    template_pod_claims,
)

TEMPLATE: Obj = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "tmpl", "namespace": "default", "labels": {"not": "copied"}},
    "spec": {
        "metadata": {"labels": {"from": "template"}, "annotations": {"note": "kept"}},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
    },
}


def consumer(name: str = "consumer", uid: str = "u-1", *claims: Obj, **status: object) -> Obj:
    p = pod(
        name, uid=uid, resourceClaims=list(claims) or [{"name": "gpu", "resourceClaimTemplateName": "tmpl"}]
    )
    if status:
        p["status"] = dict(status)
    return p


def test_the_claim_is_the_controllers_post_body() -> None:
    p = consumer()
    claim = claim_from_template(p, {"name": "gpu", "resourceClaimTemplateName": "tmpl"}, TEMPLATE)
    assert claim["metadata"] == {
        "generateName": "consumer-gpu-",
        "namespace": "default",
        "annotations": {"note": "kept", POD_CLAIM_NAME_ANNOTATION: "gpu"},
        "labels": {"from": "template"},
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": "consumer", "uid": "u-1", "controller": True}
        ],
    }
    assert claim["spec"] == TEMPLATE["spec"]["spec"]
    assert (claim["apiVersion"], claim["kind"]) == ("resource.k8s.io/v1", "ResourceClaim")


def test_the_spec_is_a_copy_and_the_pod_claim_annotation_wins() -> None:
    tmpl = copy.deepcopy(TEMPLATE)
    tmpl["spec"]["metadata"]["annotations"][POD_CLAIM_NAME_ANNOTATION] = "stale"
    claim = claim_from_template(consumer(), {"name": "gpu"}, tmpl)
    assert claim["metadata"]["annotations"][POD_CLAIM_NAME_ANNOTATION] == "gpu"
    claim["spec"]["devices"]["requests"][0]["name"] = "changed"
    claim["metadata"]["labels"]["from"] = "changed"
    assert tmpl["spec"]["spec"]["devices"]["requests"][0]["name"] == "gpu"
    assert tmpl["spec"]["metadata"]["labels"] == {"from": "template"}


def test_offline_the_claim_is_named_and_schema_valid() -> None:
    """draxr's own templates carry no ``spec.metadata``: no labels, the one annotation."""
    tmpl = template(TemplateRef("gpu.example.com", 2), "default")
    claim = claim_from_template(consumer(), {"name": "draxr-gpu"}, tmpl, claim_name="consumer-draxr-gpu")
    assert claim["metadata"]["name"] == "consumer-draxr-gpu"
    assert "labels" not in claim["metadata"]
    assert claim["metadata"]["annotations"] == {POD_CLAIM_NAME_ANNOTATION: "draxr-gpu"}
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2
    kubernetes_validate.validate(claim, "1.37", strict=True)


def test_a_long_base_keeps_a_share_of_both_names() -> None:
    assert claim_generate_name("consumer", "gpu") == "consumer-gpu-"
    exact = "p" * 48 + "-" + "gpu" + "-"  # 57: still whole
    assert claim_generate_name("p" * 48, "gpu") == exact
    # 65 characters: each part keeps len * 57 // 65, joined by a hyphen, no trailing one (upstream's).
    cut = claim_generate_name("p" * 60, "gpu")
    assert cut == "p" * 52 + "-" + "gp"
    long_claim = claim_generate_name("pod", "c" * 70)
    assert long_claim == "po-" + "c" * 53  # 75 characters: 3 * 57 // 75 and 70 * 57 // 75
    assert len(long_claim) + 5 <= 63


def test_only_template_pod_claims_are_made() -> None:
    p = consumer(
        "p",
        "u",
        {"name": "mine", "resourceClaimName": "existing"},
        {"name": "gpu", "resourceClaimTemplateName": "tmpl"},
        {"name": "broken"},
    )
    assert template_pod_claims(p) == [{"name": "gpu", "resourceClaimTemplateName": "tmpl"}]
    assert template_pod_claims(pod("plain")) == []


def made(p: Obj, pod_claim: str, claim_name: str) -> Obj:
    return claim_from_template(p, {"name": pod_claim}, TEMPLATE, claim_name=claim_name)


def test_statuses_name_each_claim_sorted_and_merged_with_the_recorded_ones() -> None:
    p = consumer(
        "p",
        "u",
        {"name": "nic", "resourceClaimTemplateName": "t1"},
        {"name": "gpu", "resourceClaimTemplateName": "t2"},
        {"name": "old", "resourceClaimTemplateName": "t3"},
        {"name": "skipped", "resourceClaimTemplateName": "t4"},
        resourceClaimStatuses=[{"name": "old", "resourceClaimName": "p-old-abcde"}, {"name": "skipped"}],
    )
    claims = [made(p, "nic", "p-nic-bbbbb"), made(p, "gpu", "p-gpu-ccccc")]
    assert claim_statuses(p, claims) == [
        {"name": "gpu", "resourceClaimName": "p-gpu-ccccc"},
        {"name": "nic", "resourceClaimName": "p-nic-bbbbb"},
        {"name": "old", "resourceClaimName": "p-old-abcde"},
    ]


def test_a_claim_of_another_pod_or_pod_claim_is_not_recorded() -> None:
    p = consumer("p", "u")
    same_name_other_pod = made(consumer("p", "other-uid"), "gpu", "p-gpu-zzzzz")
    unknown_pod_claim = made(p, "nic", "p-nic-zzzzz")
    users: Obj = {"metadata": {"name": "users"}}  # a user's claim: no owner, no annotation
    assert pod_claim_of(same_name_other_pod, p) is None
    assert pod_claim_of(unknown_pod_claim, p) == "nic"
    assert claim_statuses(p, [same_name_other_pod, unknown_pod_claim, users]) == []
    assert claim_statuses(p, [made(p, "gpu", "p-gpu-aaaaa")]) == [
        {"name": "gpu", "resourceClaimName": "p-gpu-aaaaa"}
    ]


def test_an_owner_that_is_not_the_controller_does_not_count() -> None:
    p = consumer("p", "u")
    claim = made(p, "gpu", "p-gpu-aaaaa")
    claim["metadata"]["ownerReferences"][0]["controller"] = False
    assert pod_claim_of(claim, p) is None
