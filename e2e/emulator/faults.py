"""Failure injection and the request log, for tests of retry, conflict and backoff behaviour.

A :class:`FaultRule` matches requests by verb, resource (``pods``, ``pods/status``, ``resource*``:
shell patterns over ``<resource>[/<subresource>]``) and namespace, and fires with a probability drawn
from one seeded RNG and/or for the next N matches. It injects latency, an error Status (409, 429 with
Retry-After, 500, or any code) or both. Everything is thread-safe.
"""

from __future__ import annotations

import random
import threading
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from . import errors

VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"})
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
#: The request log keeps this many records (counters are unbounded).
LOG_LIMIT = 200_000


@dataclass(slots=True)
class FaultRule:
    """One injected fault. ``times`` counts down (None: unlimited); ``hits`` counts firings."""

    verbs: frozenset[str] | None
    resource: str | None
    namespace: str | None
    error: int | None
    latency: float
    probability: float
    times: int | None
    retry_after: int
    message: str
    #: The first this many matching requests pass untouched (fail the third claim a cycle writes).
    skip: int = 0
    hits: int = 0
    active: bool = True

    def matches(self, verb: str, resource: str, namespace: str) -> bool:
        return (
            self.active
            and (self.verbs is None or verb in self.verbs)
            and (self.resource is None or fnmatchcase(resource, self.resource))
            and (self.namespace is None or namespace == self.namespace)
        )


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One served API request: what the request log keeps."""

    verb: str
    resource: str  # "pods" or "pods/status"; "" for discovery and other non-resource paths
    namespace: str
    name: str
    code: int
    user: str
    started: float
    duration: float
    dry_run: bool = False


@dataclass(frozen=True, slots=True)
class Fired:
    """What a matching rule asks the handler to do."""

    latency: float
    error: errors.ApiError | None


def _error_for(rule: FaultRule, group: str, resource: str, name: str) -> errors.ApiError | None:
    if rule.error is None:
        return None
    plural = resource.split("/", 1)[0]
    if rule.error == 409:
        return errors.conflict(group, plural, name or "unknown")
    if rule.error == 429:
        return errors.too_many_requests(rule.retry_after)
    if rule.error == 500:
        return errors.internal(rule.message)
    return errors.ApiError(rule.error, "InjectedFault", rule.message)


class FaultInjector:
    def __init__(self, seed: int = 0) -> None:
        self._lock = threading.Lock()
        self._rng = random.Random(seed)
        self._rules: list[FaultRule] = []
        self._log: deque[RequestRecord] = deque(maxlen=LOG_LIMIT)
        self._counts: Counter[tuple[str, str]] = Counter()

    def add(
        self,
        *,
        verbs: str | Iterable[str] | None = None,
        resource: str | None = None,
        namespace: str | None = None,
        error: int | None = None,
        latency: float = 0.0,
        probability: float = 1.0,
        times: int | None = None,
        retry_after: int = 1,
        message: str = "injected fault",
        skip: int = 0,
    ) -> FaultRule:
        verb_set = None if verbs is None else frozenset([verbs] if isinstance(verbs, str) else verbs)
        if verb_set is not None and not verb_set <= VERBS:
            raise ValueError(f"unknown verbs {sorted(verb_set - VERBS)}; known: {sorted(VERBS)}")
        if error is not None and not 400 <= error <= 599:
            raise ValueError("error must be an HTTP status code from 400 to 599")
        if error is None and latency <= 0:
            raise ValueError("a fault needs an error, a latency, or both")
        if not 0.0 <= probability <= 1.0:
            raise ValueError("probability must be within [0, 1]")
        if times is not None and times < 1:
            raise ValueError("times must be at least 1")
        if skip < 0:
            raise ValueError("skip must not be negative")
        rule = FaultRule(
            verb_set, resource, namespace, error, latency, probability, times, retry_after, message, skip
        )
        with self._lock:
            self._rules.append(rule)
        return rule

    def remove(self, rule: FaultRule) -> None:
        with self._lock:
            rule.active = False
            if rule in self._rules:
                self._rules.remove(rule)

    def clear(self) -> None:
        with self._lock:
            for rule in self._rules:
                rule.active = False
            self._rules.clear()

    def fire(self, verb: str, group: str, resource: str, namespace: str, name: str) -> Fired | None:
        """The first active rule that matches and wins its draw, consumed; None if none fires."""
        with self._lock:
            for rule in self._rules:
                if not rule.matches(verb, resource, namespace):
                    continue
                if rule.skip > 0:
                    rule.skip -= 1
                    continue
                if rule.probability < 1.0 and self._rng.random() >= rule.probability:
                    continue
                rule.hits += 1
                if rule.times is not None:
                    rule.times -= 1
                    if rule.times <= 0:
                        rule.active = False
                        self._rules.remove(rule)
                return Fired(rule.latency, _error_for(rule, group, resource, name))
        return None

    # --- request log ----------------------------------------------------------------------------

    def record(self, rec: RequestRecord) -> None:
        with self._lock:
            self._log.append(rec)
            self._counts[(rec.verb, rec.resource)] += 1

    def requests(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._log)

    def counts(self) -> dict[tuple[str, str], int]:
        """Requests per (verb, resource[/subresource]) since the last reset."""
        with self._lock:
            return dict(self._counts)

    def writes(self, resource: str | None = None) -> int:
        """Write requests (create, update, patch, delete), optionally for one resource pattern."""
        with self._lock:
            return sum(
                n
                for (verb, res), n in self._counts.items()
                if verb in WRITE_VERBS and (resource is None or fnmatchcase(res, resource))
            )

    def reset_log(self) -> None:
        with self._lock:
            self._log.clear()
            self._counts.clear()
