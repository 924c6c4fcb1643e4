"""The usual-node check against the general filters: for a usual pod, the search's feasible nodes and
their keys (``Usual.scan``, one pass over the walk) are exactly what Filter and Score give when the
same pod takes the general path (a node selector every node matches makes it not usual), and
``Usual.check`` gives each node the verdict ``scan`` gives it; verdicts remembered across decisions
are those of the cluster as it is."""

from __future__ import annotations

from functools import partial
from itertools import islice

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.core.harness import scheduler
from tests.core.podfactory import container, device_class, gpus, node, pod, resource_slice
from webhook.core.api.objects import Obj
from webhook.core.scheduling.cycle import Cycle
from webhook.core.scheduling.framework import SCHEDULED, Decision
from webhook.core.scheduling.sampling import rotation
from webhook.core.scheduling.scheduler import Scheduler

GPU = "example.com/gpu"
CLASS = device_class("gpu.example.com", ext=GPU, selectors=['device.driver == "gpu.example.com"'])
#: A second name of a second class over the same devices: a pod asking both takes the check's
#: general loop over its classes, one asking GPU alone its one-class loop.
GPU_B = "example.com/gpu-b"
CLASS_B = device_class("gpu-b.example.com", ext=GPU_B, selectors=['device.driver == "gpu.example.com"'])

node_shapes = st.lists(
    st.tuples(
        st.integers(0, 4),  # DRA GPUs
        st.sampled_from(["", "unschedulable", "tainted", "device-plugin", "old-kubelet", "two-pods"]),
        st.integers(0, 3),  # running pods of 4 cpu each
        st.integers(0, 2),  # GPUs in use by other claims
    ),
    min_size=1,
    max_size=8,
)


def _cluster(shapes: list[tuple[int, str, int, int]]) -> list[Obj]:
    objects: list[Obj] = [CLASS, CLASS_B]
    for i, (n_gpus, kind, running, in_use) in enumerate(shapes):
        name = f"n{i}"
        spec: Obj = {}
        if kind == "unschedulable":
            spec["unschedulable"] = True
        if kind == "tainted":
            spec["taints"] = [{"key": "k", "effect": "NoSchedule"}]
        alloc = {GPU: 2} if kind == "device-plugin" else {"pods": "2"} if kind == "two-pods" else None
        n = node(name, alloc, labels={"all": "yes"}, **spec)
        if kind == "old-kubelet":
            n["status"]["nodeInfo"] = {"kubeletVersion": "v1.34.2"}
        objects.append(n)
        if n_gpus:
            objects.append(resource_slice(f"s{i}", gpus(n_gpus), node_name=name))
        for j in range(running):
            objects.append(pod(f"r{i}-{j}", [container("c", {"cpu": "4"})], nodeName=name))
        for j in range(min(in_use, n_gpus)):
            objects.append(_allocated_claim(f"held{i}-{j}", name, f"gpu-{j}"))
    return objects


def _allocated_claim(claim_name: str, node_name: str, device: str) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": claim_name, "namespace": "default", "uid": f"uid-{claim_name}"},
        "spec": {
            "devices": {
                "requests": [{"name": "r", "exactly": {"deviceClassName": CLASS["metadata"]["name"]}}]
            }
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "r", "driver": "gpu.example.com", "pool": node_name, "device": device}
                    ]
                }
            }
        },
    }


@settings(max_examples=150, deadline=None)
@given(
    node_shapes,
    st.integers(1, 3),
    st.integers(0, 2),
    st.integers(0, 8),
    st.sampled_from(["binpack", "spread"]),
    st.booleans(),
)
def test_the_usual_pass_gives_what_filter_and_score_give(
    shapes: list[tuple[int, str, int, int]], want: int, want_b: int, cpu: int, policy: str, score: bool
) -> None:
    s = scheduler(*_cluster(shapes), policy=policy)
    names = [f"n{i}" for i in range(len(shapes))]
    asks: dict[str, object] = {GPU: want, GPU_B: want_b} if want_b else {GPU: want}
    if cpu:
        asks["cpu"] = str(cpu)
    usual_pod = pod("p", [container("c", asks)])
    general_pod = pod("p", [container("c", asks)], nodeSelector={"all": "yes"})

    cycle = s.pre_filter(usual_pod)
    usual = s._check(cycle, score)
    assert usual is not None  # the pod is the usual one
    got = [(key, n) for key, n, _ in s._feasible(cycle, iter(names), score)]

    general = s.pre_filter(general_pod)
    assert s._check(general, score) is None  # the general path: every node takes Filter and Score
    expected = [(key, n) for key, n, _ in s._feasible(general, iter(names), score)]
    assert [n for _, n in got] == [n for _, n in expected]
    for (a, _), (b, _) in zip(got, expected, strict=True):
        assert abs(a - b) < 1e-9

    by_name = s.state.nodes.by_name
    verdicts = {n: usual.check(by_name[n], n) for n in names}
    feasible = {n for _, n in got}
    for n, verdict in verdicts.items():
        if isinstance(verdict, float):
            assert n in feasible
        elif verdict is False:
            assert n not in feasible


def _placed_cluster(shapes: list[tuple[int, str, int, int]], nominated_on: list[int]) -> list[Obj]:
    """``_cluster`` with zones (``n<i>`` in zone ``z<i mod 2>``), the running pods labelled
    ``app: web`` in turn, and pods of a high priority nominated to some nodes asking two GPUs."""
    objects = _cluster(shapes)
    for o in objects:
        if o["kind"] == "Node":
            index = int(o["metadata"]["name"][1:])
            o["metadata"]["labels"]["topology.kubernetes.io/zone"] = f"z{index % 2}"
        elif o["kind"] == "Pod":
            o["metadata"]["labels"] = {"app": "web" if o["metadata"]["name"].endswith("0") else "db"}
    for k, i in enumerate(nominated_on):
        if i < len(shapes):
            nominee = pod(f"nominee-{k}", [container("c", {GPU: 2})], priority=1000)
            nominee["status"] = {"nominatedNodeName": f"n{i}"}
            objects.append(nominee)
    return objects


def _placing(p: Obj, kind: str) -> Obj:
    p["metadata"]["labels"] = {"app": "web"}
    selector = {"matchLabels": {"app": "web"}}
    if kind in ("anti", "both"):
        term = {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}
        p["spec"]["affinity"] = {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        }
    if kind in ("spread", "both"):
        p["spec"]["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": selector,
            }
        ]
    return p


@settings(max_examples=150, deadline=None)
@example([(1, "", 0, 0)], 1, "anti", [0], "binpack", True)  # a nominee holds the node's only GPU
@given(
    node_shapes,
    st.integers(1, 2),
    st.sampled_from(["anti", "spread", "both"]),
    st.lists(st.integers(0, 3), max_size=2),
    st.sampled_from(["binpack", "spread"]),
    st.booleans(),
)
def test_with_plugins_and_nominated_pods_the_usual_pass_gives_what_filter_and_score_give(
    shapes: list[tuple[int, str, int, int]],
    want: int,
    kind: str,
    nominated_on: list[int],
    policy: str,
    score: bool,
) -> None:
    s = scheduler(*_placed_cluster(shapes, nominated_on), policy=policy)
    names = [f"n{i}" for i in range(len(shapes))]
    usual_pod = _placing(pod("p", [container("c", {GPU: want})]), kind)
    general_pod = _placing(pod("p", [container("c", {GPU: want})], nodeSelector={"all": "yes"}), kind)

    cycle = s.pre_filter(usual_pod)
    assert cycle.plugins  # the profile's plugins check the pod
    assert s._check(cycle, score) is not None  # and the usual check runs before them
    got = [(key, n) for key, n, _ in s._feasible(cycle, iter(names), score)]

    general = s.pre_filter(general_pod)
    assert s._check(general, score) is None
    expected = [(key, n) for key, n, _ in s._feasible(general, iter(names), score)]
    assert [n for _, n in got] == [n for _, n in expected]
    for (a, _), (b, _) in zip(got, expected, strict=True):
        assert abs(a - b) < 1e-9


#: A change to the cluster between two decisions: (what, node index, a number).
changes = st.lists(
    st.tuples(
        st.sampled_from(
            ["bind", "unbind", "claim", "unclaim", "taint", "untaint", "slice", "class", "decide", "release"]
        ),
        st.integers(0, 3),
        st.integers(0, 3),
    ),
    max_size=12,
)
#: The pod shapes asked after each change: GPUs, cpu, GPU-b.
shapes_asked = [(1, 0, 0), (2, 0, 0), (1, 4, 0), (1, 0, 1)]


def _change(
    s: Scheduler, i: int, step: tuple[str, int, int], nodes: int, reserved: list[tuple[Decision, str]]
) -> str:
    """Applies one step of ``changes`` (the ``i``-th) to ``s``'s cluster; the node it aimed at."""
    what, at, k = step
    target = f"n{at % nodes}"
    if what == "bind":
        s.state.apply("Pod", pod(f"b{i}", [container("c", {"cpu": str(k + 1)})], nodeName=target))
    elif what == "unbind":
        s.state.apply("Pod", pod(f"b{k}", []), deleted=True)
    elif what == "claim":
        s.state.apply("ResourceClaim", _allocated_claim(f"c{at}-{k}", target, f"gpu-{k}"))
    elif what == "unclaim":
        s.state.apply("ResourceClaim", _allocated_claim(f"c{at}-{k}", target, f"gpu-{k}"), deleted=True)
    elif what in ("taint", "untaint"):
        taints = [{"key": "k", "effect": "NoSchedule"}] if what == "taint" else []
        s.state.apply("Node", node(target, None, labels={"all": "yes"}, taints=taints))
    elif what == "slice":
        s.state.apply("ResourceSlice", resource_slice(f"s{at}", gpus(k), node_name=target))
    elif what == "class":
        index = 'device.attributes["gpu.example.com"].index'
        narrower = f'device.driver == "gpu.example.com" && {index} <= {k}'
        s.state.apply("DeviceClass", device_class("gpu.example.com", ext=GPU, selectors=[narrower]))
    elif what == "decide":
        d = s.schedule(pod(f"d{i}", [container("c", {GPU: k % 2 + 1})]))
        if d.status == SCHEDULED:
            reserved.append((d, s.reserve(d)))
    elif what == "release" and reserved:
        s.unreserve(*reserved.pop(k % len(reserved)))
    return target


@settings(max_examples=100, deadline=None)
@example([(3, "", 0, 0)], [("claim", 0, 1)], "binpack")  # a device taken: the node's counts move
@example([(3, "", 3, 0)], [("bind", 0, 3), ("unbind", 0, 0)], "binpack")  # a pod gone: room again
@example([(2, "", 0, 0)], [("decide", 0, 1), ("decide", 0, 1), ("release", 0, 0)], "binpack")
@example([(2, "", 1, 1)], [("class", 0, 0), ("slice", 0, 3)], "spread")
@given(node_shapes, changes, st.sampled_from(["binpack", "spread"]))
def test_the_remembered_verdicts_are_those_of_the_cluster_now(
    shapes: list[tuple[int, str, int, int]], steps: list[tuple[str, int, int]], policy: str
) -> None:
    """Verdicts remembered across decisions and changes (``UsualMemo``) give each scan exactly
    what a scan that remembers nothing gives on the cluster as it is then."""
    s = scheduler(*_cluster(shapes), policy=policy)
    names = [f"n{i}" for i in range(len(shapes))]
    reserved: list[tuple[Decision, str]] = []

    def scans(by: Scheduler) -> list[list[tuple[float, str, object]]]:
        out = []
        for want, cpu, want_b in shapes_asked:
            asks: dict[str, object] = {GPU: want, GPU_B: want_b} if want_b else {GPU: want}
            if cpu:
                asks["cpu"] = str(cpu)
            for score in (True, False):
                cycle = by.pre_filter(pod("p", [container("c", asks)]))
                out.append(list(by._feasible(cycle, iter(names), score)))
        return out

    scans(s)  # every shape's verdicts remembered
    for i, (what, at, k) in enumerate(steps):
        target = _change(s, i, (what, at, k), len(shapes), reserved)
        # A scheduler of its own on the same cluster remembers nothing yet.
        assert scans(s) == scans(Scheduler(s.state, policy)), (what, target, k)


def _general(s: Scheduler, cycle: Cycle, node_name: str) -> tuple[float, str, object] | None:
    return s._general(cycle, node_name, True)


@settings(max_examples=100, deadline=None)
@example([(2, "", 0, 0)] * 3, [("decide", 0, 0), ("decide", 0, 0)], "binpack", 1)
@example([(1, "tainted", 0, 0), (2, "", 0, 1), (1, "", 1, 0)], [("claim", 1, 1)], "spread", 2)
# From n2, two wanted: n2 and n3, not n4 (the best of its run of three, whose GPU in use packs it).
@example([(2, "", 0, 0)] * 4 + [(2, "", 0, 1), (2, "", 0, 0)], [], "binpack", 3)
@given(node_shapes, changes, st.sampled_from(["binpack", "spread"]), st.sampled_from([1, 2, 3, 32]))
def test_the_best_of_the_remembered_runs_is_the_best_of_the_walk(
    shapes: list[tuple[int, str, int, int]], steps: list[tuple[str, int, int]], policy: str, block: int
) -> None:
    """``Usual.best`` (runs of ``block`` nodes remembered whole while their cells hold) gives, for
    every start and every number of entries wanted, the least of that many first entries of a walk
    round the ring from the start by a scheduler that remembers nothing; and a decision through it
    is the decision through the walk, on the cluster as it is after every change."""
    s = scheduler(*_cluster(shapes), policy=policy)
    s.state.nodes.block_size = block
    names = [f"n{i}" for i in range(len(shapes))]
    reserved: list[tuple[Decision, str]] = []

    def same(a: tuple[float, str, object] | None, b: tuple[float, str, object] | None) -> bool:
        if a is None or b is None:
            return a is b
        return abs(a[0] - b[0]) < 1e-9 and a[1] == b[1] and (a[2] is None) == (b[2] is None)

    def check_all() -> None:
        for want, cpu, want_b in shapes_asked:
            asks: dict[str, object] = {GPU: want, GPU_B: want_b} if want_b else {GPU: want}
            if cpu:
                asks["cpu"] = str(cpu)
            p = pod("p", [container("c", asks)])
            cycle = s.pre_filter(p)
            walked = s._usual_ring(cycle)
            if walked is not None:
                usual, ring = walked
                fresh = Scheduler(s.state, policy)
                fresh_cycle = fresh.pre_filter(p)
                scan = fresh._check(fresh_cycle, True)
                assert scan is not None
                ours = partial(_general, s, cycle)
                theirs = partial(_general, fresh, fresh_cycle)
                with pytest.raises(KeyError):  # a name that is no node's, as the walk meets it
                    usual.best(["a", *ring], None, 5, ours)
                with pytest.raises(KeyError):
                    list(scan.scan(["a", *ring], theirs, ()))
                # Another ring for the same shape (as when a pod's rarest name changes) reads its own;
                # an empty one gives nothing.
                for walked_ring in (ring, ring[::2], [], ring):
                    for start in (None, *names, "n", "zz"):
                        for wanted in (1, 2, 5):
                            got = usual.best(walked_ring, start, wanted, ours)
                            walk = scan.scan(rotation(walked_ring, start), theirs, ())
                            expected = min(islice(walk, wanted), default=None)
                            assert same(got, expected), (start, wanted, got, expected)
            decided = s.schedule(p)
            with s.within(names):  # a placement: the walk decides
                walked_decision = s.schedule(p)
            assert (decided.status, decided.node) == (walked_decision.status, walked_decision.node)

    check_all()
    for i, step in enumerate(steps):
        _change(s, i, step, len(shapes), reserved)
        check_all()
