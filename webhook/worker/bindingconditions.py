"""The wait for binding conditions (KEP-5007) between PreBind's writes and Bind, without a thread per pod.

Upstream's PreBind polls the claims every 5 s for up to ``bindingTimeout`` on the binding
goroutine. Here a binding cycle whose allocation carries ``bindingConditions`` registers its pod
and returns its pool thread; the informers' claim events (``ClusterCache.subscribe``) decide it:
every condition ``True`` on every claim -> ready; a failure condition ``True``, a claim deleted or
the pod deleted -> failed; one thread for all pods ends the waits whose ``bindingTimeout`` passed
(``device binding timeout``). Each wait ends once, through its ``done`` callback, with None (bind)
or upstream's error text (undo and retry).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..core.allocation.bindingconditions import (
    BINDING_TIMEOUT,
    BindingFailed,
    has_binding_conditions,
    ready_for_binding,
)
from ..core.api.objects import Obj, name, namespace, status, uid
from ..kube.cache import ClusterCache

log = logging.getLogger("draxr.worker")

ClaimKey = tuple[str, str]  # (namespace, name)
#: How one wait ends: None when the pod may bind, else why not (upstream's PreBind error).
Done = Callable[[str | None], None]

#: Upstream's ``bindingTimeout`` default (DynamicResourcesArgs), seconds.
BINDING_TIMEOUT_SECONDS = 600.0


@dataclass
class _Wait:
    pod_uid: str
    claims: tuple[ClaimKey, ...]
    deadline: float
    done: Done


class BindingConditionWaiter:
    def __init__(
        self,
        cache: ClusterCache,
        timeout: float = BINDING_TIMEOUT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cache = cache
        self.timeout = timeout
        self.clock = clock
        self._cond = threading.Condition()
        self._waits: dict[str, _Wait] = {}
        self._stopped = False
        self._thread: threading.Thread | None = None
        cache.subscribe(self._on_event)

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> BindingConditionWaiter:
        self._thread = threading.Thread(target=self._expire, name="binding-conditions", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the timeout thread; waits still open are dropped (a new leader resumes their pods)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def pending(self) -> int:
        """Pods waiting for binding conditions now."""
        with self._cond:
            return len(self._waits)

    # -- waits -------------------------------------------------------------------------------------

    def wait(self, pod: Obj, claims: list[ClaimKey], done: Done, elapsed: float = 0.0) -> None:
        """Wait for ``claims``' binding conditions; ``done`` is called once, maybe at once (the
        conditions may be met already), from this thread, an informer's or the timeout thread.
        ``elapsed``: seconds of ``timeout`` already spent (since an earlier ``allocationTimestamp``)."""
        deadline = self.clock() + self.timeout - max(elapsed, 0.0)
        with self._cond:
            self._waits[uid(pod)] = _Wait(uid(pod), tuple(claims), deadline, done)
            self._cond.notify_all()
        self._check(uid(pod))

    def _on_event(self, kind: str, etype: str, obj: Obj) -> None:
        if kind == "Pod" and etype == "DELETED":
            self._end(uid(obj), f"pod {namespace(obj)}/{name(obj)} got deleted in the meantime")
        elif kind == "ResourceClaim":
            key = (namespace(obj), name(obj))
            with self._cond:
                waiting = [w.pod_uid for w in self._waits.values() if key in w.claims]
            for pod_uid in waiting:
                if etype == "DELETED":
                    self._end(pod_uid, f"claim {key[0]}/{key[1]} got deleted in the meantime")
                else:
                    self._check(pod_uid)

    def _check(self, pod_uid: str) -> None:
        """Ready or failed, from the cache's copies of the claims (read without our lock held)."""
        with self._cond:
            wait = self._waits.get(pod_uid)
        if wait is None:
            return
        with self.cache.lock:
            claims = [self.cache.state.allocated.claims.get(k) for k in wait.claims]
        try:
            # A copy without binding conditions in its allocation predates PreBind's write: not yet.
            ready = all(
                c is not None and has_binding_conditions(status(c).get("allocation")) and ready_for_binding(c)
                for c in claims
            )
        except BindingFailed as e:
            self._end(pod_uid, str(e))
            return
        if ready:
            self._end(pod_uid, None)

    def _end(self, pod_uid: str, failure: str | None) -> None:
        with self._cond:
            wait = self._waits.pop(pod_uid, None)
        if wait is not None:
            wait.done(failure)

    def _expire(self) -> None:
        """End every wait whose deadline passed; sleep until the next deadline or a new wait."""
        while True:
            with self._cond:
                if self._stopped:
                    return
                now = self.clock()
                expired = [w for w in self._waits.values() if w.deadline <= now]
                for w in expired:
                    del self._waits[w.pod_uid]
                if not expired:
                    nearest = min((w.deadline for w in self._waits.values()), default=None)
                    self._cond.wait(None if nearest is None else max(nearest - now, 0.0))
                    continue
            for w in expired:
                try:
                    w.done(BINDING_TIMEOUT)
                except Exception:  # the thread must outlive one failing callback
                    log.exception("binding conditions: timeout callback failed")
