"""Every object the builders produce validates against the Kubernetes 1.37 OpenAPI schema."""

from typing import Any

import kubernetes_validate
import pytest

from tests.core.harness import scheduler
from tests.core.podfactory import container, device, device_class, gpus, node, pod, resource_slice
from webhook.core.allocation.claims import (
    SpecialClaim,
    SpecialClaimMetadata,
    SpecialClaimStatus,
    as_obj,
    deterministic_name,
    extended_resource_claim_status,
    generate_name,
    reserved_for_pod,
    same_allocation,
    settled,
    special_claim,
    special_claim_after_prebind,
    truncated_base,
    with_reservation,
)
from webhook.core.api.constants import DELETE_PROTECTION_FINALIZER, EXTENDED_RESOURCE_CLAIM_ANNOTATION

GPU = "example.com/gpu"
VERSIONS = ("1.34", "1.35", "1.36", "1.37")


def _decision(**objs: Any) -> Any:
    cls = device_class(
        "gpu.example.com",
        ext=GPU,
        selectors=["true"],
        config=[{"opaque": {"driver": "gpu.example.com", "parameters": {"a": 1}}}],
    )
    zonal = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
    }
    s = scheduler(
        node("n", labels={"zone": "a"}),
        cls,
        resource_slice("local", gpus(1), node_name="n", pool="local"),
        resource_slice("zonal", [device("z")], pool="zonal", nodeSelector=zonal),
        resource_slice("every", [device("e")], pool="every", allNodes=True),
    )
    p = pod(
        "my-pod", [container("c", {GPU: objs.get("count", 1)})], uid="3f1b2a44-0c1e-4c55-9d5b-5f8e2a1c9d70"
    )
    return p, s.schedule(p)


@pytest.mark.parametrize("count", [1, 2, 3])
def test_special_claim_after_prebind_is_schema_valid(count: int) -> None:
    p, d = _decision(count=count)
    claim = special_claim_after_prebind(
        p, d.requests, d.special, deterministic_name(generate_name(p), "seed")
    )
    kubernetes_validate.validate(claim, "1.37", strict=True)
    assert claim["metadata"]["annotations"] == {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"}
    assert claim["metadata"]["finalizers"] == [DELETE_PROTECTION_FINALIZER]
    assert claim["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "my-pod", "uid": p["metadata"]["uid"], "controller": True}
    ]
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "my-pod", "uid": p["metadata"]["uid"]}
    ]


def test_the_built_claim_has_exactly_the_typed_shape() -> None:
    """The TypedDict is the shape written: no key outside it, and only what the server sets missing."""
    p, d = _decision()
    claim = special_claim_after_prebind(p, d.requests, d.special, "my-pod-extended-resources-abcde")
    server_sets = {"uid", "resourceVersion", "creationTimestamp"}
    for typed, built, missing in (
        (SpecialClaim, claim, set()),
        (SpecialClaimMetadata, claim["metadata"], server_sets),
        (SpecialClaimStatus, claim["status"], set()),
    ):
        assert set(built) <= set(typed.__annotations__)
        assert set(typed.__annotations__) - set(built) == missing


@pytest.mark.parametrize("version", VERSIONS)
def test_create_body_and_pod_status_are_schema_valid(version: str) -> None:
    p, d = _decision()
    kubernetes_validate.validate(special_claim(p, d.requests), version, strict=True)
    status = extended_resource_claim_status("my-pod-extended-resources-abcde", d.mappings)
    with_status = {**p, "status": {"extendedResourceClaimStatus": status}}
    kubernetes_validate.validate(with_status, version, strict=True)


def test_generated_names_are_truncated_like_the_apiserver() -> None:
    long_pod = pod("p" * 60)
    base = generate_name(long_pod)
    assert truncated_base(base) == base[:58]
    name = deterministic_name(base, "seed")
    assert len(name) == 63
    assert name == deterministic_name(base, "seed")
    assert name != deterministic_name(base, "other")
    assert all(c in "bcdfghjklmnpqrstvwxz2456789" for c in name[-5:])


# -- PreBind's change to a claim (with_reservation), shared by the worker and draxr plan ----------

ALLOCATION = {"devices": {"results": [{"request": "r", "driver": "d", "pool": "p", "device": "x"}]}}


def _claim(**st: Any) -> dict[str, Any]:
    return {"metadata": {"name": "c", "namespace": "default"}, "spec": {}, "status": dict(st)}


def _consumer(p: dict[str, Any]) -> dict[str, str]:
    return {"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}


def test_a_fresh_claim_gets_the_allocation_and_the_pod() -> None:
    p = pod("a", [], uid="ua")
    claim = _claim()
    assert with_reservation(claim, p, ALLOCATION)
    assert claim["status"] == {"allocation": ALLOCATION, "reservedFor": [_consumer(p)]}
    assert settled(claim, "ua")
    assert not settled(claim, "other")


def test_the_reservation_is_added_once_not_twice() -> None:
    p = pod("a", [], uid="ua")
    claim = _claim()
    assert with_reservation(claim, p, ALLOCATION)
    assert not with_reservation(claim, p, ALLOCATION)  # nothing to write the second time
    assert not with_reservation(claim, p, None)
    assert claim["status"]["reservedFor"] == [_consumer(p)]


def test_a_claim_reserved_for_another_pod_keeps_it_and_its_allocation() -> None:
    other, p = pod("b", [], uid="ub"), pod("a", [], uid="ua")
    kept = {"devices": {"results": [{"request": "r", "driver": "d", "pool": "p", "device": "held"}]}}
    claim = _claim(allocation=kept, reservedFor=[_consumer(other)])
    assert with_reservation(claim, p, ALLOCATION)
    assert claim["status"]["allocation"] == kept  # allocated already: never replaced
    assert claim["status"]["reservedFor"] == [_consumer(other), _consumer(p)]


def test_a_pod_of_the_same_name_is_another_consumer() -> None:
    old, new = pod("a", [], uid="old"), pod("a", [], uid="new")
    claim = _claim(allocation=ALLOCATION, reservedFor=[_consumer(old)])
    assert reserved_for_pod(claim, "old")
    assert not reserved_for_pod(claim, "new")
    assert with_reservation(claim, new, None)
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == ["old", "new"]


def test_a_reserved_claim_without_allocation_gets_the_new_one() -> None:
    p = pod("a", [], uid="ua")
    claim = _claim(reservedFor=[_consumer(p)])
    assert not settled(claim, "ua")
    assert with_reservation(claim, p, ALLOCATION)
    assert claim["status"] == {"reservedFor": [_consumer(p)], "allocation": ALLOCATION}


def test_special_claim_after_prebind_is_the_reservation_of_the_created_claim() -> None:
    """``draxr plan``'s special claim is the worker's two steps: the POST body, then PreBind's change."""
    p, d = _decision()
    created = special_claim(p, d.requests, claim_name="my-pod-extended-resources-abcde")
    assert with_reservation(as_obj(created), p, d.special.to_api())
    assert special_claim_after_prebind(p, d.requests, d.special, "my-pod-extended-resources-abcde") == created


def test_same_allocation_ignores_order_and_extra_fields() -> None:
    r1 = {"request": "a", "driver": "d", "pool": "p", "device": "x"}
    r2 = {"request": "b", "driver": "d", "pool": "p", "device": "y"}
    a = {"devices": {"results": [r1, r2]}, "nodeSelector": {}}
    b = {"devices": {"results": [{**r2, "adminAccess": False}, r1]}}
    assert same_allocation(a, b)
    assert not same_allocation(a, {"devices": {"results": [r1]}})
    assert not same_allocation(a, {"devices": {"results": [r1, {**r2, "device": "z"}]}})
