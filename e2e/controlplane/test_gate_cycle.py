"""The DRAExtendedResource gate cycle on -> off -> on, on a real 1.36.3 cluster (issue 22), after
upstream's ``extendedResourceGateCycle`` (``test/e2e_dra/extendedresources_test.go``, 1.37.2): the gate
is flipped as an admin flips it, by restarting kube-apiserver, kube-controller-manager, kube-scheduler
(``ControlPlane.restart``) and the kubelets (``Nodes.set_gates``, ``stop_kubelet``, ``start_kubelet``)
with the other value, etcd and the fake runtimes running throughout. No draxr here: this is what the
cluster itself does, which draxr's modes follow (``e2e/test_rewrite.py``).

- on: a survivor and a to-delete pod ask for ``example.com/gpu: 1``; kube-scheduler makes their special
  claims; they run with their devices.
- off: the survivor keeps running and keeps its allocated claim; a new DeviceClass loses its
  ``extendedResourceName``; a probe pod asking for the name stays unschedulable without a special claim;
  the to-delete pod's claim is collected once it is deleted.
- on again: the survivor still runs, its container created once; a fresh pod gets a special claim and
  runs with its device; nothing was prepared twice.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..kubelet_logs import cdi_records, prepared_twice
from .host import HostState
from .launcher import DEFAULT_CONTROLLERS, ControlPlane, find_binaries, find_node_tools
from .nodes import CDI_KIND, DRIVER, EXTENDED_RESOURCE, NODE_CONTROLLERS, Nodes, NodeSpec
from .test_nodes import (
    IMAGE,
    NS,
    RESOURCE,
    Cluster,
    Obj,
    _create_pod,
    _phase,
    create_namespace,
    require_built,
)

GATE = "DRAExtendedResource"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    require_built(find_binaries("1.36"), find_node_tools())
    work = tmp_path_factory.mktemp("gate-cycle")
    before = HostState.now()
    with (
        ControlPlane(
            "1.36",
            gates={GATE: True},
            controllers=(*DEFAULT_CONTROLLERS, *NODE_CONTROLLERS),
            scheduler=True,
            workdir=work / "cp",
        ) as cp,
        Nodes(cp, [NodeSpec("n1", gpus=4)], workdir=work / "nodes") as nodes,
    ):
        c = Cluster(cp, nodes, before)
        create_namespace(c)
        _device_class(c, DRIVER)
        yield c


def _device_class(c: Cluster, name: str) -> Obj:
    expression = f'device.driver == "{DRIVER}"'
    status, body = c.admin.post(
        f"{RESOURCE}/deviceclasses",
        {
            "metadata": {"name": name},
            "spec": {
                "selectors": [{"cel": {"expression": expression}}],
                "extendedResourceName": EXTENDED_RESOURCE,
            },
        },
    )
    assert status == 201, body
    return body


def _gpu_pod(c: Cluster, name: str) -> None:
    gpu = {EXTENDED_RESOURCE: "1"}
    _create_pod(
        c,
        name,
        {
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "app", "image": IMAGE, "resources": {"requests": gpu, "limits": gpu}}],
        },
    )


def _special_claim(c: Cluster, pod: str) -> Obj:
    mapping = c.pod(pod)["status"]["extendedResourceClaimStatus"]
    status, claim = c.admin.get(f"{RESOURCE}/namespaces/{NS}/resourceclaims/{mapping['resourceClaimName']}")
    assert status == 200, claim
    return claim


def _runs_with_its_device(c: Cluster, pod: str) -> Obj:
    """Running, its container created once with the CDI ID of its special claim's device."""
    assert (c.pod(pod).get("status") or {}).get("phase") == "Running", pod
    claim = _special_claim(c, pod)
    [result] = claim["status"]["allocation"]["devices"]["results"]
    [record] = cdi_records(c.nodes.cdi_log, NS, pod)
    assert record["cdi_devices"] == [f"{CDI_KIND}={result['pool']}-{result['device']}"]
    return claim


def _flip(c: Cluster, on: bool) -> None:
    c.cp.restart({GATE: on})
    c.nodes.set_gates({GATE: on})
    c.nodes.stop_kubelet("n1")
    c.nodes.start_kubelet("n1", c.nodes.kubelet, f"v{c.cp.version}")


def _unschedulable(c: Cluster, pod: str) -> bool:
    status = c.pod(pod).get("status") or {}
    return any(
        (x["type"], x["status"], x.get("reason")) == ("PodScheduled", "False", "Unschedulable")
        for x in status.get("conditions") or []
    )


def test_pods_survive_the_gate_cycle(cluster: Cluster) -> None:
    c = cluster
    # on
    for pod in ("survivor", "to-delete"):
        _gpu_pod(c, pod)
        c.wait(f"{pod} is not Running", _phase(c, pod, "Running"))
        _runs_with_its_device(c, pod)
    survivor_claim = _special_claim(c, "survivor")["metadata"]["uid"]
    doomed = _special_claim(c, "to-delete")["metadata"]["name"]

    # off
    _flip(c, False)
    claim = _runs_with_its_device(c, "survivor")
    assert claim["metadata"]["uid"] == survivor_claim
    assert "extendedResourceName" not in _device_class(c, "off.example.com")["spec"]
    _gpu_pod(c, "probe")
    c.wait("probe is not unschedulable", lambda: _unschedulable(c, "probe"))
    assert "extendedResourceClaimStatus" not in (c.pod("probe").get("status") or {})
    for pod in ("probe", "to-delete"):
        status, body = c.admin.delete(f"/api/v1/namespaces/{NS}/pods/{pod}")
        assert status == 200, body
    c.wait(
        "the deleted pod's claim was not collected",
        lambda: c.admin.get(f"{RESOURCE}/namespaces/{NS}/resourceclaims/{doomed}")[0] == 404,
    )

    # on again
    _flip(c, True)
    claim = _runs_with_its_device(c, "survivor")
    assert claim["metadata"]["uid"] == survivor_claim
    _gpu_pod(c, "fresh")
    c.wait("fresh is not Running", _phase(c, "fresh", "Running"), 120)
    _runs_with_its_device(c, "fresh")
    assert prepared_twice(c.nodes.prepare_log) == []


def test_the_host_is_as_found_once_the_nodes_stop(cluster: Cluster) -> None:
    cluster.nodes.stop()
    assert cluster.nodes.host_repairs == []
    assert HostState.now() == cluster.before
