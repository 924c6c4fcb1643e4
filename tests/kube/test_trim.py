"""``kube.trim``: what the caches keep of each object. A trimmed object must drive every code path
exactly as the whole object does: the engine's decisions (property test over pods and clusters with
everything the filters read, buried in what a real API server adds) and the worker's own reads."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from bench.memory import realistic_node, realistic_pod
from tests.core.podfactory import device, device_class, resource_slice
from webhook.core.api.alignment import ALIGN_ANNOTATION, ALIGN_BY_ANNOTATION
from webhook.core.api.objects import Obj
from webhook.core.api.orphans import pod_is_done, special_claim_name, superseded
from webhook.core.cluster.state import ClusterState
from webhook.core.paths.rewrite import templates_used
from webhook.core.scheduling.framework import Decision
from webhook.core.scheduling.scheduler import Scheduler
from webhook.kube import trim
from webhook.kube.cache import ClusterCache
from webhook.kube.client import KubeClient
from webhook.worker.config import WorkerConfig
from webhook.worker.events import pod_scheduled_condition
from webhook.worker.metrics import WorkerMetrics
from webhook.worker.worker import Worker

GPU = "example.com/gpu"
LAST_APPLIED = {trim.LAST_APPLIED: '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"}}'}


def noisy(obj: Obj) -> Obj:
    """``obj`` with what an API server and its clients add that draxr never reads."""
    out = copy.deepcopy(obj)
    meta = out.setdefault("metadata", {})
    meta["managedFields"] = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {}}}]
    meta.setdefault("annotations", {}).update(LAST_APPLIED)
    meta.setdefault("labels", {}).setdefault("team", "platform")
    if out.get("kind") == "Pod":
        spec = out.setdefault("spec", {})
        spec["volumes"] = [{"name": "v", "emptyDir": {}}]
        spec["dnsPolicy"] = "ClusterFirst"
        for section in ("initContainers", "containers"):
            for c in spec.get(section, []):
                c.update(image="busybox", env=[{"name": "A", "value": "1"}], command=["sh"])
                c["livenessProbe"] = {"exec": {"command": ["true"]}}
                c.setdefault("ports", []).append({"containerPort": 9090, "protocol": "TCP"})
        status = out.setdefault("status", {})
        status["podIP"] = "10.0.0.1"
        status["containerStatuses"] = [{"name": "c", "ready": True}]
        status.setdefault("conditions", []).append({"type": "Ready", "status": "True"})
    if out.get("kind") == "Node":
        status = out.setdefault("status", {})
        status["images"] = [{"names": ["busybox"], "sizeBytes": 1}]
        status.setdefault("conditions", []).append(
            {"type": "DiskPressure", "status": "False", "message": "ok", "reason": "KubeletHasNoDiskPressure"}
        )
        status["nodeInfo"] = {**status.get("nodeInfo", {}), "osImage": "Linux"}
    return out


# -- what is kept -------------------------------------------------------------------------------------


def test_a_realistic_pod_keeps_a_fifth_of_its_json() -> None:
    raw = realistic_pod(7, "node-1")
    kept = trim.pod(copy.deepcopy(raw))
    assert len(json.dumps(kept)) * 5 < len(json.dumps(raw))
    assert kept["metadata"] == {
        k: raw["metadata"][k]
        for k in ("name", "namespace", "uid", "generateName", "creationTimestamp", "labels")
    }
    assert kept["spec"]["containers"] == [
        {"name": "main", "resources": raw["spec"]["containers"][0]["resources"]}
    ]
    assert kept["spec"]["nodeName"] == "node-1"
    assert kept["spec"]["tolerations"] == raw["spec"]["tolerations"]
    assert kept["status"]["phase"] == "Running"
    assert kept["status"]["conditions"] == [{"type": "PodScheduled", "status": "True"}]


def test_a_realistic_node_keeps_what_the_filters_and_gates_read() -> None:
    raw = realistic_node("n1")
    kept = trim.node(copy.deepcopy(raw))
    assert "managedFields" not in kept["metadata"]
    assert kept["metadata"]["labels"] == raw["metadata"]["labels"]
    assert kept["status"] == {
        "allocatable": raw["status"]["allocatable"],
        "conditions": [{"type": c["type"], "status": c["status"]} for c in raw["status"]["conditions"]],
        "nodeInfo": {"kubeletVersion": "v1.36.3"},
    }
    assert len(json.dumps(kept)) * 5 < len(json.dumps(raw))


def test_other_kinds_lose_only_managed_fields_and_the_last_applied_annotation() -> None:
    claim: Obj = {
        "kind": "ResourceClaim",
        "metadata": {
            "name": "c",
            "managedFields": [{"manager": "x"}],
            "annotations": {**LAST_APPLIED, "resource.kubernetes.io/extended-resource-claim": "true"},
            "finalizers": ["resource.kubernetes.io/delete-protection"],
        },
        "spec": {"devices": {"requests": [{"name": "r"}]}},
        "status": {"reservedFor": [{"name": "p"}]},
    }
    kept = trim.for_kind("ResourceClaim")(copy.deepcopy(claim))
    expected = copy.deepcopy(claim)
    del expected["metadata"]["managedFields"]
    del expected["metadata"]["annotations"][trim.LAST_APPLIED]
    assert kept == expected
    only_last_applied = {"kind": "DeviceClass", "metadata": {"name": "d", "annotations": dict(LAST_APPLIED)}}
    assert trim.generic(only_last_applied) == {"kind": "DeviceClass", "metadata": {"name": "d"}}


def test_pod_annotations_outside_draxrs_domains_go() -> None:
    pod = {
        "metadata": {
            "name": "p",
            "annotations": {
                ALIGN_ANNOTATION: "preferred",
                "draxr.io/rewritten": "{}",
                "resource.kubernetes.io/x": "y",
                "prometheus.io/scrape": "true",
                **LAST_APPLIED,
            },
        }
    }
    assert trim.pod(pod)["metadata"]["annotations"] == {
        ALIGN_ANNOTATION: "preferred",
        "draxr.io/rewritten": "{}",
        "resource.kubernetes.io/x": "y",
    }


def test_a_pod_keeps_only_the_volumes_the_volume_plugins_read() -> None:
    vols = [
        {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}},
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
        {"name": "disk", "gcePersistentDisk": {"pdName": "pd"}},
        {"name": "cm", "configMap": {"name": "x"}},
    ]
    kept = trim.pod({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"volumes": vols}})
    assert [v["name"] for v in kept["spec"]["volumes"]] == ["data", "scratch", "disk"]
    assert "volumes" not in trim.pod(noisy({"kind": "Pod", "metadata": {"name": "p"}, "spec": {}}))["spec"]


def test_storage_objects_keep_what_the_engine_keeps_and_their_resource_version() -> None:
    pvc = noisy(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "c", "namespace": "ns", "uid": "u", "resourceVersion": "7"},
            "spec": {"storageClassName": "sc", "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Pending", "conditions": [{"type": "Resizing"}]},
        }
    )
    kept = trim.for_kind("PersistentVolumeClaim")(pvc)
    assert kept == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "c", "namespace": "ns", "uid": "u", "resourceVersion": "7"},
        "spec": {"storageClassName": "sc", "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Pending"},
    }
    node = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": "n", "resourceVersion": "3"},
    }
    assert trim.for_kind("CSINode")(noisy(node))["metadata"] == {"name": "n", "resourceVersion": "3"}


@pytest.mark.parametrize(
    "kind",
    ["Pod", "Node", "ResourceSlice", "DeviceClass", "PersistentVolumeClaim", "PersistentVolume", "CSINode"],
)
def test_trimming_twice_changes_nothing(kind: str) -> None:
    obj = noisy({"kind": kind, "metadata": {"name": "x"}, "spec": {"containers": [{"name": "c"}]}})
    once = trim.for_kind(kind)(copy.deepcopy(obj))
    assert trim.for_kind(kind)(copy.deepcopy(once)) == once


def test_odd_shapes_do_not_raise() -> None:
    odd: list[Obj] = [{}, {"metadata": None, "spec": [], "status": "x"}, {"spec": {"containers": [None, 3]}}]
    for bad in odd:
        trim.pod(bad)
        trim.node(bad)
        trim.generic(bad)
    assert trim.pod({"spec": {"containers": [None, {"name": "c"}]}})["spec"]["containers"] == [
        {},
        {"name": "c"},
    ]


# -- same decisions, same reads ------------------------------------------------------------------------


def _nodes() -> list[Obj]:
    def node(name: str, alloc: dict[str, Any], labels: dict[str, str], **extra: Any) -> Obj:
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
            "spec": extra.get("spec", {}),
            "status": {
                "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110", **alloc},
                "conditions": [{"type": "Ready", "status": extra.get("ready", "True")}],
                "nodeInfo": {"kubeletVersion": extra.get("kubelet", "v1.36.0")},
            },
        }

    return [
        node("dra-a", {}, {"zone": "a"}),
        node(
            "dra-b",
            {},
            {"zone": "b"},
            spec={"taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]},
        ),
        node("plugin", {GPU: "2"}, {"zone": "a"}, kubelet="v1.33.0"),
        node("down", {GPU: "4"}, {"zone": "b"}, ready="False"),
    ]


def _cluster() -> list[Obj]:
    gpu = device_class("gpu.example.com", GPU, ['device.driver == "gpu.example.com"'])
    gpu["metadata"]["annotations"] = {ALIGN_BY_ANNOTATION: "resource.kubernetes.io/pcieRoot"}
    devices = [
        device(f"gpu-{i}", {"resource.kubernetes.io/pcieRoot": {"string": f"pci{i // 2}"}}) for i in range(4)
    ]
    slices = [resource_slice(f"{n}-gpu", copy.deepcopy(devices), node_name=n) for n in ("dra-a", "dra-b")]
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "default", "labels": {"team": "ml"}},
    }
    return [*_nodes(), gpu, *slices, namespace]


names = st.sampled_from([GPU, "deviceclass.resource.kubernetes.io/gpu.example.com", "cpu", "memory"])
quantities = {
    GPU: st.integers(1, 3),
    "cpu": st.sampled_from(["100m", "2", "7"]),
    "memory": st.sampled_from(["1Gi", "30Gi"]),
}


@st.composite
def pods(draw: st.DrawFn, name: str, bound: bool = False) -> Obj:
    def container(i: int, init: bool = False) -> Obj:
        requests: dict[str, Any] = {}
        for res in draw(st.lists(names, max_size=3, unique=True)):
            key = "cpu" if res == "cpu" else "memory" if res == "memory" else GPU
            requests[res] = str(draw(quantities[key]))
        c: Obj = {"name": f"{'i' if init else 'c'}{i}", "resources": {"requests": requests}}
        if init and draw(st.booleans()):
            c["restartPolicy"] = "Always"
        if draw(st.integers(0, 5)) == 0:
            c["ports"] = [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}]
        return c

    spec: Obj = {"containers": [container(i) for i in range(draw(st.integers(1, 2)))]}
    if draw(st.booleans()):
        spec["initContainers"] = [container(i, init=True) for i in range(draw(st.integers(1, 2)))]
    if draw(st.booleans()):
        spec["nodeSelector"] = {"zone": draw(st.sampled_from(["a", "b"]))}
    if draw(st.booleans()):
        spec["tolerations"] = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    if draw(st.integers(0, 3)) == 0:
        term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
    if draw(st.integers(0, 3)) == 0:
        spec["overhead"] = {"cpu": draw(st.sampled_from(["500m", "6"]))}
    if draw(st.integers(0, 3)) == 0:
        spec["resources"] = {"requests": {"cpu": "3"}}
    placement(draw, spec)
    spec["priority"] = draw(st.integers(0, 10))
    spec["schedulerName"] = "draxr"
    meta: Obj = {"name": name, "namespace": "default", "uid": f"uid-{name}", "generateName": "p-"}
    if draw(st.booleans()):
        meta["labels"] = {"app": draw(apps)}
    if draw(st.booleans()):
        meta["annotations"] = {ALIGN_ANNOTATION: draw(st.sampled_from(["required", "preferred", "none"]))}
    pod: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": "Pending"},
    }
    if bound and draw(st.integers(0, 3)) == 0:  # pending, nominated to a node (issue 21)
        pod["status"]["nominatedNodeName"] = draw(st.sampled_from(["dra-a", "dra-b", "plugin"]))
        spec["priority"] = 10
    elif bound:
        spec["nodeName"] = draw(st.sampled_from(["dra-a", "dra-b", "plugin"]))
        pod["status"]["phase"] = draw(st.sampled_from(["Running", "Succeeded"]))
    return pod


apps = st.sampled_from(["infer", "train"])


def placement(draw: st.DrawFn, spec: Obj) -> None:
    """Pod affinity or anti-affinity (a namespace selector at times) and topology spread (issue 21)."""
    if draw(st.integers(0, 2)) == 0:
        term: Obj = {
            "labelSelector": {"matchLabels": {"app": draw(apps)}},
            "topologyKey": draw(st.sampled_from(["kubernetes.io/hostname", "zone"])),
        }
        if draw(st.booleans()):
            term["namespaceSelector"] = {"matchLabels": {"team": "ml"}}
        kind = draw(st.sampled_from(["podAffinity", "podAntiAffinity"]))
        if draw(st.booleans()):
            rules: Obj = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        else:
            rules = {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "podAffinityTerm": term}]
            }
        spec.setdefault("affinity", {})[kind] = rules
    if draw(st.integers(0, 2)) == 0:
        when = draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]))
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "zone",
                "whenUnsatisfiable": when,
                "labelSelector": {"matchLabels": {"app": draw(apps)}},
            }
        ]


def _outcome(d: Decision) -> tuple[Any, ...]:
    return (d.status, d.node, d.message, d.device_keys(), d.mappings, d.requests, d.reasons, d.constraints)


def _state(objects: list[Obj], trimmed: bool) -> ClusterState:
    state = ClusterState()
    for obj in objects:
        obj = noisy(obj)
        state.apply(obj["kind"], trim.for_kind(obj["kind"])(obj) if trimmed else obj)
    return state


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(running=st.lists(pods("running", bound=True), max_size=3), pending=pods("pending"))
def test_the_engine_decides_the_same_on_trimmed_objects(running: list[Obj], pending: Obj) -> None:
    for i, p in enumerate(running):
        p["metadata"].update(name=f"running-{i}", uid=f"uid-running-{i}")
    objects = _cluster() + running
    raw = Scheduler(_state(objects, trimmed=False)).schedule(noisy(pending))
    kept = Scheduler(_state(objects, trimmed=True)).schedule(trim.for_kind("Pod")(noisy(pending)))
    assert _outcome(kept) == _outcome(raw)


@settings(max_examples=40, deadline=None)
@given(pod=pods("p", bound=True), claim_name=st.sampled_from([None, "p-extended-resources-abcde"]))
def test_the_workers_reads_of_a_cached_pod_are_the_same(pod: Obj, claim_name: str | None) -> None:
    if claim_name:
        pod["status"]["extendedResourceClaimStatus"] = {
            "resourceClaimName": claim_name,
            "requestMappings": [],
        }
    pod["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "m"}
    ]
    pod["spec"]["resourceClaims"] = [{"name": "draxr-c0", "resourceClaimTemplateName": "draxr-gpu-abc"}]
    raw = noisy(pod)
    kept = trim.for_kind("Pod")(copy.deepcopy(raw))
    other_claim = {"metadata": {"name": "p-extended-resources-zzzzz"}}
    worker = Worker(
        KubeClient(None), ClusterCache.from_objects([]), WorkerConfig(), WorkerMetrics(CollectorRegistry())
    )
    try:
        for read in (
            pod_is_done,
            special_claim_name,
            pod_scheduled_condition,
            templates_used,
            worker.is_ours,
            lambda p: superseded(p, other_claim),
        ):
            assert read(kept) == read(raw)
    finally:
        worker.stop()


def test_a_pod_keeps_what_preemption_reads() -> None:
    """Issue 21: labels (PDB selectors), preemptionPolicy, startTime, nominatedNodeName and the
    DisruptionTarget condition reach the worker's cache."""
    raw = realistic_pod(1, "node-1")
    raw["spec"]["preemptionPolicy"] = "Never"
    raw["status"].update({"startTime": "2026-01-01T00:00:00Z", "nominatedNodeName": "node-2"})
    raw["status"]["conditions"].append(
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler", "message": "m"}
    )
    kept = trim.pod(copy.deepcopy(raw))
    assert kept["metadata"]["labels"] == raw["metadata"]["labels"]
    assert kept["spec"]["preemptionPolicy"] == "Never"
    assert kept["status"]["startTime"] == "2026-01-01T00:00:00Z"
    assert kept["status"]["nominatedNodeName"] == "node-2"
    assert {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": "m",
    } in (kept["status"]["conditions"])


def test_services_and_workload_controllers_keep_only_their_selector() -> None:
    """PodTopologySpread's system defaults read a selector; a ReplicaSet's pod template (most of
    its size) and a Service's ports are dropped."""
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": "web",
            "namespace": "ns",
            "uid": "u",
            "resourceVersion": "7",
            "labels": {"a": "b"},
        },
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"spec": {"containers": []}},
        },
        "status": {"replicas": 3},
    }
    assert trim.for_kind("ReplicaSet")(rs) == {
        "kind": "ReplicaSet",
        "metadata": {"name": "web", "namespace": "ns", "uid": "u", "resourceVersion": "7"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
    }
    svc = {"kind": "Service", "metadata": {"name": "s", "namespace": "ns"}, "spec": {"ports": [{"port": 80}]}}
    assert trim.for_kind("Service")(svc) == {
        "kind": "Service",
        "metadata": {"name": "s", "namespace": "ns"},
        "spec": {},
    }


@pytest.mark.parametrize(
    ("shape", "kept"),
    [
        (trim.TrimmedPodSpec, {*trim.POD_SPEC, "volumes", "initContainers", "containers"}),
        (trim.TrimmedPodStatus, {*trim.POD_STATUS, "conditions"}),
        (trim.TrimmedContainer, {*trim.CONTAINER, "ports"}),
        (trim.TrimmedPodMetadata, {*trim.POD_METADATA, "annotations"}),
        (trim.HostPort, set(trim.HOST_PORT)),
        (trim.TrimmedCondition, set(trim.POD_CONDITION)),
    ],
)
def test_each_trimmed_shape_names_exactly_the_fields_kept(shape: type, kept: set[str]) -> None:
    assert set(shape.__annotations__) == kept
