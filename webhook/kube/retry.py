"""client-go's ``retry.RetryOnConflict``: a write that meets 409 Conflict is made again on a fresh read.

An update carries the ``resourceVersion`` of the copy it was made from; 409 says someone wrote in
between, so the mutation is applied again to what the API holds now. Any other error ends the
retries at once, and so does the last allowed attempt: its conflict is raised, as client-go returns
it. The caller names what gave up.

``Backoff`` is client-go's ``wait.Backoff`` without jitter or cap. client-go's ``DefaultRetry`` waits
10 ms between attempts; draxr's writes retry at once (``CONFLICT_BACKOFF``), as they always have: the
fresh read already holds the other writer's change.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeVar

from .client import ApiError

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Backoff:
    """``steps`` attempts at most; ``duration`` seconds before the second, each later wait
    ``factor`` times the one before."""

    steps: int = 5
    duration: float = 0.0
    factor: float = 1.0

    def __post_init__(self) -> None:
        if self.steps < 1 or self.duration < 0 or self.factor < 1:
            raise ValueError("a backoff needs steps >= 1, duration >= 0 and factor >= 1")


#: The binding cycle's and cleanup's writes: five attempts, no wait.
CONFLICT_BACKOFF: Final = Backoff()


def retry_on_conflict(
    mutate: Callable[[T], R],
    current: T,
    reread: Callable[[], T] | None = None,
    *,
    backoff: Backoff = CONFLICT_BACKOFF,
    sleep: Callable[[float], None] = time.sleep,
) -> R:
    """``mutate(current)``; after a conflict, ``current = reread()`` and again (``reread`` None: a
    write that needs no fresh copy, a create from ``generateName`` or a merge patch, is made as is).

    ``mutate`` may return without writing (the fresh copy shows nothing left to do). At most
    ``backoff.steps`` calls; the last one's conflict is raised, and so is any other exception, of
    ``mutate`` or ``reread``, at once. No read follows the last conflict.
    """
    delay = backoff.duration
    for attempt in range(1, backoff.steps + 1):
        try:
            return mutate(current)
        except ApiError as e:
            if not e.conflict or attempt == backoff.steps:
                raise
        if delay > 0:
            sleep(delay)
        delay *= backoff.factor
        if reread is not None:
            current = reread()
    raise AssertionError("unreachable: the last attempt returns or raises")
