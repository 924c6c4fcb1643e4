"""A node-by-node kubelet upgrade, 1.35 -> 1.36, under load (issue 22): a 1.36.3 control plane with
kube-scheduler and two nodes whose kubelets start as 1.35.4 (the skew Kubernetes supports: a kubelet
one minor behind). Each node's kubelet is stopped and started again from the 1.36.3 binary with the same
root directory (its DRA checkpoint), while its runtime and drivers keep running, as a node upgrade in
place does. Pods holding devices keep running without their containers being created again, pods
created while a kubelet is down are still placed and run, and no claim is prepared twice."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..kubelet_logs import cdi_records, prepared_twice
from .host import HostState
from .launcher import DEFAULT_CONTROLLERS, ControlPlane, find_binaries, find_node_tools
from .nodes import CDI_KIND, DRIVER, NODE_CONTROLLERS, Nodes, NodeSpec
from .test_nodes import IMAGE, NS, RESOURCE, Cluster, Obj, _create_pod, _phase, _setup, require_built


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    require_built(find_binaries("1.35"), find_binaries("1.36"), find_node_tools())
    old = find_binaries("1.35")
    assert not isinstance(old, str)
    work = tmp_path_factory.mktemp("upgrade")
    before = HostState.now()
    with ControlPlane(
        "1.36", controllers=(*DEFAULT_CONTROLLERS, *NODE_CONTROLLERS), scheduler=True, workdir=work / "cp"
    ) as cp:
        specs = [NodeSpec("n1", gpus=3), NodeSpec("n2", gpus=3)]
        with Nodes(cp, specs, workdir=work / "nodes", kubelet=old.kubelet) as nodes:
            c = Cluster(cp, nodes, before)
            _setup(c)
            yield c


def _gpu_pod(c: Cluster, name: str) -> None:
    claim_ref = {"claims": [{"name": "gpu"}]}
    _create_pod(
        c,
        name,
        {
            "terminationGracePeriodSeconds": 0,
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            "containers": [{"name": "app", "image": IMAGE, "resources": claim_ref}],
        },
    )


def _assert_runs_with_its_device(c: Cluster, name: str) -> Obj:
    """Running, created once, with the CDI ID of its claim's device."""
    pod = c.pod(name)
    [ref] = pod["status"]["resourceClaimStatuses"]
    status, claim = c.admin.get(f"{RESOURCE}/namespaces/{NS}/resourceclaims/{ref['resourceClaimName']}")
    assert status == 200, claim
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert result["pool"] == pod["spec"]["nodeName"]
    [record] = cdi_records(c.nodes.cdi_log, NS, name)
    assert record["cdi_devices"] == [f"{CDI_KIND}={result['pool']}-{result['device']}"]
    return pod


def test_pods_keep_running_and_being_placed_through_a_node_by_node_upgrade(cluster: Cluster) -> None:
    new = find_binaries("1.36")
    assert not isinstance(new, str)
    status, body = cluster.admin.get("/api/v1/nodes")
    assert status == 200, body
    assert {n["status"]["nodeInfo"]["kubeletVersion"] for n in body["items"]} == {"v1.35.4"}
    running: list[str] = []
    for i in range(2):  # one per node's worth of load before the upgrade
        _gpu_pod(cluster, f"before-{i}")
        cluster.wait(f"before-{i} is not Running", _phase(cluster, f"before-{i}", "Running"))
        running.append(f"before-{i}")
    for node in ("n1", "n2"):
        cluster.nodes.stop_kubelet(node)
        # Placed while a kubelet is down: on either node (the scheduler still sees both Ready).
        _gpu_pod(cluster, f"during-{node}")
        cluster.nodes.start_kubelet(node, new.kubelet, f"v{new.version}")
        cluster.wait(f"during-{node} is not Running", _phase(cluster, f"during-{node}", "Running"), 120)
        running.append(f"during-{node}")
        for name in running:  # survivors still run, their containers not created again
            assert (cluster.pod(name).get("status") or {}).get("phase") == "Running", name
            _assert_runs_with_its_device(cluster, name)
    status, body = cluster.admin.get("/api/v1/nodes")
    assert status == 200, body
    assert {n["status"]["nodeInfo"]["kubeletVersion"] for n in body["items"]} == {f"v{new.version}"}
    # After the upgrade a new pod still gets one of the last free devices.
    _gpu_pod(cluster, "after")
    cluster.wait("after is not Running", _phase(cluster, "after", "Running"))
    _assert_runs_with_its_device(cluster, "after")
    assert prepared_twice(cluster.nodes.prepare_log) == []
    drivers = {line["driver"] for line in cluster.prepare_lines()}
    assert drivers == {DRIVER}


def test_the_host_is_as_found_once_the_nodes_stop(cluster: Cluster) -> None:
    cluster.nodes.stop()
    assert cluster.nodes.host_repairs == []
    assert HostState.now() == cluster.before
