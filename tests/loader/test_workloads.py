"""Workloads as the pods they would make, and the identity of objects read from files."""

import copy
import uuid
from typing import Any

import pytest

from webhook.core.api.objects import Obj
from webhook.loader import (
    POD_TEMPLATES,
    LoadError,
    expand_workloads,
    load_paths,
    template_path,
    template_pod,
    with_identity,
)

from .test_documents import GOOD


def uid_of(key: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, key))


def test_deployment_becomes_named_pods_from_its_template() -> None:
    objects = [i.obj for i in load_paths([GOOD / "nested" / "deeper" / "04-workloads.yml"])]
    before = copy.deepcopy(objects)
    pods = expand_workloads(objects)
    assert objects == before
    assert [p["metadata"]["name"] for p in pods] == ["demo-0", "demo-1", "train-0"]
    demo0 = pods[0]
    assert demo0 == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "demo-0",
            "namespace": "team-a",
            "labels": {"app": "demo"},
            "annotations": {"note": "kept"},
            "uid": uid_of("team-a/demo-0"),
        },
        "spec": {"containers": [{"name": "app", "resources": {"requests": {"example.com/gpu": "1"}}}]},
    }
    assert pods[2]["metadata"]["namespace"] == "default"
    demo0["spec"]["containers"][0]["name"] = "changed"
    assert objects == before  # pods do not share structure with the input


@pytest.mark.parametrize(
    ("api_version", "kind", "spec", "count"),
    [
        ("apps/v1", "Deployment", {}, 1),
        ("apps/v1", "ReplicaSet", {"replicas": 3}, 3),
        ("apps/v1", "StatefulSet", {"replicas": 0}, 0),
        ("batch/v1", "Job", {"parallelism": 2, "completions": 10}, 2),
        ("batch/v1", "Job", {"replicas": 5}, 1),
    ],
)
def test_workload_pod_counts(api_version: str, kind: str, spec: dict[str, Any], count: int) -> None:
    workload = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "w"}, "spec": spec}
    pods = expand_workloads([workload])
    assert [p["metadata"]["name"] for p in pods] == [f"w-{i}" for i in range(count)]
    assert all(p["kind"] == "Pod" and p["spec"] == {} for p in pods)


def test_other_objects_pass_through_in_order_with_identity() -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    kept = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "q", "namespace": "ns", "uid": "fixed"}}
    old = {"apiVersion": "extensions/v1beta1", "kind": "Deployment", "metadata": {"name": "d"}}
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d2"}, "spec": {"replicas": 1}}
    inputs = [node, pod, dep, kept, old]
    before = copy.deepcopy(inputs)
    out = expand_workloads(inputs)
    assert inputs == before
    assert [(o["kind"], o["metadata"]["name"]) for o in out] == [
        ("Node", "n1"),
        ("Pod", "p"),
        ("Pod", "d2-0"),
        ("Pod", "q"),
        ("Deployment", "d"),
    ]
    assert out[0]["metadata"] == {"name": "n1", "uid": uid_of("Node/n1")}
    assert out[1]["metadata"] == {"name": "p", "namespace": "default", "uid": uid_of("default/p")}
    assert out[3]["metadata"] == kept["metadata"]
    assert out[4]["metadata"]["uid"] == uid_of("default/d")


def test_uids_are_deterministic() -> None:
    objects = [i.obj for i in load_paths([GOOD])]
    first = expand_workloads(objects)
    assert first == expand_workloads(objects)
    uids = [o["metadata"]["uid"] for o in first]
    assert len(set(uids)) == len(uids)


def test_invalid_count_raises_load_error() -> None:
    bad = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"replicas": "2"},
    }
    with pytest.raises(
        LoadError, match=r"^<objects>: document 1: spec.replicas: must be a non-negative integer"
    ):
        expand_workloads([{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}, bad])


@pytest.mark.parametrize(
    ("obj", "pod"),
    [
        (
            {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": []}},
            {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": []}},
        ),
        (
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "spec": {"template": {"metadata": {"x": 1}, "spec": {}}},
            },
            {"metadata": {"x": 1}, "spec": {}},
        ),
        ({"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": {"template": {}}}, {"spec": {}}),
        (
            {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}},
            },
            {"spec": {"containers": [{"name": "c"}]}},
        ),
        ({"apiVersion": "batch/v1", "kind": "CronJob", "spec": {"jobTemplate": []}}, None),
        ({"apiVersion": "v1", "kind": "Node"}, None),
        ({"apiVersion": "extensions/v1beta1", "kind": "Deployment", "spec": {"template": {}}}, None),
    ],
)
def test_the_pod_template_of_every_workload_kind(obj: Any, pod: Any) -> None:
    assert template_pod(obj) == pod
    if pod is not None:
        path = template_path(obj)
        assert path == POD_TEMPLATES[(obj["apiVersion"], obj["kind"])]
        node = obj
        for key in path or ():
            node = node[key]
        made = template_pod(obj)
        if "spec" in node and made is not None:
            assert node["spec"] is made["spec"]  # not a copy: callers patch in place


def test_with_identity_is_what_expand_workloads_gives_an_object_that_is_no_workload() -> None:
    quota: Obj = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"}}
    dc: Obj = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"}}
    for obj in (quota, dc):
        before = copy.deepcopy(obj)
        made = with_identity(obj)
        assert obj == before  # the input is left alone
        assert made == expand_workloads([obj])[0]
        assert made["metadata"]["uid"] == with_identity(obj)["metadata"]["uid"]
    assert with_identity(quota)["metadata"]["namespace"] == "default"
    assert "namespace" not in with_identity(dc)["metadata"]
