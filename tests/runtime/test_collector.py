"""``runtime.collector``: the collector's settings for a serving process."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from webhook.runtime import collector


class _Made:
    """An object the collector tracks (an instance with a ``__dict__``)."""


@pytest.fixture
def restored() -> Iterator[None]:
    """The thresholds as they were. What a test froze stays frozen, as after the worker tests of
    ``test_serve.py``: unfreezing would move their frozen objects back too."""
    before = gc.get_threshold()
    try:
        yield
    finally:
        gc.set_threshold(*before)


def test_settle_collects_the_young_generation_less_often_and_keeps_the_older_ratios(restored: None) -> None:
    gc.set_threshold(700, 7, 9)
    collector.settle()
    assert gc.get_threshold() == (collector.YOUNG, 7, 9)


def test_settle_freezes_what_exists_and_not_what_comes_after(restored: None) -> None:
    before = _Made()
    collector.settle()
    after = _Made()
    tracked = gc.get_objects()
    assert not any(o is before for o in tracked)  # frozen objects are in no generation
    assert any(o is after for o in tracked)
