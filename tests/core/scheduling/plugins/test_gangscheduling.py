"""GangScheduling, its cases transcribed from upstream's ``gangscheduling_test.go`` (named by its
tests and cases)."""

import pytest

from webhook.core.api import podgroups
from webhook.core.scheduling.plugins import gangscheduling as g
from webhook.core.scheduling.plugins.gangscheduling import Progress


@pytest.mark.parametrize(
    ("exists", "min_count", "all_pods", "expected"),
    [
        # TestGangSchedulingFlow: "gang pod fails PreEnqueue when pod group is not yet created"
        (False, 3, 3, 'waiting for pods\'s pod group "pg" to appear in scheduling queue'),
        # "gang pod fails PreEnqueue when quorum is not met"
        (True, 3, 2, g.WAITING_FOR_MIN_COUNT),
        # "gang pod passes PreEnqueue, but waits at Permit" (draxr has no Permit: the cycle places all)
        (True, 3, 3, None),
        # "basic policy pod succeeds immediately"
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


#: upstream's ``TestPlacementFeasible`` (its cases without CompositePodGroups): minCount (0: a basic
#: group), the members evaluated, those scheduled before, each member's outcome in turn, and
#: PlacementFeasible's code after each.
PLACEMENT_FEASIBLE = [
    ("All pods succeed, minCount met at end", 2, 2, 0, ["Success", "Success"], ["Wait", "Success"]),
    ("First pod fails, minCount not satisfiable", 3, 3, 0, ["Unschedulable"], ["Unschedulable"]),
    (
        "Second pod fails, minCount not satisfiable",
        2,
        2,
        0,
        ["Success", "Unschedulable"],
        ["Wait", "Unschedulable"],
    ),
    ("Non-gang pod group with 0 scheduled pods fails", 0, 1, 0, ["Unschedulable"], ["Unschedulable"]),
    ("Non-gang pod group with succeeds once 1 pod is scheduled", 0, 1, 0, ["Success"], ["Success"]),
    ("Non-gang pod group with 1 initially scheduled pod succeeds", 0, 1, 1, ["Unschedulable"], ["Success"]),
    (
        "More than minCount pods, all succeed",
        2,
        3,
        0,
        ["Success", "Success", "Success"],
        ["Wait", "Success", "Success"],
    ),
    (
        "More than minCount pods, first fails",
        2,
        3,
        0,
        ["Unschedulable", "Success", "Success"],
        ["Wait", "Wait", "Success"],
    ),
    (
        "More than minCount pods, minCount not satisfiable",
        2,
        3,
        0,
        ["Unschedulable", "Unschedulable"],
        ["Wait", "Unschedulable"],
    ),
    (
        "1 pod scheduled, 2 unscheduled pods succeed, minCount 3 met",
        3,
        2,
        1,
        ["Success", "Success"],
        ["Wait", "Success"],
    ),
    ("minCount already met by scheduled pods", 2, 1, 2, ["Unschedulable"], ["Success"]),
    (
        "1 pod scheduled, minCount 3, first unscheduled fails, not enough remaining",
        3,
        2,
        1,
        ["Unschedulable"],
        ["Unschedulable"],
    ),
    (
        "1 pod scheduled, minCount 4, first unscheduled succeeds, not enough remaining",
        4,
        2,
        1,
        ["Success"],
        ["Unschedulable"],
    ),
]


@pytest.mark.parametrize(
    ("name", "min_count", "members", "scheduled", "outcomes", "expected"),
    PLACEMENT_FEASIBLE,
    ids=[c[0] for c in PLACEMENT_FEASIBLE],
)
def test_upstream_placement_feasible(
    name: str, min_count: int, members: int, scheduled: int, outcomes: list[str], expected: list[str]
) -> None:
    pod_group: dict[str, object] = {
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}} if min_count else {"basic": {}}}
    }
    wanted = podgroups.min_count(pod_group)
    remaining = members
    got = []
    for outcome in outcomes:
        remaining -= 1
        scheduled += outcome == "Success"
        verdict = g.placement_feasible(wanted, Progress(remaining, scheduled))
        got.append("Success" if verdict is None else verdict[0])
    assert got == expected, name
