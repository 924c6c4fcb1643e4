"""PodGroupPodsCount (upstream ``plugins/podgrouppodscount``): a placement that places more of the
group scores higher. The raw score is the group's pods already scheduled plus those the placement
proposes; normalized, the best placement gets 100 and the others their share of it."""

from __future__ import annotations

from typing import Final

NAME: Final = "PodGroupPodsCount"
WEIGHT: Final = 1
MAX_SCORE: Final = 100


class NoPodsAssigned(Exception):
    """No candidate placement assigns any pod of the group (upstream's error)."""

    def __init__(self) -> None:
        super().__init__("no pods from pod group are assigned to any of the candidate placements")


def score_placement(scheduled: int, proposed: int) -> int:
    return scheduled + proposed


def normalize(scores: list[int]) -> list[int]:
    """``NormalizePlacementScore``: each score over the best, on 0-100."""
    best = max(scores, default=0)
    if best == 0:
        raise NoPodsAssigned()
    return [s * MAX_SCORE // best for s in scores]


__all__ = ["MAX_SCORE", "NAME", "WEIGHT", "NoPodsAssigned", "normalize", "score_placement"]
