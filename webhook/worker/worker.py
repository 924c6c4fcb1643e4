"""The worker: schedules every pending pod whose ``spec.schedulerName`` is ours.

It is made of one part per concern, each in its own module, wired here:

- ``eventhandlers``: the informers (in ``ClusterCache``) call it; it turns events into queued work;
- ``scheduling``: one thread makes decisions one at a time under the cache lock (Reserve included,
  so the next decision already sees the devices), PostFilter, and the unschedulable pod's answer;
- ``bindingcycle``: a pool runs binding cycles (PreBind, Bind; Unreserve on failure) concurrently;
  ``volumebinding``: VolumeBinding's PreBind (the claims' selected node, waiting for the provisioner);
- ``bindingconditions``: the wait for devices' binding conditions (KEP-5007) between PreBind and
  Bind, on claim events and one timeout thread, not on a binding thread per pod;
- ``maintenance``: a thread frees the claims of finished pods, keeps the rewrite's templates and
  repairs orphans;
- ``leadership``: only the leader writes (its client is fenced: no write, no retry of one, leaves a
  worker that lost the lease); leading, the worker catches up at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from ..core.api.objects import Obj
from ..core.scheduling.framework import Decision
from ..kube.cache import ClusterCache
from ..kube.client import KubeClient
from ..kube.leader import LeaderElector
from .assumed import AssumedClaims, AssumedPods, LeftClaims
from .binder import Binder
from .bindingconditions import BindingConditionWaiter
from .bindingcycle import BindingCycle
from .claimwriter import ClaimWriter
from .cleanup import Cleaner
from .config import WorkerConfig
from .doubles import DoubleAllocations
from .eventhandlers import EventHandlers, is_ours
from .events import EVENT_SENDERS, EventRecorder
from .groupbinding import GroupBindingCycle
from .leadership import Leadership
from .maintenance import Maintenance
from .metrics import WorkerMetrics
from .nodevices import PodsWithoutDevices
from .podgroupscheduling import PodGroupScheduling
from .queue import SchedulingQueue
from .scheduling import SchedulingLoop
from .templates import TemplateKeeper
from .unmapped import UnmappedPods
from .volumebinding import VolumeBinder


class Worker:
    def __init__(
        self,
        client: KubeClient,
        cache: ClusterCache,
        config: WorkerConfig,
        metrics: WorkerMetrics,
        leader: LeaderElector | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cache = cache
        self.config = config
        self.metrics = metrics
        self.leadership = Leadership(leader, metrics.leader, self._on_leading)
        fence = self.leadership.is_leader
        #: Every write of the worker is fenced, retries included (``KubeClient.fenced``).
        self.client = client = client.fenced(fence, self.leadership.write_window)
        self.queue = SchedulingQueue(clock, config.initial_backoff, config.max_backoff)
        self.scheduler = cache.scheduler(
            config.policy, config.scheduler_name, config.percentage_of_nodes_to_score
        )
        #: The one writer of claims: the binding cycle's and cleanup's.
        self.claims = ClaimWriter(client, fence, metrics.on_claim)
        self.binder = Binder(
            client,
            config.scheduler_name,
            fence,
            binding_conditions=lambda: cache.state.devices.binding_conditions,
            claims=self.claims,
        )
        self.cleaner = Cleaner(client, self.claims)
        # A client of its own (kube-scheduler's event client): an Event for every pod bound takes
        # neither write tokens nor connections from the bindings; a connection per sender.
        self.events = EventRecorder(
            client.with_own_connections(EVENT_SENDERS), config.scheduler_name, config.identity
        )
        self.templates = TemplateKeeper(client, cache, fence, grace=config.template_grace)
        self.unmapped = UnmappedPods(metrics.unmapped, self.events, fence)
        self.maintenance = Maintenance(
            self.cleaner,
            self.templates,
            cache,
            metrics,
            fence,
            orphan_interval=config.orphan_interval,
            template_grace=config.template_grace,
            report=self.unmapped.report,
            reports=(
                DoubleAllocations(cache, self.events, metrics.double_allocated, fence),
                PodsWithoutDevices(cache, self.events, metrics.pods_without_devices, fence),
            ),
        )
        self.assumed_pods = AssumedPods(cache)
        assumed_claims = AssumedClaims(cache)
        left_claims = LeftClaims(cache)
        self._stop = threading.Event()
        self.volume_binder = VolumeBinder(client, cache, fence, config.bind_timeout, self._stop)
        self._pool = ThreadPoolExecutor(max_workers=config.bind_workers, thread_name_prefix="bind")
        self.binding_conditions = BindingConditionWaiter(cache, config.binding_timeout)
        self.binding = BindingCycle(
            self.binder,
            self.scheduler,
            self.queue,
            self.events,
            metrics,
            self.assumed_pods,
            assumed_claims,
            left_claims,
            self.volume_binder,
            self.binding_conditions,
            self._pool.submit,
        )
        self.scheduling = SchedulingLoop(
            client,
            cache,
            self.scheduler,
            self.queue,
            self.binder,
            self.binding,
            self._pool,
            self.events,
            metrics,
            self.assumed_pods,
            fence,
            config.scheduler_name,
        )
        self.scheduling.groups = PodGroupScheduling(
            client,
            cache,
            self.scheduler,
            self.queue,
            GroupBindingCycle(client, self.binding),
            self._pool,
            self.events,
            metrics,
            config.scheduler_name,
            self.scheduling.unschedulable_member,
            topology_aware=config.topology_aware,
            search_steps=config.gang_search_steps,
            two_phase_commit=config.gang_two_phase_commit,
        )
        self.handlers = EventHandlers(
            cache,
            self.queue,
            self.templates,
            self.assumed_pods,
            assumed_claims,
            self.maintenance.clean_up,
            config.scheduler_name,
            self.unmapped,
        )
        self._threads: list[threading.Thread] = []
        cache.subscribe(self.handlers.on_event)

    # -- leadership -----------------------------------------------------------------------------

    @property
    def leader(self) -> LeaderElector | None:
        return self.leadership.elector

    @leader.setter
    def leader(self, elector: LeaderElector | None) -> None:
        self.leadership.elector = elector

    def is_leader(self) -> bool:
        return self.leadership.is_leader()

    def on_leadership(self, leading: bool) -> None:
        """Leading (or starting without election, once the cache has synced): queue every pending
        pod and repair orphans at once: claims of pods deleted while no worker led still hold
        their devices."""
        self.leadership.changed(leading)

    def _on_leading(self) -> None:
        self.resync()
        self.maintenance.repair_soon()

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> Worker:
        self.events.start()
        self.binding_conditions.start()
        self.leadership.start()
        loops: tuple[tuple[Callable[[], None], str], ...] = (
            (lambda: self.scheduling.run(self._stop, self.leadership.leading), "schedule"),
            (lambda: self.maintenance.run(self._stop), "maintenance"),
        )
        for target, tname in loops:
            t = threading.Thread(target=target, name=tname, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        self._stop.set()
        self.leadership.leading.set()
        self.queue.close()
        for t in self._threads:
            t.join(timeout=10)
        self.binding_conditions.stop()
        self._pool.shutdown(wait=True, cancel_futures=False)
        self.events.stop()

    # -- what tests and the runtime ask ---------------------------------------------------------

    def resync(self) -> None:
        """Queue every pending pod and every finished pod's claim (after start or leadership)."""
        self.handlers.resync()

    def is_ours(self, pod: Obj) -> bool:
        return is_ours(pod, self.config.scheduler_name)

    def assumed(self, pod_uid: str) -> str | None:
        """The node this worker bound the pod to, while the cache does not show it yet."""
        return self.assumed_pods.node(pod_uid)

    def schedule_one(self, pod_uid: str) -> Decision | None:
        return self.scheduling.schedule_one(pod_uid)
