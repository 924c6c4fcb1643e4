"""``POST /mutate/pods`` in rewrite mode (KEP-5004's "Option 1"): the path per pod, the patch, the
warnings, and the fixed point."""

from __future__ import annotations

import copy
import json

import jsonpatch
import pytest

from tests.admission.builders import (
    GPU,
    GPU_CLASS,
    container,
    decode_patch,
    device_class,
    gpu_cluster,
    gpu_pod,
    node,
    pod,
    review,
)
from tests.admission.conftest import Webhook
from webhook.admission import AdmissionConfig
from webhook.core.api.constants import EXTENDED_RESOURCE_NAME_ANNOTATION
from webhook.core.api.objects import Obj
from webhook.core.paths.rewrite import REWRITTEN_ANNOTATION, templates_of

PATH = "/mutate/pods"
VALIDATE = "/validate/pods"


def mutated(webhook: Webhook, p: Obj) -> tuple[Obj, list[str]]:
    response = webhook.respond(PATH, review(p))
    assert response["allowed"] is True
    ops = decode_patch(response) if "patch" in response else []
    return jsonpatch.apply_patch(copy.deepcopy(p), ops), response.get("warnings", [])


def test_with_the_apiservers_gate_off_the_kep_example_pod_is_rewritten(webhook: Webhook) -> None:
    webhook.install(gpu_cluster(), apiserver_gate=False)
    out, warnings = mutated(webhook, gpu_pod("demo-0"))
    c = out["spec"]["containers"][0]
    assert c["resources"]["requests"] == {"cpu": "100m"}
    assert c["resources"]["claims"] == [{"name": "draxr-container-0-request-1", "request": "devices"}]
    assert out["spec"]["resourceClaims"] == [
        {"name": "draxr-container-0-request-1", "resourceClaimTemplateName": f"draxr-{GPU_CLASS}-1"}
    ]
    # Its claims are of a class draxr manages: draxr's worker places it, one allocator per pool.
    assert out["spec"]["schedulerName"] == "draxr"
    assert [(t.device_class, t.count) for t in templates_of(out)] == [(GPU_CLASS, 1)]
    assert json.loads(out["metadata"]["annotations"][REWRITTEN_ANNOTATION]) == {
        f"draxr-{GPU_CLASS}-1": [GPU_CLASS, 1]
    }
    assert warnings == [f"{GPU}: rewritten into DRA claims (DRAExtendedResource is off in the apiserver)"]
    assert all(len(w) <= 120 for w in warnings)


def test_the_rewrite_is_a_fixed_point(webhook: Webhook) -> None:
    webhook.install(gpu_cluster(), apiserver_gate=False)
    once, _ = mutated(webhook, gpu_pod())
    response = webhook.respond(PATH, review(once))
    assert "patch" not in response


def test_route_always_still_sends_rewritten_pods_to_draxrs_worker(webhook: Webhook) -> None:
    webhook.install(gpu_cluster(), config=AdmissionConfig(route="always"), apiserver_gate=False)
    out, _ = mutated(webhook, gpu_pod(schedulerName="volcano"))
    assert out["spec"]["schedulerName"] == "draxr"


def test_route_never_leaves_rewritten_pods_to_any_dra_aware_scheduler(webhook: Webhook) -> None:
    webhook.install(gpu_cluster(), config=AdmissionConfig(route="never"), apiserver_gate=False)
    out, _ = mutated(webhook, gpu_pod())
    assert "schedulerName" not in out["spec"]
    assert out["spec"]["resourceClaims"]


def test_with_both_gates_on_the_native_path_stays_unchanged(webhook: Webhook) -> None:
    webhook.install(gpu_cluster(), apiserver_gate=True)
    out, warnings = mutated(webhook, gpu_pod())
    assert out["spec"]["containers"][0]["resources"]["requests"][GPU] == 1
    assert out["spec"]["schedulerName"] == "draxr"
    assert warnings == []


def test_dra_nodes_whose_kubelets_lack_the_gate_mean_rewrite(webhook: Webhook) -> None:
    objs = gpu_cluster()
    objs[1]["status"]["nodeInfo"] = {"kubeletVersion": "v1.35.4"}
    webhook.install(objs, apiserver_gate=True)
    out, warnings = mutated(webhook, gpu_pod())
    assert "resourceClaims" in out["spec"]
    assert warnings == [
        f"{GPU}: rewritten into DRA claims (no DRA node's kubelet has DRAExtendedResource on)"
    ]


def test_in_a_mixed_cluster_the_pod_goes_where_it_fits_dra_first(webhook: Webhook) -> None:
    """The KEP example's cluster with the gate off: free DRA devices take the pod; when they cannot
    hold it, a device-plugin node with room does, unless ``--force-rewrite``."""
    objs = [*gpu_cluster(devices=2), node("dp", {GPU: 4})]
    webhook.install(objs, apiserver_gate=False)
    out, warnings = mutated(webhook, gpu_pod())
    assert "resourceClaims" in out["spec"]
    assert warnings == [
        f"{GPU}: rewritten into DRA claims (free DRA devices fit it; device-plugin nodes stay for others)"
    ]
    three = pod("p", [container("c", {GPU: 3})])
    out, warnings = mutated(webhook, three)
    assert out["spec"]["containers"][0]["resources"]["requests"][GPU] == 3
    assert "schedulerName" not in out["spec"]
    assert warnings == [
        f"{GPU}: left to the device plugin (no free DRA devices fit it; a device-plugin node has room)"
    ]
    webhook.install(objs, config=AdmissionConfig(force_rewrite=True), apiserver_gate=False)
    out, warnings = mutated(webhook, three)
    assert "resourceClaims" in out["spec"]
    assert warnings == [f"{GPU}: rewritten into DRA claims (draxr --force-rewrite)"]


def test_mode_native_and_off(webhook: Webhook) -> None:
    webhook.install(gpu_cluster(), config=AdmissionConfig(mode="native"), apiserver_gate=False)
    out, _ = mutated(webhook, gpu_pod())
    assert out["spec"]["schedulerName"] == "draxr"
    webhook.install(gpu_cluster(), config=AdmissionConfig(mode="off"))
    out, warnings = mutated(webhook, gpu_pod())
    assert out == gpu_pod()
    assert warnings == [f"{GPU}: left alone (draxr --mode=off)"]


def test_init_containers_and_sidecars_get_the_devices_upstreams_mapping_gives(webhook: Webhook) -> None:
    webhook.install(gpu_cluster(), apiserver_gate=False)
    p = pod(
        "p",
        [container("app", {GPU: 1})],
        init=[container("init", {GPU: 2}), container("side", {GPU: 1}, sidecar=True)],
    )
    out, _ = mutated(webhook, p)
    claims = {
        c["name"]: [e["name"] for e in c["resources"]["claims"]]
        for c in [*out["spec"]["initContainers"], *out["spec"]["containers"]]
    }
    # The init container runs before the sidecar and the app start: it reuses their requests.
    assert claims == {
        "init": ["draxr-container-1-request-0", "draxr-container-2-request-0"],
        "side": ["draxr-container-1-request-0"],
        "app": ["draxr-container-2-request-0"],
    }


def test_a_pod_keeps_its_own_claims(webhook: Webhook) -> None:
    webhook.install(gpu_cluster(), apiserver_gate=False)
    p = gpu_pod(resourceClaims=[{"name": "mine", "resourceClaimName": "my-claim"}])
    out, _ = mutated(webhook, p)
    assert [pc["name"] for pc in out["spec"]["resourceClaims"]] == ["mine", "draxr-container-0-request-1"]


def test_the_class_annotation_names_the_mapping_where_the_field_is_dropped(webhook: Webhook) -> None:
    annotated = device_class(GPU_CLASS, None, ['device.driver == "gpu.example.com"'])
    annotated["metadata"]["annotations"] = {EXTENDED_RESOURCE_NAME_ANNOTATION: GPU}
    webhook.install([annotated, *gpu_cluster()[1:]], apiserver_gate=False)
    out, _ = mutated(webhook, gpu_pod())
    assert out["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] == f"draxr-{GPU_CLASS}-1"


def test_a_quota_on_the_name_alone_is_named_in_a_warning(webhook: Webhook) -> None:
    quota: Obj = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpus", "namespace": "default"},
        "spec": {"hard": {f"requests.{GPU}": "4"}},
    }
    webhook.install([*gpu_cluster(), quota], apiserver_gate=False)
    _, warnings = mutated(webhook, gpu_pod())
    assert warnings[-1] == (
        f"quota on {GPU} does not limit rewritten pods; add {GPU_CLASS}.deviceclass.resource.k8s.io/devices"
    )


def _old_kubelets(objects: list[Obj]) -> list[Obj]:
    for o in objects:
        if o["kind"] == "Node":
            o["status"]["nodeInfo"] = {"kubeletVersion": "v1.35.4"}
    return objects


@pytest.mark.parametrize(("version", "warned"), [("v1.37.2", False), ("v1.36.3", False), ("v1.34.4", True)])
def test_where_the_served_release_charges_claims_the_name_no_quota_warning(
    webhook: Webhook, version: str, warned: bool
) -> None:
    """1.37 unified quota (``resource_claims.go`` ``addExtendedResourceQuota``): with the gate on, a
    rewritten pod's claims are charged ``requests.example.com/gpu``; the warning written for 1.34's
    rules said otherwise. Rewritten here with the apiserver's gate on: no kubelet has it yet."""
    quota: Obj = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpus", "namespace": "default"},
        "spec": {"hard": {f"requests.{GPU}": "4"}},
    }
    webhook.install([*_old_kubelets(gpu_cluster()), quota], apiserver_version=version)
    out, warnings = mutated(webhook, gpu_pod())
    assert "resourceClaims" in out["spec"]
    assert any(w.startswith(f"quota on {GPU}") for w in warnings) is warned


@pytest.mark.parametrize("gate", [False, True])
def test_a_pod_with_a_node_name_is_left_alone_with_a_warning_when_its_node_cannot_serve_it(
    webhook: Webhook, gate: bool
) -> None:
    """Reproduced: a pod created with ``spec.nodeName`` skips every scheduler, so the claims of its
    rewrite were never allocated and it hung in ContainerCreating (natively, a gated kubelet would
    run it without a device). Left alone, its author is told when the node does not advertise the
    name (a device plugin would serve it there)."""
    webhook.install([*gpu_cluster(), node("dp-node", {GPU: "2"})], apiserver_gate=gate)
    out, warnings = mutated(webhook, gpu_pod("p", nodeName="dra-node"))
    assert out == gpu_pod("p", nodeName="dra-node")
    assert warnings == [
        f'{GPU}: node "dra-node" does not advertise it; a pod with spec.nodeName gets no DRA device',
        f"{GPU}: left alone (spec.nodeName is set: no scheduler allocates its devices)",
    ]
    out, warnings = mutated(webhook, gpu_pod("q", nodeName="dp-node"))
    assert out == gpu_pod("q", nodeName="dp-node")
    assert warnings == [f"{GPU}: left alone (spec.nodeName is set: no scheduler allocates its devices)"]


def test_a_class_that_tolerates_taints_rewrites_into_tolerating_templates(webhook: Webhook) -> None:
    """``draxr.io/extended-resource-tolerations`` (issue 23): the rewrite names a template whose
    request tolerates what the class tolerates, and the annotation the worker makes it from says so."""
    toleration = {"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}
    cluster = gpu_cluster()
    cluster[0]["metadata"]["annotations"] = {
        "draxr.io/extended-resource-tolerations": json.dumps([toleration])
    }
    webhook.install(cluster, apiserver_gate=False)
    out, _ = mutated(webhook, gpu_pod())
    [ref] = templates_of(out)
    assert out["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] == ref.name
    assert ref.name.startswith(f"draxr-{GPU_CLASS}-1-tolerating-")
    assert ref.toleration_list() == [toleration]


def test_a_fractional_quantity_is_not_rewritten_away_so_validation_denies_it(webhook: Webhook) -> None:
    """Found on the gate-off e2e targets: the rewrite dropped ``500m`` (upstream's mapping asks for
    no device then) and the pod was admitted without the name, so validation never saw it."""
    webhook.install(gpu_cluster(), apiserver_gate=False)
    for bad in ("500m", "-1"):
        p = gpu_pod(count=bad)
        out, warnings = mutated(webhook, p)
        assert out == p
        assert warnings[0].startswith(f"{GPU}: rewritten into DRA claims")  # the path it would take
        denied = webhook.respond(VALIDATE, review(out))
        assert denied["allowed"] is False
        assert f"spec.containers[0].resources.requests[{GPU}]" in denied["status"]["message"]
