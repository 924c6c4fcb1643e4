"""The scheduling queue: priority, arrival order, backoff and requeue on cluster events."""

from __future__ import annotations

import threading

from webhook.worker.queue import SchedulingQueue


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_priority_then_arrival() -> None:
    q = SchedulingQueue(Clock())
    q.add("a", 0)
    q.add("b", 10)
    q.add("c", 0)
    q.add("d", 10)
    assert [q.pop(0).uid for _ in range(4)] == ["b", "d", "a", "c"]  # type: ignore[union-attr]
    assert q.pop(0) is None


def test_failed_pod_waits_for_a_cluster_change_then_backs_off() -> None:
    clock = Clock()
    q = SchedulingQueue(clock)
    q.add("p")
    assert q.pop(0).uid == "p"  # type: ignore[union-attr]
    assert q.failed("p") == 1.0
    assert q.pop(0) is None  # unschedulable: nothing changed yet
    assert q.depth()["unschedulable"] == 1
    q.cluster_changed()
    assert q.depth()["backoff"] == 1  # backing off (1 s) ...
    assert q.pop(0).uid == "p"  # type: ignore[union-attr]  # ... but nothing else is active
    assert q.failed("p") == 2.0  # doubling
    for expected in (4.0, 8.0, 16.0, 32.0, 60.0, 60.0):
        q.cluster_changed()
        clock.now += 100
        assert q.pop(0) is not None
        assert q.failed("p") == expected


def test_backoff_orders_retries_behind_active_pods_and_never_idles() -> None:
    """kube-scheduler's ``SchedulerPopFromBackoffQ`` (on since 1.33): active pods come first; a
    pod in backoff is popped ahead of its time only when none is active."""
    clock = Clock()
    q = SchedulingQueue(clock)
    q.add("early")
    assert q.pop(0).uid == "early"  # type: ignore[union-attr]
    q.failed("early")
    q.cluster_changed()  # "early" is in backoff for 1 s
    q.add("new", priority=-5)  # lower priority, but active
    assert q.pop(0).uid == "new"  # type: ignore[union-attr]
    assert q.pop(0).uid == "early"  # type: ignore[union-attr]
    assert q.pop(0) is None
    q.failed("early")  # 2 s now; an event moves it to backoff again
    q.cluster_changed()
    q.failed("new")
    clock.now += 1.5
    q.cluster_changed()  # "new" backs off until 1 s after its failure: expired, so active
    assert [q.pop(0).uid for _ in range(2)] == ["new", "early"]  # type: ignore[union-attr]


def test_a_pod_queued_again_is_popped_ahead_of_time_at_its_latest_backoff() -> None:
    """A pod's earlier backoff left in the heap does not put it ahead of another pod."""
    clock = Clock()
    q = SchedulingQueue(clock)
    q.add("a")
    q.add("b")
    assert q.pop(0).uid == "a"  # type: ignore[union-attr]
    q.failed("a")  # unschedulable, backoff for 1 s (until +1.0)
    q.cluster_changed()
    q.add("a")  # an event while it backs off: queued again until +1.0
    assert q.pop(0).uid == "b"  # type: ignore[union-attr]
    clock.now += 0.5
    q.failed("b", unschedulable=False)  # until +1.5
    assert q.pop(0).uid == "a"  # type: ignore[union-attr]  # the first of a's two items
    q.failed("a", unschedulable=False)  # 2 s now: until +2.5; a's other item (+1.0) is stale
    assert [q.pop(0).uid for _ in range(2)] == ["b", "a"]  # type: ignore[union-attr]
    assert q.pop(0) is None


def test_event_during_an_attempt_is_not_lost() -> None:
    clock = Clock()
    q = SchedulingQueue(clock)
    q.add("p")
    q.pop(0)
    q.cluster_changed()  # a slice appeared while "p" was being scheduled
    q.failed("p")
    clock.now += 1.0
    assert q.pop(0).uid == "p"  # type: ignore[union-attr]


def test_a_change_but_one_pod_leaves_that_pod_where_it_is() -> None:
    """The move after a failed binding: every other pod, in flight or unschedulable."""
    q = SchedulingQueue(Clock())
    for uid in ("waiting", "binding", "deciding"):
        q.add(uid)
        q.pop(0)
    q.failed("waiting")
    q.failed("binding")
    q.cluster_changed(but="binding")
    assert q.depth()["unschedulable"] == 1  # "binding"
    q.failed("deciding")  # the change came during its attempt
    assert q.depth()["unschedulable"] == 1
    assert {q.pop(0).uid, q.pop(0).uid} == {"waiting", "deciding"}  # type: ignore[union-attr]


def test_retry_now_skips_backoff() -> None:
    q = SchedulingQueue(Clock())
    q.add("p")
    q.pop(0)
    q.failed("p", retry_now=True)
    assert q.pop(0).uid == "p"  # type: ignore[union-attr]


def test_remove_and_done_forget_the_pod() -> None:
    q = SchedulingQueue(Clock())
    q.add("a")
    q.add("b")
    q.remove("a")
    assert q.pop(0).uid == "b"  # type: ignore[union-attr]
    q.done("b")
    q.cluster_changed()
    assert q.pop(0) is None
    assert len(q) == 0


def test_pop_blocks_until_a_pod_arrives_and_close_wakes_it() -> None:
    q = SchedulingQueue()
    got: list[str | None] = []
    ready = threading.Event()

    def consumer() -> None:
        ready.set()
        e = q.pop(timeout=10)
        got.append(e.uid if e else None)

    t = threading.Thread(target=consumer)
    t.start()
    ready.wait()
    q.add("x")
    t.join(10)
    assert got == ["x"]
    t2 = threading.Thread(target=lambda: got.append(None if q.pop(timeout=10) is None else "y"))
    t2.start()
    q.close()
    t2.join(10)
    assert got == ["x", None]


def test_take_brings_the_queued_members_in_flight_in_queue_order() -> None:
    clock = Clock()
    q = SchedulingQueue(clock)
    for uid, prio in (("m0", 0), ("m1", 5), ("m2", 0), ("m3", 0), ("other", 0)):
        q.add(uid, prio)
    first = q.pop(0)
    assert first is not None
    assert first.uid == "m1"
    q.failed("m2")  # unschedulable, waiting for a change
    taken = q.take(["m0", "m1", "m2", "m3", "gone"])
    assert [e.uid for e in taken] == ["m0", "m2", "m3"]  # m1 is in flight already
    assert q.depth() == {"active": 1, "backoff": 0, "unschedulable": 0, "in_flight": 4}
    popped = q.pop(0)
    assert popped is not None
    assert popped.uid == "other"
    clock.now += 120
    assert q.pop(0) is None
    q.failed("m0")
    q.cluster_changed()
    again = q.pop(0)
    assert again is not None
    assert again.uid == "m0"
