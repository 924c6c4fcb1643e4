"""FreeDevices: free and total candidate devices per (class, node), kept up by flips and targeted
invalidation rather than rescans; and a property test that, whatever happens to a ClusterState,
its counts equal a count made from scratch; free devices per topology group likewise."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.harness import claim, exactly, state_of
from tests.core.podfactory import container, device, device_class, gpus, node, pod, resource_slice
from webhook.core.api.alignment import ALIGN_BY_ANNOTATION
from webhook.core.api.objects import Obj
from webhook.core.api.quantity import Quantity
from webhook.core.cel import SelectorEngine
from webhook.core.cluster.allocated import Share
from webhook.core.cluster.capacity import FreeDevices
from webhook.core.cluster.deviceclasses import ClassResolver
from webhook.core.cluster.devices import DeviceIndex, NodeDevices
from webhook.core.cluster.nodeinfo import Nodes
from webhook.core.cluster.slices import DeviceKey
from webhook.core.cluster.state import ClusterState
from webhook.core.cluster.topology import group_devices

DRIVER = "gpu.example.com"


class Counts:
    """FreeDevices over its own parts, with a set standing in for the allocated state."""

    def __init__(self, *classes: Obj) -> None:
        self.nodes = Nodes()
        self.devices = DeviceIndex(ClassResolver(classes))
        self.taken: set[DeviceKey] = set()
        self.free = FreeDevices(self.nodes, self.devices, self.taken.__contains__)
        self.scanned: list[str] = []
        build = self.devices.node_devices

        def spy(n: Obj) -> NodeDevices:  # each node once: prime() and the count both look it up
            if n["metadata"]["name"] not in self.scanned:
                self.scanned.append(n["metadata"]["name"])
            return build(n)

        self.devices.node_devices = spy  # type: ignore[method-assign, assignment]

    def add_node(self, name: str) -> None:
        self.nodes.upsert(node(name))

    def take(self, key: DeviceKey) -> None:
        self.taken.add(key)
        self.free.on_flip(key, True)

    def give_back(self, key: DeviceKey) -> None:
        self.taken.discard(key)
        self.free.on_flip(key, False)


def two_nodes() -> Counts:
    c = Counts(
        device_class("gpu"), device_class("even", selectors=[f'device.attributes["{DRIVER}"].index % 2 == 0'])
    )
    for n, count in (("a", 2), ("b", 3)):
        c.add_node(n)
        c.devices.upsert_slice(resource_slice(f"{n}-gpus", gpus(count), node_name=n))
    c.add_node("empty")
    return c


def test_free_and_total_per_class_and_node() -> None:
    c = two_nodes()
    assert c.free.free("gpu") == {"a": 2, "b": 3}  # a node without candidates has no entry
    assert c.free.total("gpu") == {"a": 2, "b": 3}
    assert c.free.free("even") == {"a": 1, "b": 2}
    assert c.free.free("unknown") == {}


def test_counts_start_from_what_is_already_taken() -> None:
    c = two_nodes()
    c.taken.add((DRIVER, "a", "gpu-0"))
    assert c.free.free("gpu") == {"a": 1, "b": 3}
    assert c.free.total("gpu") == {"a": 2, "b": 3}


def test_flips_move_counts_without_rescanning() -> None:
    c = two_nodes()
    c.free.free("gpu")
    c.free.free("even")
    c.scanned.clear()
    c.take((DRIVER, "a", "gpu-0"))
    c.take((DRIVER, "b", "gpu-1"))
    assert c.free.free("gpu") == {"a": 1, "b": 2}
    assert c.free.free("even") == {"a": 0, "b": 2}  # b's gpu-1 is not an "even" candidate
    assert c.free.total("gpu") == {"a": 2, "b": 3}
    c.give_back((DRIVER, "a", "gpu-0"))
    assert c.free.free("gpu") == {"a": 2, "b": 2}
    assert c.scanned == []


def test_a_flip_of_a_device_nobody_counts_changes_nothing() -> None:
    c = two_nodes()
    c.free.free("gpu")
    c.take((DRIVER, "elsewhere", "x"))
    assert c.free.free("gpu") == {"a": 2, "b": 3}


def test_a_device_every_node_reaches_counts_on_every_node() -> None:
    c = Counts(device_class("gpu"))
    c.add_node("a")
    c.add_node("b")
    c.devices.upsert_slice(resource_slice("net", gpus(1), pool="net", allNodes=True))
    assert c.free.free("gpu") == {"a": 1, "b": 1}
    c.take((DRIVER, "net", "gpu-0"))
    assert c.free.free("gpu") == {"a": 0, "b": 0}


def test_forget_nodes_recounts_only_those_nodes() -> None:
    c = two_nodes()
    c.free.free("gpu")
    c.devices.upsert_slice(resource_slice("a-gpus", gpus(4), node_name="a"))  # a's view is dropped
    c.scanned.clear()
    assert c.free.free("gpu") == {"a": 2, "b": 3}  # not told yet: the old count stands
    c.free.forget_nodes(["a"])
    assert c.free.free("gpu") == {"a": 4, "b": 3}
    assert c.scanned == ["a"]


def test_a_forgotten_node_no_longer_follows_flips_until_recounted() -> None:
    c = two_nodes()
    c.free.free("gpu")
    c.free.forget_nodes(["a"])
    c.take((DRIVER, "a", "gpu-0"))  # taken while a is not loaded
    assert c.free.free("gpu") == {"a": 1, "b": 3}  # the recount sees it
    c.give_back((DRIVER, "a", "gpu-0"))
    assert c.free.free("gpu") == {"a": 2, "b": 3}  # and flips reach the new slot


def test_forget_class_recounts_the_class_only() -> None:
    c = two_nodes()
    c.free.free("gpu")
    c.free.free("even")
    c.devices.classes.upsert(device_class("even", selectors=[f'device.attributes["{DRIVER}"].index == 2']))
    c.devices.invalidate_class("even")
    c.free.forget_class("even")
    c.scanned.clear()
    assert c.free.free("even") == {"b": 1}
    assert c.free.total("even") == {"b": 1}
    assert sorted(c.scanned) == ["a", "b", "empty"]
    c.scanned.clear()
    assert c.free.free("gpu") == {"a": 2, "b": 3}
    assert c.scanned == []


def test_node_added_counts_the_new_node_only() -> None:
    c = two_nodes()
    c.free.free("gpu")
    c.add_node("new")
    c.devices.upsert_slice(resource_slice("new-gpus", gpus(1), node_name="new"))
    c.scanned.clear()
    c.free.node_added()
    assert c.free.free("gpu") == {"a": 2, "b": 3, "new": 1}
    assert c.scanned == ["new"]


def test_a_removed_node_is_no_longer_counted() -> None:
    c = two_nodes()
    c.free.free("gpu")
    c.nodes.remove("b")
    c.devices.invalidate_node("b")
    c.free.forget_nodes(["b"])
    assert c.free.free("gpu") == {"a": 2}
    assert c.free.total("gpu") == {"a": 2}


# -- the property: incremental counts equal counts made from scratch -----------------------------------

NODES = ("n0", "n1", "n2")
POOLS = ("p0", "p1", "p2", "p3")
#: One resourceSliceCount per pool: slices that disagree make the answer order-dependent
#: (upstream issue 141117; see test_slices), which is not what this property is about.
POOL_COUNT = {"p0": 2, "p1": 2, "p2": 1, "p3": 1}
SLICES = ("s0", "s1", "s2", "s3", "s4", "s5")
CLASSES = ("c0", "c1")
SELECTORS: tuple[list[str], ...] = (
    [],
    [f'device.attributes["{DRIVER}"].index == 0'],
    [f'device.attributes["{DRIVER}"].index >= 1'],
    [f'device.attributes["{DRIVER}"].model == "a"'],  # a CEL error on devices without a model
)
KEYS = [(DRIVER, p, f"{s}-d{i}") for p in POOLS for s in SLICES for i in range(3)]
ENGINE = SelectorEngine()

Op = tuple[Any, ...]


def _slice(name: str, target: str, pool: str, flags: list[int], gen: int, dup: bool) -> Obj:
    devs: list[Obj] = []
    for i, flag in enumerate(flags):
        attrs: dict[str, Any] = {"index": {"int": i}}
        extra: dict[str, Any] = {}
        if flag == 1:
            attrs["model"] = {"string": "a"}
        elif flag == 2:
            extra["taints"] = [{"key": "k", "effect": "NoSchedule"}]
        elif flag == 3:
            extra["bindingConditions"] = ["ready"]
        if target == "per-device":
            extra.update({"nodeName": NODES[i % 3]} if i < 2 else {"allNodes": True})
        devs.append(device("dup" if dup and i == 0 else f"{name}-d{i}", attrs, **extra))
    placement: dict[str, Any]
    if target in NODES:
        placement = {"node_name": target}
    elif target == "all":
        placement = {"allNodes": True}
    elif target == "zone-x":
        placement = {
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["x"]}]}
                ]
            }
        }
    else:
        placement = {"perDeviceNodeSelection": True}
    return resource_slice(name, devs, pool=pool, generation=gen, count=POOL_COUNT[pool], **placement)


def _allocated(name: str, keys: list[DeviceKey]) -> Obj:
    results = [{"request": "r", "driver": d, "pool": p, "device": n} for d, p, n in keys]
    return claim(name, [exactly("r", "c0")], allocation={"devices": {"results": results}})


def _rule(name: str, pool: str | None) -> Obj:
    return {
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": {
            "deviceSelector": {"pool": pool} if pool else {},
            "taint": {"key": "r", "effect": "NoExecute"},
        },
    }


ops = st.one_of(
    st.tuples(st.just("node"), st.sampled_from(NODES), st.sampled_from(["x", "y"])),
    st.tuples(st.just("del-node"), st.sampled_from(NODES)),
    st.tuples(
        st.just("slice"),
        st.sampled_from(SLICES),
        st.sampled_from([*NODES, "all", "zone-x", "per-device"]),
        st.sampled_from(POOLS),
        st.lists(st.integers(0, 3), max_size=3),
        st.integers(1, 2),
        st.booleans(),
    ),
    st.tuples(st.just("del-slice"), st.sampled_from(SLICES)),
    st.tuples(st.just("class"), st.sampled_from(CLASSES), st.integers(0, len(SELECTORS) - 1)),
    st.tuples(st.just("del-class"), st.sampled_from(CLASSES)),
    st.tuples(
        st.just("claim"), st.sampled_from(["k0", "k1", "k2"]), st.lists(st.sampled_from(KEYS), max_size=3)
    ),
    st.tuples(st.just("del-claim"), st.sampled_from(["k0", "k1", "k2"])),
    st.tuples(st.just("reserve"), st.sampled_from(["t0", "t1"]), st.lists(st.sampled_from(KEYS), max_size=3)),
    st.tuples(st.just("release"), st.sampled_from(["t0", "t1"])),
    st.tuples(st.just("rule"), st.sampled_from(["r0", "r1"]), st.sampled_from([None, *POOLS])),
    st.tuples(st.just("del-rule"), st.sampled_from(["r0", "r1"])),
)


class Model:
    """The objects a ClusterState was given, to build a fresh one from."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], Obj] = {}
        self.tokens: dict[str, list[DeviceKey]] = {}

    def apply(self, state: ClusterState, op: Op) -> None:
        kind = op[0]
        if kind == "reserve":
            self.tokens[op[1]] = list(op[2])
            state.reserve(op[1], list(op[2]), {"metadata": {"uid": op[1]}}, "nowhere")
            return
        if kind == "release":
            self.tokens.pop(op[1], None)
            state.unreserve(op[1])
            return
        build: dict[str, Callable[[], tuple[str, Obj]]] = {
            "node": lambda: ("Node", node(op[1], labels={"zone": op[2]})),
            "slice": lambda: ("ResourceSlice", _slice(*op[1:])),
            "class": lambda: ("DeviceClass", device_class(op[1], selectors=SELECTORS[op[2]])),
            "claim": lambda: ("ResourceClaim", _allocated(op[1], op[2])),
            "rule": lambda: ("DeviceTaintRule", _rule(op[1], op[2])),
        }
        if kind in build:
            k, obj = build[kind]()
            self.objects[(k, op[1])] = obj
            assert state.apply(k, obj)
            return
        k = {
            "del-node": "Node",
            "del-slice": "ResourceSlice",
            "del-class": "DeviceClass",
            "del-claim": "ResourceClaim",
            "del-rule": "DeviceTaintRule",
        }[kind]
        gone = self.objects.pop((k, op[1]), None)
        assert state.apply(k, gone or _named(k, op[1]), deleted=True)

    def recount(self, cls: str) -> tuple[dict[str, int], dict[str, int]]:
        fresh = ClusterState(ENGINE)
        order = ("Node", "DeviceClass", "DeviceTaintRule", "ResourceSlice", "ResourceClaim")
        for kind in order:
            for (k, _), obj in self.objects.items():
                if k == kind:
                    fresh.apply(k, obj)
        for token, keys in self.tokens.items():
            fresh.allocated.reserve_devices(token, keys)
        free: dict[str, int] = {}
        total: dict[str, int] = {}
        for n, info in fresh.nodes.items():
            cands = fresh.devices.node_devices(info.node).special_candidates(cls)
            if cands:
                total[n] = len(cands)
                free[n] = sum(1 for d in cands if not fresh.allocated.is_allocated(d.key))
        return free, total


def _named(kind: str, name: str) -> Obj:
    meta: Obj = {"name": name}
    if kind == "ResourceClaim":
        meta["namespace"] = "default"
    return {"kind": kind, "metadata": meta}


#: Where every example starts: nodes, classes and complete pools, so that random steps meet counts.
BASE: list[Op] = [
    ("node", "n0", "x"),
    ("node", "n1", "y"),
    ("node", "n2", "x"),
    ("class", "c0", 0),
    ("class", "c1", 2),
    ("slice", "s0", "n0", "p0", [0, 1, 2], 1, False),
    ("slice", "s5", "n2", "p0", [0], 1, False),  # p0: local slices on two nodes
    ("slice", "s1", "all", "p1", [0, 0], 1, False),
    ("slice", "s4", "n1", "p1", [0], 1, False),  # p1: a local and a non-local slice
    ("slice", "s2", "zone-x", "p2", [1, 0, 0], 1, False),
    ("slice", "s3", "per-device", "p3", [0, 0, 0], 1, False),
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, min_size=1, max_size=25))
def test_incremental_counts_equal_a_count_from_scratch(steps: list[Op]) -> None:
    state = ClusterState(ENGINE)
    model = Model()
    for op in [*BASE, *steps]:
        model.apply(state, op)
        for cls in CLASSES:  # ask after every step, so the next change meets warm caches
            free, total = model.recount(cls)
            assert state.capacity.free(cls) == free, (op, cls)
            assert state.capacity.total(cls) == total, (op, cls)


@pytest.mark.parametrize("cls", CLASSES)
def test_the_recount_itself_sees_devices(cls: str) -> None:
    """Guard for the property: the model's recount is not trivially empty."""
    state = ClusterState(ENGINE)
    model = Model()
    for op in [("node", "n0", "x"), ("class", cls, 0), ("slice", "s0", "n0", "p2", [0, 0], 1, False)]:
        model.apply(state, op)
    assert model.recount(cls) == ({"n0": 2}, {"n0": 2})
    model.apply(state, ("claim", "k0", [(DRIVER, "p2", "s0-d1")]))
    assert model.recount(cls) == ({"n0": 1}, {"n0": 2})
    assert state.capacity.free(cls) == {"n0": 1}


# --- free devices per topology group ---------------------------------------------------------

ROOT = "resource.kubernetes.io/pcieRoot"


def aligned_class(annotation: str | None = ROOT) -> Obj:
    dc = device_class("gpu", "example.com/gpu", selectors=["true"])
    if annotation is not None:
        dc["metadata"]["annotations"] = {ALIGN_BY_ANNOTATION: annotation}
    return dc


def rooted_gpus(name: str, roots: list[list[int]]) -> Obj:
    devices = []
    for i, rs in enumerate(roots):
        attr = {"string": f"r{rs[0]}"} if len(rs) == 1 else {"strings": [f"r{r}" for r in rs]}
        devices.append(device(f"gpu-{i}", {ROOT: attr}))
    return resource_slice(f"{name}-gpus", devices, node_name=name, pool=name)


def group_counts(st_: ClusterState, node_name: str) -> dict[str, tuple[int, int]]:
    return {str(v[1]): (g.size, g.free) for v, g in st_.capacity.groups("gpu", node_name, ROOT).items()}


def group_rescan(st_: ClusterState, node_name: str) -> dict[str, tuple[int, int]]:
    nd = st_.node_devices(node_name)
    assert nd is not None
    groups, _ = group_devices(nd.special_candidates("gpu"), ROOT, st_.allocated.is_allocated)
    return {str(v[1]): (g.size, g.free) for v, g in groups.items()}


def gpu_key(i: int, node_name: str = "n") -> DeviceKey:
    return ("gpu.example.com", node_name, f"gpu-{i}")


def test_groups_follow_reserve_and_release() -> None:
    st_ = state_of(node("n"), aligned_class(), rooted_gpus("n", [[0], [0], [1], [0, 1]]))
    assert group_counts(st_, "n") == {"r0": (3, 3), "r1": (2, 2)}
    p = pod("p", [container("c", {"example.com/gpu": 1})])
    st_.reserve("t", [gpu_key(3)], p, "n")
    assert group_counts(st_, "n") == {"r0": (3, 2), "r1": (2, 1)}  # a list-typed device is in both
    st_.unreserve("t", p)
    assert group_counts(st_, "n") == {"r0": (3, 3), "r1": (2, 2)}


def test_largest_group_spans_every_node_and_follows_slices() -> None:
    st_ = state_of(
        node("a"),
        node("b"),
        aligned_class(),
        rooted_gpus("a", [[0]] * 2),
        rooted_gpus("b", [[0]] * 3 + [[1]]),
    )
    assert st_.capacity.largest_group("gpu", ROOT) == 3
    st_.apply("ResourceSlice", rooted_gpus("b", [[0]] * 2))
    assert st_.capacity.largest_group("gpu", ROOT) == 2


def test_no_groups_without_the_annotation_and_a_changed_annotation_recounts() -> None:
    st_ = state_of(node("n"), aligned_class(None), rooted_gpus("n", [[0], [1]]))
    assert group_counts(st_, "n") == {}
    st_.apply("DeviceClass", aligned_class())
    assert group_counts(st_, "n") == {"r0": (1, 1), "r1": (1, 1)}
    st_.apply("DeviceClass", aligned_class("pcieRoot"))  # malformed: ignored
    assert group_counts(st_, "n") == {}


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
    st_ = state_of(node("n"), aligned_class(), rooted_gpus("n", roots))
    group_counts(st_, "n")  # loaded before the changes, so that only flips keep it right
    held: dict[int, str] = {}
    for take, i in steps:
        i %= len(roots)
        if take and i not in held:
            held[i] = f"t{i}"
            st_.reserve(held[i], [gpu_key(i)], pod(f"p{i}", uid=f"p{i}"), "n")
        elif not take and i in held:
            st_.unreserve(held.pop(i), pod(f"p{i}", uid=f"p{i}"))
        assert group_counts(st_, "n") == group_rescan(st_, "n")


# --- multi-allocatable devices: counted in share slots ------------------------------------------

SHARED_KEY: DeviceKey = (DRIVER, "n", "shared")
PLAIN_KEY: DeviceKey = (DRIVER, "n", "plain")


def shared_gpu(
    name: str = "shared", memory: str = "40Gi", default: str | None = "10Gi", attrs: Obj | None = None
) -> Obj:
    """A multi-allocatable device whose memory a share takes ``default`` of (None: all of it)."""
    cap: Obj = {"value": memory}
    if default is not None:
        cap["requestPolicy"] = {"default": default, "validRange": {"min": "1Gi", "step": "1Gi"}}
    return device(name, attrs, capacity={"memory": cap}, allowMultipleAllocations=True)


def share_claim(name: str, key: DeviceKey, memory: str | None, *, share_id: str | None = None) -> Obj:
    result: Obj = {"request": "r", "driver": key[0], "pool": key[1], "device": key[2]}
    # One ID per claim name, as real share IDs are unique (a share held twice counts once).
    result["shareID"] = share_id or f"00000000-0000-0000-0000-{name.encode().hex()[-12:]:0>12}"
    if memory is not None:
        result["consumedCapacity"] = {"memory": memory}
    return claim(name, [exactly("r", "gpu")], allocation={"devices": {"results": [result]}})


def shared_state() -> ClusterState:
    return state_of(
        node("n"),
        device_class("gpu", "example.com/gpu"),
        resource_slice("n-gpus", [shared_gpu(), device("plain")], node_name="n", pool="n"),
    )


def test_a_shared_device_counts_the_default_shares_that_still_fit() -> None:
    """40Gi in shares of the default 10Gi: four slots, and one for the plain device."""
    st_ = shared_state()
    assert st_.capacity.total("gpu") == {"n": 5}
    assert st_.capacity.free("gpu") == {"n": 5}
    st_.apply("ResourceClaim", share_claim("a", SHARED_KEY, "10Gi"))
    assert st_.capacity.free("gpu") == {"n": 4}
    st_.apply("ResourceClaim", share_claim("bb", SHARED_KEY, "25Gi"))  # 35Gi used: no 10Gi left
    assert st_.capacity.free("gpu") == {"n": 1}
    assert not st_.allocated.is_allocated(SHARED_KEY)  # shares never take it
    st_.apply("ResourceClaim", _allocated("c", [PLAIN_KEY]))
    assert st_.capacity.free("gpu") == {"n": 0}
    assert st_.capacity.available("gpu") == []
    st_.apply("ResourceClaim", share_claim("bb", SHARED_KEY, "25Gi"), deleted=True)
    assert st_.capacity.free("gpu") == {"n": 3}
    assert st_.capacity.available("gpu") == ["n"]
    assert st_.capacity.total("gpu") == {"n": 5}


def test_a_result_without_a_share_id_takes_a_shared_device() -> None:
    """A claim allocated while consumable capacity was off holds the device whole."""
    st_ = shared_state()
    st_.apply("ResourceClaim", _allocated("old", [SHARED_KEY]))
    assert st_.allocated.is_allocated(SHARED_KEY)
    assert st_.capacity.free("gpu") == {"n": 1}
    st_.apply("ResourceClaim", _allocated("old", []))
    assert st_.capacity.free("gpu") == {"n": 5}


def test_reserved_shares_count_until_released() -> None:
    st_ = shared_state()
    st_.capacity.free("gpu")
    p = pod("p", [container("c", {"example.com/gpu": 1})])
    shares = [Share(SHARED_KEY, "11111111-1111-1111-1111-111111111111", {"memory": Quantity.parse("20Gi")})]
    st_.reserve("t", [PLAIN_KEY], p, "n", shares=shares)
    assert st_.capacity.free("gpu") == {"n": 2}
    assert st_.allocated.consumed(SHARED_KEY) == {"memory": Fraction(20 * 2**30)}
    st_.unreserve("t", p)
    assert st_.capacity.free("gpu") == {"n": 5}
    assert st_.allocated.consumed(SHARED_KEY) is None


def test_without_a_default_a_share_takes_the_whole_capacity() -> None:
    st_ = state_of(
        node("n"),
        device_class("gpu", "example.com/gpu"),
        resource_slice(
            "n-gpus",
            [shared_gpu(default=None), device("nocap", allowMultipleAllocations=True)],
            node_name="n",
        ),
    )
    assert st_.capacity.total("gpu") == {"n": 1 + 32}  # no capacity: as many shares as a claim holds
    st_.apply("ResourceClaim", share_claim("a", (DRIVER, "n", "shared"), "1Gi"))
    assert st_.capacity.free("gpu") == {"n": 32}


def test_shared_devices_count_as_devices_in_groups_free_while_a_share_fits() -> None:
    st_ = state_of(
        node("n"),
        aligned_class(),
        resource_slice(
            "n-gpus",
            [shared_gpu("s0", attrs={ROOT: {"string": "r0"}}), device("g1", {ROOT: {"string": "r0"}})],
            node_name="n",
            pool="n",
        ),
    )
    assert group_counts(st_, "n") == {"r0": (2, 2)}
    assert st_.capacity.largest_group("gpu", ROOT) == 2
    st_.apply("ResourceClaim", share_claim("a", (DRIVER, "n", "s0"), "30Gi"))
    assert group_counts(st_, "n") == {"r0": (2, 2)}  # 10Gi left: one more share fits
    st_.apply("ResourceClaim", share_claim("bb", (DRIVER, "n", "s0"), "10Gi"))
    assert group_counts(st_, "n") == {"r0": (2, 1)}
    st_.apply("ResourceClaim", share_claim("a", (DRIVER, "n", "s0"), "30Gi"), deleted=True)
    assert group_counts(st_, "n") == {"r0": (2, 2)}


SHARED_KEYS = [(DRIVER, "n", f"s{i}") for i in range(3)]
share_ops = st.one_of(
    st.tuples(
        st.just("share"),
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from(SHARED_KEYS),
        st.sampled_from([None, "0", "5Gi", "10Gi", "30Gi"]),
    ),
    st.tuples(st.just("take"), st.sampled_from(["a", "b", "c"]), st.sampled_from(SHARED_KEYS)),
    st.tuples(st.just("del"), st.sampled_from(["a", "b", "c"])),
    st.tuples(
        st.just("reserve"),
        st.sampled_from(["t0", "t1"]),
        st.sampled_from(SHARED_KEYS),
        st.sampled_from(["5Gi", "20Gi"]),
    ),
    st.tuples(st.just("release"), st.sampled_from(["t0", "t1"])),
    st.tuples(st.just("slice"), st.sampled_from(["20Gi", "40Gi"])),
)


def _shared_slice(memory: str) -> Obj:
    devices = [
        shared_gpu("s0", memory, attrs={ROOT: {"string": "r0"}}),
        shared_gpu("s1", memory, None, attrs={ROOT: {"string": "r0"}}),
        shared_gpu("s2", memory, "5Gi", attrs={ROOT: {"string": "r1"}}),
        device("g0", {ROOT: {"string": "r1"}}),
    ]
    return resource_slice("n-gpus", devices, node_name="n", pool="n")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(share_ops, max_size=20))
def test_share_counts_always_equal_a_count_from_scratch(steps: list[tuple[Any, ...]]) -> None:
    """Whatever shares come and go (claims, reservations, a slice that changes the capacity), the
    counts kept up by ``on_shares`` equal those of a state built from the final objects, and the
    totals are the share slots of unused devices."""
    objects: dict[str, Obj] = {"slice": _shared_slice("40Gi")}
    memory = 40
    tokens: dict[str, list[Share]] = {}
    state = state_of(node("n"), aligned_class(), objects["slice"])
    for step in steps:
        kind = step[0]
        if kind == "share":
            objects[step[1]] = share_claim(step[1], step[2], step[3])
            state.apply("ResourceClaim", objects[step[1]])
        elif kind == "take":
            objects[step[1]] = _allocated(step[1], [step[2]])
            state.apply("ResourceClaim", objects[step[1]])
        elif kind == "del" and step[1] in objects:
            state.apply("ResourceClaim", objects.pop(step[1]), deleted=True)
        elif kind == "reserve":
            tokens[step[1]] = [Share(step[2], step[1], {"memory": Quantity.parse(step[3])})]
            state.reserve(step[1], [], {"metadata": {"uid": step[1]}}, "nowhere", shares=tokens[step[1]])
        elif kind == "release":
            tokens.pop(step[1], None)
            state.unreserve(step[1])
        elif kind == "slice":
            objects["slice"] = _shared_slice(step[1])
            memory = int(step[1][:-2])
            state.apply("ResourceSlice", objects["slice"])
        fresh = state_of(node("n"), aligned_class(), *objects.values())
        for token, shares in tokens.items():
            fresh.reserve(token, [], {"metadata": {"uid": token}}, "nowhere", shares=shares)
        assert state.capacity.free("gpu") == fresh.capacity.free("gpu"), step
        assert state.capacity.total("gpu") == fresh.capacity.total("gpu"), step
        assert group_counts(state, "n") == group_counts(fresh, "n"), step
        assert state.capacity.available("gpu") == fresh.capacity.available("gpu"), step
    # s0: 10Gi shares, s1: the whole device, s2: 5Gi shares, g0: one device.
    assert state.capacity.total("gpu") == {"n": memory // 10 + 1 + memory // 5 + 1}
