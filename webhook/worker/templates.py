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
is never made and the pod waits forever.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ..core.api.objects import Obj, meta, name, namespace
from ..core.paths.rewrite import TemplateRef, template, template_ref, templates_of, templates_used
from ..kube.cache import ClusterCache
from ..kube.client import ApiError, KubeClient
from ..kube.resources import RESOURCE_CLAIM_TEMPLATES
from .config import WorkerConfig

log = logging.getLogger("draxr.templates")

TemplateKey = tuple[str, str]  # (namespace, name)


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
        self._unused_since: dict[TemplateKey, float] = {}
        cache.subscribe(self._on_event)

    def _on_event(self, kind: str, etype: str, obj: Obj) -> None:
        if kind != "ResourceClaimTemplate" or etype != "DELETED" or template_ref(obj) is None:
            return
        gone: TemplateKey = (namespace(obj), name(obj))
        for pod in self.cache.all_pods().values():
            if namespace(pod) != gone[0] or meta(pod).get("deletionTimestamp"):
                continue
            for ref in templates_of(pod):
                if ref.name == gone[1]:
                    log.info(
                        "a pod still needs deleted ResourceClaimTemplate",
                        extra={"claim": f"{gone[0]}/{gone[1]}"},
                    )
                    with self._lock:
                        self._wanted[gone] = ref
                    return

    def want(self, pod: Obj) -> bool:
        """Note the templates a rewritten pod needs; True when some are missing."""
        refs = templates_of(pod)
        if not refs:
            return False
        ns = namespace(pod)
        # Called on every event of a rewritten pod: a lookup, not a copy of every template.
        missing = {(ns, r.name): r for r in refs if not self.cache.has_template(ns, r.name)}
        with self._lock:
            self._wanted.update(missing)
        return bool(missing)

    def wanted(self) -> bool:
        with self._lock:
            return bool(self._wanted)

    def ensure(self) -> int:
        """Create the templates wanted and missing; the number created."""
        with self._lock:
            wanted, self._wanted = self._wanted, {}
        created = 0
        for (ns, tname), ref in sorted(wanted.items()):
            if self.cache.has_template(ns, tname) or not self.fence():
                continue
            try:
                self.client.create(RESOURCE_CLAIM_TEMPLATES, template(ref, ns), ns)
                created += 1
                log.info("created ResourceClaimTemplate", extra={"claim": f"{ns}/{tname}"})
            except ApiError as e:
                if e.status == 409:
                    continue  # made meanwhile (by us, or a previous leader)
                log.warning("create ResourceClaimTemplate %s/%s: %s", ns, tname, e)
                with self._lock:
                    self._wanted.setdefault((ns, tname), ref)  # next round
        return created

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
            except ApiError as e:
                if not e.not_found:
                    log.warning("delete ResourceClaimTemplate %s/%s: %s", key[0], key[1], e)
                    continue
            self._unused_since.pop(key, None)
        for key in list(self._unused_since):
            if key not in self.cache.templates():
                del self._unused_since[key]
        return deleted
