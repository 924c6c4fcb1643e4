"""kube-controller-manager as draxr's clusters run it: owner-based garbage collection, namespace
deletion, and the resourceclaim controller's claims from templates and their release.

The API emulator imitated these controllers once; its own tests of that imitation
(tests/emulator/test_lifecycle.py, test_claimcontroller.py) became these scenarios, which run where a
real kube-controller-manager runs (the local rows of ``make e2e-local``, a cluster) and skip on the
emulator, which runs none. What draxr relies on most: a user claim draxr's worker reserved for a pod
is released when the pod goes, and claims made for a pod go with it. Pods here name a scheduler
nobody runs, so no scheduler or kubelet touches them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from webhook.core.api.constants import POD_CLAIM_NAME_ANNOTATION
from webhook.core.api.objects import Obj
from webhook.kube.resources import NAMESPACES, PODS, RESOURCE_CLAIMS

from .target import CONFIG_MAPS, Target

FINALIZER = "resource.kubernetes.io/delete-protection"
HOLD = "example.com/keep"


@pytest.fixture
def cluster(target: Target) -> Target:
    target.require_controllers("garbage collection, namespace deletion, claims from templates")
    return target


# -- garbage collection --------------------------------------------------------------------------


def config_map(
    target: Target, name: str, *owners: Obj, finalizers: tuple[str, ...] = (), block: bool = False
) -> Obj:
    meta: Obj = {"name": name}
    if owners:
        meta["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "name": o["metadata"]["name"],
                "uid": o["metadata"]["uid"],
            }
            | ({"blockOwnerDeletion": True} if block else {})
            for o in owners
        ]
    if finalizers:
        meta["finalizers"] = list(finalizers)
    return target.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})


def delete(target: Target, name: str, policy: str) -> Obj:
    path = CONFIG_MAPS.path(target.namespace, name)
    body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": policy}
    result: Obj = target.admin.request("delete", path, body=body, resource="configmaps")
    return result


def release(target: Target, name: str) -> None:
    """Remove a configmap's finalizers (so that it, and the namespace, can go)."""
    target.admin.patch(CONFIG_MAPS, name, {"metadata": {"finalizers": None}}, namespace=target.namespace)


def named(name: str, check: Callable[[Obj], Any] = bool) -> Callable[[list[Obj]], Obj | None]:
    """The object ``name`` once ``check`` holds for it."""

    def find(items: list[Obj]) -> Obj | None:
        return next((i for i in items if i["metadata"]["name"] == name and check(i)), None)

    return find


def gone(name: str) -> Callable[[list[Obj]], bool]:
    return lambda items: all(i["metadata"]["name"] != name for i in items)


def test_garbage_collection_in_the_background(cluster: Target) -> None:
    owner = config_map(cluster, "owner")
    other = config_map(cluster, "other")
    config_map(cluster, "plain", owner)
    config_map(cluster, "held", owner, finalizers=(HOLD,))
    config_map(cluster, "shared", owner, other)
    delete(cluster, "owner", "Background")
    cluster.wait("configmaps", gone("plain"))
    held = cluster.wait("configmaps", named("held", lambda o: o["metadata"].get("deletionTimestamp")))
    assert held["metadata"]["finalizers"] == [HOLD]
    # A dependent with another live owner loses only the dangling reference.
    shared = cluster.wait("configmaps", named("shared", lambda o: len(o["metadata"]["ownerReferences"]) == 1))
    assert [r["name"] for r in shared["metadata"]["ownerReferences"]] == ["other"]
    release(cluster, "held")


def test_orphan_propagation_keeps_dependents(cluster: Target) -> None:
    owner = config_map(cluster, "owner")
    config_map(cluster, "dep", owner)
    delete(cluster, "owner", "Orphan")
    cluster.wait("configmaps", gone("owner"))
    assert not cluster.admin.get(CONFIG_MAPS, "dep", cluster.namespace)["metadata"].get("ownerReferences")


def test_foreground_deletion_waits_for_dependents(cluster: Target) -> None:
    """The owner stays, marked, until every dependent that blocks its deletion is gone."""
    owner = config_map(cluster, "owner")
    config_map(cluster, "dep", owner, finalizers=(HOLD,), block=True)
    marked = delete(cluster, "owner", "Foreground")
    assert "foregroundDeletion" in marked["metadata"]["finalizers"]
    cluster.wait("configmaps", named("dep", lambda o: o["metadata"].get("deletionTimestamp")))
    assert cluster.admin.get(CONFIG_MAPS, "owner", cluster.namespace)["metadata"]["deletionTimestamp"]
    release(cluster, "dep")
    cluster.wait("configmaps", gone("owner"))


def test_namespace_deletion_removes_its_objects(cluster: Target) -> None:
    ns = f"draxr-e2e-tmp-{uuid.uuid4().hex[:6]}"
    cluster.admin.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    cluster.wait("serviceaccounts", lambda sas: sas, namespace=ns)  # the ServiceAccount admission plugin
    cluster.admin.create(PODS, pod("p"), ns)
    cluster.admin.create(
        CONFIG_MAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, ns
    )
    cluster.admin.delete(NAMESPACES, ns)
    cluster.wait("namespaces", gone(ns), timeout=60)
    for res in (PODS, CONFIG_MAPS):
        assert cluster.admin.list(res, ns)["items"] == []


# -- the resourceclaim controller ----------------------------------------------------------------


def pod(name: str, *claims: Obj) -> Obj:
    body: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": "nobody",
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
        },
    }
    if claims:
        body["spec"]["resourceClaims"] = list(claims)
        body["spec"]["containers"][0]["resources"] = {"claims": [{"name": c["name"]} for c in claims]}
    return body


def from_template(name: str = "gpu") -> Obj:
    return {"name": name, "resourceClaimTemplateName": "gpu-1"}


def template(target: Target) -> Obj:
    return target.create(
        "resourceclaimtemplates",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpu-1"},
            "spec": {
                "metadata": {"labels": {"from": "template"}},
                "spec": {
                    "devices": {"requests": [{"name": "devices", "exactly": {"deviceClassName": "gpu"}}]}
                },
            },
        },
    )


def create_pod(target: Target, body: Obj) -> Obj:
    return target.create("pods", body)


def recorded(name: str) -> Callable[[list[Obj]], Obj | None]:
    return named(name, lambda p: (p.get("status") or {}).get("resourceClaimStatuses"))


def allocate(target: Target, claim: Obj, *pods: Obj, finalizer: bool = True) -> Obj:
    """As a scheduler's PreBind leaves a claim: allocated, reserved for ``pods``, and (by default)
    with the delete-protection finalizer that tells the controller to deallocate it after them."""
    if finalizer:
        claim["metadata"]["finalizers"] = [FINALIZER]
        claim = target.admin.update(RESOURCE_CLAIMS, claim)
    claim["status"] = {
        "allocation": {
            "devices": {
                "results": [{"request": "devices", "driver": "d.example.com", "pool": "n", "device": "g"}]
            }
        },
        "reservedFor": [
            {"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]} for p in pods
        ],
    }
    return target.admin.update(RESOURCE_CLAIMS, claim, subresource="status")


def test_a_claim_is_made_from_the_template_owned_by_the_pod_and_recorded_once(cluster: Target) -> None:
    """The claim's shape is e2e/controlplane/test_controlplane.py's; here: one claim, and later
    updates of the pod make no second."""
    template(cluster)
    create_pod(cluster, pod("p", from_template()))
    p = cluster.wait("pods", recorded("p"))
    [claim] = cluster.objects("resourceclaims")
    assert claim["metadata"]["annotations"] == {POD_CLAIM_NAME_ANNOTATION: "gpu"}
    assert p["status"]["resourceClaimStatuses"] == [
        {"name": "gpu", "resourceClaimName": claim["metadata"]["name"]}
    ]
    cluster.admin.patch(PODS, "p", {"metadata": {"labels": {"touched": "yes"}}}, namespace=cluster.namespace)
    cluster.wait("pods", named("p", lambda o: (o["metadata"].get("labels") or {}).get("touched")))
    assert [c["metadata"]["name"] for c in cluster.objects("resourceclaims")] == [claim["metadata"]["name"]]


def test_a_missing_template_is_waited_for(cluster: Target) -> None:
    create_pod(cluster, pod("p", from_template()))
    template(cluster)
    cluster.wait("pods", recorded("p"))
    assert len(cluster.objects("resourceclaims")) == 1


def test_named_claims_are_left_alone(cluster: Target) -> None:
    """Only a claim from a template is made and recorded; one the pod names is the user's. (It must
    exist: 1.35's controller records nothing for a pod while a claim it names is missing.)"""
    template(cluster)
    existing = cluster.create(
        "resourceclaims",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "existing"},
            "spec": {"devices": {"requests": [{"name": "devices", "exactly": {"deviceClassName": "gpu"}}]}},
        },
    )
    create_pod(cluster, pod("p", {"name": "mine", "resourceClaimName": "existing"}, from_template()))
    p = cluster.wait("pods", recorded("p"))
    [made] = [c for c in cluster.objects("resourceclaims") if c["metadata"]["name"] != "existing"]
    assert p["status"]["resourceClaimStatuses"] == [
        {"name": "gpu", "resourceClaimName": made["metadata"]["name"]}
    ]
    assert cluster.admin.get(RESOURCE_CLAIMS, "existing", cluster.namespace) == existing


def test_a_deleted_pods_allocated_claim_is_released_and_collected(cluster: Target) -> None:
    template(cluster)
    create_pod(cluster, pod("p", from_template()))
    p = cluster.wait("pods", recorded("p"))
    [claim] = cluster.objects("resourceclaims")
    allocate(cluster, claim, p)
    cluster.admin.delete(PODS, "p", cluster.namespace)
    cluster.wait("resourceclaims", lambda claims: not claims)


def test_a_finished_pods_claim_is_deleted(cluster: Target) -> None:
    template(cluster)
    create_pod(cluster, pod("p", from_template()))
    p = cluster.wait("pods", recorded("p"))
    p["status"]["phase"] = "Succeeded"
    cluster.admin.update(PODS, p, subresource="status")
    cluster.wait("resourceclaims", lambda claims: not claims)


def test_a_shared_claim_loses_the_reservations_of_departed_pods_only(cluster: Target) -> None:
    """Reserved for two pods that name it, a claim keeps the one still there and its allocation;
    once nobody reserves it, it loses its allocation and its finalizer, and stays (nobody owns it).
    (The controller looks at the claims a departed pod names, not at every claim reserved for it.)"""
    uses = {"name": "shared", "resourceClaimName": "shared"}
    a, b = create_pod(cluster, pod("a", uses)), create_pod(cluster, pod("b", uses))
    shared = cluster.create(
        "resourceclaims",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "shared"},
            "spec": {"devices": {"requests": [{"name": "devices", "exactly": {"deviceClassName": "gpu"}}]}},
        },
    )
    allocate(cluster, shared, a, b)
    cluster.admin.delete(PODS, "a", cluster.namespace)

    def reserved_for(names: list[str]) -> Callable[[list[Obj]], Obj | None]:
        return named(
            "shared", lambda c: [r["name"] for r in (c.get("status") or {}).get("reservedFor") or []] == names
        )

    kept = cluster.wait("resourceclaims", reserved_for(["b"]))
    assert kept["status"].get("allocation")
    cluster.admin.delete(PODS, "b", cluster.namespace)
    released = cluster.wait("resourceclaims", named("shared", lambda c: not c["metadata"].get("finalizers")))
    assert not (released.get("status") or {}).get("reservedFor")
    assert not (released.get("status") or {}).get("allocation")
    assert cluster.admin.get(RESOURCE_CLAIMS, "shared", cluster.namespace)["metadata"]["name"] == "shared"
