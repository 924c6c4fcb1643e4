"""Smoke tests for the launcher, which also pin down how a real kube-apiserver treats what draxr relies on.

One control plane per matrix row per module (a module-scoped fixture):

- ``1.35-gate-off``: Kubernetes 1.35 with ``DRAExtendedResource=false`` (alpha, off by default there),
  with kube-controller-manager;
- ``1.35-gate-on``: Kubernetes 1.35 with ``DRAExtendedResource=true``;
- ``1.36-default``: Kubernetes 1.36 with its defaults (the gate is beta and on), with
  kube-controller-manager and kube-scheduler;
- ``1.36-gate-off``: Kubernetes 1.36 with ``DRAExtendedResource=false`` (a cluster that turned it off).

Without the binaries (``make controlplane``) the tests skip, or fail when ``CI=true``.
"""

from __future__ import annotations

import http.client
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from webhook.identity.names import WEBHOOK, WORKER
from webhook.install.flowcontrol import flow_control

from .launcher import USERS, ControlPlane, ControlPlaneError, find_binaries

Obj = dict[str, Any]

ROWS: dict[str, dict[str, Any]] = {
    "1.35-gate-off": {"version": "1.35", "gates": {"DRAExtendedResource": False}, "controllers": True},
    "1.35-gate-on": {"version": "1.35", "gates": {"DRAExtendedResource": True}},
    "1.36-default": {"version": "1.36", "controllers": True, "scheduler": True},
    "1.36-gate-off": {"version": "1.36", "gates": {"DRAExtendedResource": False}},
}
WITH_CONTROLLERS = [row for row, kw in ROWS.items() if kw.get("controllers")]
EXT = "example.com/gpu"
RESOURCE = "/apis/resource.k8s.io/v1"


def require_binaries(version: str) -> None:
    found = find_binaries(version)
    if isinstance(found, str):
        if os.environ.get("CI") == "true":
            pytest.fail(found)
        pytest.skip(found)


@pytest.fixture(scope="module", params=list(ROWS))
def cp(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    row: str = request.param
    kwargs = ROWS[row]
    require_binaries(kwargs["version"])
    with ControlPlane(workdir=tmp_path_factory.mktemp(f"cp-{row}"), **kwargs) as plane:
        yield plane


def gate_on(cp: ControlPlane) -> bool:
    return cp.gates.get("DRAExtendedResource", cp.version.startswith("1.36"))


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def namespace(cp: ControlPlane) -> Iterator[str]:
    """A fresh namespace with its ``default`` ServiceAccount (which the ServiceAccount admission plugin
    wants before it admits a pod; no serviceaccount controller may run)."""
    admin = cp.client()
    name = unique("e2e")
    status, body = admin.post("/api/v1/namespaces", {"metadata": {"name": name}})
    assert status == 201, body
    status, body = admin.post(f"/api/v1/namespaces/{name}/serviceaccounts", {"metadata": {"name": "default"}})
    assert status in (201, 409), body
    yield name
    admin.delete(f"/api/v1/namespaces/{name}")


def device_class(name: str, ext: str | None = EXT) -> Obj:
    spec: Obj = {"selectors": [{"cel": {"expression": "device.driver == 'e2e.draxr.io'"}}]}
    if ext is not None:
        spec["extendedResourceName"] = ext
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def pod(name: str, *, ext: str | None = None, claims: list[Obj] | None = None) -> Obj:
    container: Obj = {"name": "main", "image": "registry.invalid/pause:3.10"}
    if ext is not None:
        container["resources"] = {"requests": {ext: "1"}, "limits": {ext: "1"}}
    spec: Obj = {"containers": [container]}
    if claims is not None:
        spec["resourceClaims"] = claims
        container["resources"] = {"claims": [{"name": c["name"]} for c in claims]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


# ---------------------------------------------------------------------------------------------------------
# The launcher itself


def test_version_and_served_resource_versions(cp: ControlPlane) -> None:
    admin = cp.client()
    status, version = admin.get("/version")
    assert status == 200, version
    assert version["gitVersion"] == f"v{cp.version}"
    major, minor, _ = cp.version.split(".")
    assert (version["major"], version["minor"]) == (major, minor)
    # The binary version is the emulated version: feature gates default as in this release.
    assert (version.get("emulationMajor"), version.get("emulationMinor")) == (major, minor)

    status, group = admin.get("/apis/resource.k8s.io")
    assert status == 200, group
    served = sorted(v["version"] for v in group["versions"])
    # v1 is on by default; the launcher turns on v1beta1 and v1beta2, which both releases still serve.
    # v1alpha3 (DeviceTaintRule) stays off.
    assert served == ["v1", "v1beta1", "v1beta2"]
    assert group["preferredVersion"]["version"] == "v1"


@pytest.mark.parametrize("version", ["1.35", "1.36"])
def test_resource_versions_served_by_default(version: str, tmp_path: Path) -> None:
    require_binaries(version)
    with ControlPlane(version, runtime_config={}, workdir=tmp_path) as plane:
        status, group = plane.client().get("/apis/resource.k8s.io")
    assert status == 200, group
    assert [v["version"] for v in group["versions"]] == ["v1"]


@pytest.mark.parametrize("version", ["1.35", "1.36"])
def test_a_process_that_dies_fails_the_start_with_its_log(version: str, tmp_path: Path) -> None:
    require_binaries(version)
    plane = ControlPlane(version, gates={"NoSuchGate": True}, workdir=tmp_path)
    with pytest.raises(ControlPlaneError) as raised, plane:
        pytest.fail("the control plane started with an unknown feature gate")
    message = str(raised.value)
    assert message.startswith("kube-apiserver did not become ready: kube-apiserver exited with 1")
    assert "unrecognized feature gate: NoSuchGate" in message
    # Everything is stopped; the logs stay for the failure report.
    assert plane.running() == []
    assert (tmp_path / "kube-apiserver.log").exists()


def test_users_are_who_they_claim(cp: ControlPlane) -> None:
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    for key, user in USERS.items():
        for by_token in (False, True):
            client = cp.client(key, by_token=by_token)
            status, body = client.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", review)
            assert status == 201, body
            info = body["status"]["userInfo"]
            assert info["username"] == user.name
            assert set(user.groups) <= set(info["groups"])
            assert "system:authenticated" in info["groups"]
    # Without RBAC grants a normal user may not list DeviceClasses.
    status, body = cp.client("dev").get(f"{RESOURCE}/deviceclasses")
    assert status == 403, body
    assert body["message"] == (
        'deviceclasses.resource.k8s.io is forbidden: User "dev" cannot list resource "deviceclasses" '
        'in API group "resource.k8s.io" at the cluster scope'
    )


def test_kubeconfigs_are_well_formed(cp: ControlPlane) -> None:
    for key in USERS:
        path = cp.kubeconfig_path(key)
        text = path.read_text()
        assert cp.url in text
        assert str(cp.ca_path) in text
    assert cp.token("dev") != cp.token("admin")


# ---------------------------------------------------------------------------------------------------------
# DRAExtendedResource: what the apiserver keeps


def test_device_class_extended_resource_name(cp: ControlPlane) -> None:
    admin = cp.client()
    name = unique("gpu") + ".e2e.draxr.io"
    status, created = admin.post(f"{RESOURCE}/deviceclasses", device_class(name))
    try:
        # Created either way: with the gate off the field is silently dropped, no warning, no error.
        assert status == 201, created
        status, stored = admin.get(f"{RESOURCE}/deviceclasses/{name}")
        assert status == 200, stored
        if gate_on(cp):
            assert created["spec"]["extendedResourceName"] == EXT
            assert stored["spec"]["extendedResourceName"] == EXT
        else:
            assert "extendedResourceName" not in created["spec"]
            assert "extendedResourceName" not in stored["spec"]
    finally:
        admin.delete(f"{RESOURCE}/deviceclasses/{name}")


@pytest.mark.parametrize("api", ["v1", "v1beta1", "v1beta2"])
def test_device_class_dry_run_create(cp: ControlPlane, api: str) -> None:
    admin = cp.client()
    name = unique("dry") + ".e2e.draxr.io"
    body = device_class(name) | {"apiVersion": f"resource.k8s.io/{api}"}
    status, answer = admin.post(f"/apis/resource.k8s.io/{api}/deviceclasses", body, dryRun="All")
    assert status == 201, answer
    assert answer["metadata"]["name"] == name
    assert ("extendedResourceName" in answer["spec"]) == gate_on(cp)
    if gate_on(cp):
        assert answer["spec"]["extendedResourceName"] == EXT
    # A dry run stores nothing.
    status, stored = admin.get(f"{RESOURCE}/deviceclasses/{name}")
    assert status == 404, stored


def test_pod_status_extended_resource_claim_status(cp: ControlPlane, namespace: str) -> None:
    admin = cp.client()
    pods = f"/api/v1/namespaces/{namespace}/pods"
    status, created = admin.post(pods, pod("p", ext=EXT))
    assert status == 201, created
    ext_status = {
        "extendedResourceClaimStatus": {
            "resourceClaimName": "p-extended-resources-abcde",
            "requestMappings": [
                {"containerName": "main", "resourceName": EXT, "requestName": "container-0-request-0"}
            ],
        }
    }
    status, patched = admin.merge_patch(f"{pods}/p/status", {"status": ext_status})
    assert status == 200, patched
    status, stored = admin.get(f"{pods}/p")
    assert status == 200, stored
    if gate_on(cp):
        assert patched["status"]["extendedResourceClaimStatus"] == ext_status["extendedResourceClaimStatus"]
        assert stored["status"]["extendedResourceClaimStatus"] == ext_status["extendedResourceClaimStatus"]
    else:
        # Dropped on the way in, with a 200 OK.
        assert "extendedResourceClaimStatus" not in patched["status"]
        assert "extendedResourceClaimStatus" not in stored["status"]


def test_pod_status_extended_resource_claim_status_is_validated(cp: ControlPlane, namespace: str) -> None:
    """With the gate on the status must name a container that requests the resource; with it off the
    field is dropped before validation, so the same bad update succeeds."""
    admin = cp.client()
    pods = f"/api/v1/namespaces/{namespace}/pods"
    status, created = admin.post(pods, pod("q"))  # requests no extended resource
    assert status == 201, created
    bad = {
        "extendedResourceClaimStatus": {
            "resourceClaimName": "q-extended-resources-abcde",
            "requestMappings": [{"containerName": "main", "resourceName": EXT, "requestName": "r"}],
        }
    }
    status, body = admin.merge_patch(f"{pods}/q/status", {"status": bad})
    if gate_on(cp):
        assert status == 422, body
        assert body["reason"] == "Invalid"
        causes = [(c["field"], c["message"]) for c in body["details"]["causes"]]
        assert causes == [
            (
                "status.extendedResourceClaimStatus.requestMappings[0].resourceName",
                f'Invalid value: "{EXT}": must match the extended resource name of an entry in '
                "spec.initContainers.resources.requests or spec.containers.resources.requests",
            )
        ]
    else:
        assert status == 200, body
        assert "extendedResourceClaimStatus" not in body["status"]


# ---------------------------------------------------------------------------------------------------------
# kube-controller-manager: garbage collection and claims from templates


@pytest.mark.parametrize("cp", WITH_CONTROLLERS, indirect=True)
def test_claim_owned_by_a_pod_is_garbage_collected(cp: ControlPlane, namespace: str) -> None:
    admin = cp.client()
    status, p = admin.post(f"/api/v1/namespaces/{namespace}/pods", pod("owner"))
    assert status == 201, p
    claims = f"{RESOURCE}/namespaces/{namespace}/resourceclaims"
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": "owned",
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": "owner",
                    "uid": p["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.e2e.draxr.io"}}]}
        },
    }
    status, body = admin.post(claims, claim)
    assert status == 201, body
    # A pod that no node runs is deleted at once (no kubelet to wait for).
    status, body = admin.delete(f"/api/v1/namespaces/{namespace}/pods/owner")
    assert status == 200, body
    cp.wait_for("the claim was not garbage-collected", lambda: admin.get(f"{claims}/owned")[0] == 404)


@pytest.mark.parametrize("cp", WITH_CONTROLLERS, indirect=True)
def test_claim_generated_from_a_template(cp: ControlPlane, namespace: str) -> None:
    admin = cp.client()
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "tmpl"},
        "spec": {
            "metadata": {"labels": {"from": "template"}},
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.e2e.draxr.io"}}]}
            },
        },
    }
    status, stored_template = admin.post(
        f"{RESOURCE}/namespaces/{namespace}/resourceclaimtemplates", template
    )
    assert status == 201, stored_template
    pods = f"/api/v1/namespaces/{namespace}/pods"
    status, p = admin.post(
        pods, pod("consumer", claims=[{"name": "gpu", "resourceClaimTemplateName": "tmpl"}])
    )
    assert status == 201, p
    claims = f"{RESOURCE}/namespaces/{namespace}/resourceclaims"
    found: list[Obj] = []

    def generated() -> bool:
        status, body = admin.get(claims)
        assert status == 200, body
        found[:] = body["items"]
        return bool(found)

    cp.wait_for("the resourceclaim controller made no claim", generated)
    [claim] = found
    meta = claim["metadata"]
    assert meta["generateName"] == "consumer-gpu-"
    assert meta["name"].startswith("consumer-gpu-")
    assert len(meta["name"]) == len("consumer-gpu-") + 5
    assert meta["annotations"] == {"resource.kubernetes.io/pod-claim-name": "gpu"}
    assert meta["labels"] == {"from": "template"}
    # controller: true, and no blockOwnerDeletion.
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "consumer",
            "uid": p["metadata"]["uid"],
            "controller": True,
        }
    ]
    # The template's spec as stored, defaults included (exactly.allocationMode ExactCount, count 1).
    assert claim["spec"] == stored_template["spec"]["spec"]
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["allocationMode"] == "ExactCount"

    def recorded() -> bool:
        _, body = admin.get(f"{pods}/consumer")
        return bool(body.get("status", {}).get("resourceClaimStatuses"))

    cp.wait_for("the pod's status names no claim", recorded)
    _, stored = admin.get(f"{pods}/consumer")
    assert stored["status"]["resourceClaimStatuses"] == [{"name": "gpu", "resourceClaimName": meta["name"]}]

    status, body = admin.delete(f"{pods}/consumer")
    assert status == 200, body
    cp.wait_for(
        "the generated claim was not garbage-collected",
        lambda: admin.get(f"{claims}/{meta['name']}")[0] == 404,
    )


@pytest.mark.parametrize("cp", [r for r, kw in ROWS.items() if kw.get("scheduler")], indirect=True)
def test_scheduler_reports_no_nodes(cp: ControlPlane, namespace: str) -> None:
    admin = cp.client()
    pods = f"/api/v1/namespaces/{namespace}/pods"
    status, body = admin.post(pods, pod("lonely"))
    assert status == 201, body
    conditions: list[Obj] = []

    def unschedulable() -> bool:
        _, body = admin.get(f"{pods}/lonely")
        conditions[:] = [
            c for c in body.get("status", {}).get("conditions", []) if c["type"] == "PodScheduled"
        ]
        return bool(conditions)

    cp.wait_for("the scheduler did not look at the pod", unschedulable)
    [cond] = conditions
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    assert cond["message"] == "no nodes available to schedule pods", cond


def priority_level_as(cp: ControlPlane, user: str) -> str | None:
    """The UID of the priority level kube-apiserver's API Priority and Fairness puts a request of
    ``user`` in (its ``X-Kubernetes-PF-PriorityLevel-UID`` header), as admin impersonating the user:
    impersonation runs before APF classifies, and a 403 is classified like any other answer."""
    conn = http.client.HTTPSConnection("127.0.0.1", cp.port, context=cp.ssl_context(), timeout=30)
    try:
        conn.request(
            "GET",
            "/api/v1/namespaces/default/pods",
            headers={"Impersonate-User": user, "Impersonate-Group": "system:serviceaccounts"},
        )
        resp = conn.getresponse()
        resp.read()
        return resp.getheader("X-Kubernetes-PF-PriorityLevel-UID")
    finally:
        conn.close()


def test_draxrs_flow_schema_puts_its_service_accounts_in_its_own_priority_level(
    cp: ControlPlane, namespace: str
) -> None:
    """What `draxr manifests` and the chart render for API Priority and Fairness is accepted by a real
    kube-apiserver, and classifies exactly draxr's two ServiceAccounts into draxr's level: the
    worker's and the webhook's requests there, another ServiceAccount of the namespace not."""
    admin = cp.client()
    flowcontrol = "/apis/flowcontrol.apiserver.k8s.io/v1"
    level, schema = flow_control(namespace)
    status, created = admin.post(f"{flowcontrol}/prioritylevelconfigurations", level)
    assert status == 201, created
    uid = created["metadata"]["uid"]
    try:
        status, body = admin.post(f"{flowcontrol}/flowschemas", schema)
        assert status == 201, body
        users = {sa: f"system:serviceaccount:{namespace}:{sa}" for sa in (WORKER, WEBHOOK, "default")}
        cp.wait_for(
            "draxr's ServiceAccounts were not put in draxr's priority level",
            lambda: all(priority_level_as(cp, users[sa]) == uid for sa in (WORKER, WEBHOOK)),
        )
        assert priority_level_as(cp, users["default"]) not in (None, uid)
    finally:
        admin.delete(f"{flowcontrol}/flowschemas/{schema['metadata']['name']}")
        admin.delete(f"{flowcontrol}/prioritylevelconfigurations/{level['metadata']['name']}")
