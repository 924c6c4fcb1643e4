"""``Lifecycle``: a part that fails to start is stopped before the error goes up."""

from __future__ import annotations

import pytest

from .lifecycle import Lifecycle


class Part(Lifecycle):
    def __init__(self, fail: bool) -> None:
        self.fail, self.events = fail, list[str]()

    def start(self) -> None:
        self.events.append("start")
        if self.fail:
            raise RuntimeError("half started")

    def stop(self) -> None:
        self.events.append("stop")


def test_a_started_part_is_stopped_on_exit() -> None:
    part = Part(fail=False)
    with part as entered:
        assert entered is part
        assert part.events == ["start"]
    assert part.events == ["start", "stop"]


def test_a_part_failing_to_start_is_stopped_and_the_error_kept() -> None:
    part = Part(fail=True)
    with pytest.raises(RuntimeError, match="half started"), part:
        pytest.fail("the body ran without a started part")
    assert part.events == ["start", "stop"]
