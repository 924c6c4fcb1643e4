"""``bench/floor.py`` and the floor side of ``bench/versus_scheduler.py`` (benchmarks: here, not in
a mirror).

The floor's writes leave every pod as a scheduler must (``validate`` of the versus bench holds them to
it, on the API emulator); its slots never give a device twice; its options are refused clearly."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.floor import SCHEDULER, FloorWriter, place
from bench.versus_scheduler import SHAPES, parse_args, setup, thread_counts, validate
from e2e.emulator import Emulator
from webhook.kube.client import KubeClient
from webhook.kube.resources import EVENTS, NAMESPACES, PODS


@pytest.fixture
def client() -> Iterator[KubeClient]:
    with Emulator() as em:
        yield KubeClient(em.api_client(), qps=1e9, burst=10**9)


def test_each_slot_is_a_device_of_its_own_for_the_pods_class() -> None:
    shape = SHAPES["upstream"]
    slots = [shape.slot(i, s) for s, i in enumerate(range(shape.nodes * shape.devices))]
    assert len({(s.node, s.device) for s in slots}) == len(slots)
    assert (slots[11].node, slots[11].device) == ("node-001", "basic-device-1")
    assert (slots[11].device_class, slots[11].resource) == ("test-class-11", "example.com/gpu-11")
    assert {s.pool for s in slots} == {s.node for s in slots}


def test_the_floors_writes_leave_every_pod_validly_bound_with_its_event(client: KubeClient) -> None:
    _, shape = parse_args(["--shape", "upstream", "--nodes", "2", "--classes", "3"])
    setup(client, shape)
    client.create(NAMESPACES, {"metadata": {"name": "ns"}})
    writer = FloorWriter(client, threads=4)
    for i in range(12):
        body = client.create(PODS, shape.pod(f"p-{i:04d}", i, SCHEDULER), "ns")
        writer.submit(body, shape.slot(i, i + 5))  # after 5 init slots, as the measured pods
    writer.stop()
    assert writer.errors == []
    classes = {shape.resource_name(i): shape.device_class(i) for i in range(shape.classes)}
    report = validate(client, ["ns"], classes)
    assert report["valid"], report["problems"]
    assert (report["bound"], report["devices_allocated"]) == (12, 12)
    events = client.list(EVENTS, "ns")["items"]
    assert sorted(e["involvedObject"]["name"] for e in events if e["reason"] == "Scheduled") == [
        f"p-{i:04d}" for i in range(12)
    ]


def test_a_write_the_api_refuses_is_the_floors_error_not_a_lost_thread(client: KubeClient) -> None:
    _, shape = parse_args(["--shape", "upstream", "--nodes", "1", "--classes", "1"])
    setup(client, shape)
    client.create(NAMESPACES, {"metadata": {"name": "ns"}})
    body = client.create(PODS, shape.pod("p-0000", 0, SCHEDULER), "ns")
    client.delete(PODS, "p-0000", "ns")
    writer = FloorWriter(client, threads=1)
    writer.submit(body, shape.slot(0, 0))
    writer.stop()
    assert [e.split(":")[:2] for e in writer.errors] == [["p-0000", " ApiError"]]


def test_place_writes_the_special_claim_for_the_slots_class(client: KubeClient) -> None:
    _, shape = parse_args(["--shape", "upstream", "--nodes", "1", "--classes", "2"])
    setup(client, shape)
    client.create(NAMESPACES, {"metadata": {"name": "ns"}})
    body = client.create(PODS, shape.pod("p-0001", 1, SCHEDULER), "ns")
    place(client, body, shape.slot(1, 3))
    live = client.get(PODS, "p-0001", "ns")
    assert live["spec"]["nodeName"] == "node-000"
    mapping = live["status"]["extendedResourceClaimStatus"]["requestMappings"]
    assert mapping == [
        {"containerName": "c", "resourceName": "example.com/gpu-1", "requestName": "container-0-request-0"}
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--defaults", "--qps", "100"], "--defaults runs both schedulers at their shipped write limits"),
        (["--shape", "placement", "--only", "floor"], "the floor places pods by slot"),
        (["--floor-threads", "8,x"], "not a comma-separated list of numbers: '8,x'"),
        (["--floor-threads", "0"], "each thread count must be 1-64: '0'"),
        (["--floor-threads", "16,65"], "each thread count must be 1-64: '16,65'"),
        (["--only", "nobody"], "invalid choice: 'nobody'"),
    ],
)
def test_bad_floor_options_are_a_usage_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_args(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_thread_counts_and_defaults_parse() -> None:
    assert thread_counts("4,16,64") == (4, 16, 64)
    args, _ = parse_args(["--defaults", "--only", "floor"])
    assert (args.defaults, args.only, args.floor_threads) == (True, "floor", (8, 16, 32))
