"""Read-your-writes for DeviceClasses at pod admission.

Routing is decided once, at admission (``spec.schedulerName`` cannot change later), from the
informer-fed cache. A DeviceClass created a moment before the pod (``kubectl apply -f class.yaml
-f job.yaml``) may not have reached the informer yet; trusting the cache would then leave the pod
with the default scheduler for good. Upstream's kube-scheduler has no such problem because it
retries when the class arrives. So when the cache knows no class for a requested name, the webhook
lists the DeviceClasses from the API server and resolves the name against that fresh list.

Concurrent admissions share one list: a request waits for a list that *started after it arrived*
(an older one might predate the class), and at most one list is in flight at a time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..core.api.objects import Obj
from ..core.cluster.deviceclasses import ClassResolver
from ..core.paths.requested import backing_classes
from ..kube.cache import ClusterCache
from ..kube.client import ApiError
from ..kube.resources import DEVICE_CLASSES
from .blocking import MAY_BLOCK, WouldBlock

log = logging.getLogger("draxr.admission")

Observer = Callable[[str], None]  # called with "found", "none" or "error" per read
Lister = Callable[[float], list[Obj]]  # DeviceClasses from the API server, within the timeout


@dataclass(frozen=True)
class FreshClasses:
    """What a fresh list says about names the cache could not resolve."""

    resolved: dict[str, str]  # resource name -> DeviceClass
    error: str | None = None  # why the list failed (the cache's answer stands)


class ClassReader:
    """``lister`` defaults to a list through the client of the cache's DeviceClass informer."""

    def __init__(
        self,
        cache: ClusterCache,
        timeout: float,
        observe: Observer | None = None,
        lister: Lister | None = None,
    ) -> None:
        self._cache = cache
        self._timeout = timeout
        self._observe = observe
        self._lister = lister
        self._cond = threading.Condition()
        self._started = 0  # lists started so far
        self._finished = 0  # the number of the newest finished list
        self._running = False
        self._result: list[Obj] | str = []  # the newest list's items, or its error

    def live(self) -> bool:
        """Only an informer-fed cache can lag behind; a snapshot is the whole truth."""
        return self._timeout > 0 and (self._lister is not None or "DeviceClass" in self._cache.informers)

    def resolve(self, names: list[str]) -> FreshClasses:
        """Resolve ``names`` against a DeviceClass list that started after this call."""
        if not names or not self.live():
            return FreshClasses({})
        outcome = self.classes()
        if isinstance(outcome, str):
            self._note("error")
            return FreshClasses({}, outcome)
        resolved = backing_classes(names, ClassResolver(outcome))
        self._note("found" if resolved else "none")
        return FreshClasses(resolved)

    def classes(self) -> list[Obj] | str:
        """Every DeviceClass, from a list that started after this call, or why there is none.
        Call only when ``live()``."""
        if not MAY_BLOCK.get():
            raise WouldBlock
        return self._fresh_list()

    def _note(self, result: str) -> None:
        if self._observe is not None:
            self._observe(result)

    def _fresh_list(self) -> list[Obj] | str:
        deadline = time.monotonic() + self._timeout
        with self._cond:
            needed = self._started + 1
            while self._finished < needed:
                if not self._running:
                    self._running = True
                    self._started += 1
                    mine = self._started
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return f"no DeviceClass list within {self._timeout:g}s"
                self._cond.wait(remaining)
            else:
                return self._result
        result = self._list(deadline)
        with self._cond:
            self._result = result
            self._finished = mine
            self._running = False
            self._cond.notify_all()
        return result

    def _list(self, deadline: float) -> list[Obj] | str:
        try:
            return (self._lister or self._list_from_api)(max(deadline - time.monotonic(), 0.1))
        except ApiError as e:
            log.warning("listing DeviceClasses failed: %s", e)
            return f"{e.status}: {e.message}" if e.status else e.message
        except Exception as e:  # a broken response must not fail the admission
            log.warning("listing DeviceClasses failed: %s: %s", type(e).__name__, e)
            return f"{type(e).__name__}: {e}"

    def _list_from_api(self, timeout: float) -> list[Obj]:
        client = self._cache.informers["DeviceClass"].client
        items = client.list(DEVICE_CLASSES, timeout=timeout, retries=0).get("items")
        return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []
