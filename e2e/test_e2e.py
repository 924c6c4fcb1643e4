"""End-to-end scenarios: admission, dry-run warnings, scheduling, cleanup, failover.

Each runs against the emulator sandbox, against a real cluster when DRAXR_E2E_KUBECONFIG is set, and
against the local control plane's rows where the native path works (``make e2e-local``, e2e/conftest.py).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import yaml

from webhook.core.api.objects import Obj
from webhook.kube.client import ApiError
from webhook.kube.resources import PODS

from .barrier import AdmissionBarrier
from .controlplane.launcher import wait_until
from .target import RESOURCES, Target


def _bound(names: set[str]) -> Any:
    def check(pods: list[Obj]) -> bool:
        return names <= {p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")}

    return check


def test_admission_denies_invalid_and_duplicate_extended_resource_names(target: Target) -> None:
    with pytest.raises(ApiError) as bad:
        target.create(
            "deviceclasses",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": target.class_name("bad")},
                "spec": {"extendedResourceName": "example.com"},
            },
        )
    assert bad.value.status == 422
    assert 'spec.extendedResourceName: Invalid value: "example.com"' in bad.value.message
    first = target.device_class("first")
    with pytest.raises(ApiError) as dup:
        target.device_class("second")
    assert dup.value.status == 422
    assert 'admission webhook "deviceclasses.validate.draxr.io" denied the request' in dup.value.message
    assert first["metadata"]["name"] in dup.value.message


def test_fractional_dra_quantity_is_denied(target: Target) -> None:
    cls = target.device_class()
    implicit = f"deviceclass.resource.kubernetes.io/{cls['metadata']['name']}"
    with pytest.raises(ApiError) as denied:
        target.pod("fractional", {implicit: "500m"})
    assert denied.value.status == 422
    assert "Invalid value: 500m: must be an integer" in denied.value.message


def test_pods_are_routed_bound_mapped_and_cleaned_up(target: Target) -> None:
    cls = target.device_class()["metadata"]["name"]
    target.slice(target.nodes[0], 2)
    for i in range(2):
        target.pod(f"gpu-{i}", {target.ext: "1"})
    pods = {p["metadata"]["name"]: p for p in target.objects("pods")}
    for p in pods.values():
        assert p["spec"]["schedulerName"] == "draxr"  # routed by the mutating webhook
        assert json.loads(p["metadata"]["annotations"]["draxr.io/extended-resources"]) == {target.ext: cls}
    target.wait("pods", _bound({"gpu-0", "gpu-1"}), timeout=60)
    claims = target.wait("resourceclaims", lambda cs: cs if len(cs) == 2 else None)
    devices = set()
    for c in claims:
        assert c["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"] == "true"
        assert c["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
        (res,) = c["status"]["allocation"]["devices"]["results"]
        devices.add(res["device"])
    assert len(devices) == 2
    for p in target.objects("pods"):
        erc = p["status"]["extendedResourceClaimStatus"]
        assert erc["resourceClaimName"] in {c["metadata"]["name"] for c in claims}
        assert erc["requestMappings"] == [
            {"containerName": "c", "resourceName": target.ext, "requestName": "container-0-request-0"}
        ]
    for i in range(2):
        target.user.delete(PODS, f"gpu-{i}", target.namespace)
    target.wait("resourceclaims", lambda cs: not cs or None, timeout=60)


def test_a_hand_written_mapping_naming_what_the_api_lacks_is_denied(target: Target) -> None:
    """Issue 23, no silent no-device pods: even from an allowed writer, a mapping that names a
    request its claim lacks, or a claim that does not exist, is denied by the pod-status hook (the
    kubelet would give the container nothing)."""
    if target.writer is None:
        pytest.skip("the suite has no credentials of draxr's worker on this target")
    target.device_class()
    target.slice(target.nodes[0], 1)
    target.pod("mapped", {target.ext: "1"})
    [pod] = target.wait("pods", lambda ps: [p for p in ps if p["spec"].get("nodeName")], timeout=60)
    good = pod["status"]["extendedResourceClaimStatus"]
    claim = good["resourceClaimName"]
    wrong_request = {
        **good,
        "requestMappings": [{**good["requestMappings"][0], "requestName": "container-0-request-7"}],
    }
    wrong_claim = {**good, "resourceClaimName": "mapped-extended-resources-nothere"}
    for mapping, message in (
        (wrong_request, f'"container-0-request-7": no request of this name in ResourceClaim "{claim}"'),
        (
            wrong_claim,
            '"mapped-extended-resources-nothere": no ResourceClaim of this name in namespace '
            f'"{target.namespace}"',
        ),
    ):
        with pytest.raises(ApiError) as denied:
            target.writer.patch(
                PODS,
                "mapped",
                {"status": {"extendedResourceClaimStatus": mapping}},
                namespace=target.namespace,
                subresource="status",
            )
        assert denied.value.status == 422, denied.value.message
        assert 'admission webhook "pods.validate.draxr.io" denied the request' in denied.value.message
        assert message in denied.value.message
    kept = target.admin.get(PODS, "mapped", target.namespace)["status"]["extendedResourceClaimStatus"]
    assert kept == good


def _event(reason: str, pod: str) -> Any:
    def check(events: list[Obj]) -> Obj | None:
        for e in events:
            if e.get("reason") == reason and e["involvedObject"].get("name") == pod:
                return e
        return None

    return check


def test_a_pod_bound_without_a_mapping_is_reported(target: Target) -> None:
    """Issue 23, no silent no-device pods: a pod asking for a DRA-backed name and bound by hand (as
    a scheduler without DRAExtendedResource binds it: no special claim, no mapping) runs on a node
    whose allocatable lacks the name, so the kubelet gives it nothing; draxr's worker reports it
    with a ``NoDevicesAllocated`` Warning Event naming the container and the name."""
    target.device_class()
    target.slice(target.nodes[0], 1)
    target.pod("unmapped", {target.ext: "1"}, nodeName=target.nodes[0])
    event = target.wait("events", _event("NoDevicesAllocated", "unmapped"), timeout=60)
    assert event["type"] == "Warning"
    assert f"c: {target.ext}" in event["message"]
    assert "no extendedResourceClaimStatus" in event["message"]
    pod = target.admin.get(PODS, "unmapped", target.namespace)
    assert pod["status"].get("extendedResourceClaimStatus") is None


def test_a_pod_with_a_claim_from_a_template_gets_both_allocated(target: Target) -> None:
    """The pod's own claim comes from a template (kube-controller-manager's resourceclaim controller
    makes it after the pod); draxr waits for it, then allocates it with the special claim in one go."""
    target.require_controllers("claims from templates")
    cls = target.device_class()["metadata"]["name"]
    target.slice(target.nodes[0], 2)
    target.create(
        "resourceclaimtemplates",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "tmpl"},
            "spec": {
                "spec": {"devices": {"requests": [{"name": "own", "exactly": {"deviceClassName": cls}}]}}
            },
        },
    )
    target.pod(
        "both", {target.ext: "1"}, resourceClaims=[{"name": "own", "resourceClaimTemplateName": "tmpl"}]
    )
    [pod] = target.wait("pods", lambda ps: [p for p in ps if p["spec"].get("nodeName")], timeout=60)
    claims = {c["metadata"]["name"]: c for c in target.objects("resourceclaims")}
    [own] = pod["status"]["resourceClaimStatuses"]
    special = pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
    assert own["name"] == "own"
    assert set(claims) == {own["resourceClaimName"], special}
    devices = set()
    for c in claims.values():
        assert [r["name"] for r in c["status"]["reservedFor"]] == ["both"]
        (res,) = c["status"]["allocation"]["devices"]["results"]
        devices.add(res["device"])
    assert len(devices) == 2


def test_unschedulable_pod_waits_with_a_reason_until_devices_appear(target: Target) -> None:
    target.device_class()
    target.pod("waits", {target.ext: "1"})

    def reason(pods: list[Obj]) -> str | None:
        # A first attempt may still see the cluster without the new class; the next one follows it.
        for p in pods:
            for c in (p.get("status") or {}).get("conditions") or []:
                waiting = c["type"] == "PodScheduled" and c["status"] == "False"
                if waiting and "cannot allocate all claims" in c["message"]:
                    return str(c["message"])
        return None

    message = target.wait("pods", reason, timeout=30)
    assert message.startswith("0/")
    target.slice(target.nodes[-1], 1)
    target.wait("pods", _bound({"waits"}), timeout=60)


def test_dry_run_shows_the_webhook_warnings_and_denials(target: Target, kubectl: str) -> None:
    target.device_class()
    pod: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "dry", "namespace": target.namespace},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {
                        "requests": {target.ext: "1", f"unknown-{target.run_id}.draxr.io/thing": "1"},
                        "limits": {target.ext: "1", f"unknown-{target.run_id}.draxr.io/thing": "1"},
                    },
                }
            ]
        },
    }
    done = target.kubectl("apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(pod))
    assert done.returncode == 0, done.stderr
    assert "(server dry run)" in done.stdout
    assert f"Warning: unknown-{target.run_id}.draxr.io/thing: no DeviceClass maps this name" in done.stderr
    del pod["spec"]["containers"][0]["resources"]["requests"][f"unknown-{target.run_id}.draxr.io/thing"]
    del pod["spec"]["containers"][0]["resources"]["limits"][f"unknown-{target.run_id}.draxr.io/thing"]
    done = target.kubectl("apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(pod))
    assert done.returncode == 0, done.stderr
    assert "Warning: no node can run this pod now: 0/" in done.stderr  # no devices published yet
    assert not [p for p in target.objects("pods") if p["metadata"]["name"] == "dry"]  # nothing persisted
    bad = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": target.class_name("x")},
        "spec": {"extendedResourceName": target.ext},
    }
    denied = target.kubectl("apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(bad))
    assert denied.returncode != 0
    # kubectl renders an Invalid status from its causes: "The DeviceClass "x" is invalid: <field errors>"
    assert (
        f'The DeviceClass "{target.class_name("x")}" is invalid: spec.extendedResourceName: Duplicate value'
        in (denied.stderr)
    )
    assert "already declared by DeviceClass" in denied.stderr


def test_a_terminating_pod_keeps_its_device_until_it_is_gone(target: Target) -> None:
    """A bound pod deleted with a grace period stays, terminating, until its kubelet confirms the
    containers stopped (here the kubelet first runs the pod's preStop hook, a 30 s sleep; the scenario
    then deletes the pod with grace 0). Until then its device stays taken: the next pod waits, then
    gets it."""
    if target.sandbox is not None:
        pytest.skip(
            "the emulator deletes a bound pod at once, as if its kubelet had confirmed (e2e/README.md)"
        )
    if not target.local:
        pytest.skip("a cluster's kubelets end the grace period themselves: the pod may be gone at once")
    target.device_class()
    target.slice(target.nodes[0], 1)
    target.pod(
        "leaving",
        {target.ext: "1"},
        lifecycle={"preStop": {"sleep": {"seconds": 30}}},
        terminationGracePeriodSeconds=30,
    )
    target.wait("pods", _bound({"leaving"}), timeout=60)
    target.user.delete(PODS, "leaving", target.namespace)
    [pod] = [p for p in target.objects("pods") if p["metadata"]["name"] == "leaving"]
    assert pod["metadata"]["deletionTimestamp"]
    target.pod("next", {target.ext: "1"})

    def waiting(pods: list[Obj]) -> bool:
        return any(
            c["type"] == "PodScheduled" and c["status"] == "False"
            for p in pods
            if p["metadata"]["name"] == "next"
            for c in (p.get("status") or {}).get("conditions") or []
        )

    target.wait("pods", waiting, timeout=30)
    [claim] = target.objects("resourceclaims")
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["leaving"]
    target.user.request(
        "delete",
        PODS.path(target.namespace, "leaving"),
        body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
        resource="pods",
    )
    target.wait("pods", _bound({"next"}), timeout=60)
    [claim] = target.wait("resourceclaims", _special_claims_of("next"))
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["next"]


def test_worker_failover(target: Target) -> None:
    procs = target.processes
    if procs is None:
        pytest.skip("the suite does not run draxr's workers on this target, so it cannot kill one")
    target.device_class()
    target.slice(target.nodes[0], 2)
    leader = procs.leader(10)
    target.pod("before", {target.ext: "1"})
    target.wait("pods", _bound({"before"}), timeout=30)
    procs.kill(leader)
    killed = time.monotonic()
    target.pod("after", {target.ext: "1"})
    target.wait("pods", _bound({"after"}), timeout=30)
    lease, _, retry = procs.lease
    assert time.monotonic() - killed < lease + retry + 3


@pytest.mark.any_gate
def test_the_webhook_reports_the_gate_answer_the_workers_leader_published(target: Target) -> None:
    """Issue 23: one cluster-wide gate answer. The worker's leader probes the apiserver's gate and
    writes it in ConfigMap draxr-apiserver-gate; the webhook replica reads it (kube/sharedgate.py),
    with the RBAC ``draxr manifests`` grants, so both report the same mode."""
    procs = target.processes
    if procs is None or target.sandbox is not None:
        # The emulator's draxr-0 is webhook and worker in one: tests/runtime/test_serve.py.
        pytest.skip("the webhook and the workers run as separate processes only on the local rows")
    leader = procs.leader(10)
    readyz: list[str] = []

    def shared() -> bool:
        status, body = procs.webhook_get("/readyz")
        readyz[:] = [f"{status} {body}"]
        return status == 200 and f"(shared by {leader}, probed " in body

    # The leader publishes at once; the webhook reads every 10 s.
    wait_until(f"the webhook adopting {leader}'s answer", shared, 45, detail=lambda: str(readyz))
    gate = "on" if target.native else "off"
    assert f"apiserver DRAExtendedResource: {gate} (shared by {leader}" in readyz[0]


def _special_claims_of(pod: str) -> Any:
    def check(claims: list[Obj]) -> list[Obj] | None:
        mine = [
            c for c in claims if any(o["name"] == pod for o in c["metadata"].get("ownerReferences") or [])
        ]
        return mine or None

    return check


def _held_mid_allocation(target: Target, barrier: AdmissionBarrier, pod: str) -> None:
    """The worker's write of the special claim's allocation is held at the barrier: the claim exists,
    unallocated, and the pod is not bound."""
    held = barrier.wait_held()
    [claim] = target.objects("resourceclaims")
    assert held["name"] == claim["metadata"]["name"]
    assert held["object"]["status"]["reservedFor"][0]["name"] == pod  # the write that is held
    assert not claim.get("status", {}).get("allocation")
    assert not target.admin.get(PODS, pod, target.namespace)["spec"].get("nodeName")


def test_a_pod_deleted_mid_allocation_leaves_nothing_behind(target: Target) -> None:
    """The pod goes while the worker is in PreBind: its special claim is created, the write of the
    claim's allocation is in flight. The worker's next writes fail; it removes the claim, and the
    device serves the next pod."""
    if not target.local:
        pytest.skip("the API server cannot call the test's admission barrier on this target")
    target.device_class()
    target.slice(target.nodes[0], 1)
    with AdmissionBarrier(target, "resourceclaims/status") as barrier:
        target.pod("doomed", {target.ext: "1"})
        _held_mid_allocation(target, barrier, "doomed")
        target.user.delete(PODS, "doomed", target.namespace)
        barrier.release()
        target.wait("resourceclaims", lambda cs: not cs, timeout=60)
    target.pod("next", {target.ext: "1"})
    target.wait("pods", _bound({"next"}), timeout=60)
    [claim] = target.wait("resourceclaims", _special_claims_of("next"))
    assert claim["status"]["reservedFor"][0]["name"] == "next"


def test_a_pod_deleted_mid_allocation_while_no_worker_runs_is_repaired(target: Target) -> None:
    """Every worker dies while a pod's allocation is in flight (its special claim exists, the write of
    its allocation is held); the pod is deleted while no worker runs, then the held write goes on.
    The workers started again release whatever the dead leader left, and the device serves the next
    pod."""
    procs = target.processes
    if procs is None or not target.local:
        pytest.skip("the suite does not run draxr's workers on this target, so it cannot kill them")
    target.device_class()
    target.slice(target.nodes[0], 1)
    procs.leader(10)
    with AdmissionBarrier(target, "resourceclaims/status") as barrier:
        target.pod("doomed", {target.ext: "1"})
        _held_mid_allocation(target, barrier, "doomed")
        for worker in procs.workers():
            procs.kill(worker)
        target.user.delete(PODS, "doomed", target.namespace)
        barrier.release()
        procs.restore()
        target.wait("resourceclaims", lambda cs: not cs, timeout=60)
    target.pod("next", {target.ext: "1"})
    target.wait("pods", _bound({"next"}), timeout=60)


def test_a_statefulset_on_wait_for_first_consumer_binds_after_its_claim(target: Target) -> None:
    """Issue 21: a GPU StatefulSet's pod on a ``WaitForFirstConsumer`` claim. draxr sets the claim's
    ``volume.kubernetes.io/selected-node`` and binds the pod only once the claim is bound; the test
    plays the external provisioner and the PV controller (the rows run neither). The claim is the
    one the StatefulSet's volumeClaimTemplate makes (``data-web-0``), created as its controller
    would (the rows run no StatefulSet controller)."""
    target.device_class()
    target.slice(target.nodes[0], 1)
    sc = target.create(
        "storageclasses",
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": f"wait-{target.run_id}"},
            "provisioner": "e2e.draxr.io",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
    )
    sc_name = sc["metadata"]["name"]
    target.create(
        "persistentvolumeclaims",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data-web-0"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": sc_name,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )
    target.pod(
        "web-0",
        {target.ext: "1"},
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}}],
    )

    def selected(claims: list[Obj]) -> Obj | None:
        for c in claims:
            if (c["metadata"].get("annotations") or {}).get("volume.kubernetes.io/selected-node"):
                return c
        return None

    pvc = target.wait("persistentvolumeclaims", selected, timeout=60)
    assert pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == target.nodes[0]
    assert not [p for p in target.objects("pods") if p["spec"].get("nodeName")]  # waits for the volume
    # The provisioner: a volume for the claim; the PV controller: the claim bound to it.
    pv_name = f"pvc-{pvc['metadata']['uid']}"
    target.create(
        "persistentvolumes",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": pv_name},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": sc_name,
                "persistentVolumeReclaimPolicy": "Delete",
                "csi": {"driver": "e2e.draxr.io", "volumeHandle": pv_name},
                "claimRef": {
                    "kind": "PersistentVolumeClaim",
                    "namespace": target.namespace,
                    "name": "data-web-0",
                    "uid": pvc["metadata"]["uid"],
                },
            },
        },
    )
    pvc["spec"]["volumeName"] = pv_name
    pvc["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] = "yes"
    target.admin.update(RESOURCES["persistentvolumeclaims"], pvc)
    target.wait("pods", _bound({"web-0"}), timeout=60)
