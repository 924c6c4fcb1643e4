"""The maintenance thread: what the worker keeps tidy besides scheduling (upstream's resourceclaim
controller, and a garbage collection of its own).

Special claims the event handlers queue (a finished or deleted pod's, an orphan's) are freed one at
a time, a failed one again after two seconds; the rewrite's ResourceClaimTemplates are made when
wanted and collected every few seconds; orphans are repaired every ``orphan_interval`` seconds, and
at once when this worker starts to lead; the reports (``doubles.py``, ``nodevices.py``) look at the
cache every ``every`` seconds. Only the leader writes.
"""

from __future__ import annotations

import logging
import queue as stdqueue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..core.api.objects import Obj
from ..kube.cache import ClusterCache
from .cleanup import Cleaner
from .metrics import WorkerMetrics
from .templates import TemplateKeeper

log = logging.getLogger("draxr.worker")

#: A special claim that could not be freed is tried again after this many seconds.
RETRY_AFTER = 2.0


class Report(Protocol):
    """A periodic look at the cache that reports what it finds (doubles.py, nodevices.py)."""

    every: float

    def check(self) -> object: ...


@dataclass(frozen=True, slots=True)
class Cleanup:
    """A special claim to unreserve and delete; ``confirm``: ask the API first whether its pod still
    uses it."""

    namespace: str
    claim: str
    pod_uid: str
    confirm: Obj | None = None


class Maintenance:
    def __init__(
        self,
        cleaner: Cleaner,
        templates: TemplateKeeper,
        cache: ClusterCache,
        metrics: WorkerMetrics,
        is_leader: Callable[[], bool],
        *,
        orphan_interval: float,
        template_grace: float,
        report: Callable[[], None] = lambda: None,
        reports: Sequence[Report] = (),
    ) -> None:
        """``report``: called every turn, writes the Events of anomalies the event handlers saw
        (``UnmappedPods.report``)."""
        self.cleaner = cleaner
        self.templates = templates
        self.cache = cache
        self.metrics = metrics
        self.is_leader = is_leader
        self.orphan_interval = orphan_interval
        self.template_grace = template_grace
        self.report = report
        self.reports = reports
        #: Special claims to free, in the order their events came.
        self.cleanups: stdqueue.Queue[Cleanup] = stdqueue.Queue()
        self._repair_now = threading.Event()

    def clean_up(self, item: Cleanup) -> None:
        self.cleanups.put(item)

    def repair_soon(self) -> None:
        """Repair orphans on the next turn of the loop, not at the next interval."""
        self._repair_now.set()

    def run(self, stop: threading.Event) -> None:
        next_repair = time.monotonic() + self.orphan_interval
        collect_every = min(max(self.template_grace / 2, 0.1), 5.0)
        next_collect = time.monotonic() + collect_every
        next_report = [time.monotonic()] * len(self.reports)
        while not stop.is_set():
            try:
                item = self.cleanups.get(timeout=0.1)
            except stdqueue.Empty:
                item = None
            if item is not None and self.is_leader() and not self._clean(item):
                self._retry_later(item)
            if self.templates.wanted() and self.is_leader():
                self.templates.ensure()
            self.report()
            if time.monotonic() >= next_collect:
                next_collect = time.monotonic() + collect_every
                if self.is_leader():
                    self.templates.collect()
            for i, report in enumerate(self.reports):
                if time.monotonic() >= next_report[i]:
                    next_report[i] = time.monotonic() + report.every
                    report.check()
            if self._repair_now.is_set() or time.monotonic() >= next_repair:
                self._repair_now.clear()
                next_repair = time.monotonic() + self.orphan_interval
                if self.is_leader():
                    self.repair_orphans()

    def _clean(self, item: Cleanup) -> bool:
        """Free one special claim; True when nothing is left to do."""
        if item.confirm is not None and not self.cleaner.confirm_gone(item.confirm):
            return True  # the API says its pod still uses it
        return self.cleaner.unreserve_and_delete(item.namespace, item.claim, item.pod_uid)

    def _retry_later(self, item: Cleanup) -> None:
        timer = threading.Timer(RETRY_AFTER, self.cleanups.put, args=(item,))
        timer.daemon = True
        timer.start()

    def repair_orphans(self) -> int:
        repaired = self.cleaner.repair(self.cache.special_claims(), self.cache.all_pods().get)
        self.metrics.orphans.set(self.cleaner.unrepaired)
        if repaired:
            self.metrics.orphans_repaired.inc(repaired)
        return repaired
