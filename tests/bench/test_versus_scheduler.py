"""``bench/versus_scheduler.py``'s options: each ``--shape`` brings its own sizes (upstream's is
scheduler_perf's Explicit_25classes_5000pods_500nodes), the sizes given override them, bad ones are
refused with a usage error rather than a traceback from the cluster."""

from __future__ import annotations

import pytest

from bench.versus_scheduler import SHAPES, Shape, parse_args


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
