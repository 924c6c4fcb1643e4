"""``bench/gangs.py`` (a benchmark, so here, not in a mirror): the parts that need no control plane."""

from __future__ import annotations

from bench.gangs import SHAPES, objects_of, stream


def test_a_seed_makes_the_same_stream_of_the_three_shapes() -> None:
    assert stream(1, 30) == stream(1, 30)
    assert {g["shape"] for g in stream(1, 200)} == set(SHAPES)


def test_a_gang_is_one_pod_group_in_one_rack_and_a_single_pod_has_none() -> None:
    group, pods = objects_of({"name": "s0", "shape": "8x8", "size": 8, "gpus": 8}, "draxr")
    assert group is not None
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 8}}
    assert group["spec"]["schedulingConstraints"]["topology"][0]["key"] == "topology.kubernetes.io/rack"
    assert len(pods) == 8
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == {"s0"}
    assert {p["spec"]["schedulerName"] for p in pods} == {"draxr"}
    single, [pod] = objects_of({"name": "s1", "shape": "1x1", "size": 1, "gpus": 1}, None)
    assert single is None
    assert "schedulingGroup" not in pod["spec"]
    assert "schedulerName" not in pod["spec"]
