"""``worker.maintenance``: queued special claims freed (a failed one again later), the API asked first
where the event came from the cache, and orphans repaired at once when asked, on the leader only."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from webhook.core.api.objects import Obj
from webhook.kube.cache import ClusterCache
from webhook.worker import maintenance
from webhook.worker.cleanup import Cleaner
from webhook.worker.maintenance import Cleanup, Maintenance
from webhook.worker.metrics import WorkerMetrics
from webhook.worker.templates import TemplateKeeper


class FakeCleaner:
    """Answers from a script; ``calls`` says what was asked, ``done`` is set after ``until`` calls."""

    def __init__(self, freed: list[bool], *, gone: bool = True, until: int = 1) -> None:
        self.freed = freed
        self.gone = gone
        self.calls: list[str] = []
        self.until = until
        self.done = threading.Event()
        self.unrepaired = 0

    def _note(self, call: str) -> None:
        self.calls.append(call)
        if len(self.calls) >= self.until:
            self.done.set()

    def confirm_gone(self, claim: Obj) -> bool:
        self._note(f"confirm {claim['metadata']['name']}")
        return self.gone

    def unreserve_and_delete(self, ns: str, claim: str, pod_uid: str) -> bool:
        self._note(f"free {ns}/{claim}")
        return self.freed.pop(0)

    def repair(self, claims: list[Obj], pod_exists: Callable[[str], Obj | None]) -> int:
        self.unrepaired = 1
        self._note("repair")
        return 2


class NoTemplates:
    def wanted(self) -> bool:
        return False

    def collect(self) -> int:
        return 0


def make(cleaner: FakeCleaner, *, leader: bool = True) -> tuple[Maintenance, CollectorRegistry]:
    registry = CollectorRegistry()
    m = Maintenance(
        cast(Cleaner, cleaner),
        cast(TemplateKeeper, NoTemplates()),
        ClusterCache.from_objects([]),
        WorkerMetrics(registry),
        lambda: leader,
        orphan_interval=3600.0,
        template_grace=60.0,
    )
    return m, registry


@pytest.fixture
def running() -> Iterator[Callable[[Maintenance], None]]:
    """Runs a maintenance loop on a thread until the test ends."""
    stop = threading.Event()
    threads: list[threading.Thread] = []

    def start(m: Maintenance) -> None:
        t = threading.Thread(target=m.run, args=(stop,), daemon=True)
        t.start()
        threads.append(t)

    yield start
    stop.set()
    for t in threads:
        t.join(timeout=5)


def test_a_claim_that_could_not_be_freed_is_tried_again(
    running: Callable[[Maintenance], None], monkeypatch: Any
) -> None:
    monkeypatch.setattr(maintenance, "RETRY_AFTER", 0.01)
    cleaner = FakeCleaner([False, True], until=2)
    m, _ = make(cleaner)
    m.clean_up(Cleanup("default", "c", "uid-p"))
    running(m)
    assert cleaner.done.wait(5)
    assert cleaner.calls == ["free default/c", "free default/c"]


def test_a_claim_from_the_cache_is_freed_only_once_the_api_agrees() -> None:
    claim: Obj = {"metadata": {"name": "c", "namespace": "default"}}
    still_used = FakeCleaner([], gone=False)
    m, _ = make(still_used)
    assert m._clean(Cleanup("default", "c", "uid-p", confirm=claim)) is True  # nothing to do
    assert still_used.calls == ["confirm c"]
    gone = FakeCleaner([True])
    m, _ = make(gone)
    assert m._clean(Cleanup("default", "c", "uid-p", confirm=claim)) is True
    assert gone.calls == ["confirm c", "free default/c"]


def test_repair_soon_repairs_at_once_and_reports(running: Callable[[Maintenance], None]) -> None:
    cleaner = FakeCleaner([])
    m, registry = make(cleaner)
    m.repair_soon()
    running(m)
    assert cleaner.done.wait(5)
    assert cleaner.calls == ["repair"]
    assert registry.get_sample_value("draxr_orphaned_claims") == 1
    assert registry.get_sample_value("draxr_orphaned_claims_repaired_total") == 2


def test_a_follower_frees_nothing_it_is_handed() -> None:
    cleaner = FakeCleaner([True])
    m, _ = make(cleaner, leader=False)
    stop = threading.Event()
    m.clean_up(Cleanup("default", "c", "uid-p"))
    m.cleanups.put(Cleanup("default", "last", "uid-q"))

    def stop_after_the_last() -> None:
        # The loop takes one item per turn: once the queue is empty, both went by untouched.
        while not m.cleanups.empty():
            stop.wait(0.01)
        stop.set()

    waiter = threading.Thread(target=stop_after_the_last, daemon=True)
    waiter.start()
    m.run(stop)
    waiter.join(timeout=5)
    assert cleaner.calls == []
