"""The ResourceClaimTemplates rewritten pods' claims come from (core/paths/rewrite.py).

The webhook names the templates without writing anything (dry runs stay exact), so they are made
here, on first sight of a rewritten pod: one per (namespace, class, count), with a deterministic
name and ``app.kubernetes.io/managed-by: draxr``. The resourceclaim controller retries a pod whose
template does not exist yet, so a template made a moment after its first pod is in time.

A template no pod of its namespace uses for ``grace`` seconds is deleted, and one whose DeviceClass
is gone at once (no pod can be rewritten to it any more, and a claim it would still make could
never be allocated): its claims are owned by their pods and collected with them, so nothing of the
rewrite outlives the pods that use it (no orphans by construction). Only the leader writes.

A template of ours deleted while a pod that needs it is known (the collection raced a new pod still
on its way to the cache, or someone deleted it) is wanted again at once: without it the pod's claim
is never made and the pod waits forever. Never, though, one whose DeviceClass is gone (the
collection deleted it for that reason: wanting it again made a create and a delete every few
seconds), nor for a pod being deleted.

A create that fails is tried again after a growing backoff (1 s, doubling, at most 5 minutes), as
client-go's workqueue rate limiter does; one the API refuses for good (403: a namespace being
deleted; 404: a namespace gone; 422: invalid) is given up and not wanted again for 5 minutes. The
maintenance loop turns ten times a second: without this, it retried such a create at that rate,
forever.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Final

from ..core.api.objects import Obj, is_terminating, name, namespace
from ..core.paths.rewrite import TemplateRef, template, template_ref, templates_of, templates_used
from ..kube.cache import ClusterCache
from ..kube.client import ApiError, KubeClient, NotLeader
from ..kube.resources import RESOURCE_CLAIM_TEMPLATES
from .config import WorkerConfig

log = logging.getLogger("draxr.templates")

TemplateKey = tuple[str, str]  # (namespace, name)

#: A failed create is tried again after this many seconds, doubling per failure, at most ``BACKOFF_MAX``.
BACKOFF_INITIAL: Final = 1.0
BACKOFF_MAX: Final = 300.0
#: Statuses after which a create is not tried again (for ``BACKOFF_MAX``): retrying cannot help.
GIVE_UP_ON: Final = frozenset({403, 404, 422})


class TemplateKeeper:
    def __init__(
        self,
        client: KubeClient,
        cache: ClusterCache,
        fence: Callable[[], bool],
        *,
        grace: float = WorkerConfig.template_grace,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.cache = cache
        self.fence = fence
        self.grace = grace
        self._clock = clock
        self._lock = threading.Lock()
        self._wanted: dict[TemplateKey, TemplateRef] = {}
        self._due: dict[TemplateKey, float] = {}  # a failed create: not tried again before this
        self._failures: dict[TemplateKey, int] = {}
        self._given_up: dict[TemplateKey, float] = {}  # refused for good: not wanted before this
        self._unused_since: dict[TemplateKey, float] = {}
        cache.subscribe(self._on_event)

    def _on_event(self, kind: str, etype: str, obj: Obj) -> None:
        if kind != "ResourceClaimTemplate" or etype != "DELETED":
            return
        ref = template_ref(obj)
        if ref is None or self.cache.device_class(ref.device_class) is None:
            return  # not ours, or deleted because its class is gone: no pod can use it
        gone: TemplateKey = (namespace(obj), name(obj))
        for pod in self.cache.all_pods().values():
            if namespace(pod) != gone[0] or is_terminating(pod):
                continue
            if any(r.name == gone[1] for r in templates_of(pod)):
                log.info(
                    "a pod still needs deleted ResourceClaimTemplate", extra={"claim": f"{gone[0]}/{gone[1]}"}
                )
                with self._lock:
                    self._wanted[gone] = ref
                return

    def want(self, pod: Obj) -> bool:
        """Note the templates a rewritten pod needs; True when some are missing (a pod being
        deleted needs none; a template of a class that is gone is never wanted)."""
        if is_terminating(pod):
            return False
        refs = templates_of(pod)
        if not refs:
            return False
        ns = namespace(pod)
        # Called on every event of a rewritten pod: a lookup, not a copy of every template.
        missing = {
            (ns, r.name): r
            for r in refs
            if not self.cache.has_template(ns, r.name) and self.cache.device_class(r.device_class) is not None
        }
        if not missing:
            return False
        now = self._clock()
        with self._lock:
            for key, ref in missing.items():
                if self._given_up.get(key, now) > now:
                    continue
                self._given_up.pop(key, None)
                self._wanted[key] = ref
        return True

    def wanted(self) -> bool:
        """Some wanted template is due for a create now."""
        now = self._clock()
        with self._lock:
            return any(self._due.get(key, now) <= now for key in self._wanted)

    def ensure(self) -> int:
        """Create the templates wanted, missing and due; the number created."""
        now = self._clock()
        with self._lock:
            due = {k: r for k, r in self._wanted.items() if self._due.get(k, now) <= now}
            for key in due:
                del self._wanted[key]
            for key in [k for k, until in self._given_up.items() if until <= now]:
                del self._given_up[key]
        created = 0
        for (ns, tname), ref in sorted(due.items()):
            if self.cache.has_template(ns, tname) or self.cache.device_class(ref.device_class) is None:
                with self._lock:
                    self._forget_failures((ns, tname))
                continue
            if not self.fence():
                continue
            try:
                self.client.create(RESOURCE_CLAIM_TEMPLATES, template(ref, ns), ns)
                created += 1
                log.info("created ResourceClaimTemplate", extra={"claim": f"{ns}/{tname}"})
            except NotLeader:  # the fence fell meanwhile: the next leader makes it
                with self._lock:
                    self._wanted.setdefault((ns, tname), ref)
                continue
            except ApiError as e:
                if e.status != 409:  # 409: made meanwhile (by us, or a previous leader)
                    self._failed((ns, tname), ref, e, now)
                    continue
            with self._lock:
                self._forget_failures((ns, tname))
        return created

    def _failed(self, key: TemplateKey, ref: TemplateRef, error: ApiError, now: float) -> None:
        with self._lock:
            if error.status in GIVE_UP_ON:
                self._forget_failures(key)
                self._given_up[key] = now + BACKOFF_MAX
                log.warning("create ResourceClaimTemplate %s/%s: %s; given up", key[0], key[1], error)
                return
            failures = self._failures[key] = self._failures.get(key, 0) + 1
            delay = min(BACKOFF_INITIAL * 2 ** (failures - 1), BACKOFF_MAX)
            self._due[key] = now + delay
            self._wanted.setdefault(key, ref)
        log.warning("create ResourceClaimTemplate %s/%s: %s; again in %.0f s", key[0], key[1], error, delay)

    def _forget_failures(self, key: TemplateKey) -> None:
        """Under the lock."""
        self._failures.pop(key, None)
        self._due.pop(key, None)

    def collect(self) -> int:
        """Delete draxr's templates that no pod of their namespace has used for ``grace`` seconds,
        and those whose DeviceClass is gone."""
        now = self._clock()
        used: set[TemplateKey] = set()
        for pod in self.cache.all_pods().values():
            used.update((namespace(pod), tname) for tname in templates_used(pod))
        deleted = 0
        for key, obj in sorted(self.cache.templates().items()):
            ref = template_ref(obj)
            if ref is None:
                continue  # not ours
            class_gone = self.cache.device_class(ref.device_class) is None
            if key in used and not class_gone:
                self._unused_since.pop(key, None)
                continue
            since = self._unused_since.setdefault(key, now)
            if (not class_gone and now - since < self.grace) or not self.fence():
                continue
            try:
                self.client.delete(RESOURCE_CLAIM_TEMPLATES, key[1], key[0])
                deleted += 1
                log.info("deleted unused ResourceClaimTemplate", extra={"claim": f"{key[0]}/{key[1]}"})
            except NotLeader:
                continue  # the fence fell meanwhile: the next leader collects it
            except ApiError as e:
                if not e.not_found:
                    log.warning("delete ResourceClaimTemplate %s/%s: %s", key[0], key[1], e)
                    continue
            self._unused_since.pop(key, None)
        for key in list(self._unused_since):
            if key not in self.cache.templates():
                del self._unused_since[key]
        return deleted
