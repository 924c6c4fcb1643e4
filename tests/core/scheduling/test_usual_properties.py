"""The usual-node check against the general filters: for a usual pod, the search's feasible nodes and
their keys (``Usual.scan``, one pass over the walk) are exactly what Filter and Score give when the
same pod takes the general path (a node selector every node matches makes it not usual), and
``Usual.check`` gives each node the verdict ``scan`` gives it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.harness import scheduler
from tests.core.podfactory import container, device_class, gpus, node, pod, resource_slice
from webhook.core.api.objects import Obj

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
