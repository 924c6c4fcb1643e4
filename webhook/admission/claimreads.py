"""The claims and templates a new pod names, for routing: from the cache, else from the API server.

A pod that consumes devices of a class draxr manages through its own ``spec.resourceClaims`` goes
to draxr's worker (one allocator per device pool), and routing is decided once, at admission. The
claim or template is usually in the cache; one created a moment before the pod may not have reached
the informer yet, so a miss is read from the API server (at most ``--class-read-timeout`` seconds,
as DeviceClasses are in ``classreads.py``). A claim that does not exist yet is routed to draxr: the
worker waits for it as kube-scheduler does. A read that fails routes the same way, with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..core.api.objects import Obj
from ..core.paths.consumed import CLAIM, ClaimClasses, ClaimSource, gather
from ..kube.cache import ClusterCache
from ..kube.client import ApiError
from ..kube.resources import RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS
from .blocking import MAY_BLOCK, WouldBlock

log = logging.getLogger("draxr.admission")

Observer = Callable[[str], None]  # called with "found", "missing" or "error" per read
#: (source, namespace, timeout) -> the object, None when it does not exist; raises on failure.
Getter = Callable[[ClaimSource, str, float], Obj | None]


class PodClaims:
    """``getter`` defaults to a GET through the client of the cache's ResourceClaim informer."""

    def __init__(
        self,
        cache: ClusterCache,
        timeout: float,
        observe: Observer | None = None,
        getter: Getter | None = None,
    ) -> None:
        self._cache = cache
        self._timeout = timeout
        self._observe = observe
        self._getter = getter

    def live(self) -> bool:
        """Only an informer-fed cache can lag behind; a snapshot is the whole truth."""
        return self._timeout > 0 and (self._getter is not None or "ResourceClaim" in self._cache.informers)

    def classes(self, namespace: str, sources: list[ClaimSource]) -> ClaimClasses:
        """What the pod's claims consume. Raises ``WouldBlock`` on the event loop when the cache
        misses one and the API server must be asked."""
        with self._cache.lock:
            cached = [(s, self._cached(namespace, s)) for s in sources]
        misses = [s for s, obj in cached if obj is None]
        if not misses or not self.live():
            return gather(cached)
        if not MAY_BLOCK.get():
            raise WouldBlock
        found: dict[ClaimSource, Obj | None] = {}
        problems: list[tuple[ClaimSource, str]] = []
        for source in misses:
            try:
                found[source] = self._read(source, namespace)
            except Exception as e:  # an unreadable claim must not fail the admission
                log.warning("reading %s in %s failed: %s", source, namespace, e)
                problems.append((source, _why(e)))
                self._note("error")
                continue
            self._note("found" if found[source] is not None else "missing")
        unreadable = {s for s, _ in problems}
        out = gather(
            (s, obj if obj is not None else found.get(s)) for s, obj in cached if s not in unreadable
        )
        out.unreadable = problems
        return out

    def _cached(self, namespace: str, source: ClaimSource) -> Obj | None:
        if source.kind == CLAIM:
            return self._cache.state.allocated.claims.get((namespace, source.name))
        return self._cache.template(namespace, source.name)

    def _read(self, source: ClaimSource, namespace: str) -> Obj | None:
        if self._getter is not None:
            return self._getter(source, namespace, self._timeout)
        client = self._cache.informers["ResourceClaim"].client
        resource = RESOURCE_CLAIMS if source.kind == CLAIM else RESOURCE_CLAIM_TEMPLATES
        try:
            return client.get(resource, source.name, namespace, timeout=self._timeout, retries=0)
        except ApiError as e:
            if e.not_found:
                return None
            raise

    def _note(self, result: str) -> None:
        if self._observe is not None:
            self._observe(result)


def _why(e: Exception) -> str:
    if isinstance(e, ApiError):
        return f"{e.status}: {e.message}" if e.status else e.message
    return f"{type(e).__name__}: {e}"
