"""What a binding cycle wrote that the informers do not show yet, held until they do.

kube-scheduler assumes a pod it bound until its cache shows the binding, and the DRA plugin keeps a
claim it wrote in an assume cache until the informer catches up. The worker does both: an event of a
bound pod that still shows no node must not schedule it again, and a decision's reservation of
devices stays until the cache shows the claims that hold them. A special claim a failed cycle could
not delete holds its pod's next attempt until the cache shows it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from ..core.api.objects import Obj, meta, name, namespace, not_older, spec, uid
from ..core.cluster.allocated import allocated_devices
from ..kube.cache import ClusterCache

ClaimKey = tuple[str, str]  # (namespace, name)


class AssumedPods:
    """Pods this worker bound that the cache still shows unbound. A late event of such a pod (its
    mapping's status write, say) must not schedule it again, or PostFilter would take the claim of
    a bound pod for a stale one and delete it."""

    def __init__(self, cache: ClusterCache) -> None:
        self._cache = cache
        self._nodes: dict[str, str] = {}
        self._lock = threading.Lock()

    def assume(self, pod_uid: str, node: str) -> None:
        """After Bind; nothing when the cache already shows the pod bound, or gone. Under the lock
        the event handlers take, so that the event showing the node cannot slip in between."""
        with self._lock:
            current = self._cache.pod(pod_uid)
            if current is not None and not spec(current).get("nodeName"):
                self._nodes[pod_uid] = node

    def node(self, pod_uid: str) -> str | None:
        """The node this worker bound the pod to, while the cache does not show it yet."""
        with self._lock:
            return self._nodes.get(pod_uid)

    def stale(self, etype: str, pod: Obj) -> bool:
        """True for an event older than this worker's binding of the pod (it shows no node yet);
        the event that shows the node, or the deletion, ends the assumption."""
        with self._lock:
            if uid(pod) not in self._nodes:
                return False
            if etype != "DELETED" and not spec(pod).get("nodeName"):
                return True
            del self._nodes[uid(pod)]
            return False


class AssumedClaims:
    """Each bound pod's in-flight reservation, until the cache shows every claim its binding cycle
    wrote as written or later: allocated, deallocated since (at a newer resourceVersion: a relist
    after a watch gap may show only that), or gone. Then the cache forgets the reservation and
    counts the claims instead. An older event (the creation, before the status write) keeps it."""

    def __init__(self, cache: ClusterCache) -> None:
        self._cache = cache
        #: token -> the claims it waits for, each with the resourceVersion the cycle left it at.
        self._waiting: dict[str, dict[ClaimKey, str]] = {}
        self._lock = threading.Lock()

    def hold(self, token: str, written: Mapping[ClaimKey, str]) -> None:
        """Keep the reservation ``token`` until the cache shows ``written`` (key: resourceVersion,
        "" unknown); forget it at once when it already does (the watch was faster)."""
        with self._lock:
            shown = self._cache.caught_up(written)
            waiting = {k: rv for k, rv in written.items() if k not in shown}
            if waiting:
                self._waiting[token] = waiting
        if not waiting:
            self._cache.forget_reservation(token)

    def seen(self, etype: str, claim: Obj) -> None:
        """A claim event: the reservations that waited only for this claim are forgotten."""
        deleted_or_allocated = etype == "DELETED" or bool(allocated_devices(claim))
        written = (namespace(claim), name(claim))
        done: list[str] = []
        with self._lock:
            for token, keys in self._waiting.items():
                rv = keys.get(written)
                if rv is None or not (deleted_or_allocated or not_older(claim, rv)):
                    continue
                del keys[written]
                if not keys:
                    done.append(token)
            for token in done:
                del self._waiting[token]
        for token in done:
            self._cache.forget_reservation(token)


class LeftClaims:
    """Special claims that failed binding cycles created and could not delete (a fenced Unreserve:
    the lease lost for a moment), one per pod, until the cache shows them. The pod's next attempt
    waits for that: deciding before, it would find no claim of the pod and create a second one.
    A claim is waited for at most ``hold`` seconds: one deleted before the watch showed it (a
    relist that never lists it) holds its pod no longer, and a second claim is freed anyway once
    the pod is seen bound with the other (``eventhandlers``)."""

    def __init__(self, cache: ClusterCache, hold: float = 10.0, clock: Callable[[], float] = time.monotonic):
        self._cache = cache
        self._hold = hold
        self._clock = clock
        #: pod uid -> (the claim's key, its resourceVersion when created, since when it is waited for).
        self._left: dict[str, tuple[ClaimKey, str, float]] = {}
        self._lock = threading.Lock()

    def leave(self, pod_uid: str, claim: Obj) -> None:
        with self._lock:
            key = (namespace(claim), name(claim))
            self._left[pod_uid] = (key, str(meta(claim).get("resourceVersion") or ""), self._clock())

    def waits(self, pod_uid: str) -> bool:
        """Whether the pod's next attempt must wait: its left claim is not in the cache yet."""
        with self._lock:
            entry = self._left.get(pod_uid)
            if entry is None:
                return False
            key, rv, since = entry
            if self._clock() - since < self._hold and not self._cache.caught_up({key: rv}):
                return True
            del self._left[pod_uid]
            return False

    def forget(self, pod_uid: str) -> None:
        """The pod left the queue (bound, gone)."""
        with self._lock:
            self._left.pop(pod_uid, None)
