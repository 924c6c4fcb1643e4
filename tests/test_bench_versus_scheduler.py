"""``bench/versus_scheduler.py`` (a benchmark, no module of the package: so here, not in a mirror).

Its options: each ``--shape`` brings its own sizes (upstream's is scheduler_perf's
Explicit_25classes_5000pods_500nodes), the sizes given override them, bad ones are refused with a usage
error rather than a traceback from the cluster. Its validity check, on the API emulator: a claim of
another class than its pod's resource, or a device allocated twice, is reported."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.versus_scheduler import SHAPES, SPECIAL, Shape, parse_args, pod, setup, validate
from e2e.emulator import Emulator
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
