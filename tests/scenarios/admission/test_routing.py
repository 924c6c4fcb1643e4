"""``POST /mutate/pods`` routing (issue 20, issue 21 item 3): every pod that consumes devices of a
class draxr manages goes to draxr's worker, by a DRA-backed name or by its own claims (read from the
cache, else from the API server); one the worker cannot honour is denied, naming the feature, or
left to its scheduler with ``--unsupported-pods=default-scheduler``."""

from __future__ import annotations

import copy

import jsonpatch

from tests.admission.builders import GPU_CLASS, container, decode_patch, gpu_cluster, gpu_pod, pod, review
from tests.admission.conftest import Webhook
from webhook.admission import AdmissionConfig
from webhook.core.api.objects import Obj

PATH = "/mutate/pods"
DEVICES: Obj = {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS}}]}


def user_claim(name: str = "mine", cls: str = GPU_CLASS) -> Obj:
    devices = {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls}}]}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"devices": devices},
    }


def user_template(name: str = "tpl") -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": DEVICES}},
    }


def claim_pod(**spec: object) -> Obj:
    entries = [{"name": "a", "resourceClaimName": "mine"}, {"name": "b", "resourceClaimTemplateName": "tpl"}]
    return pod(containers=[container("c", {"cpu": "1"})], resourceClaims=entries, **spec)  # type: ignore[arg-type]


def answer(webhook: Webhook, p: Obj) -> tuple[Obj, Obj]:
    response = webhook.respond(PATH, review(p))
    if not response["allowed"]:
        return p, response
    ops = decode_patch(response) if "patch" in response else []
    return jsonpatch.apply_patch(copy.deepcopy(p), ops), response


def test_a_pod_whose_claim_uses_a_managed_class_goes_to_draxr(webhook: Webhook) -> None:
    # Reproduces issue 20: an ordinary claim pod stayed with kube-scheduler beside draxr.
    webhook.install([*gpu_cluster(), user_claim(), user_template()])
    out, _ = answer(webhook, claim_pod())
    assert out["spec"]["schedulerName"] == "draxr"
    again, _ = answer(webhook, out)
    assert again == out  # a fixed point


def test_claims_of_unmanaged_classes_stay_with_their_scheduler(webhook: Webhook) -> None:
    config = AdmissionConfig(managed_classes="draxr.io/managed=true")
    webhook.install([*gpu_cluster(), user_claim(), user_template()], config=config)
    out, response = answer(webhook, claim_pod())
    assert "schedulerName" not in out["spec"]
    assert "patch" not in response


def test_route_never_routes_no_claim_pod(webhook: Webhook) -> None:
    webhook.install([*gpu_cluster(), user_claim(), user_template()], config=AdmissionConfig(route="never"))
    out, _ = answer(webhook, claim_pod())
    assert "schedulerName" not in out["spec"]


#: A PodGroup of a CompositePodGroup: what the worker does not place yet.
COMPOSITE = {
    "apiVersion": "scheduling.k8s.io/v1beta1",
    "kind": "PodGroup",
    "metadata": {"name": "composite", "namespace": "default"},
    "spec": {"parentCompositePodGroupName": "top", "schedulingPolicy": {"basic": {}}},
}


def test_an_unsupported_feature_is_denied_by_name(webhook: Webhook) -> None:
    webhook.install([*gpu_cluster(), user_claim(), user_template(), COMPOSITE])
    _, response = answer(webhook, gpu_pod(schedulingGroup={"podGroupName": "composite"}))
    assert response["allowed"] is False
    status = response["status"]
    assert status["code"] == 403
    assert status["reason"] == "Forbidden"
    assert (
        "a PodGroup of a CompositePodGroup (PodGroup spec.parentCompositePodGroupName)" in status["message"]
    )
    assert f'DeviceClass "{GPU_CLASS}"' in status["message"]
    # Volumes, pod affinity, topology spread and pod groups are the worker's own: such pods are routed.
    spread = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]}}
    for honoured in (
        claim_pod(volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "d"}}]),
        gpu_pod(topologySpreadConstraints=spread),
        claim_pod(affinity=anti),
        gpu_pod(schedulingGroup={"podGroupName": "trainers"}),
        gpu_pod(workloadRef={"name": "w", "podGroup": "g"}),
    ):
        _, response = answer(webhook, honoured)
        assert response["allowed"] is True


def test_an_unsupported_feature_can_be_left_to_kube_scheduler(webhook: Webhook) -> None:
    config = AdmissionConfig(unsupported_pods="default-scheduler")
    webhook.install([*gpu_cluster(), user_claim(), user_template(), COMPOSITE], config=config)
    out, response = answer(webhook, claim_pod(schedulingGroup={"podGroupName": "composite"}))
    assert response["allowed"] is True
    assert "schedulerName" not in out["spec"]
    [warning] = response["warnings"]
    assert warning.startswith(
        "left to default-scheduler: draxr's worker lacks a PodGroup of a CompositePodGroup"
    )
