"""VolumeBinding's PreBind in the worker (upstream ``BindPodVolumes``): the API writes the decision's
``PodVolumes`` call for (``core...volumebinding.prebind.api_writes``: each statically bound volume's
``claimRef``, then each WaitForFirstConsumer claim's ``volume.kubernetes.io/selected-node``), then
the wait until the PV controller and the external provisioner have bound every claim
(``check_bindings`` on the informers' objects), at most ``timeout`` seconds.

It runs before the claims' PreBind (upstream's PreBind order: VolumeBinding, then DynamicResources)
on a binding-pool thread, as upstream's binding cycle goroutine waits. The wait wakes on every claim
or volume event and at least every ``POLL_INTERVAL_SECONDS`` (upstream's poll). Any failure is a
``BindError`` with upstream's text: the cycle runs Unreserve and the pod is retried; the writes
already made are not undone (upstream neither: the provisioner may already act on them)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..core.api.objects import Obj, uid
from ..core.scheduling.framework import Decision
from ..core.scheduling.plugins.volumebinding.prebind import (
    BIND_TIMEOUT_SECONDS,
    POLL_INTERVAL_SECONDS,
    TIMED_OUT,
    BindingFailed,
    api_writes,
    check_bindings,
    prebind_error,
)
from ..kube.cache import ClusterCache
from ..kube.client import ApiError, KubeClient, NotLeader
from ..kube.resources import PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES
from .binder import BindError

_RESOURCES = {"persistentvolumes": PERSISTENT_VOLUMES, "persistentvolumeclaims": PERSISTENT_VOLUME_CLAIMS}


class VolumeBinder:
    def __init__(
        self,
        client: KubeClient,
        cache: ClusterCache,
        fence: Callable[[], bool] = lambda: True,
        timeout: float = BIND_TIMEOUT_SECONDS,
        stop: threading.Event | None = None,
    ) -> None:
        self.client = client
        self.cache = cache
        self.fence = fence
        self.timeout = timeout
        self.stop = stop or threading.Event()
        self._changed = threading.Condition()
        self._events = 0  # events seen, under ``_changed``
        cache.subscribe(self._on_event)

    def _on_event(self, kind: str, _etype: str, _obj: Obj) -> None:
        if kind in ("PersistentVolumeClaim", "PersistentVolume", "Node", "Pod"):
            with self._changed:
                self._events += 1
                self._changed.notify_all()

    def pre_bind(self, pod: Obj, decision: Decision) -> None:
        """Write, then wait for the bindings; raises ``BindError`` (or ``NotLeader``)."""
        volumes, node_name = decision.volumes, decision.node
        if not volumes or node_name is None:
            return
        written_volumes: list[tuple[Obj, Obj]] = []
        written_claims: list[Obj] = []
        statics = iter(volumes.static)
        for write in api_writes(volumes, node_name):
            if not self.fence():
                raise NotLeader("lost leadership; not writing")
            try:
                result = self.client.patch(
                    _RESOURCES[write.resource], write.name, write.patch, namespace=write.namespace or None
                )
            except ApiError as e:  # ``bindAPIUpdate``'s error, as the API server gave it
                raise BindError(prebind_error(e.message)) from e
            if write.resource == "persistentvolumes":
                written_volumes.append((next(statics).pvc, result))
            else:
                written_claims.append(result)
        self._wait(pod, node_name, written_volumes, written_claims)

    def _wait(
        self, pod: Obj, node_name: str, written_volumes: list[tuple[Obj, Obj]], written_claims: list[Obj]
    ) -> None:
        deadline = time.monotonic() + self.timeout
        while True:
            with self._changed:
                seen = self._events
            # Checked without ``_changed`` held: the cache's lock is never taken under it.
            try:
                if self._bound(pod, node_name, written_volumes, written_claims):
                    return
            except BindingFailed as e:
                raise BindError(prebind_error(str(e))) from e
            left = deadline - time.monotonic()
            if left <= 0 or self.stop.is_set():
                raise BindError(prebind_error(TIMED_OUT))
            with self._changed:
                if self._events == seen:
                    self._changed.wait(min(left, POLL_INTERVAL_SECONDS))

    def _bound(
        self, pod: Obj, node_name: str, written_volumes: list[tuple[Obj, Obj]], written_claims: list[Obj]
    ) -> bool:
        cache = self.cache
        with cache.lock:
            volumes = cache.state.volumes
            node = cache.state.nodes.by_name.get(node_name)
            return check_bindings(
                pod,
                node_name,
                node.node if node is not None else None,
                uid(pod) in cache.pods,
                written_volumes,
                written_claims,
                volumes.api_claim,
                volumes.api_volume,
            )
