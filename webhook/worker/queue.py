"""The scheduling queue: active pods by priority then arrival, per-pod exponential backoff, and an
unschedulable set that waits for a cluster change that could make its pods fit.

Like kube-scheduler's queue: a pod that failed goes to "unschedulable"; any event that may free
or add capacity (a slice, claim, class, node, or a pod that releases resources) moves those pods
back, through backoff if their backoff has not expired. Nothing waits on a fixed long timer.

As kube-scheduler with ``SchedulerPopFromBackoffQ`` (beta and on since 1.33), a pod in backoff is
popped at once when no pod is active: backoff orders retries under load, it does not idle the
scheduler (a pod whose claims from templates were just created binds without waiting a second).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

INITIAL_BACKOFF = 1.0
MAX_BACKOFF = 60.0


@dataclass
class Entry:
    uid: str
    priority: int
    seq: int
    attempts: int = 0
    backoff_until: float = 0.0
    key: str = ""  # namespace/name, for logs
    #: What of the pod its scheduling depends on, as last queued (``add``); None: unknown.
    signature: str | None = None


@dataclass(order=True)
class _Heap:
    sort: tuple[int, int]
    uid: str = field(compare=False)


class SchedulingQueue:
    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        initial_backoff: float = INITIAL_BACKOFF,
        max_backoff: float = MAX_BACKOFF,
    ) -> None:
        self._clock = clock
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self._cond = threading.Condition()
        self._entries: dict[str, Entry] = {}
        self._active: list[_Heap] = []
        self._in_active: set[str] = set()
        self._backoff: list[tuple[float, int, str]] = []
        self._unschedulable: set[str] = set()
        self._in_flight: set[str] = set()
        self._moved_while_in_flight: set[str] = set()
        self._seq = itertools.count()
        self._closed = False

    # -- producers ---------------------------------------------------------------------------

    def add(self, uid: str, priority: int = 0, key: str = "", signature: str | None = None) -> None:
        """A pending pod appeared or changed: make it active unless it is backing off.

        A queued pod whose ``signature`` (what its scheduling depends on) did not change stays
        where it is: an update of its status alone (the worker's own PodScheduled=False among
        them) cannot make it fit, as kube-scheduler's queueing hints for a pod's own update. No
        signature: always a change (a resync)."""
        with self._cond:
            entry = self._entries.get(uid)
            if entry is None:
                entry = Entry(uid, priority, next(self._seq), key=key, signature=signature)
                self._entries[uid] = entry
            else:
                entry.priority = priority
                if signature is not None and signature == entry.signature:
                    return
                entry.signature = signature
            if uid in self._in_flight:
                self._moved_while_in_flight.add(uid)
                return
            self._unschedulable.discard(uid)
            self._activate_or_backoff(entry)

    def remove(self, uid: str) -> None:
        """The pod is gone, bound, or no longer ours."""
        with self._cond:
            self._entries.pop(uid, None)
            self._unschedulable.discard(uid)
            self._in_active.discard(uid)
            self._moved_while_in_flight.discard(uid)

    def cluster_changed(self, *, but: str = "") -> None:
        """Something that could make unschedulable pods fit happened: retry them (all ``but`` the
        pod whose failed binding freed the capacity, as kube-scheduler's move after a binding
        error leaves out the pod it was binding)."""
        with self._cond:
            for uid in list(self._unschedulable):
                if uid == but:
                    continue
                self._unschedulable.discard(uid)
                entry = self._entries.get(uid)
                if entry is not None:
                    self._activate_or_backoff(entry)
            self._moved_while_in_flight |= self._in_flight - {but}

    def activate(self, uids: Iterable[str]) -> None:
        """These pods may fit now (a pod of their group came): out of the unschedulable set."""
        with self._cond:
            for uid in uids:
                if uid in self._in_flight:
                    self._moved_while_in_flight.add(uid)
                elif uid in self._unschedulable:
                    self._unschedulable.discard(uid)
                    entry = self._entries.get(uid)
                    if entry is not None:
                        self._activate_or_backoff(entry)

    # -- the scheduling loop --------------------------------------------------------------------

    def pop(self, timeout: float | None = None) -> Entry | None:
        """The next pod to schedule; blocks until one is ready, the timeout ends, or close()."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while True:
                if self._closed:
                    return None
                self._flush_backoff()
                while self._active:
                    item = heapq.heappop(self._active)
                    if item.uid not in self._in_active:
                        continue
                    self._in_active.discard(item.uid)
                    entry = self._entries.get(item.uid)
                    if entry is None:
                        continue
                    self._in_flight.add(entry.uid)
                    return entry
                popped = self._pop_backoff()
                if popped is not None:
                    self._in_flight.add(popped.uid)
                    return popped
                now = self._clock()
                waits = [t - now for t, _, _ in self._backoff[:1]]
                if deadline is not None:
                    waits.append(deadline - now)
                    if deadline <= now:
                        return None
                wait = min(waits) if waits else None
                self._cond.wait(timeout=max(wait, 0.0) if wait is not None else None)

    def take(self, uids: Iterable[str]) -> list[Entry]:
        """The queued pods among ``uids`` (not in flight), now in flight, in queue order (priority,
        then arrival): the other members of a pod group come into its cycle with the one popped."""
        with self._cond:
            out = [e for u in uids if (e := self._entries.get(u)) is not None and u not in self._in_flight]
            for e in out:
                self._in_active.discard(e.uid)  # its heap and backoff items are skipped when met
                self._unschedulable.discard(e.uid)
                self._in_flight.add(e.uid)
            out.sort(key=lambda e: (-e.priority, e.seq))
            return out

    def done(self, uid: str) -> None:
        """Scheduled (or given up): forget the pod."""
        with self._cond:
            self._in_flight.discard(uid)
            self._moved_while_in_flight.discard(uid)
            self._entries.pop(uid, None)

    def failed(self, uid: str, *, retry_now: bool = False, unschedulable: bool = True) -> float:
        """The attempt failed: back off. An unschedulable pod also waits for a cluster change
        (unless one came meanwhile); other failures (a binding cycle that hit an API error) are
        retried when the backoff ends. Returns the backoff in seconds.
        """
        with self._cond:
            self._in_flight.discard(uid)
            entry = self._entries.get(uid)
            if entry is None:
                return 0.0
            entry.attempts += 1
            delay = min(self.initial_backoff * float(2 ** min(entry.attempts - 1, 32)), self.max_backoff)
            entry.backoff_until = self._clock() + delay
            moved = uid in self._moved_while_in_flight
            self._moved_while_in_flight.discard(uid)
            if retry_now:
                entry.backoff_until = 0.0
                self._activate_or_backoff(entry)
            elif moved or not unschedulable:
                self._activate_or_backoff(entry)
            else:
                self._unschedulable.add(uid)
            self._cond.notify_all()
            return delay

    def requeue(self, uid: str) -> None:
        """Give the pod back untouched (no attempt counted): this process may not schedule now."""
        with self._cond:
            self._in_flight.discard(uid)
            self._moved_while_in_flight.discard(uid)
            entry = self._entries.get(uid)
            if entry is not None:
                self._push_active(entry)
                self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # -- introspection ----------------------------------------------------------------------------

    def depth(self) -> dict[str, int]:
        with self._cond:
            return {
                "active": len(self._in_active),
                "backoff": len({u for _, _, u in self._backoff}),
                "unschedulable": len(self._unschedulable),
                "in_flight": len(self._in_flight),
            }

    def __len__(self) -> int:
        with self._cond:
            return len(self._entries)

    # -- internals --------------------------------------------------------------------------------

    def _activate_or_backoff(self, entry: Entry) -> None:
        now = self._clock()
        if entry.backoff_until > now:
            heapq.heappush(self._backoff, (entry.backoff_until, entry.seq, entry.uid))
        else:
            self._push_active(entry)
        self._cond.notify_all()

    def _push_active(self, entry: Entry) -> None:
        if entry.uid in self._in_active:
            return
        self._in_active.add(entry.uid)
        heapq.heappush(self._active, _Heap((-entry.priority, entry.seq), entry.uid))

    def _pop_backoff(self) -> Entry | None:
        """The pod whose backoff ends first, ahead of time (no pod is active)."""
        while self._backoff:
            until, _, uid = heapq.heappop(self._backoff)
            entry = self._entries.get(uid)
            if (
                entry is None
                or uid in self._in_flight
                or uid in self._unschedulable
                or uid in self._in_active
            ):
                continue
            if until != entry.backoff_until:
                continue  # an earlier backoff: the pod was queued again since, and that item stands
            return entry
        return None

    def _flush_backoff(self) -> None:
        now = self._clock()
        while self._backoff and self._backoff[0][0] <= now:
            _, _, uid = heapq.heappop(self._backoff)
            entry = self._entries.get(uid)
            if entry is None or uid in self._in_flight or uid in self._unschedulable:
                continue
            if entry.backoff_until <= now:
                self._push_active(entry)
