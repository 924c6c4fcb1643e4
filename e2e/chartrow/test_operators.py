"""What operators live through, on the deployed draxr (the row: ``conftest.py``): the worker leader's
pod force-deleted, a webhook pod deleted under 500 creates, ``helm upgrade`` to a second image tag,
the leader's node drained, the serving certificate renewed in the cluster with a short validity.
Each under a stream of pods; bindings and leadership counted from the API server's audit log."""

from __future__ import annotations

import base64
import datetime as dt
import subprocess
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from webhook.identity.names import CA_SECRET, TLS_SECRET, WEBHOOK, WEBHOOK_CONFIGURATION
from webhook.identity.pki import Issued
from webhook.kube.leader import LeaderElection

from ..chart import NAMESPACE, find_helm, helm_release, split_ref
from .failover import available, force_delete_leader, leader
from .faults import nothing_wrong
from .row import ChartRow
from .stream import Stream, stream_pod

Obj = dict[str, Any]
NS = "operators"
WEBHOOK_PODS = "app.kubernetes.io/component=webhook"


def _run_id() -> str:
    return uuid.uuid4().hex[:6]  # names of this run only: the audit log keeps earlier runs' bindings


def _stream(row: ChartRow, what: str) -> Stream:
    row.namespace(NS)
    return Stream(row.cluster.cp.client(), NS, f"{what}-{_run_id()}").start()


def _settled(row: ChartRow, stream: Stream) -> None:
    """Every pod of the stopped stream bound, no admission failed, and nothing wrong
    (``faults.counts``: no device in two claims or freed under a pod or leaked, no pod bound twice,
    no write by a fenced worker)."""
    row.cluster.cp.wait_for(
        "pods of the stream never bound",
        lambda: stream.unbound() == [],
        120,
        detail=lambda: f"unbound: {stream.unbound()}",
    )
    assert stream.failed == []
    nothing_wrong(row, [NS])


def test_the_leader_s_pod_force_deleted_the_follower_binds_within_lease_and_retry(row: ChartRow) -> None:
    stream = _stream(row, "failover")
    try:
        seconds = force_delete_leader(row, stream)
    finally:
        stream.stop()
    election = LeaderElection()
    print(f"failover: a pod bound by the follower {seconds:.1f}s after the leader's pod was deleted")
    assert seconds <= election.lease_duration + election.retry_period + 5
    _settled(row, stream)


def test_a_webhook_pod_deleted_under_500_creates_fails_no_admission(row: ChartRow) -> None:
    """At least 500 pods created by four clients while a webhook pod is deleted (after the 50th),
    until it is gone and its replacement ready. The pods are held by a scheduling gate: only
    admission sees them. The deleted pod leaves the Service's endpoints while its preStop sleep
    keeps it answering, so no review meets a closed port."""
    row.namespace(NS)
    client = row.cluster.cp.client()
    run = _run_id()
    failed: list[str] = []
    done = [0]
    lock = threading.Lock()
    victim = row.get("-n", NAMESPACE, "pods", "-l", WEBHOOK_PODS)["items"][0]["metadata"]["name"]
    start_deleting, back = threading.Event(), threading.Event()
    gone_at: list[int] = []  # creates answered when the deleted pod was gone

    def create() -> None:
        while True:
            with lock:
                if done[0] >= 500 and back.is_set():
                    return
                i = done[0] + len(failed)
            name = f"admit-{run}-{threading.get_ident() % 10000}-{i}"
            try:
                status, body = client.post(f"/api/v1/namespaces/{NS}/pods", stream_pod(name, NS, gated=True))
            except OSError as e:
                status, body = 0, {"message": str(e)}
            with lock:
                if status != 201:
                    failed.append(f"{name}: {status} {body.get('message', body)}")
                    return
                done[0] += 1
                if done[0] == 50:
                    start_deleting.set()

    def delete_victim() -> None:
        try:
            start_deleting.wait(120)
            row.kubectl("-n", NAMESPACE, "delete", "pod", victim, "--wait=true", timeout=120)
            with lock:
                gone_at.append(done[0])
            row.kubectl(
                "-n", NAMESPACE, "rollout", "status", "deployment", WEBHOOK, "--timeout=180s", timeout=200
            )
        finally:
            back.set()

    deleter = threading.Thread(target=delete_victim)
    deleter.start()
    with ThreadPoolExecutor(4) as pool:
        for f in [pool.submit(create) for _ in range(4)]:
            f.result()
    deleter.join(200)
    assert failed == [], failed[:5]
    assert gone_at, "the webhook pod was not deleted"
    assert gone_at[0] < done[0], "no create after the webhook pod was gone"
    print(f"{done[0]} creates, 0 failed admissions; the deleted webhook pod gone after {gone_at[0]}")


def _secrets(row: ChartRow) -> dict[str, Obj]:
    return {n: row.get("-n", NAMESPACE, "secret", n)["data"] for n in (CA_SECRET, TLS_SECRET)}


def _ca_bundles(row: ChartRow) -> set[str]:
    bundles = set()
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        for hook in row.get(kind, WEBHOOK_CONFIGURATION)["webhooks"]:
            bundles.add(hook["clientConfig"]["caBundle"])
    return bundles


def _upgrade(row: ChartRow, image: str, *sets: str) -> None:
    """``helm upgrade`` with the chart's defaults but the image (and ``sets``), until both
    Deployments run the new template."""
    helm = find_helm()
    assert helm is not None
    argv = helm_release(helm, "upgrade", image, row.cluster.kubeconfig, *sets)
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, f"helm upgrade: {done.stderr}"
    row.cluster.cp.wait_for("draxr not available after the upgrade", lambda: available(row), 240)


def test_helm_upgrade_to_a_second_tag_under_a_stream_keeps_admission_binding_and_certificates(
    row: ChartRow,
) -> None:
    chart, nodes = row.cluster.chart, row.cluster.nodes
    assert chart is not None
    assert nodes is not None
    repo, tag = split_ref(chart.image)
    second = f"{repo}:{tag}-second"
    nodes.tag_image(chart.image, second)
    certs, bundles = _secrets(row), _ca_bundles(row)
    stream = _stream(row, "upgrade")
    try:
        _upgrade(row, second)
        for name in ("draxr-webhook", "draxr-worker"):
            [c] = row.get("-n", NAMESPACE, "deployment", name)["spec"]["template"]["spec"]["containers"]
            assert c["image"] == second
    finally:
        stream.stop()
    assert stream.failed == []
    assert len(stream.created) >= 10, "the stream made too few pods to span the upgrade"
    _settled(row, stream)
    assert _secrets(row) == certs
    assert _ca_bundles(row) == bundles


def _draxr_pods(row: ChartRow) -> str:
    """Where draxr's pods are and how they are, for a failure."""
    return row.kubectl("-n", NAMESPACE, "get", "pods", "-o", "wide")


def test_the_leader_s_node_drained_draxr_comes_back_on_the_other_node(row: ChartRow) -> None:
    """``kubectl drain`` of the worker leader's node: the PDBs keep a ready replica of each
    Deployment all along, draxr comes back whole on the other node and binds there, never on the
    cordoned one."""
    nodes = row.cluster.nodes
    assert nodes is not None
    drained = leader(row)["spec"]["nodeName"]
    [other] = [n for n in nodes.names if n != drained]
    least = dict.fromkeys(("draxr-webhook", "draxr-worker"), 2)
    watching = threading.Event()

    def watch() -> None:  # the PDBs: at least one ready replica of each Deployment all along
        while not watching.is_set():
            for d in row.get("-n", NAMESPACE, "deployments")["items"]:
                name = d["metadata"]["name"]
                least[name] = min(least[name], d["status"].get("readyReplicas", 0))
            watching.wait(0.3)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        row.kubectl(
            "drain",
            drained,
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--force",  # bare pods of other tests, if any, go too
            "--timeout=240s",
            timeout=260,
        )
        row.cluster.cp.wait_for(
            "draxr not back on the other node", lambda: available(row), 240, detail=lambda: _draxr_pods(row)
        )
    finally:
        watching.set()
        watcher.join(30)
    try:
        assert min(least.values()) >= 1, least
        pods = row.get("-n", NAMESPACE, "pods")["items"]
        assert {p["spec"]["nodeName"] for p in pods if not p["metadata"].get("deletionTimestamp")} == {other}
        stream = _stream(row, "drained")
        try:
            row.cluster.cp.wait_for(
                "no pod bound after the drain",
                lambda: len(stream.bound) >= 3,
                120,
                detail=lambda: f"failed: {stream.failed[:3]}\n{_draxr_pods(row)}",
            )
        finally:
            stream.stop()
        bound_nodes = {p["spec"].get("nodeName") for p in row.get("-n", NS, "pods")["items"]}
        assert drained not in bound_nodes, "a pod went to the cordoned node"
    finally:
        row.kubectl("uncordon", drained)
    # The stream's last pods may wait for devices one node does not have: uncordoned, they bind.
    _settled(row, stream)


def _serving(row: ChartRow) -> Issued:
    data = row.get("-n", NAMESPACE, "secret", TLS_SECRET)["data"]
    return Issued.parse(base64.b64decode(data["tls.crt"]), base64.b64decode(data["tls.key"]))


def _loaded_serials(row: ChartRow) -> list[set[str]]:
    """For each webhook pod not terminating, the serials it logged reloading (hex, as
    runtime/tls.py logs them). A pod of an earlier rollout may still be in its preStop sleep, or
    gone by the time its log is asked for: it serves no review."""
    out = []
    for pod in row.get("-n", NAMESPACE, "pods", "-l", WEBHOOK_PODS)["items"]:
        if pod["metadata"].get("deletionTimestamp"):
            continue
        log = row.kubectl("-n", NAMESPACE, "logs", pod["metadata"]["name"])
        lines = [line for line in log.splitlines() if "reloaded: serial" in line]
        out.append({line.split("serial ", 1)[1].split(",")[0] for line in lines})
    return out


SHORT = dt.timedelta(minutes=3)


@pytest.mark.timeout(900)
def test_the_serving_certificate_renewed_in_the_cluster_under_reviews_fails_none(row: ChartRow) -> None:
    """``certs.validity=3m``, ``certs.renewBefore=2m`` (a window longer than the kubelet takes to
    update a Secret volume): the leader re-issues the 90-day certificate for 3 minutes at once,
    then renews that one a minute later; both reach every webhook pod while dry-run creates flow,
    none refused. Then draxr's defaults again."""
    # The image the Deployments run now (an earlier scenario may have moved it to a second tag):
    # only the certificate settings change here.
    webhook = row.get("-n", NAMESPACE, "deployment", "draxr-webhook")
    [container] = webhook["spec"]["template"]["spec"]["containers"]
    image = container["image"]
    row.namespace(NS)
    client = row.cluster.cp.client()
    failed: list[str] = []
    reviews = [0]
    stop = threading.Event()

    def review() -> None:
        while not stop.is_set():
            name = f"review-{_run_id()}"
            try:
                status, body = client.post(
                    f"/api/v1/namespaces/{NS}/pods", stream_pod(name, NS), dryRun="All"
                )
            except OSError as e:
                status, body = 0, {"message": str(e)}
            if status != 201:
                failed.append(f"{status} {body.get('message', body)}")
            reviews[0] += 1
            stop.wait(0.2)

    reviewer = threading.Thread(target=review)
    reviewer.start()
    issued: set[str] = set()  # the short-lived serials seen in the TLS Secret
    try:
        _upgrade(row, image, "certs.validity=3m", "certs.renewBefore=2m")

        def two_short_ones_loaded_everywhere() -> bool:
            cert = _serving(row).cert
            if cert.not_valid_after_utc - dt.datetime.now(dt.UTC) <= SHORT:
                issued.add(f"{cert.serial_number:x}")
            # The kubelet updates a Secret volume on its own period: a pod may skip a renewal.
            return all(len(loaded & issued) >= 2 for loaded in _loaded_serials(row))

        row.cluster.cp.wait_for(
            "two short-lived certificates not loaded by every webhook pod",
            two_short_ones_loaded_everywhere,
            480,
            detail=lambda: f"issued {sorted(issued)}, loaded {_loaded_serials(row)}",
        )
    finally:
        stop.set()
        reviewer.join(30)
    assert failed == [], failed[:5]
    print(f"{reviews[0]} reviews through {len(issued)} renewals, 0 failed")
    _upgrade(row, image)  # draxr's defaults again: the next pass renews for 90 days
    row.cluster.cp.wait_for(
        "the certificate not renewed for 90 days again",
        lambda: _serving(row).cert.not_valid_after_utc - dt.datetime.now(dt.UTC) > dt.timedelta(days=80),
        120,
    )
