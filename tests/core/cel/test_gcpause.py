"""The collector pause: off inside, back on after, nested and across threads, never turning on a
collector the process switched off."""

from __future__ import annotations

import gc
import threading
from collections.abc import Hashable, Iterator

import pytest

from webhook.core.api.quantity import Quantity
from webhook.core.cel import SelectorEngine
from webhook.core.cel.gcpause import collector_paused


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        (gc.enable if was else gc.disable)()


def test_paused_inside_and_running_again_after() -> None:
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_nested_pauses_end_with_the_outermost() -> None:
    with collector_paused():
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_an_exception_still_ends_the_pause() -> None:
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("boom")
    assert gc.isenabled()


def test_a_collector_the_process_switched_off_stays_off() -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_overlapping_pauses_in_two_threads_end_when_the_last_ends() -> None:
    first_in = threading.Event()
    first_may_leave = threading.Event()
    first_left = threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with collector_paused():
            first_in.set()
            first_may_leave.wait()
        first_left.set()

    t = threading.Thread(target=first)
    t.start()
    first_in.wait()
    with collector_paused():
        first_may_leave.set()
        first_left.wait()
        seen.append(gc.isenabled())  # the other thread's pause ended, this one's has not
    t.join()
    assert seen == [False]
    assert gc.isenabled()


class Probe:
    """A device that records, whenever the engine reads its fingerprint, whether the collector runs."""

    driver = "d"
    attributes: dict[str, tuple[str, object]] = {}
    capacity: dict[str, Quantity] = {}
    allow_multiple_allocations = False

    def __init__(self, states: list[bool]) -> None:
        self.states = states

    @property
    def fingerprint(self) -> Hashable:
        self.states.append(gc.isenabled())
        return "probe"


def test_a_batch_pauses_the_collector_while_it_works() -> None:
    states: list[bool] = []
    engine = SelectorEngine()
    expr = "device.driver == 'd'"
    assert engine.select([expr], [Probe(states)]) == [True]
    assert states == [False]
    assert gc.isenabled()
    assert engine.matches(expr, Probe(states))
    assert states[-1] is True  # a single call does not pause it
