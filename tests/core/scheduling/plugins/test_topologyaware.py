"""TopologyPlacementGenerator (upstream ``topology_placement_test.go``)."""

import pytest

from webhook.core.scheduling.plugins.topologyaware import Placement, PlacementError, generate_placements

LABELS = {
    "n1": {"rack": "a"},
    "n2": {"rack": "b"},
    "n3": {"rack": "a"},
    "n4": {},
}


def test_without_a_key_the_one_placement_is_every_node() -> None:
    assert generate_placements(None, LABELS) == [Placement("", ("n1", "n2", "n3", "n4"))]


def test_one_placement_per_domain_and_unlabelled_nodes_in_none() -> None:
    assert generate_placements("rack", LABELS) == [Placement("a", ("n1", "n3")), Placement("b", ("n2",))]


def test_scheduled_members_pin_their_domain() -> None:
    assert generate_placements("rack", LABELS, [("ns/p0", "n2")]) == [Placement("b", ("n2",))]


def test_a_key_no_node_has_gives_no_placement() -> None:
    assert generate_placements("zone", LABELS) == []


@pytest.mark.parametrize(
    ("scheduled", "message"),
    [
        (
            [("ns/p0", "n1"), ("ns/p1", "n2")],
            "cannot determine domain for already scheduled pods: "
            "more than 1 domain found for pod group: a, b",
        ),
        (
            [("ns/p0", "n4")],
            "cannot determine domain for already scheduled pods: no topology domain found for pod ns/p0",
        ),
        ([("ns/p0", "gone")], 'getting node for pod ns/p0: nodeinfo not found for node name "gone"'),
    ],
)
def test_scheduled_members_without_one_domain_are_an_error(
    scheduled: list[tuple[str, str]], message: str
) -> None:
    with pytest.raises(PlacementError) as e:
        generate_placements("rack", LABELS, scheduled)
    assert str(e.value) == message


def _nodes(*entries: tuple[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    return dict(entries)


#: upstream's ``TestGeneratePlacements`` (its PodGroup cases): the group's key, its scheduled pods'
#: nodes, the parent placement's nodes, the snapshot's other nodes, and the placements wanted
#: (None: an error).
GENERATE_PLACEMENTS = {
    "without constraint returns placement matching all nodes": (
        None,
        [],
        _nodes(("node1", {}), ("node2", {"foo": "bar"})),
        _nodes(("node3", {})),
        {"": ["node1", "node2"]},
    ),
    "with topology key constraint, returns placement for each topology domain": (
        "topology1",
        [],
        _nodes(
            ("node0", {"topology2": "d1"}),
            ("node1", {"topology2": "d4"}),
            ("node2", {"topology1": "d1"}),
            ("node3", {"topology1": "d2"}),
            ("node4", {"topology1": "d1"}),
            ("node5", {"topology1": "d3"}),
        ),
        {},
        {"d1": ["node2", "node4"], "d2": ["node3"], "d3": ["node5"]},
    ),
    "without matching topology label, returns empty": (
        "topology3",
        [],
        _nodes(("node0", {"topology2": "d1"}), ("node2", {"topology1": "d1"})),
        {},
        {},
    ),
    "with pods already scheduled in a single domain, returns that domain": (
        "topology",
        ["node2", "node3"],
        _nodes(("node0", {"topology": "d2"}), ("node1", {"topology": "d1"})),
        _nodes(("node2", {"topology": "d1"}), ("node3", {"topology": "d1"})),
        {"d1": ["node1"]},
    ),
    "with pods already scheduled in a single domain not present in current placement, returns empty": (
        "topology",
        ["node2", "node3"],
        _nodes(("node0", {"topology": "d2"})),
        _nodes(("node2", {"topology": "d1"}), ("node3", {"topology": "d1"})),
        {},
    ),
    "with pods already scheduled in conflicting domains, returns error": (
        "topology",
        ["node2", "node3"],
        _nodes(("node0", {"topology": "d2"}), ("node1", {"topology": "d1"})),
        _nodes(("node2", {"topology": "d0"}), ("node3", {"topology": "d1"})),
        None,
    ),
    "with already scheduled pod on node outside of snapshot, returns error": (
        "topology",
        ["node2", "node4"],
        _nodes(("node0", {"topology": "d2"}), ("node1", {"topology": "d1"})),
        _nodes(("node2", {"topology": "d1"}), ("node3", {"topology": "d1"})),
        None,
    ),
    "with already scheduled pod on node without topology label, returns error": (
        "topology",
        ["node2"],
        _nodes(("node1", {"topology": "d2"})),
        _nodes(("node2", {"foo": "bar"})),
        None,
    ),
}


@pytest.mark.parametrize("name", list(GENERATE_PLACEMENTS))
def test_upstream_generate_placements(name: str) -> None:
    key, scheduled, placement, others, wanted = GENERATE_PLACEMENTS[name]
    pods = [(f"ns/p{i}", n) for i, n in enumerate(scheduled)]
    if wanted is None:
        with pytest.raises(PlacementError):
            generate_placements(key, placement, pods, known={**placement, **others})
        return
    got = generate_placements(key, placement, pods, known={**placement, **others})
    assert {p.name: list(p.nodes) for p in got} == wanted
