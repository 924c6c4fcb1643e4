"""Faults of the real components under the deployed draxr (``faults.py``), each under a stream of
extended-resource pods; every webhook replica down with ``failurePolicy: Fail``; a lost node and a
deleted one. Judged by ``faults.counts``: from the API server's audit log no pod bound twice and no
write by a fenced worker, from the claims no device in two claims, freed under a pod or leaked."""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

import pytest

from webhook.identity.names import WEBHOOK

from ..chart import NAMESPACE
from ..kubelet_logs import prepared_twice
from ..local import KEP_DEVICE_CLASS_NAME
from .faults import FAULTS, create_until_answered, nothing_wrong, wait_all_bound
from .row import ChartRow
from .stream import stream_pod

Obj = dict[str, Any]
NS = "faults"
IMPLICIT_GPU = f"deviceclass.resource.kubernetes.io/{KEP_DEVICE_CLASS_NAME}"


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_stream_of_pods_through_the_fault_binds_every_pod_once(row: ChartRow, fault: str) -> None:
    row.namespace(NS)
    run = uuid.uuid4().hex[:6]  # names of this run only: the audit log keeps earlier runs' bindings
    names = [f"stream-{run}-{i}" for i in range(8)]
    refused: list[str] = []
    stopped: list[str] = []

    def stream() -> None:
        try:
            for name in names:
                create_until_answered(row, NS, name, refused)
        except Exception as e:  # said by the assertion below, never a thread dying unseen
            stopped.append(f"{type(e).__name__}: {e}")

    creator = threading.Thread(target=stream)
    creator.start()
    try:
        findings = FAULTS[fault](row)
    finally:
        creator.join(300)
    assert findings == []
    assert not creator.is_alive()
    assert stopped == []
    assert refused == []
    wait_all_bound(row, NS, names, f"after {fault}", 180)
    events = row.cluster.cp.audit_events()
    bindings = {
        e["objectRef"]["name"]
        for e in events
        if e["objectRef"].get("subresource") == "binding" and e["objectRef"].get("namespace") == NS
    }
    assert set(names) <= bindings  # the record holds every binding: the checks below see them all
    nothing_wrong(row, [NS])


def test_every_webhook_replica_down_refuses_creates_clearly_then_admission_resumes(row: ChartRow) -> None:
    """failurePolicy: Fail. With no webhook replica a create of a pod asking for example.com/gpu is
    refused with the API server's message naming draxr's hook; once the replicas are back admission
    works again, nothing else restarted."""
    row.namespace(NS)
    name = f"refused-{uuid.uuid4().hex[:6]}"
    row.kubectl("-n", NAMESPACE, "scale", "deployment", WEBHOOK, "--replicas=0")
    try:
        row.kubectl(
            "-n",
            NAMESPACE,
            "wait",
            "--for=delete",
            "pod",
            "-l",
            "app.kubernetes.io/component=webhook",
            "--timeout=120s",
        )
        client = row.cluster.cp.client()
        status, body = client.post(f"/api/v1/namespaces/{NS}/pods", stream_pod(name, NS))
        assert status == 500, (status, body)
        assert "failed calling webhook" in body["message"], body
        assert "draxr" in body["message"], body
    finally:
        row.kubectl("-n", NAMESPACE, "scale", "deployment", WEBHOOK, "--replicas=2")
    row.kubectl("-n", NAMESPACE, "rollout", "status", "deployment", WEBHOOK, "--timeout=180s", timeout=200)
    refused: list[str] = []
    create_until_answered(row, NS, name, refused)
    assert refused == []


def _deployment(name: str, image: str) -> Obj:
    """Two replicas of one GPU each that leave an unreachable node after 2 s (the default is 300 s)."""
    labels = {"app": name}
    tolerations = [
        {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2}
        for key in ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")
    ]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "tolerations": tolerations,
                    "containers": [
                        {
                            "name": "app",
                            "image": image,
                            "imagePullPolicy": "Never",
                            "command": ["sleep", "3600"],
                            # The class's implicit name: DRA devices on both nodes, so wherever a
                            # replica runs it holds a special claim (example.com/gpu is the device
                            # plugin's on e2e-node-b).
                            "resources": {"limits": {IMPLICIT_GPU: "1"}},
                        }
                    ],
                },
            },
        },
    }


def _deployed(row: ChartRow, app: str) -> tuple[dict[str, Obj], str, str, set[str]]:
    """Deployment ``app`` (``_deployment``) rolled out: its pods by uid, the node of one of them
    (the node to lose), the other node, and the special claims of the pods on the first."""
    nodes, chart = row.cluster.nodes, row.cluster.chart
    assert nodes is not None
    assert chart is not None
    row.namespace(NS)
    row.kubectl("apply", "-f", "-", stdin=json.dumps(_deployment(app, chart.workload)))
    row.kubectl("-n", NS, "rollout", "status", f"deployment/{app}", "--timeout=180s", timeout=200)
    pods = {p["metadata"]["uid"]: p for p in row.get("-n", NS, "pods", "-l", f"app={app}")["items"]}
    lost = next(iter(pods.values()))["spec"]["nodeName"]
    [other] = [n for n in nodes.names if n != lost]
    claims = {
        p["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
        for p in pods.values()
        if p["spec"]["nodeName"] == lost
    }
    return pods, lost, other, claims


@pytest.mark.timeout(900)  # the node lifecycle controller's grace period (50 s) and two restarts
def test_a_lost_node_s_pods_are_replaced_elsewhere_and_released_when_it_returns(row: ChartRow) -> None:
    """A kubelet stopped past the eviction timeout: the node lifecycle controller taints the node,
    the pods are marked for deletion, their replacements run on the other node and never on the
    lost one; the kubelet back, the old pods go, their claims with them, and no driver was asked to
    prepare a claim it had prepared already."""
    cluster, nodes = row.cluster, row.cluster.nodes
    assert nodes is not None
    old, lost, other, lost_claims = _deployed(row, "lost")
    t0 = time.monotonic()
    nodes.stop_kubelet(lost)
    try:

        def tainted() -> bool:
            taints = row.get("node", lost)["spec"].get("taints") or []
            return any(t["key"] == "node.kubernetes.io/unreachable" for t in taints)

        cluster.cp.wait_for(f"node {lost} not tainted unreachable", tainted, 180)
        print(f"{time.monotonic() - t0:.0f}s: {lost} tainted unreachable")

        def replaced() -> bool:
            pods = row.get("-n", NS, "pods", "-l", "app=lost")["items"]
            fresh = [p for p in pods if p["metadata"]["uid"] not in old]
            assert all(p["spec"].get("nodeName") != lost for p in fresh), (
                "a replacement went to the lost node"
            )
            gone_or_going = all(
                p["metadata"].get("deletionTimestamp")
                for p in pods
                if p["metadata"]["uid"] in old and p["spec"]["nodeName"] == lost
            )
            running = [p for p in fresh if p["status"].get("phase") == "Running"]
            return gone_or_going and len(running) == 2

        cluster.cp.wait_for("the lost node's pods not replaced on the other node", replaced, 240)
        print(f"{time.monotonic() - t0:.0f}s: replaced on {other}")
        assert all(
            p["spec"]["nodeName"] == other
            for p in row.get("-n", NS, "pods", "-l", "app=lost")["items"]
            if p["metadata"]["uid"] not in old
        )
    finally:
        nodes.start_kubelet(lost, nodes.kubelet, f"v{cluster.cp.version}")

    def released() -> bool:
        pods = row.get("-n", NS, "pods", "-l", "app=lost")["items"]
        claims = {c["metadata"]["name"] for c in row.get("-n", NS, "resourceclaims")["items"]}
        on_lost = [p for p in pods if p["metadata"]["uid"] in old and p["spec"]["nodeName"] == lost]
        return not on_lost and not (lost_claims & claims)

    print(f"{time.monotonic() - t0:.0f}s: {lost}'s kubelet back")
    cluster.cp.wait_for("the lost node's pods or claims not gone after it returned", released, 180)
    print(f"{time.monotonic() - t0:.0f}s: the old pods and their claims gone")
    assert prepared_twice(nodes.prepare_log) == []
    nothing_wrong(row, [NS])


@pytest.mark.timeout(900)
def test_a_deleted_node_s_pods_are_collected_and_their_claims_released(row: ChartRow) -> None:
    """A kubelet stopped and its Node object deleted meanwhile: pod garbage collection removes the
    pods bound there, draxr releases their special claims, the replacements run on the other node.
    The kubelet back, the Node is registered anew, its driver publishes again (as its DaemonSet
    would restart it) and nothing is prepared twice."""
    cluster, nodes = row.cluster, row.cluster.nodes
    assert nodes is not None
    old, lost, other, lost_claims = _deployed(row, "deleted")
    nodes.stop_kubelet(lost)
    try:
        row.kubectl("delete", "node", lost, "--wait=true", timeout=120)

        def collected_and_replaced() -> bool:
            pods = row.get("-n", NS, "pods", "-l", "app=deleted")["items"]
            claims = {c["metadata"]["name"] for c in row.get("-n", NS, "resourceclaims")["items"]}
            on_lost = [p for p in pods if p["spec"].get("nodeName") == lost]
            running = [
                p for p in pods if p["metadata"]["uid"] not in old and p["status"].get("phase") == "Running"
            ]
            return not on_lost and not (lost_claims & claims) and len(running) >= 1

        cluster.cp.wait_for(
            "the deleted node's pods not collected or not replaced", collected_and_replaced, 240
        )
        assert all(
            p["spec"]["nodeName"] == other
            for p in row.get("-n", NS, "pods", "-l", "app=deleted")["items"]
            if p["spec"].get("nodeName")
        )
    finally:
        nodes.start_kubelet(lost, nodes.kubelet, f"v{cluster.cp.version}")
    assert prepared_twice(nodes.prepare_log) == []
    nothing_wrong(row, [NS])
