"""InterPodAffinity through the scheduler, as a property: whatever the cluster and the order of pods,
each decision (the one before reserved) places a pod exactly where a brute-force check of required
anti-affinity in both directions and of free devices allows, and nowhere when no node is allowed; so no
two pods with required anti-affinity towards each other ever share a topology domain."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.harness import state_of
from tests.core.podfactory import container, device_class, gpus, node, pod, resource_slice
from webhook.core.api.objects import Obj
from webhook.core.scheduling.framework import SCHEDULED
from webhook.core.scheduling.scheduler import Scheduler

GPU = "example.com/gpu"
CLASS = device_class("gpu.example.com", ext=GPU, selectors=['device.driver == "gpu.example.com"'])
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
APPS = ["a", "b"]


def replica(i: int, app: str, anti_to: str | None, key: str) -> Obj:
    p = pod(f"p{i}", [container("c", {GPU: 1})])
    p["metadata"]["labels"] = {"app": app}
    if anti_to is not None:
        p["spec"]["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": anti_to}}, "topologyKey": key}
                ]
            }
        }
    return p


def conflicts(a: Obj, a_labels: dict[str, str], b: Obj, b_labels: dict[str, str]) -> bool:
    """``a``'s required anti-affinity term matches ``b`` and they share its topology domain."""
    for term in (
        a["spec"]
        .get("affinity", {})
        .get("podAntiAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", [])
    ):
        key = term["topologyKey"]
        wanted = term["labelSelector"]["matchLabels"]
        matches = all(b["metadata"]["labels"].get(k) == v for k, v in wanted.items())
        if matches and key in a_labels and a_labels.get(key) == b_labels.get(key):
            return True
    return False


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    zones=st.lists(st.sampled_from(["z1", "z2", "z3"]), min_size=1, max_size=5),
    devices=st.integers(1, 2),
    pods=st.lists(
        st.tuples(
            st.sampled_from(APPS),
            st.one_of(st.none(), st.sampled_from(APPS)),
            st.sampled_from([HOSTNAME, ZONE]),
        ),
        min_size=1,
        max_size=10,
    ),
)
def test_placements_match_a_brute_force_check_of_anti_affinity(
    zones: list[str], devices: int, pods: list[tuple[str, str | None, str]]
) -> None:
    objs: list[Obj] = [CLASS]
    for i, zone in enumerate(zones):
        objs += [
            node(f"n{i}", {GPU: 0}, {ZONE: zone}),
            resource_slice(f"s{i}", gpus(devices, f"n{i}"), node_name=f"n{i}"),
        ]
    st_ = state_of(*objs)
    s = Scheduler(st_, percentage_of_nodes_to_score=100)
    node_labels = {f"n{i}": {ZONE: z, HOSTNAME: f"n{i}"} for i, z in enumerate(zones)}
    used: dict[str, int] = dict.fromkeys(node_labels, 0)
    placed: list[tuple[Obj, str]] = []
    for i, (app, anti_to, key) in enumerate(pods):
        p = replica(i, app, anti_to, key)
        allowed = {
            n
            for n, labels in node_labels.items()
            if used[n] < devices
            and not any(
                conflicts(p, labels, q, node_labels[m]) or conflicts(q, node_labels[m], p, labels)
                for q, m in placed
            )
        }
        d = s.schedule(p)
        if not allowed:
            assert d.status != SCHEDULED, (i, d.node)
            continue
        assert d.status == SCHEDULED, (i, d.message)
        assert d.node in allowed
        s.reserve(d)
        used[d.node] += 1
        placed.append((p, d.node))
    for x, (a, m) in enumerate(placed):
        for b, n in placed[x + 1 :]:
            assert not conflicts(a, node_labels[m], b, node_labels[n])
            assert not conflicts(b, node_labels[n], a, node_labels[m])
