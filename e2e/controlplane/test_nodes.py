"""Real kubelets on the launcher's control plane (nodes.py), without draxr: Kubernetes 1.37.2 with
kube-scheduler, two Nodes (``n1``: 2 GPUs, a shared GPU and a tainted one, given to its driver as a
JSON device list; ``n2``: 2 GPUs and a device plugin with one ``example.com/gpu``).

What the fake runtime promises (README, "The fake container runtime"): pods run through their init
containers, ``exit N`` commands end with N, every container's CDI devices are in the CDI log; what the
DRA driver promises: CDI IDs naming the allocated devices (and shares), every prepare and unprepare in
the prepare log; and that the host is as it was once the nodes stop.

Tests run in file order on one module-scoped cluster; the last one stops the nodes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .host import HOST_PATHS, HostState
from .launcher import DEFAULT_CONTROLLERS, Client, ControlPlane, find_binaries, find_node_tools
from .nodes import (
    CDI_KIND,
    DEVICE_PLUGIN_CDI_KIND,
    DRIVER,
    EXTENDED_RESOURCE,
    NODE_CONTROLLERS,
    Nodes,
    NodeSpec,
)

Obj = dict[str, Any]
NS = "nodes-e2e"
RESOURCE = "/apis/resource.k8s.io/v1"
IMAGE = "registry.k8s.io/pause:3.10"
GPU_MODEL = "LATEST-GPU-MODEL"


def _gpu(i: int, model: str = GPU_MODEL) -> Obj:
    return {
        "name": f"gpu-{i}",
        "attributes": {"model": {"string": model}, "index": {"int": i}, "numa": {"int": i}},
        "capacity": {"memory": {"value": "80Gi"}},
    }


#: n1's devices (NodeSpec.devices): two GPUs; one shared in 10Gi steps of its memory (KEP-5075's
#: consumable capacity, beta in 1.37); one with a NoSchedule taint (no claim without a toleration
#: gets it).
N1_DEVICES = [
    _gpu(0),
    _gpu(1),
    {
        "name": "shared-0",
        "allowMultipleAllocations": True,
        "attributes": {"model": {"string": "SHARED-GPU"}},
        "capacity": {
            "memory": {
                "value": "80Gi",
                "requestPolicy": {"default": "10Gi", "validRange": {"min": "10Gi", "step": "10Gi"}},
            }
        },
    },
    {
        "name": "tainted-0",
        "attributes": {"model": {"string": GPU_MODEL}},
        "taints": [{"key": "draxr.e2e/broken", "value": "true", "effect": "NoSchedule"}],
    },
]


@dataclass
class Cluster:
    cp: ControlPlane
    nodes: Nodes
    before: HostState

    @property
    def admin(self) -> Client:
        return self.cp.client()

    def wait(self, what: str, check: Callable[[], Any], timeout: float = 60.0) -> None:
        self.cp.wait_for(what, lambda: bool(check()), timeout)

    def pod(self, name: str) -> Obj:
        status, body = self.admin.get(f"/api/v1/namespaces/{NS}/pods/{name}")
        assert status == 200, body
        return body

    def cdi_lines(self) -> list[Obj]:
        return [json.loads(line) for line in self.nodes.cdi_log.read_text().splitlines()]

    def prepare_lines(self) -> list[Obj]:
        return [json.loads(line) for line in self.nodes.prepare_log.read_text().splitlines()]


def require_built(*found: object) -> None:
    """Skips, or fails under CI=true, with the reason a lookup (find_binaries, find_node_tools) gave."""
    for reason in found:
        if isinstance(reason, str):
            if os.environ.get("CI") == "true":
                pytest.fail(reason)
            pytest.skip(reason)


def create_namespace(c: Cluster) -> None:
    """The tests' namespace, once its default ServiceAccount exists (pods need it)."""
    admin = c.admin
    status, body = admin.post("/api/v1/namespaces", {"metadata": {"name": NS}})
    assert status == 201, body
    c.wait(
        "no default ServiceAccount",
        lambda: admin.get(f"/api/v1/namespaces/{NS}/serviceaccounts/default")[0] == 200,
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    require_built(find_binaries("1.37"), find_node_tools())
    work = tmp_path_factory.mktemp("nodes")
    before = HostState.now()
    with ControlPlane(
        "1.37", controllers=(*DEFAULT_CONTROLLERS, *NODE_CONTROLLERS), scheduler=True, workdir=work / "cp"
    ) as cp:
        specs = [
            NodeSpec("n1", devices=json.dumps(N1_DEVICES)),
            NodeSpec("n2", gpus=2, device_plugin=1),
        ]
        with Nodes(cp, specs, workdir=work / "nodes") as nodes:
            c = Cluster(cp, nodes, before)
            _setup(c)
            yield c


def _setup(c: Cluster) -> None:
    admin = c.admin
    create_namespace(c)
    for cls, model in ((DRIVER, GPU_MODEL), ("shared.example.com", "SHARED-GPU")):
        expression = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].model == "{model}"'
        status, body = admin.post(
            f"{RESOURCE}/deviceclasses",
            {"metadata": {"name": cls}, "spec": {"selectors": [{"cel": {"expression": expression}}]}},
        )
        assert status == 201, body
    for name, exactly in (
        ("one-gpu", {"deviceClassName": DRIVER}),
        (
            "shared-10g",
            {"deviceClassName": "shared.example.com", "capacity": {"requests": {"memory": "10Gi"}}},
        ),
    ):
        template = {
            "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
        }
        status, body = admin.post(f"{RESOURCE}/namespaces/{NS}/resourceclaimtemplates", template)
        assert status == 201, body


def _create_pod(c: Cluster, name: str, spec: Obj) -> None:
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
    status, answer = c.admin.post(f"/api/v1/namespaces/{NS}/pods", body)
    assert status == 201, answer


def _phase(c: Cluster, name: str, phase: str) -> Callable[[], bool]:
    return lambda: (c.pod(name).get("status") or {}).get("phase") == phase


def test_nodes_join_as_themselves(cluster: Cluster) -> None:
    status, body = cluster.admin.get("/api/v1/nodes")
    assert status == 200
    nodes = {n["metadata"]["name"]: n for n in body["items"]}
    assert sorted(nodes) == ["n1", "n2"]
    for n in nodes.values():
        assert n["status"]["nodeInfo"]["kubeletVersion"] == "v1.37.2"
        assert n["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("fakeRuntime://")
    assert EXTENDED_RESOURCE not in nodes["n1"]["status"]["allocatable"]
    assert nodes["n2"]["status"]["allocatable"][EXTENDED_RESOURCE] == "1"
    status, body = cluster.admin.get(f"{RESOURCE}/resourceslices")
    devices = {
        (s["spec"]["nodeName"], d["name"]): d
        for s in body["items"]
        if s["spec"]["driver"] == DRIVER
        for d in s["spec"]["devices"]
    }
    assert sorted(devices) == [
        ("n1", "gpu-0"),
        ("n1", "gpu-1"),
        ("n1", "shared-0"),
        ("n1", "tainted-0"),
        ("n2", "gpu-0"),
        ("n2", "gpu-1"),
    ]
    assert devices[("n2", "gpu-1")]["attributes"] == {
        "model": {"string": GPU_MODEL},
        "index": {"int": 1},
        "numa": {"int": 1},
        "pcieRoot": {"string": "pci0000:00"},
    }
    # The JSON device list reaches the API as written (consumable capacity and taints are on in 1.37).
    shared = devices[("n1", "shared-0")]
    assert shared["allowMultipleAllocations"] is True
    assert shared["capacity"]["memory"]["requestPolicy"]["validRange"] == {"min": "10Gi", "step": "10Gi"}
    assert devices[("n1", "tainted-0")]["taints"][0]["key"] == "draxr.e2e/broken"


def test_a_pod_runs_through_its_init_container_with_its_claim_devices(cluster: Cluster) -> None:
    """The init container exits 0 at once, the sidecar and the app run; the containers that name
    the claim get the CDI ID of its device, the sidecar none."""
    claim_ref = {"claims": [{"name": "gpu"}]}
    _create_pod(
        cluster,
        "dra",
        {
            "restartPolicy": "Never",
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            "initContainers": [
                {"name": "init", "image": IMAGE, "resources": claim_ref},
                {"name": "side", "image": IMAGE, "restartPolicy": "Always"},
            ],
            "containers": [{"name": "app", "image": IMAGE, "resources": claim_ref}],
        },
    )
    cluster.wait("pod dra is not Running", _phase(cluster, "dra", "Running"))
    pod = cluster.pod("dra")
    [init, side] = pod["status"]["initContainerStatuses"]
    assert init["state"]["terminated"]["exitCode"] == 0
    assert init["state"]["terminated"]["reason"] == "Completed"
    assert "running" in side["state"]
    assert "running" in pod["status"]["containerStatuses"][0]["state"]
    [ref] = pod["status"]["resourceClaimStatuses"]
    status, claim = cluster.admin.get(f"{RESOURCE}/namespaces/{NS}/resourceclaims/{ref['resourceClaimName']}")
    assert status == 200
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert result["pool"] == pod["spec"]["nodeName"]
    expected = [f"{CDI_KIND}={result['pool']}-{result['device']}"]
    lines = {line["container"]: line for line in cluster.cdi_lines() if line["pod"] == "dra"}
    assert lines == {
        "init": {"namespace": NS, "pod": "dra", "container": "init", "cdi_devices": expected},
        "side": {"namespace": NS, "pod": "dra", "container": "side", "cdi_devices": []},
        "app": {"namespace": NS, "pod": "dra", "container": "app", "cdi_devices": expected},
    }
    [prepare] = [p for p in cluster.prepare_lines() if p["op"] == "prepare" and p["driver"] == DRIVER]
    assert prepare["claims"] == [
        {
            "uid": claim["metadata"]["uid"],
            "namespace": NS,
            "name": claim["metadata"]["name"],
            "cdi_devices": expected,
        }
    ]

    status, _ = cluster.admin.delete(f"/api/v1/namespaces/{NS}/pods/dra")
    assert status == 200
    cluster.wait(
        "the claim was not unprepared",
        lambda: any(
            p["op"] == "unprepare" and [c["uid"] for c in p["claims"]] == [claim["metadata"]["uid"]]
            for p in cluster.prepare_lines()
        ),
    )


def test_a_shared_device_gets_a_cdi_id_per_share(cluster: Cluster) -> None:
    """Two pods each claim 10Gi of the shared GPU: both run on n1 with the same device, each with its
    own share ID, in their CDI IDs too."""
    spec = {
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "shared-10g"}],
        "containers": [{"name": "app", "image": IMAGE, "resources": {"claims": [{"name": "gpu"}]}}],
    }
    for name in ("share-1", "share-2"):
        _create_pod(cluster, name, spec)
    ids = []
    for name in ("share-1", "share-2"):
        cluster.wait(f"pod {name} is not Running", _phase(cluster, name, "Running"))
        pod = cluster.pod(name)
        assert pod["spec"]["nodeName"] == "n1"
        [ref] = pod["status"]["resourceClaimStatuses"]
        _, claim = cluster.admin.get(f"{RESOURCE}/namespaces/{NS}/resourceclaims/{ref['resourceClaimName']}")
        [result] = claim["status"]["allocation"]["devices"]["results"]
        assert (result["device"], result["consumedCapacity"]) == ("shared-0", {"memory": "10Gi"})
        [line] = [line for line in cluster.cdi_lines() if line["pod"] == name]
        assert line["cdi_devices"] == [f"{CDI_KIND}=n1-shared-0-{result['shareID']}"]
        ids.append(result["shareID"])
    assert len(set(ids)) == 2


def test_the_device_plugin_serves_its_node(cluster: Cluster) -> None:
    _create_pod(
        cluster,
        "dp",
        {
            "containers": [
                {
                    "name": "app",
                    "image": IMAGE,
                    "resources": {"requests": {EXTENDED_RESOURCE: "1"}, "limits": {EXTENDED_RESOURCE: "1"}},
                }
            ]
        },
    )
    cluster.wait("pod dp is not Running", _phase(cluster, "dp", "Running"))
    assert cluster.pod("dp")["spec"]["nodeName"] == "n2"
    [line] = [line for line in cluster.cdi_lines() if line["pod"] == "dp"]
    assert line["cdi_devices"] == [f"{DEVICE_PLUGIN_CDI_KIND}=n2-dp-gpu-0"]


@pytest.mark.parametrize(
    ("command", "phase", "code"),
    [(["sh", "-c", "exit 3"], "Failed", 3), (["true"], "Succeeded", 0), (["false"], "Failed", 1)],
)
def test_a_command_that_exits_ends_the_container(
    cluster: Cluster, command: list[str], phase: str, code: int
) -> None:
    name = f"exits-{code}-{phase.lower()}"
    _create_pod(
        cluster,
        name,
        {"restartPolicy": "Never", "containers": [{"name": "c", "image": IMAGE, "command": command}]},
    )
    cluster.wait(f"pod {name} is not {phase}", _phase(cluster, name, phase))
    [status] = cluster.pod(name)["status"]["containerStatuses"]
    assert status["state"]["terminated"]["exitCode"] == code


def test_the_host_is_as_found_once_the_nodes_stop(cluster: Cluster) -> None:
    """The kubelets wrote their tunables and created their host paths inside their mount namespaces:
    nothing reached the host, so the safety net had nothing to put back."""
    cluster.nodes.stop()
    assert cluster.nodes.host_repairs == []
    assert HostState.now() == cluster.before
    for path in HOST_PATHS:
        assert Path(path).exists() == dict(cluster.before.paths)[str(path)]
