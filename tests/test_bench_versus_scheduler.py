"""``bench/versus_scheduler.py`` (a benchmark, no module of the package: so here, not in a mirror).

Its options: each ``--shape`` brings its own sizes (upstream's is scheduler_perf's
Explicit_25classes_5000pods_500nodes), the sizes given override them, bad ones are refused with a usage
error rather than a traceback from the cluster. Its validity check, on the API emulator: a claim of
another class than its pod's resource, or a device allocated twice, is reported."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.versus_scheduler import (
    SHAPES,
    SPECIAL,
    Shape,
    node_labels,
    parse_args,
    pod,
    replica_problems,
    setup,
    validate,
)
from e2e.emulator import Emulator
from webhook.core.api.objects import Obj
from webhook.kube.client import KubeClient
from webhook.kube.resources import NAMESPACES, PODS, RESOURCE_CLAIMS


def test_the_default_is_the_single_class_shape_on_1_37() -> None:
    args, shape = parse_args([])
    assert args.version == "1.37"
    assert shape == Shape("single", nodes=500, devices=8, classes=1, init_pods=0, pods=1000)
    assert shape.device_class(0) == "gpu.example.com"
    assert shape.resource_name(0) == "example.com/gpu"
    assert shape.device(0) == {"name": "gpu-0"}


def test_upstream_shape_is_scheduler_perfs_25_classes_5000_pods_500_nodes() -> None:
    _, shape = parse_args(["--shape", "upstream"])
    assert shape == Shape("upstream", nodes=500, devices=10, classes=25, init_pods=2500, pods=2500)
    assert shape.device_class(24) == "test-class-24"
    assert shape.resource_name(24) == "example.com/gpu-24"
    assert shape.driver == "test-driver.cdi.k8s.io"
    device = shape.device(3)
    assert device["name"] == "basic-device-3"
    assert device["attributes"]["resource.kubernetes.io/pciRoot"] == {"string": "pci0000:01"}
    assert device["capacity"] == {"memory": {"value": "24480Mi"}, "millicores": {"value": "1k"}}


def test_sizes_given_override_the_shapes() -> None:
    args, shape = parse_args(
        ["--version", "1.36", "--shape", "upstream", "--nodes", "20", "--init-pods", "100", "--pods", "100"]
    )
    assert args.version == "1.36"
    assert shape == Shape("upstream", nodes=20, devices=10, classes=25, init_pods=100, pods=100)
    _, shape = parse_args(["--init-pods", "0", "--devices", "2"])
    assert shape == Shape("single", nodes=500, devices=2, classes=1, init_pods=0, pods=1000)
    assert SHAPES["single"].devices == 8  # the defaults are left as they were


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--classes", "3"], "--classes needs --shape upstream"),
        (["--shape", "upstream", "--nodes", "0"], "--nodes must be >= 1, not 0"),
        (["--init-pods", "-1"], "--init-pods must be >= 0, not -1"),
        (["--shape", "bogus"], "invalid choice: 'bogus'"),
        (["--defaults", "--qps", "100"], "--defaults runs both schedulers at their shipped write limits"),
        (["--defaults", "--qps=100"], "--defaults runs both schedulers at their shipped write limits"),
        (["--shape", "placement", "--only", "floor"], "the floor places pods by slot"),
        (["--floor-threads", "8,x"], "must be integers separated by commas, not '8,x'"),
        (["--floor-threads", "0"], "each thread count must be 1-64: '0'"),
        (["--floor-threads", "16,65"], "each thread count must be 1-64: '16,65'"),
        (["--only", "nobody"], "invalid choice: 'nobody'"),
    ],
)
def test_bad_options_are_a_usage_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_args(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


# -- validity across classes, on the API emulator ----------------------------------------------------


@pytest.fixture
def client() -> Iterator[KubeClient]:
    with Emulator() as em:
        yield KubeClient(em.api_client())


def placed(client: KubeClient, shape: Shape, i: int, claim_class: str, device: str) -> None:
    """Pod ``p-<i>`` (asking for class ``i mod classes``'s resource) bound to node-000 as a scheduler
    leaves it: its special claim asks for ``claim_class``, is allocated ``device`` and reserved for it."""
    name = f"p-{i:04d}"
    body = pod(name, shape.resource_name(i % shape.classes), None)
    body["spec"]["nodeName"] = "node-000"
    uid = client.create(PODS, body, "ns")["metadata"]["uid"]
    claim = client.create(
        RESOURCE_CLAIMS,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "name": f"{name}-claim",
                "annotations": {SPECIAL: "true"},
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid, "controller": True}
                ],
            },
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "container-0-request-0",
                            "exactly": {"deviceClassName": claim_class, "count": 1},
                        }
                    ]
                }
            },
        },
        "ns",
    )
    allocation = {
        "devices": {
            "results": [
                {
                    "request": "container-0-request-0",
                    "driver": shape.driver,
                    "pool": "node-000",
                    "device": device,
                }
            ]
        }
    }
    reserved = [{"resource": "pods", "name": name, "uid": uid}]
    client.patch(
        RESOURCE_CLAIMS,
        claim["metadata"]["name"],
        {"status": {"allocation": allocation, "reservedFor": reserved}},
        subresource="status",
        namespace="ns",
    )
    mapping = {
        "containerName": "c",
        "resourceName": shape.resource_name(i % shape.classes),
        "requestName": "container-0-request-0",
    }
    erc = {"resourceClaimName": claim["metadata"]["name"], "requestMappings": [mapping]}
    client.patch(
        PODS, name, {"status": {"extendedResourceClaimStatus": erc}}, subresource="status", namespace="ns"
    )


def test_validity_holds_each_claim_to_its_pods_class(client: KubeClient) -> None:
    _, shape = parse_args(["--shape", "upstream", "--nodes", "1", "--classes", "3"])
    setup(client, shape)
    client.create(NAMESPACES, {"metadata": {"name": "ns"}})
    classes = {shape.resource_name(i): shape.device_class(i) for i in range(shape.classes)}
    placed(client, shape, 0, "test-class-0", "basic-device-0")
    placed(client, shape, 1, "test-class-1", "basic-device-1")
    assert validate(client, ["ns"], classes)["valid"]

    placed(client, shape, 2, "test-class-0", "basic-device-1")  # the wrong class, and a device taken
    report = validate(client, ["ns"], classes)
    assert not report["valid"]
    assert report["problems"] == [
        "p-0002: claim asks for {'test-class-0': 1}, the pod for {'test-class-2': 1}",
        "p-0002: claim allocates {'test-class-0': 1}, the pod asks for {'test-class-2': 1}",
        "device ('test-driver.cdi.k8s.io', 'node-000', 'basic-device-1') allocated 2 times",
    ]


# -- the placement shape (issue 21: kube-scheduler's figure for bench/scale.py's placement stream) ----


def test_placement_shape_is_the_scale_bench_s_placement_stream() -> None:
    _, shape = parse_args(["--shape", "placement"])
    assert shape == Shape(
        "placement", nodes=500, devices=10, classes=25, init_pods=0, pods=1500, zones=10, groups=50
    )
    anti, plain, spread = shape.pod("a", 0, None), shape.pod("b", 1, "draxr"), shape.pod("c", 3, None)
    assert anti["metadata"]["labels"] == {"app": "anti-0"}
    assert anti["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert "labels" not in plain["metadata"]
    assert plain["spec"]["schedulerName"] == "draxr"
    assert spread["spec"]["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"
    assert node_labels("node-013", shape)["topology.kubernetes.io/zone"] == "zone-3"
    assert "topology.kubernetes.io/zone" not in node_labels("node-013", SHAPES["upstream"])
    _, small = parse_args(["--shape", "placement", "--zones", "3", "--groups", "2"])
    assert (small.zones, small.groups) == (3, 2)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--zones", "3"], "--zones needs --shape placement"),
        (["--shape", "upstream", "--groups", "3"], "--groups needs --shape placement"),
        (["--shape", "placement", "--zones", "0"], "--zones must be >= 1, not 0"),
    ],
)
def test_placement_options_belong_to_the_placement_shape(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parse_args(argv)
    assert message in capsys.readouterr().err


def _bound(name: str, app: str, node: str) -> Obj:
    return {"metadata": {"name": name, "labels": {"app": app}}, "spec": {"nodeName": node}}


def test_replica_problems_name_a_shared_node_and_a_skew_over_one() -> None:
    zone = "topology.kubernetes.io/zone"
    nodes = {f"n{i}": {"metadata": {"labels": {zone: f"z{i % 2}"}}} for i in range(4)}
    fine = [_bound("a", "anti-0", "n0"), _bound("b", "anti-0", "n1"), _bound("c", "spread-0", "n0")]
    assert replica_problems(fine, nodes) == []
    shared = [*fine, _bound("d", "anti-0", "n1")]
    assert replica_problems(shared, nodes) == ["d: a second replica of anti-0 on node n1"]
    skewed = [*fine, _bound("e", "spread-0", "n2")]  # z0 holds 2, z1 none
    assert replica_problems(skewed, nodes) == ["spread-0: zones hold [0, 2] replicas (maxSkew 1)"]
