"""``bench/gang_parity.py`` (a benchmark, so here, not in a mirror): the parts that need no control
plane. Its streams are the seed's alone, its groups are what the API takes, and its binding check
flags a gang bound below its minCount, a keyed group across racks and a device in two claims."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.gang_parity import (
    PODGROUPS,
    RACK,
    cluster,
    engine_verdict,
    members,
    pod_group,
    problems,
    stream,
)
from e2e.emulator import Emulator
from webhook.core.api.objects import Obj
from webhook.core.scheduling.framework import SCHEDULED
from webhook.kube.client import KubeClient
from webhook.kube.resources import NAMESPACES, NODES, PODS, RESOURCE_CLAIMS


@pytest.fixture
def em() -> Iterator[Emulator]:
    with Emulator() as emulator:
        yield emulator


def test_a_seed_makes_the_same_cluster_and_stream() -> None:
    assert cluster(3, 8) == cluster(3, 8)
    assert stream(3, 12) == stream(3, 12)
    assert stream(3, 12) != stream(4, 12)
    for g in stream(3, 40):
        assert 2 <= len(g["gpus"]) <= 4
        assert g["min"] <= len(g["gpus"])
        assert g["gang"] or g["min"] == 1


def test_the_engine_places_a_group_on_the_seeds_cluster() -> None:
    g = {"name": "g", "gang": True, "min": 2, "key": RACK, "gpus": [1, 1]}
    verdict = engine_verdict(cluster(1, 8), "ns", g, 0)
    assert verdict["status"] == SCHEDULED
    assert len(verdict["nodes"]) == 2
    pinned = engine_verdict(cluster(1, 8), "ns", g, 0, pinned=["node-0", "node-4"])  # one rack
    assert pinned["status"] == SCHEDULED
    across = engine_verdict(cluster(1, 8), "ns", g, 0, pinned=["node-0", "node-1"])  # two racks
    assert across["status"] != SCHEDULED


def _bound(client: KubeClient, pod: Obj, node: str) -> None:
    pod["spec"]["nodeName"] = node
    client.create(PODS, pod, "ns")


def test_the_binding_check_flags_a_partial_gang_and_a_group_across_racks(em: Emulator) -> None:
    client = KubeClient(em.api_client(), qps=10_000, burst=10_000)
    for i in range(2):
        client.create(NODES, {"metadata": {"name": f"node-{i}", "labels": {RACK: f"rack-{i}"}}})
    client.create(NAMESPACES, {"metadata": {"name": "ns"}})
    gang = {"name": "g0", "gang": True, "min": 2, "key": None, "gpus": [1, 1]}
    keyed = {"name": "g1", "gang": False, "min": 1, "key": RACK, "gpus": [1, 1]}
    client.create(PODGROUPS, pod_group(gang), "ns")
    [first, _] = members(gang, None)
    _bound(client, first, "node-0")
    a, b = members(keyed, None)
    _bound(client, a, "node-0")
    _bound(client, b, "node-1")
    for name in ("c1", "c2"):
        result = {"request": "r", "driver": "d", "pool": "p", "device": "gpu-0"}
        created = client.create(RESOURCE_CLAIMS, {"metadata": {"name": name}, "spec": {}}, "ns")
        created["status"] = {"allocation": {"devices": {"results": [result]}}}
        em.update_status("resourceclaims", created)
    found = problems(client, "ns", [gang, keyed])
    assert "gang g0: 1 bound, below its minCount 2" in found
    assert "group g1: members in more than one rack" in found
    assert any(p.startswith("device ('d', 'p', 'gpu-0') in claims") for p in found)
