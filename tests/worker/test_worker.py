"""The worker end to end (``worker.worker`` and every part it wires) through the API emulator with the
real client (issue 4's scenarios)."""

from __future__ import annotations

import json

from tests.worker.harness import GPU, Cluster, device_class, gpu_slice, node, poll
from webhook.worker.unmapped import UNMAPPED


def test_motivating_example_lands_on_both_kinds_of_node(kube: Cluster) -> None:
    kube.apply(node("dra-node"), node("dp-node", {GPU: 2}), device_class(), gpu_slice("dra-node", 8))
    kube.worker()
    for i in range(10):
        kube.pod(f"demo-{i}")
    bound = kube.wait_bound(10)
    assert sorted(bound.values()).count("dp-node") == 2
    assert sorted(bound.values()).count("dra-node") == 8
    claims = kube.claims()
    assert len(claims) == 8  # only pods on the DRA node have a special claim
    by_pod = {c["metadata"]["ownerReferences"][0]["name"]: c for c in claims}
    for pod in kube.pods():
        name = pod["metadata"]["name"]
        erc = pod["status"].get("extendedResourceClaimStatus")
        if bound[name] == "dp-node":
            assert erc is None
            assert name not in by_pod
        else:
            claim = by_pod[name]
            assert claim["metadata"]["name"].startswith(f"{name}-extended-resources-")
            assert claim["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
            assert erc == {
                "requestMappings": [
                    {"containerName": "c", "resourceName": GPU, "requestName": "container-0-request-0"}
                ],
                "resourceClaimName": claim["metadata"]["name"],
            }
            sel = claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]
            assert sel["values"] == ["dra-node"]
    kube.check_consistent()


def test_mixed_device_plugin_and_dra_on_one_node(kube: Cluster) -> None:
    kube.apply(
        node("n", {"example.com/nic": 4}),
        device_class(),
        device_class("nic.example.com", "example.com/nic"),
        gpu_slice("n", 2),
    )
    kube.worker()
    kube.pod("mixed", {"example.com/nic": 1, GPU: 1})
    kube.wait_bound(1)
    (claim,) = kube.claims()
    requests = claim["spec"]["devices"]["requests"]
    assert [r["name"] for r in requests] == ["container-0-request-0"]  # example.com/gpu < example.com/nic
    assert requests[0]["exactly"]["deviceClassName"] == "gpu.example.com"


def test_init_and_sidecar_containers(kube: Cluster) -> None:
    kube.apply(node("n"), device_class(), gpu_slice("n", 4))
    kube.worker()
    kube.em.create(
        "pods",
        {
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {
                "schedulerName": "draxr",
                "initContainers": [
                    {"name": "setup", "image": "x", "resources": {"requests": {GPU: 2}}},
                    {
                        "name": "side",
                        "image": "x",
                        "restartPolicy": "Always",
                        "resources": {"requests": {GPU: 1}},
                    },
                ],
                "containers": [{"name": "main", "image": "x", "resources": {"requests": {GPU: 1}}}],
            },
        },
    )
    kube.wait_bound(1)
    (claim,) = kube.claims()
    reqs = {r["name"]: r["exactly"]["count"] for r in claim["spec"]["devices"]["requests"]}
    # setup reuses the sidecar's and main's requests (1 + 1): nothing left to ask for itself
    assert reqs == {"container-1-request-0": 1, "container-2-request-0": 1}
    assert len(claim["status"]["allocation"]["devices"]["results"]) == 2
    pod = kube.em.get("pods", "p", "default")
    setup = [
        m["requestName"]
        for m in pod["status"]["extendedResourceClaimStatus"]["requestMappings"]
        if m["containerName"] == "setup"
    ]
    assert setup == ["container-1-request-0", "container-2-request-0"]


def test_user_claims_allocated_with_extended_resources(kube: Cluster) -> None:
    kube.apply(node("n"), device_class(), gpu_slice("n", 3))
    kube.em.create(
        "resourceclaims",
        {
            "metadata": {"name": "mine", "namespace": "default"},
            "spec": {
                "devices": {
                    "requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.example.com", "count": 2}}]
                }
            },
        },
    )
    kube.worker()
    kube.pod("p", {GPU: 1}, resourceClaims=[{"name": "x", "resourceClaimName": "mine"}])
    kube.wait_bound(1)
    user = kube.em.get("resourceclaims", "mine", "default")
    assert len(user["status"]["allocation"]["devices"]["results"]) == 2
    assert [r["name"] for r in user["status"]["reservedFor"]] == ["p"]
    assert len(kube.allocated()) == 3
    kube.check_consistent()


def test_unschedulable_gets_condition_and_event_then_binds_when_a_slice_appears(kube: Cluster) -> None:
    kube.apply(node("n"), node("m"), device_class())
    kube.worker()
    kube.pod("waiting")
    msg = "0/2 nodes are available: 2 cannot allocate all claims."
    kube.em.wait_for(lambda: (kube.condition("waiting") or {}).get("message") == msg, 10)
    cond = kube.condition("waiting")
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    events = kube.em.wait_for(
        lambda: [e for e in kube.em.list("events", "default") if e["reason"] == "FailedScheduling"], 10
    )
    assert events[0]["message"] == msg
    assert events[0]["involvedObject"]["name"] == "waiting"
    kube.apply(gpu_slice("m", 1))
    assert kube.wait_bound(1) == {"waiting": "m"}


def test_invalid_pools_are_named_in_the_condition_and_the_event(kube: Cluster) -> None:
    """Upstream's Filter reason for a node whose pool is invalid (duplicate device names in the
    node's view) is "invalid resource pools were encountered", aggregated per node."""
    broken = gpu_slice("n", 2)
    broken["spec"]["devices"][1]["name"] = broken["spec"]["devices"][0]["name"]
    kube.apply(node("n"), node("m"), device_class(), broken)
    kube.worker()
    kube.pod("waiting")
    msg = "0/2 nodes are available: 1 cannot allocate all claims, 1 invalid resource pools were encountered."
    kube.em.wait_for(lambda: (kube.condition("waiting") or {}).get("message") == msg, 10)
    events = kube.em.wait_for(
        lambda: [e for e in kube.em.list("events", "default") if e["reason"] == "FailedScheduling"], 10
    )
    assert events[0]["message"] == msg


def test_completion_and_deletion_free_devices(kube: Cluster) -> None:
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    kube.worker()
    kube.pod("first")
    kube.wait_bound(1)
    kube.pod("second")
    kube.em.wait_for(lambda: kube.condition("second") is not None, 10)
    first = kube.em.get("pods", "first", "default")
    first["status"]["phase"] = "Succeeded"
    kube.em.update_status("pods", first)
    kube.em.wait_for(lambda: "second" in kube.bound(), 15, "second bound after first finished")
    claims = {c["metadata"]["ownerReferences"][0]["name"] for c in kube.claims()}
    assert claims == {"second"}  # the finished pod's claim is gone
    kube.em.delete("pods", "second", "default")
    kube.em.wait_for(lambda: not kube.claims(), 15, "claim deleted with its pod")
    assert kube.allocated() == []


def test_orphaned_special_claims_are_repaired(kube: Cluster) -> None:
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    kube.em.create(
        "resourceclaims",
        {
            "metadata": {
                "name": "ghost-extended-resources-abcde",
                "namespace": "default",
                "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
                "finalizers": ["resource.kubernetes.io/delete-protection"],
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": "ghost",
                        "uid": "00000000-0000-0000-0000-000000000000",
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "container-0-request-0",
                            "exactly": {
                                "deviceClassName": "gpu.example.com",
                                "allocationMode": "ExactCount",
                                "count": 1,
                            },
                        }
                    ]
                }
            },
        },
    )
    claim = kube.em.get("resourceclaims", "ghost-extended-resources-abcde", "default")
    claim["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "container-0-request-0",
                        "driver": "gpu.example.com",
                        "pool": "n-gpu",
                        "device": "gpu-0",
                    }
                ]
            }
        }
    }
    kube.em.update_status("resourceclaims", claim)
    proc = kube.worker(orphan_interval=0.2)
    kube.em.wait_for(lambda: not kube.claims(), 15, "orphan removed")
    assert proc.worker is not None
    kube.pod("now-fits")
    assert kube.wait_bound(1) == {"now-fits": "n"}


def test_stale_special_claim_is_replaced(kube: Cluster) -> None:
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    pod = kube.pod("p", schedulingGates=[{"name": "hold"}])
    kube.em.create(
        "resourceclaims",
        {
            "metadata": {
                "name": "p-extended-resources-stale",
                "namespace": "default",
                "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": "p",
                        "uid": pod["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "container-0-request-0",
                            "exactly": {"deviceClassName": "gpu.example.com", "count": 1},
                        }
                    ]
                }
            },
        },
    )
    kube.worker()
    pod = kube.em.get("pods", "p", "default")
    pod["spec"]["schedulingGates"] = []
    kube.em.update("pods", pod)
    kube.wait_bound(1)
    names = [c["metadata"]["name"] for c in kube.claims()]
    assert len(names) == 1
    assert names[0] != "p-extended-resources-stale"
    kube.check_consistent()


def test_concurrency_200_pods_for_64_devices(kube: Cluster) -> None:
    kube.apply(device_class())
    for i in range(8):
        kube.apply(node(f"n{i}"), gpu_slice(f"n{i}", 8))
    kube.worker()
    for i in range(200):
        kube.pod(f"p{i:03d}")
    kube.wait_bound(64, timeout=60)
    pending = [p["metadata"]["name"] for p in kube.pods() if not p["spec"].get("nodeName")]
    kube.em.wait_for(lambda: all(kube.condition(n) for n in pending), 60, "every pending pod has a reason")
    assert len(kube.bound()) == 64
    assert len(kube.claims()) == 64
    assert len(set(kube.allocated())) == 64
    for n in pending[:5]:
        cond = kube.condition(n)
        assert cond is not None
        assert cond["message"] == "0/8 nodes are available: 8 cannot allocate all claims."
    kube.check_consistent()


def test_a_device_taint_rule_keeps_pods_off_the_tainted_devices_until_it_goes(kube: Cluster) -> None:
    kube.apply(node("n"), device_class(), gpu_slice("n", 2))
    kube.apply(
        {
            "apiVersion": "resource.k8s.io/v1alpha3",
            "kind": "DeviceTaintRule",
            "metadata": {"name": "gpu-0-broken"},
            "spec": {
                "deviceSelector": {"driver": "gpu.example.com", "pool": "n-gpu", "device": "gpu-0"},
                "taint": {"key": "example.com/broken", "effect": "NoSchedule"},
            },
        }
    )
    kube.worker()  # the emulator serves DeviceTaintRule as v1alpha3, as 1.35 does
    kube.pod("first")
    kube.wait_bound(1)
    assert kube.allocated() == [("gpu.example.com", "n-gpu", "gpu-1")]  # never the tainted gpu-0
    kube.pod("second")
    msg = "0/1 nodes are available: 1 cannot allocate all claims."
    kube.em.wait_for(lambda: (kube.condition("second") or {}).get("message") == msg, 10)
    kube.em.delete("devicetaintrules", "gpu-0-broken")
    assert kube.wait_bound(2) == {"first": "n", "second": "n"}
    kube.check_consistent()


def test_a_class_that_tolerates_a_taint_lets_the_tainted_device_serve(kube: Cluster) -> None:
    """``draxr.io/extended-resource-tolerations`` (issue 23): the special claim's requests carry the
    class's tolerations, as the claim the worker writes and its allocation show."""
    toleration = {"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}
    tolerating = device_class()
    tolerating["metadata"]["annotations"] = {
        "draxr.io/extended-resource-tolerations": json.dumps([toleration])
    }
    tainted = gpu_slice("n", 1)
    tainted["spec"]["devices"][0]["taints"] = [{"key": "example.com/maintenance", "effect": "NoSchedule"}]
    kube.apply(node("n"), tolerating, tainted)
    kube.worker()
    kube.pod("p")
    assert kube.wait_bound(1) == {"p": "n"}
    (claim,) = kube.claims()
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] == [toleration]
    assert claim["status"]["allocation"]["devices"]["results"][0]["tolerations"] == [toleration]
    kube.check_consistent()


def test_a_bound_pod_whose_status_names_no_claim_is_reported_and_keeps_its_device(kube: Cluster) -> None:
    """Its claim is not 'superseded': the pod may run with it. A log line, a Warning Event and a
    gauge say so; nothing is freed."""
    kube.apply(node("n"), device_class(), gpu_slice("n", 1))
    proc = kube.worker()
    assert proc.worker is not None
    kube.pod("p")
    kube.wait_bound(1)
    (claim,) = kube.claims()
    kube.em.patch(
        "pods", "p", {"status": {"extendedResourceClaimStatus": None}}, "default", subresource="status"
    )
    [event] = kube.em.wait_for(
        lambda: [e for e in kube.em.list("events", "default") if e["reason"] == UNMAPPED], 10, "the Event"
    )
    assert event["type"] == "Warning"
    assert event["involvedObject"]["name"] == "p"
    assert claim["metadata"]["name"] in event["message"]
    assert proc.registry.get_sample_value("draxr_unmapped_bound_pods") == 1
    assert proc.worker.maintenance.repair_orphans() == 0
    assert [c["metadata"]["uid"] for c in kube.claims()] == [claim["metadata"]["uid"]]
    assert kube.allocated() == [("gpu.example.com", "n-gpu", "gpu-0")]
    kube.em.delete("pods", "p", "default")  # gone: its claims are freed, and the gauge follows
    kube.em.wait_for(lambda: not kube.claims(), 10, "the claim freed once the pod is gone")
    poll(lambda: proc.registry.get_sample_value("draxr_unmapped_bound_pods") == 0, 10, "the gauge")
