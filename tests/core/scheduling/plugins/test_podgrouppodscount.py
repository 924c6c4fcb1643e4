import pytest

from webhook.core.scheduling.plugins.podgrouppodscount import NoPodsAssigned, normalize, score_placement


def test_the_score_counts_scheduled_and_proposed_pods() -> None:
    assert score_placement(2, 3) == 5


def test_normalized_the_best_gets_100_and_others_their_share_rounded_down() -> None:
    assert normalize([3, 2, 1]) == [100, 66, 33]


def test_no_pod_assigned_anywhere_is_an_error() -> None:
    with pytest.raises(NoPodsAssigned, match="no pods from pod group are assigned"):
        normalize([0, 0])
