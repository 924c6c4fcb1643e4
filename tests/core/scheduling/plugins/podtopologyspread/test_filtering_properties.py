"""PodTopologySpread through the scheduler, as a property: replicas sharing one DoNotSchedule zone
constraint, placed one after the other (each reserved), go exactly where a brute-force check of the
skew (matches in the zone + 1 - the global minimum, 0 while fewer zones than ``minDomains``) and of free
devices allows, and nowhere when no node is allowed; so after every placement no zone holds more than
``maxSkew`` matching pods above the emptiest (or, below ``minDomains`` zones, above 0)."""

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
ZONE = "topology.kubernetes.io/zone"


def replica(i: int, app: str, max_skew: int, min_domains: int | None) -> Obj:
    p = pod(f"p{i}", [container("c", {GPU: 1})])
    p["metadata"]["labels"] = {"app": app}
    c: Obj = {
        "maxSkew": max_skew,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": app}},
    }
    if min_domains is not None:
        c["minDomains"] = min_domains
    p["spec"]["topologySpreadConstraints"] = [c]
    return p


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    zones=st.lists(st.sampled_from(["z1", "z2", "z3"]), min_size=1, max_size=6),
    devices=st.integers(1, 3),
    max_skew=st.integers(1, 2),
    min_domains=st.one_of(st.none(), st.integers(1, 4)),
    apps=st.lists(st.sampled_from(["a", "b"]), min_size=1, max_size=12),
)
def test_placements_match_a_brute_force_check_of_the_skew(
    zones: list[str], devices: int, max_skew: int, min_domains: int | None, apps: list[str]
) -> None:
    objs: list[Obj] = [CLASS]
    for i, zone in enumerate(zones):
        objs += [
            node(f"n{i}", {GPU: 0}, {ZONE: zone}),
            resource_slice(f"s{i}", gpus(devices, f"n{i}"), node_name=f"n{i}"),
        ]
    s = Scheduler(state_of(*objs), percentage_of_nodes_to_score=100)
    zone_of = {f"n{i}": z for i, z in enumerate(zones)}
    domains = sorted(set(zones))
    used = dict.fromkeys(zone_of, 0)
    matches = {app: dict.fromkeys(domains, 0) for app in ("a", "b")}

    def floor(app: str) -> int:
        if min_domains is not None and len(domains) < min_domains:
            return 0
        return min(matches[app].values())

    for i, app in enumerate(apps):
        allowed = {
            n
            for n, z in zone_of.items()
            if used[n] < devices and matches[app][z] + 1 - floor(app) <= max_skew
        }
        d = s.schedule(replica(i, app, max_skew, min_domains))
        if not allowed:
            assert d.status != SCHEDULED, (i, d.node)
            continue
        assert d.status == SCHEDULED, (i, d.message)
        assert d.node in allowed
        s.reserve(d)
        used[d.node] += 1
        matches[app][zone_of[d.node]] += 1
        assert max(matches[app].values()) - floor(app) <= max_skew
