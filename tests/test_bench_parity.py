"""``bench/parity.py`` (a benchmark, no module of the package: so here, not in a mirror): the parts
that need no control plane. The stream draws unbound claims of the ``WaitForFirstConsumer`` class
for some pods; the provisioner binds a claim once a scheduler selected its node, to a volume of that
node's zone, and leaves other claims alone (and says why when it cannot bind); the binding check
flags a claim selected for another node, a volume in another zone and a zone the class does not
allow."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.parity import (
    ALLOWED_ZONES,
    SELECTED_NODE,
    VOLUME_CLASS,
    VOLUME_ZONE,
    WFFC_CLASS,
    ZONE,
    Provisioner,
    cluster,
    create_volume,
    provisioned_problems,
    snapshot,
    stream,
)
from e2e.controlplane.launcher import wait_until
from e2e.emulator import Emulator
from webhook.core.api.objects import Obj
from webhook.kube.client import KubeClient
from webhook.kube.resources import NODES, PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES


@pytest.fixture
def client() -> Iterator[KubeClient]:
    with Emulator() as em:
        yield KubeClient(em.api_client(), qps=10_000, burst=10_000)


def test_the_stream_mounts_static_and_wait_for_first_consumer_claims() -> None:
    pods = stream(1, 400)
    classes = [p for p in pods if (p["metadata"].get("annotations") or {}).get(VOLUME_CLASS) == WFFC_CLASS]
    assert 20 <= len(classes) <= 60  # about a tenth
    for p in classes:
        assert p["spec"]["volumes"] == [
            {"name": "data", "persistentVolumeClaim": {"claimName": f"data-{p['metadata']['name']}"}}
        ]
    [sc] = [o for o in cluster(1, 8) if o["kind"] == "StorageClass"]
    assert sc["volumeBindingMode"] == "WaitForFirstConsumer"
    assert sc["allowedTopologies"][0]["matchLabelExpressions"][0]["values"] == list(ALLOWED_ZONES)


def _node(client: KubeClient, name: str, zone: str) -> None:
    client.create(NODES, {"metadata": {"name": name, "labels": {ZONE: zone}}})


def _pod(name: str) -> Obj:
    return {"metadata": {"name": name, "annotations": {VOLUME_CLASS: WFFC_CLASS}}, "spec": {}}


def _select(client: KubeClient, claim: str, node: str) -> Provisioner:
    """The claim's node selected (as a scheduler's PreBind does) while the provisioner runs, until
    it has provisioned one claim."""
    with Provisioner(client, "default") as provisioner:
        patch = {"metadata": {"annotations": {SELECTED_NODE: node}}}
        client.patch(PERSISTENT_VOLUME_CLAIMS, claim, patch, namespace="default")
        wait_until("the claim provisioned", lambda: provisioner.provisioned == 1, 10)
    return provisioner


def test_a_static_volume_is_made_bound_to_the_pods_claim_in_its_zone(client: KubeClient) -> None:
    create_volume(client, "default", {"metadata": {"name": "p0", "annotations": {VOLUME_ZONE: "zone-2"}}})
    claim = client.get(PERSISTENT_VOLUME_CLAIMS, "data-p0", "default")
    volume = client.get(PERSISTENT_VOLUMES, claim["spec"]["volumeName"])
    assert (claim["spec"]["storageClassName"], claim["status"]["phase"]) == ("", "Bound")
    assert claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
    assert volume["spec"]["claimRef"] == {"namespace": "default", "name": "data-p0"}
    assert (volume["metadata"]["labels"][ZONE], volume["status"]["phase"]) == ("zone-2", "Bound")
    create_volume(client, "default", {"metadata": {"name": "p1"}})  # no volume: nothing made
    assert client.list(PERSISTENT_VOLUME_CLAIMS, "default")["items"] == [claim]


def test_the_provisioner_binds_a_selected_claim_to_a_volume_of_the_nodes_zone(client: KubeClient) -> None:
    _node(client, "n1", "zone-1")
    create_volume(client, "default", _pod("p1"))
    create_volume(client, "default", _pod("p2"))  # never selected: left alone
    provisioner = _select(client, "data-p1", "n1")
    claim = client.get(PERSISTENT_VOLUME_CLAIMS, "data-p1", "default")
    volume = client.get(PERSISTENT_VOLUMES, claim["spec"]["volumeName"])
    assert claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
    assert claim["status"]["phase"] == "Bound"
    assert volume["metadata"]["labels"][ZONE] == "zone-1"
    assert volume["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
    assert volume["status"]["phase"] == "Bound"
    assert not client.get(PERSISTENT_VOLUME_CLAIMS, "data-p2", "default")["spec"].get("volumeName")
    assert provisioner.errors == []


def test_the_check_flags_another_node_another_zone_and_a_zone_not_allowed(client: KubeClient) -> None:
    _node(client, "n1", "zone-1")
    _node(client, "n2", "zone-2")
    create_volume(client, "default", _pod("p1"))
    _select(client, "data-p1", "n1")
    objects = snapshot(client)
    nodes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Node"}
    pod = _pod("p1")
    assert provisioned_problems(objects, "default", pod, nodes["n1"]) == []
    assert provisioned_problems(objects, "default", pod, nodes["n2"]) == [
        "p1: on n2, its claim selected for n1",
        "p1: on n2 in zone-2, its volume in zone-1",
        f"p1: on n2 in zone-2, which {WFFC_CLASS} does not allow",
    ]


def test_a_provisioner_that_cannot_bind_says_why_instead_of_dying_silently(client: KubeClient) -> None:
    client.create(NODES, {"metadata": {"name": "bare", "labels": {"k": "v"}}})  # no zone: no volume
    create_volume(client, "default", _pod("p1"))
    with Provisioner(client, "default") as provisioner:
        patch = {"metadata": {"annotations": {SELECTED_NODE: "bare"}}}
        client.patch(PERSISTENT_VOLUME_CLAIMS, "data-p1", patch, namespace="default")
        wait_until("the provisioner's error", lambda: bool(provisioner.errors), 10)
    assert provisioner.errors == [f"provisioner: KeyError: '{ZONE}'"]
    assert provisioner.provisioned == 0
