"""What every hook reads: the cluster cache, the settings and two small helpers built on them."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..core.api.objects import Obj
from ..core.paths.quota import QuotaRules, quota_rules
from ..kube.cache import ClusterCache
from ..kube.client import ApiError
from ..kube.resources import RESOURCE_CLAIMS
from .advice import FitAdvisor
from .blocking import MAY_BLOCK, WouldBlock
from .claimreads import PodClaims
from .classreads import ClassReader, Observer
from .config import AdmissionConfig

log = logging.getLogger("draxr.admission")

ClaimReader = Callable[[str, str], Obj | None]  # (namespace, name) -> the claim, None when gone


class ClaimWaiter:
    """Finds a ResourceClaim: in the cache, else in the API, else waiting a little for the cache.

    The scheduler creates the extended resource claim and then writes the pod's
    ``status.extendedResourceClaimStatus`` (upstream's write order), so when the webhook's informer
    has not seen the claim yet the API has it: one live read answers, where waiting for a watch
    that lags behind could deny a correct mapping. Only when the API cannot be asked (no informer,
    or the read fails) does the hook wait for the cache. A snapshot cache (``--snapshot``) never
    changes, so there is nothing to wait for.
    """

    def __init__(self, cache: ClusterCache, timeout: float, reader: ClaimReader | None = None) -> None:
        self._cache = cache
        self._timeout = timeout
        self._reader = reader
        self._changed = threading.Condition()
        self._events = 0
        cache.subscribe(self._on_event)

    def _on_event(self, kind: str, _etype: str, _obj: Obj) -> None:
        if kind == "ResourceClaim":
            with self._changed:
                self._events += 1
                self._changed.notify_all()

    def _static(self) -> bool:
        return self._cache.synced(["ResourceClaim"]) and "ResourceClaim" not in self._cache.informers

    def _lookup(self, namespace: str, claim_name: str) -> Obj | None:
        with self._cache.lock:
            return self._cache.state.allocated.claims.get((namespace, claim_name))

    def get(self, namespace: str, claim_name: str) -> Obj | None:
        # Never hold the condition and the cache lock together: a listener may run while its
        # caller holds the cache lock.
        with self._changed:
            seen = self._events
        claim = self._lookup(namespace, claim_name)
        if claim is not None or self._static():
            return claim
        if self.live():
            if not MAY_BLOCK.get():
                raise WouldBlock
            try:
                return self.fresh(namespace, claim_name)
            except (ApiError, OSError) as e:
                log.warning("reading ResourceClaim %s/%s failed: %s", namespace, claim_name, e)
        if self._timeout <= 0:
            return None
        if not MAY_BLOCK.get():
            raise WouldBlock
        deadline = time.monotonic() + self._timeout
        while claim is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            seen = self._wait_past(seen, remaining)
            claim = self._lookup(namespace, claim_name)
        return claim

    def live(self) -> bool:
        """Whether the API can be asked (an informer-fed cache, or a reader given for tests)."""
        return self._reader is not None or "ResourceClaim" in self._cache.informers

    def fresh(self, namespace: str, claim_name: str) -> Obj | None:
        """The claim as the API server has it now (None: gone). The cache may still hold a claim
        its writer deleted a moment ago. Raises ``WouldBlock`` on the event loop; API errors
        propagate (``ApiError``)."""
        if not MAY_BLOCK.get():
            raise WouldBlock
        if self._reader is not None:
            return self._reader(namespace, claim_name)
        client = self._cache.informers["ResourceClaim"].client
        try:
            return client.get(RESOURCE_CLAIMS, claim_name, namespace, timeout=self._timeout or 2.0, retries=0)
        except ApiError as e:
            if e.not_found:
                return None
            raise

    def _wait_past(self, seen: int, timeout: float) -> int:
        """Wait until a claim event after the ``seen``-th one; the number of events so far."""
        with self._changed:
            self._changed.wait_for(lambda: self._events != seen, timeout)
            return self._events


def _always_on() -> bool:
    return True


def _unknown_version() -> str:
    return ""


@dataclass(frozen=True)
class Context:
    cache: ClusterCache
    config: AdmissionConfig
    fit: FitAdvisor
    claims: ClaimWaiter
    classes: ClassReader
    #: Whether kube-apiserver keeps the KEP-5004 fields now (kube/gates.py's detector).
    apiserver_gate: Callable[[], bool] = _always_on
    #: kube-apiserver's ``gitVersion`` ("" unknown): its release's quota rules apply.
    apiserver_version: Callable[[], str] = _unknown_version
    #: The claims and templates new pods name (routing by their classes).
    pod_claims: PodClaims | None = None

    @classmethod
    def build(
        cls,
        cache: ClusterCache,
        config: AdmissionConfig,
        class_reads: Observer | None = None,
        apiserver_gate: Callable[[], bool] = _always_on,
        *,
        claim_reads: Observer | None = None,
    ) -> Context:
        return cls(
            cache,
            config,
            FitAdvisor(cache, config.fit_cache_size),
            ClaimWaiter(cache, config.claim_wait_seconds),
            ClassReader(cache, config.class_read_seconds, class_reads),
            apiserver_gate,
            pod_claims=PodClaims(cache, config.class_read_seconds, claim_reads),
        )

    def quota_rules(self) -> QuotaRules:
        """The served release's ResourceQuota rules for KEP-5004's objects (core/paths/quota.py)."""
        return quota_rules(self.apiserver_version() or None, self.apiserver_gate())

    def allowed_writer(self, username: str) -> bool:
        return bool(username) and username in self.config.allowed_writers
