"""``bench/floor.py`` and the floor side of ``bench/versus_scheduler.py`` (benchmarks: here, not in
a mirror).

The floor's writes leave every pod as a scheduler must (``validate`` of the versus bench holds them to
it, on the API emulator); its slots never give a device twice. Its options' refusals are with the
versus bench's others (tests/test_bench_versus_scheduler.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.floor import SCHEDULER, FloorWriter, place
from bench.versus_scheduler import SHAPES, parse_args, setup, thread_counts, validate
from e2e.emulator import Emulator
from webhook.kube.client import KubeClient
from webhook.kube.resources import EVENTS, NAMESPACES, PODS, RESOURCE_CLAIMS


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
    claim_name = live["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
    claim = client.get(RESOURCE_CLAIMS, claim_name, "ns")
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "test-class-1"
    terms = claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-000"]}]}]
    mapping = live["status"]["extendedResourceClaimStatus"]["requestMappings"]
    assert mapping == [
        {"containerName": "c", "resourceName": "example.com/gpu-1", "requestName": "container-0-request-0"}
    ]


def test_thread_counts_and_defaults_parse() -> None:
    assert thread_counts("4,16,64") == [4, 16, 64]
    args, _ = parse_args(["--defaults", "--only", "floor"])
    # No write limit given: each scheduler's shipped one (None), the floor's threads by default.
    assert (args.qps, args.only, args.floor_threads) == (None, "floor", [8, 16, 32])
    assert parse_args([])[0].qps == 1000
