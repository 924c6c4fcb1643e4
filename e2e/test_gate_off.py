"""The targets where DRAExtendedResource is off on kube-apiserver (``1.34-gate-off``, ``1.35-gate-off``,
``emulator-gate-off``).

There the native path cannot work: the apiserver drops DeviceClass ``spec.extendedResourceName`` and
pod ``status.extendedResourceClaimStatus`` (kep5004-semantics.md §1 and §2, drop-disabled-fields) with
a success status, so no explicit name resolves and no container is ever mapped to a device. These
scenarios prove those drops with draxr installed, and that draxr's webhook still guards what does not
depend on the gate: forged special claims and fractional quantities of implicit names
(``deviceclass.resource.kubernetes.io/<class>``).

What does work is rewrite mode (KEP-5004's "Option 1", draxr's choice with ``--mode auto`` here): the
mutating webhook rewrites such a pod's extended-resource requests into pod ``resourceClaims``, which
need no gate (``test_a_routed_pod_gets_its_devices``; test_rewrite.py has the rest).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from webhook.core.api.constants import DRAXR_RESOURCES_ANNOTATION
from webhook.core.api.objects import Obj
from webhook.kube.client import ApiError
from webhook.kube.resources import PODS

from .target import Target

pytestmark = pytest.mark.gate_off


def _class_without_name(target: Target, suffix: str) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": target.class_name(suffix)},
        "spec": {"extendedResourceName": target.ext, "selectors": []},
    }


def test_the_apiserver_drops_the_device_class_field(target: Target, kubectl: str) -> None:
    cls = target.device_class()
    assert "extendedResourceName" not in cls["spec"]  # 201 Created, the field gone
    stored = target.objects("deviceclasses")
    assert [
        c["spec"].get("extendedResourceName") for c in stored if c["metadata"]["name"] == target.class_name()
    ] == [None]
    # A second class naming the same resource: with the gate on draxr's webhook refuses it (a
    # duplicate name). Here the field is dropped before validating admission, so there is nothing to
    # refuse; the dry run shows the object as it would be stored.
    dup = _class_without_name(target, "second")
    done = target.kubectl("create", "--dry-run=server", "-o", "yaml", "-f", "-", stdin=yaml.safe_dump(dup))
    assert done.returncode == 0, done.stderr
    answer = yaml.safe_load(done.stdout)
    assert answer["metadata"]["name"] == target.class_name("second")
    assert "extendedResourceName" not in answer["spec"]
    assert "draxr" not in done.stderr  # no denial, no warning from the webhook
    created = target.create("deviceclasses", dup)
    assert "extendedResourceName" not in created["spec"]


def test_the_apiserver_drops_a_pods_claim_mapping(target: Target) -> None:
    """An extendedResourceClaimStatus from a user draxr does not allow (with the gate on its webhook
    refuses it) is dropped before validating admission: 200 OK, nothing stored."""
    cls = target.device_class()["metadata"]["name"]
    implicit = f"deviceclass.resource.kubernetes.io/{cls}"
    pod = target.pod("p", {implicit: "1"})
    # Implicit names resolve without the gate: the webhook took the pod and, as with every pod that
    # consumes devices of a class draxr manages, routed it to draxr's worker (one allocator per pool).
    assert json.loads(pod["metadata"]["annotations"][DRAXR_RESOURCES_ANNOTATION]) == {implicit: cls}
    assert pod["spec"]["schedulerName"] == "draxr"
    mapping = {
        "resourceClaimName": "p-extended-resources-forged",
        "requestMappings": [{"containerName": "c", "resourceName": implicit, "requestName": "r"}],
    }
    patched = target.admin.patch(
        PODS,
        "p",
        {"status": {"extendedResourceClaimStatus": mapping}},
        namespace=target.namespace,
        subresource="status",
    )
    assert "extendedResourceClaimStatus" not in patched["status"]
    assert "extendedResourceClaimStatus" not in target.admin.get(PODS, "p", target.namespace)["status"]


def test_a_forged_special_claim_is_denied(target: Target) -> None:
    claim: Obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": "forged",
            "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
        },
        "spec": {
            "devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": target.class_name()}}]}
        },
    }
    with pytest.raises(ApiError) as denied:
        target.create("resourceclaims", claim)
    assert denied.value.status == 403
    assert 'admission webhook "resourceclaims.validate.draxr.io" denied the request' in denied.value.message
    assert "may only be written by the scheduler" in denied.value.message
    assert not target.objects("resourceclaims")


def test_a_fractional_quantity_for_an_implicit_name_is_denied(target: Target) -> None:
    cls = target.device_class()["metadata"]["name"]
    with pytest.raises(ApiError) as denied:
        target.pod("fractional", {f"deviceclass.resource.kubernetes.io/{cls}": "500m"})
    assert denied.value.status == 422
    assert 'admission webhook "pods.validate.draxr.io" denied the request' in denied.value.message
    assert "Invalid value: 500m: must be an integer" in denied.value.message
    assert not target.objects("pods")


def _bound(pods: list[Obj]) -> Any:
    return [p for p in pods if p["spec"].get("nodeName")]


def test_a_routed_pod_gets_its_devices(target: Target) -> None:
    """Rewrite mode (draxr's default ``--mode auto`` picks it here): the pod asks for its device
    through a claim of its own, made by the resourceclaim controller from draxr's template, so its
    container gets the device without the mapping the apiserver would drop. (It is placed by
    kube-scheduler on the local rows, by draxr's worker with ``--route=always`` on the emulator.)"""
    target.require_controllers("claims from draxr's templates")
    cls = target.device_class()["metadata"]["name"]
    target.slice(target.nodes[0], 1)
    implicit = f"deviceclass.resource.kubernetes.io/{cls}"
    target.pod("p", {implicit: "1"})
    [pod] = target.wait("pods", _bound, timeout=60)
    [claim] = target.objects("resourceclaims")
    assert claim["status"]["reservedFor"][0]["name"] == "p"  # draxr allocated and bound it...
    # ... and the kubelet can tell which container gets the device: the container names the pod's
    # claim, which the pod's status resolves to this claim.
    assert "extendedResourceClaimStatus" not in pod["status"]
    [container] = pod["spec"]["containers"]
    assert implicit not in container["resources"].get("requests", {})
    [ref] = container["resources"]["claims"]
    generated = {s["name"]: s["resourceClaimName"] for s in pod["status"]["resourceClaimStatuses"]}
    assert generated[ref["name"]] == claim["metadata"]["name"]
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert result["request"] == ref["request"]
