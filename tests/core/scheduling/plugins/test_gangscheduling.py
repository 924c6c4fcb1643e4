"""GangScheduling, its cases transcribed from upstream's ``gangscheduling_test.go`` (named)."""

import pytest

from webhook.core.scheduling.plugins import gangscheduling as g
from webhook.core.scheduling.plugins.gangscheduling import Progress


@pytest.mark.parametrize(
    ("exists", "min_count", "all_pods", "expected"),
    [
        # TestGangSchedulingPreEnqueue: the PodGroup does not exist
        (False, 3, 3, 'waiting for pods\'s pod group "pg" to appear in scheduling queue'),
        # ... fewer pods than minCount
        (True, 3, 2, g.WAITING_FOR_MIN_COUNT),
        # ... exactly minCount
        (True, 3, 3, None),
        # ... a basic group never waits for other pods
        (True, None, 1, None),
    ],
)
def test_pre_enqueue(exists: bool, min_count: int | None, all_pods: int, expected: str | None) -> None:
    assert g.pre_enqueue("pg", exists, min_count, all_pods) == expected


@pytest.mark.parametrize(
    ("min_count", "progress", "expected"),
    [
        (
            3,
            Progress(remaining=1, scheduled=1),
            (g.UNSCHEDULABLE, "minCount (3) cannot be satisfied: 1 scheduled, 1 remaining"),
        ),
        (
            3,
            Progress(remaining=2, scheduled=1),
            (g.WAIT, "minCount (3) is not yet satisfied: 1 scheduled, 2 remaining"),
        ),
        (3, Progress(remaining=0, scheduled=3), None),
        (1, Progress(remaining=5, scheduled=1), None),
        (
            1,
            Progress(remaining=0, scheduled=0),
            (g.UNSCHEDULABLE, "minCount (1) cannot be satisfied: 0 scheduled, 0 remaining"),
        ),
    ],
)
def test_placement_feasible(min_count: int, progress: Progress, expected: tuple[str, str] | None) -> None:
    assert g.placement_feasible(min_count, progress) == expected


def test_a_pod_group_name_is_quoted_as_go_quotes_it() -> None:
    assert (
        g.waiting_for_pod_group('a"b')
        == 'waiting for pods\'s pod group "a\\"b" to appear in scheduling queue'
    )
