import pytest

from webhook.core.scheduling.plugins.podgrouppodscount import NoPodsAssigned, normalize, score_placement


def test_the_score_counts_scheduled_and_proposed_pods() -> None:
    assert score_placement(2, 3) == 5


def test_normalized_the_best_gets_100_and_others_their_share_rounded_down() -> None:
    assert normalize([3, 2, 1]) == [100, 66, 33]


def test_no_pod_assigned_anywhere_is_an_error() -> None:
    with pytest.raises(NoPodsAssigned, match="no pods from pod group are assigned"):
        normalize([0, 0])


@pytest.mark.parametrize(
    ("name", "assigned", "assumed", "proposed", "expected"),
    [
        ("existing assigned and assumed pods", 2, 1, 2, 5),
        ("no assumed pods", 1, 0, 2, 3),
        ("no assigned pods", 0, 1, 2, 3),
        ("no assigned pods, no assumed pods", 0, 0, 2, 2),
    ],
)
def test_upstream_score_placement(
    name: str, assigned: int, assumed: int, proposed: int, expected: int
) -> None:
    """upstream's ``TestScorePlacement``: assigned and assumed pods both count as scheduled."""
    assert score_placement(assigned + assumed, proposed) == expected, name


@pytest.mark.parametrize(
    ("name", "scores", "expected"),
    [
        ("distinct scores", [10, 50, 110], [9, 45, 100]),
        ("equal scores", [50, 50], [100, 100]),
        ("single score", [50], [100]),
        (
            "some minimal score that is far from a group of scores located closely",
            [11, 100, 101, 102],
            [10, 98, 99, 100],
        ),
    ],
)
def test_upstream_normalize_placement_score(name: str, scores: list[int], expected: list[int]) -> None:
    """upstream's ``TestNormalizePlacementScore`` ("zero scores": the error above)."""
    assert normalize(scores) == expected, name
