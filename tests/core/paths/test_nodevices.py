"""Bound pods running without the devices they asked for (issue 23 item 4): a DRA-backed name, a
node without it in allocatable, and no valid mapping, whoever scheduled the pod."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.harness import state_of
from tests.core.podfactory import container, device_class, gpus, node, pod, resource_slice
from webhook.core.api.objects import Obj
from webhook.core.cluster.state import ClusterState
from webhook.core.paths.nodevices import pod_without_devices, pods_without_devices

GPU = "example.com/gpu"
CLASS = "gpu.example.com"
REQUEST = "container-0-request-0"


def cluster(*extra: Obj) -> ClusterState:
    return state_of(
        node("dra"),
        node("dp", {GPU: 2}),
        device_class(CLASS, ext=GPU),
        resource_slice("s", gpus(2), node_name="dra"),
        *extra,
    )


def special_claim(claim_name: str = "p-extended-resources-x", *, allocated: bool = True) -> Obj:
    obj: Obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": claim_name, "namespace": "default", "uid": f"uid-{claim_name}"},
        "spec": {
            "devices": {
                "requests": [{"name": "container-0-request-0", "exactly": {"deviceClassName": CLASS}}]
            }
        },
    }
    if allocated:
        result = {"request": "container-0-request-0", "driver": CLASS, "pool": "dra", "device": "gpu-0"}
        obj["status"] = {"allocation": {"devices": {"results": [result]}}}
    return obj


def bound(node_name: str = "dra", mapping: Obj | None = None, **spec: Any) -> Obj:
    p = pod("p", [container("c", {GPU: 1})], nodeName=node_name, **spec)
    p["status"] = {"phase": "Running"}
    if mapping is not None:
        p["status"]["extendedResourceClaimStatus"] = mapping
    return p


def mapping(claim_name: str = "p-extended-resources-x", request: str = "container-0-request-0") -> Obj:
    return {
        "resourceClaimName": claim_name,
        "requestMappings": [{"containerName": "c", "resourceName": GPU, "requestName": request}],
    }


def test_a_pod_bound_without_a_mapping_is_reported() -> None:
    # Reproduces issue 23: placed by a scheduler without the gate, it runs with no GPU, silently.
    report = pod_without_devices(bound(), cluster())
    assert report is not None
    assert report.missing == (("c", GPU),)
    assert report.message() == (
        "pod default/p runs on dra without the devices it asked for (c: example.com/gpu): its status has "
        "no extendedResourceClaimStatus (its scheduler did not allocate them); its node's allocatable "
        "does not have the name, so the kubelet gives it no device. Delete the pod so that a scheduler "
        "with DRAExtendedResource (or draxr) places it again"
    )


def test_a_valid_mapping_is_not_reported() -> None:
    assert pod_without_devices(bound(mapping=mapping()), cluster(special_claim())) is None


def test_a_mapping_to_a_missing_unallocated_or_wrong_claim_is_reported() -> None:
    missing = pod_without_devices(bound(mapping=mapping()), cluster())
    assert missing is not None
    assert 'names ResourceClaim "p-extended-resources-x", which does not exist' in missing.why
    pending = pod_without_devices(bound(mapping=mapping()), cluster(special_claim(allocated=False)))
    assert pending is not None
    assert "which is not allocated" in pending.why
    wrong = pod_without_devices(bound(mapping=mapping(request="nope")), cluster(special_claim()))
    assert wrong is not None
    assert "has no request for them" in wrong.why


def test_device_plugin_nodes_pending_and_finished_pods_are_not_reported() -> None:
    state = cluster()
    assert pod_without_devices(bound("dp"), state) is None  # the device plugin serves it there
    pending = bound()
    del pending["spec"]["nodeName"]
    assert pod_without_devices(pending, state) is None
    done = bound()
    done["status"]["phase"] = "Succeeded"
    assert pod_without_devices(done, state) is None
    unmapped_name = pod("q", [container("c", {"other.com/thing": 1})], nodeName="dra")
    assert pod_without_devices(unmapped_name, state) is None  # no class backs the name


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["dra", "dp", None]),
    st.booleans(),
    st.sampled_from(["Running", "Succeeded", "Pending"]),
    st.integers(min_value=0, max_value=2),
)
def test_reported_exactly_when_bound_running_unserved_and_unmapped(
    node_name: str | None, mapped: bool, phase: str, count: int
) -> None:
    """Property: the report's four conditions, each necessary, together sufficient."""
    p = pod("p", [container("c", {GPU: count})])
    if node_name:
        p["spec"]["nodeName"] = node_name
    p["status"] = {"phase": phase}
    if mapped:
        p["status"]["extendedResourceClaimStatus"] = mapping()
    expected = node_name == "dra" and not mapped and phase != "Succeeded" and count > 0
    reports = pods_without_devices([p], cluster(special_claim()))
    assert bool(reports) == expected
