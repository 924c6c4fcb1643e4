"""core.capacity: free-device counts per topology group follow every change without a rescan."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.harness import state_of
from tests.core.podfactory import container, device, device_class, node, pod, resource_slice
from webhook.core.objects import Obj
from webhook.core.slices import DeviceKey
from webhook.core.state import ClusterState
from webhook.core.topology import ALIGN_BY_ANNOTATION, group_devices

ROOT = "resource.kubernetes.io/pcieRoot"


def aligned(annotation: str | None = ROOT) -> Obj:
    dc = device_class("gpu", "example.com/gpu", selectors=["true"])
    if annotation is not None:
        dc["metadata"]["annotations"] = {ALIGN_BY_ANNOTATION: annotation}
    return dc


def gpus(name: str, roots: list[list[int]]) -> Obj:
    devices = []
    for i, rs in enumerate(roots):
        attr = {"string": f"r{rs[0]}"} if len(rs) == 1 else {"strings": [f"r{r}" for r in rs]}
        devices.append(device(f"gpu-{i}", {ROOT: attr}))
    return resource_slice(f"{name}-gpus", devices, node_name=name, pool=name)


def counted(st_: ClusterState, node_name: str) -> dict[str, tuple[int, int]]:
    return {str(v[1]): (g.size, g.free) for v, g in st_.capacity.groups("gpu", node_name, ROOT).items()}


def rescanned(st_: ClusterState, node_name: str) -> dict[str, tuple[int, int]]:
    nd = st_.node_devices(node_name)
    assert nd is not None
    groups, _ = group_devices(nd.special_candidates("gpu"), ROOT, st_.allocated.is_allocated)
    return {str(v[1]): (g.size, g.free) for v, g in groups.items()}


def key(i: int, node_name: str = "n") -> DeviceKey:
    return ("gpu.example.com", node_name, f"gpu-{i}")


def test_groups_follow_reserve_and_release() -> None:
    st_ = state_of(node("n"), aligned(), gpus("n", [[0], [0], [1], [0, 1]]))
    assert counted(st_, "n") == {"r0": (3, 3), "r1": (2, 2)}
    p = pod("p", [container("c", {"example.com/gpu": 1})])
    st_.reserve("t", [key(3)], p, "n")
    assert counted(st_, "n") == {"r0": (3, 2), "r1": (2, 1)}  # a list-typed device is in both
    st_.release("t", p)
    assert counted(st_, "n") == {"r0": (3, 3), "r1": (2, 2)}


def test_largest_group_spans_every_node_and_follows_slices() -> None:
    st_ = state_of(node("a"), node("b"), aligned(), gpus("a", [[0]] * 2), gpus("b", [[0]] * 3 + [[1]]))
    assert st_.capacity.largest_group("gpu", ROOT) == 3
    st_.apply("ResourceSlice", gpus("b", [[0]] * 2))
    assert st_.capacity.largest_group("gpu", ROOT) == 2


def test_no_groups_without_the_annotation_and_a_changed_annotation_recounts() -> None:
    st_ = state_of(node("n"), aligned(None), gpus("n", [[0], [1]]))
    assert counted(st_, "n") == {}
    st_.apply("DeviceClass", aligned())
    assert counted(st_, "n") == {"r0": (1, 1), "r1": (1, 1)}
    st_.apply("DeviceClass", aligned("pcieRoot"))  # malformed: ignored
    assert counted(st_, "n") == {}


def test_error_nodes_are_the_nodes_with_a_cel_error_candidate() -> None:
    broken = device_class("gpu", "example.com/gpu", selectors=['device.attributes["gpu.example.com"].x == 1'])
    st_ = state_of(
        node("a"),
        node("b"),
        broken,
        resource_slice("a", [device("d", {"x": {"int": 1}})], node_name="a"),
        resource_slice("b", [device("d", {})], node_name="b"),
    )
    assert st_.capacity.error_nodes("gpu") == {"b"}
    st_.apply("ResourceSlice", resource_slice("b", [device("d", {"x": {"int": 2}})], node_name="b"))
    assert st_.capacity.error_nodes("gpu") == set()


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 2), min_size=1, max_size=2, unique=True), min_size=1, max_size=6),
    st.lists(st.tuples(st.booleans(), st.integers(0, 5)), max_size=12),
)
def test_counts_always_equal_a_rescan(roots: list[list[int]], steps: list[tuple[bool, int]]) -> None:
    st_ = state_of(node("n"), aligned(), gpus("n", roots))
    counted(st_, "n")  # loaded before the changes, so that only flips keep it right
    held: dict[int, str] = {}
    for take, i in steps:
        i %= len(roots)
        if take and i not in held:
            held[i] = f"t{i}"
            st_.reserve(held[i], [key(i)], pod(f"p{i}", uid=f"p{i}"), "n")
        elif not take and i in held:
            st_.release(held.pop(i), pod(f"p{i}", uid=f"p{i}"))
        assert counted(st_, "n") == rescanned(st_, "n")
