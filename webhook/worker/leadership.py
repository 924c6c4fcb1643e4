"""Leadership: only the leader writes, and a worker that starts to lead catches up at once.

The fence is the elector's (``kube/leader.py``): ``is_leader`` turns false on its own once renewals
stop, before the lease can expire, so every write checks it. Without leader election the worker
leads from the start. On leading, every pending pod is queued and orphans are repaired at once: the
claims of pods deleted while no worker led still hold their devices.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

from prometheus_client import Gauge

from ..kube.leader import LeaderElector


class Leadership:
    def __init__(self, elector: LeaderElector | None, gauge: Gauge, on_leading: Callable[[], None]) -> None:
        #: None: no leader election, this worker leads.
        self.elector = elector
        self._gauge = gauge
        self._on_leading = on_leading
        #: Set while leading (and on stop, to wake the loops that wait for it).
        self.leading = threading.Event()

    def is_leader(self) -> bool:
        return self.elector is None or self.elector.is_leader()

    def write_window(self) -> float:
        """Seconds a write sent now may take (``LeaderElector.write_window``); unbounded without
        leader election."""
        return math.inf if self.elector is None else self.elector.write_window()

    def start(self) -> None:
        if self.elector is None:
            self.leading.set()

    def changed(self, leading: bool) -> None:
        """The elector's callback (or, without election, once the cache has synced)."""
        self._gauge.set(1 if leading else 0)
        if leading:
            self.leading.set()
            self._on_leading()
        else:
            self.leading.clear()
