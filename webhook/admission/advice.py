"""Warnings for pod authors that only the running webhook can give (``kubectl`` prints them at
create time, and under ``--dry-run=server``); those that follow from the pod and the cluster alone
are core's (core/paths/explain.py).

* a decision taken from the cache alone, because the fresh DeviceClass list failed;
* no node can run the pod right now: the scheduling engine's own explanation (``FitAdvisor``).

The apiserver shows warnings verbatim; each is kept to ``MAX_WARNING_LENGTH`` characters.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import OrderedDict
from typing import Final

from ..core.api.messages import clip
from ..core.api.objects import Obj, meta, name, spec, uid
from ..core.scheduling.framework import ERROR, SCHEDULED
from ..core.scheduling.scheduler import Scheduler
from ..kube.cache import ClusterCache

log = logging.getLogger("draxr.admission")

PLACEHOLDER_NAME: Final = "<generated>"
PLACEHOLDER_UID: Final = "00000000-0000-0000-0000-000000000000"


def stale_classes_warning(decision: str, error: str) -> str:
    return clip(f"{decision} follows draxr's cache, DeviceClasses could not be listed: {error}")


def fit_warning(status: str, message: str) -> str:
    lead = "scheduling check failed" if status == ERROR else "no node can run this pod now"
    return clip(f"{lead}: {message}")


def _spec_digest(pod_spec: Obj) -> bytes:
    text = json.dumps(pod_spec, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.blake2b(text.encode("ascii"), digest_size=16).digest()


class FitAdvisor:
    """Runs the scheduling engine on a copy of a new pod and remembers the answer.

    The answer depends only on the cluster state (its ``version`` bumps on every change), the pod's
    namespace, name, uid and spec; a burst of identical pods (a Deployment scaling up) costs one
    decision per state version.
    """

    def __init__(self, cache: ClusterCache, size: int = 256) -> None:
        self._cache = cache
        self._size = max(size, 0)
        self._answers: OrderedDict[tuple[int, str, str, str, bytes], str | None] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def warning(self, pod: Obj, namespace: str) -> str | None:
        """None when some node fits the pod, else the warning to show."""
        pod_spec = {k: v for k, v in spec(pod).items() if k != "schedulerName"}
        pod_name = name(pod) or PLACEHOLDER_NAME
        pod_uid = uid(pod) or PLACEHOLDER_UID
        digest = _spec_digest(pod_spec)
        candidate = {
            **pod,
            "metadata": {**meta(pod), "name": pod_name, "uid": pod_uid, "namespace": namespace},
            "spec": pod_spec,
        }
        with self._cache.lock:
            key = (self._cache.state.version, namespace, pod_name, pod_uid, digest)
            with self._lock:
                if key in self._answers:
                    self._answers.move_to_end(key)
                    self.hits += 1
                    return self._answers[key]
            try:
                decision = Scheduler(self._cache.state).schedule(candidate, score=False)
            except Exception:  # advice only: a failure must not fail the admission of the pod
                log.exception("fit check failed for a pod in namespace %s", namespace)
                return None
        answer = None if decision.status == SCHEDULED else fit_warning(decision.status, decision.message)
        with self._lock:
            self.misses += 1
            if self._size:
                self._answers[key] = answer
                while len(self._answers) > self._size:
                    self._answers.popitem(last=False)
        return answer
