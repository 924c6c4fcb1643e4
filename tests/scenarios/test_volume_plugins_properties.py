"""Property tests of the volume plugins in decisions (hypothesis): random small clusters (zones,
CSINode attach limits, bound zonal volumes, local volumes to bind, classes that provision in some
zones) and a sequence of pods sharing their claims, each placed and reserved in turn. Checked on
every pod the engine places, independently of the plugins' code:

* every bound volume's node affinity and zone labels admit the node;
* a volume bound statically admits the node, and no volume goes to two claims;
* a claim provisioned there is allowed there by its class; a claim given a node keeps it;
* after any sequence of placements no node has more volumes of a driver than its CSINode allows;
* a ReadWriteOncePod claim is used by one pod at most.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.harness import state_of
from tests.core.podfactory import container, node, pod
from tests.core.volumefactory import WAIT, claim_volume, csi_node, pv, pvc, storage_class, with_volumes
from webhook.core.api.objects import Obj, labels, name
from webhook.core.api.pvhelpers import node_affinity_error
from webhook.core.scheduling.framework import SCHEDULED
from webhook.core.scheduling.scheduler import Scheduler

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
DRIVER = "ebs.csi.aws.com"
ZONES = ["a", "b", "c"]


@dataclass
class World:
    objects: list[Obj] = field(default_factory=list)
    nodes: dict[str, dict[str, str]] = field(default_factory=dict)  # node -> labels
    limits: dict[str, int] = field(default_factory=dict)  # node -> attach limit of DRIVER
    bound: dict[str, Obj] = field(default_factory=dict)  # claim -> its volume
    provisioned: dict[str, list[str]] = field(default_factory=dict)  # claim -> zones its class allows
    local: dict[str, Obj] = field(default_factory=dict)  # local volume name -> volume
    rwop: set[str] = field(default_factory=set)
    claims: list[str] = field(default_factory=list)


@st.composite
def worlds(draw: st.DrawFn) -> World:
    w = World(objects=[storage_class("local", WAIT, "kubernetes.io/no-provisioner")])
    for i in range(draw(st.integers(2, 4))):
        n = f"n{i}"
        zone = draw(st.sampled_from(ZONES))
        w.nodes[n] = {HOSTNAME: n, ZONE: zone}
        w.objects.append(node(n, labels={ZONE: zone}))
        limit = draw(st.one_of(st.none(), st.integers(1, 3)))
        if limit is not None:
            w.limits[n] = limit
            w.objects.append(csi_node(n, {DRIVER: limit}))
    for i in range(draw(st.integers(0, 3))):  # bound zonal volumes
        zone = draw(st.sampled_from(ZONES))
        in_labels = draw(st.booleans())
        volume = pv(
            f"zonal-{i}",
            "gp3",
            capacity="10Gi",
            csi=(DRIVER, f"vol-{i}"),
            phase="Bound",
            node_affinity=None if in_labels else {ZONE: [zone]},
            labels={ZONE: zone} if in_labels else None,
        )
        rwop = draw(st.booleans())
        modes = ["ReadWriteOncePod"] if rwop else ["ReadWriteOnce"]
        c = f"bound-{i}"
        w.objects += [volume, pvc(c, "gp3", volume_name=f"zonal-{i}", bound=True, access_modes=modes)]
        w.bound[c] = volume
        if rwop:
            w.rwop.add(c)
        w.claims.append(c)
    for i in range(draw(st.integers(0, 2))):  # classes that provision in some zones
        allowed = draw(st.lists(st.sampled_from(ZONES), min_size=1, max_size=2, unique=True))
        w.objects.append(storage_class(f"wffc-{i}", WAIT, DRIVER, allowed_topologies={ZONE: allowed}))
        for j in range(draw(st.integers(1, 2))):
            c = f"dyn-{i}-{j}"
            w.objects.append(pvc(c, f"wffc-{i}", request="1Gi", access_modes=["ReadWriteOnce"]))
            w.provisioned[c] = allowed
            w.claims.append(c)
    for i in range(draw(st.integers(0, 3))):  # local volumes, and claims to bind them
        host = draw(st.sampled_from(sorted(w.nodes)))
        volume = pv(
            f"local-{i}",
            "local",
            capacity="5Gi",
            node_affinity={HOSTNAME: [host]},
            access_modes=["ReadWriteOnce"],
        )
        w.local[f"local-{i}"] = volume
        w.objects.append(volume)
    for j in range(draw(st.integers(0, 3))):
        c = f"local-claim-{j}"
        w.objects.append(pvc(c, "local", request="1Gi", access_modes=["ReadWriteOnce"]))
        w.claims.append(c)
    return w


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[World, list[list[str]]]:
    w = draw(worlds())
    pods: list[list[str]] = []
    for _ in range(draw(st.integers(1, 6))):
        if not w.claims:
            pods.append([])
            continue
        pods.append(draw(st.lists(st.sampled_from(w.claims), max_size=2, unique=True)))
    return w, pods


def volume_of(w: World, claim: str) -> tuple[str, str] | None:
    """(driver, identity) of a claim's volume as NodeVolumeLimits counts it, or None."""
    if claim in w.bound:
        return DRIVER, f"vol-{name(w.bound[claim]).split('-')[1]}"
    if claim in w.provisioned:
        return DRIVER, f"unbound/{claim}"
    return None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_every_placement_respects_volumes(case: tuple[World, list[list[str]]]) -> None:
    w, pods = case
    state = state_of(*w.objects)
    s = Scheduler(state, percentage_of_nodes_to_score=100)
    selected: dict[str, str] = {}  # claim -> the node it was given
    static: dict[str, str] = {}  # local volume -> claim
    claim_static: dict[str, str] = {}  # claim -> local volume
    attached: dict[str, set[tuple[str, str]]] = {n: set() for n in w.nodes}
    rwop_users: dict[str, int] = {}
    for i, claims in enumerate(pods):
        p = with_volumes(pod(f"p{i}", [container("c", {"cpu": "10m"})]), *(claim_volume(c) for c in claims))
        d = s.schedule(p)
        if d.status != SCHEDULED:
            continue
        assert d.node is not None
        n = d.node
        node_labels = w.nodes[n]
        for c in claims:
            if c in w.bound:
                volume = w.bound[c]
                assert node_affinity_error(volume, node_labels) is None
                zone = labels(volume).get(ZONE)
                assert zone is None or zone == node_labels[ZONE]
            if c in w.provisioned:
                assert node_labels[ZONE] in w.provisioned[c]
                assert selected.setdefault(c, n) == n
            if c in w.rwop:
                rwop_users[c] = rwop_users.get(c, 0) + 1
                assert rwop_users[c] == 1
            if c in claim_static:  # bound statically by an earlier pod: only where its volume is
                assert node_affinity_error(w.local[claim_static[c]], node_labels) is None
        if d.volumes is not None:
            for b in d.volumes.static:
                volume_name = name(b.pv)
                assert node_affinity_error(w.local[volume_name], node_labels) is None
                assert static.setdefault(volume_name, name(b.pvc)) == name(b.pvc)
                assert claim_static.setdefault(name(b.pvc), volume_name) == volume_name
        for c in claims:
            v = volume_of(w, c)
            if v is not None:
                attached[n].add(v)
        s.reserve(d)
        for node_name, limit in w.limits.items():
            assert len({v for v in attached[node_name] if v[0] == DRIVER}) <= limit


def test_the_generator_places_pods() -> None:
    """A fixed world in which every property is exercised at least once (a guard that the
    generator's shapes are ones the engine places)."""
    w = World(objects=[storage_class("wffc", WAIT, DRIVER, allowed_topologies={ZONE: ["a"]})])
    w.objects += [
        node("n0", labels={ZONE: "a"}),
        csi_node("n0", {DRIVER: 1}),
        pvc("d", "wffc", request="1Gi"),
    ]
    s = Scheduler(state_of(*w.objects))
    d = s.schedule(with_volumes(pod("p"), claim_volume("d")))
    assert (d.status, d.node) == (SCHEDULED, "n0")
    s.reserve(d)
    e = s.schedule(with_volumes(pod("q"), claim_volume("d")))
    assert (e.status, e.node) == (SCHEDULED, "n0")  # the same volume: attached once
