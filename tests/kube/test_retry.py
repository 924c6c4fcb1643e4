"""``retry_on_conflict``: conflicts retried on a fresh read, other errors at once, attempts bounded."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.kube.client import ApiError
from webhook.kube.retry import Backoff, retry_on_conflict


def conflict() -> ApiError:
    return ApiError(409, {"reason": "Conflict", "message": "the object has been modified"})


def forbidden() -> ApiError:
    return ApiError(403, {"reason": "Forbidden", "message": "no"})


class Script:
    """A mutation that answers from a script (one outcome per call) and records which copy each call
    saw; rereads hand out copies 1, 2, 3..."""

    def __init__(self, *outcomes: str) -> None:
        self.outcomes = list(outcomes)
        self.seen: list[int] = []
        self.reads = 0
        self.log: list[str] = []

    def mutate(self, copy: int) -> str:
        self.seen.append(copy)
        self.log.append(f"write {copy}")
        outcome = self.outcomes.pop(0)
        if outcome == "conflict":
            raise conflict()
        if outcome == "forbidden":
            raise forbidden()
        return f"written from {copy}"

    def reread(self) -> int:
        self.reads += 1
        self.log.append(f"read {self.reads}")
        return self.reads


def test_a_conflict_then_success_writes_again_from_a_fresh_read() -> None:
    s = Script("conflict", "ok")
    assert retry_on_conflict(s.mutate, 0, s.reread) == "written from 1"
    assert s.log == ["write 0", "read 1", "write 1"]


def test_conflicts_that_do_not_stop_raise_the_last_one_after_the_bound() -> None:
    s = Script(*["conflict"] * 5)
    with pytest.raises(ApiError) as raised:
        retry_on_conflict(s.mutate, 0, s.reread)
    assert raised.value.conflict
    assert s.seen == [0, 1, 2, 3, 4]  # five attempts, each on the read before it
    assert s.reads == 4  # no read after the last conflict


def test_another_error_is_raised_at_once() -> None:
    s = Script("forbidden", "ok")
    with pytest.raises(ApiError) as raised:
        retry_on_conflict(s.mutate, 0, s.reread)
    assert raised.value.status == 403
    assert (s.seen, s.reads) == ([0], 0)


def test_an_error_of_the_reread_is_raised_at_once() -> None:
    s = Script("conflict", "ok")

    def gone() -> int:
        raise LookupError("the object is gone")

    with pytest.raises(LookupError):
        retry_on_conflict(s.mutate, 0, gone)
    assert s.seen == [0]


def test_without_a_reread_the_same_copy_is_written_again() -> None:
    s = Script("conflict", "conflict", "ok")
    assert retry_on_conflict(s.mutate, 7) == "written from 7"
    assert s.seen == [7, 7, 7]


def test_a_mutation_may_end_without_writing() -> None:
    calls: list[int] = []

    def nothing_left(copy: int) -> str:
        calls.append(copy)
        return "already so"

    assert retry_on_conflict(nothing_left, 0, lambda: 1) == "already so"
    assert calls == [0]


def test_the_backoff_waits_between_attempts_and_grows() -> None:
    s = Script("conflict", "conflict", "conflict", "ok")
    waits: list[float] = []
    backoff = Backoff(steps=4, duration=0.01, factor=2.0)
    assert retry_on_conflict(s.mutate, 0, s.reread, backoff=backoff, sleep=waits.append) == "written from 3"
    assert waits == [0.01, 0.02, 0.04]


def test_the_default_retries_at_once() -> None:
    s = Script("conflict", "ok")
    waits: list[float] = []
    retry_on_conflict(s.mutate, 0, s.reread, sleep=waits.append)
    assert waits == []


@pytest.mark.parametrize("backoff", [{"steps": 0}, {"duration": -1.0}, {"factor": 0.5}])
def test_a_backoff_that_cannot_work_is_refused(backoff: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Backoff(**backoff)  # type: ignore[arg-type]


@given(
    outcomes=st.lists(st.sampled_from(["conflict", "forbidden", "ok"]), min_size=1, max_size=8),
    steps=st.integers(min_value=1, max_value=6),
)
def test_against_a_model(outcomes: list[str], steps: int) -> None:
    # The model: attempts go on while they conflict and the bound allows; each reads first but the first.
    padded = outcomes + ["ok"] * steps
    attempts = 1
    while padded[attempts - 1] == "conflict" and attempts < steps:
        attempts += 1
    last = padded[attempts - 1]
    s = Script(*padded)
    try:
        result: str | None = retry_on_conflict(s.mutate, 0, s.reread, backoff=Backoff(steps=steps))
        error: int | None = None
    except ApiError as e:
        result, error = None, e.status
    assert s.seen == list(range(attempts))
    assert s.reads == attempts - 1
    assert (result, error) == (
        (f"written from {attempts - 1}", None) if last == "ok" else (None, 409 if last == "conflict" else 403)
    )
