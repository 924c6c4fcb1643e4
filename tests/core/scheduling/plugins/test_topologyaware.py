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
