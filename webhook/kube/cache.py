"""The process-wide view of the cluster: informers (or a static snapshot) feeding one
``ClusterState`` behind one lock, shared by the webhook and the worker of one ``draxr serve``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..core.allocation.policy import DEFAULT_POLICY
from ..core.api.objects import Obj, name, namespace, not_older, uid
from ..core.api.podgroups import GroupKey, from_workload, group_of, key_of, workload_of
from ..core.api.specialclaims import is_special_claim
from ..core.cluster.allocated import allocated_devices
from ..core.cluster.state import STORAGE_KINDS as KEPT_STORAGE_KINDS
from ..core.cluster.state import ClusterState
from ..core.cluster.workloads import WORKLOAD_KINDS
from ..core.scheduling.framework import SCHEDULED, Decision
from ..core.scheduling.plugins.defaultpreemption import DefaultPreemption, PostFilterResult
from ..core.scheduling.podgroupcycle import GroupDecision, PodGroupCycle, PodGroupInfo
from ..core.scheduling.podgrouppreemption import GroupPreemption, preempt_for_group
from ..core.scheduling.podgroupsearch import DEFAULT_STEPS
from ..core.scheduling.sampling import ADAPTIVE
from ..core.scheduling.scheduler import Scheduler
from . import trim
from .client import KubeClient
from .informer import Informer
from .resources import (
    CSI_DRIVERS,
    CSI_NODES,
    CSI_STORAGE_CAPACITIES,
    DEVICE_CLASSES,
    DEVICE_TAINT_RULE_VERSIONS,
    NAMESPACES,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    POD_DISRUPTION_BUDGETS,
    POD_GROUP_VERSIONS,
    PODS,
    REPLICA_SETS,
    REPLICATION_CONTROLLERS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_QUOTAS,
    RESOURCE_SLICES,
    SERVICES,
    STATEFUL_SETS,
    STORAGE_CLASSES,
    VOLUME_ATTACHMENTS,
    WORKLOADS,
    Resource,
    device_taint_rules,
    pod_groups,
)

Listener = Callable[[str, str, Obj], None]  # (kind, event type, object)

KIND_OF = {
    "Node": NODES,
    "DeviceClass": DEVICE_CLASSES,
    "ResourceSlice": RESOURCE_SLICES,
    "ResourceClaim": RESOURCE_CLAIMS,
    "Pod": PODS,
    "DeviceTaintRule": device_taint_rules(DEVICE_TAINT_RULE_VERSIONS[0]),  # version found at start
    "ResourceQuota": RESOURCE_QUOTAS,
    "ResourceClaimTemplate": RESOURCE_CLAIM_TEMPLATES,
    "PersistentVolumeClaim": PERSISTENT_VOLUME_CLAIMS,
    "PersistentVolume": PERSISTENT_VOLUMES,
    "StorageClass": STORAGE_CLASSES,
    "CSINode": CSI_NODES,
    "CSIDriver": CSI_DRIVERS,
    "CSIStorageCapacity": CSI_STORAGE_CAPACITIES,
    "VolumeAttachment": VOLUME_ATTACHMENTS,
    "PodDisruptionBudget": POD_DISRUPTION_BUDGETS,
    "Namespace": NAMESPACES,
    "Service": SERVICES,
    "ReplicationController": REPLICATION_CONTROLLERS,
    "ReplicaSet": REPLICA_SETS,
    "StatefulSet": STATEFUL_SETS,
}
KIND_OF["PodGroup"] = pod_groups(POD_GROUP_VERSIONS[0])  # version found at start
KIND_OF["Workload"] = WORKLOADS
#: Kinds a cluster may not serve at all (an alpha API switched off): watched when served.
OPTIONAL_KINDS = {
    "DeviceTaintRule": DEVICE_TAINT_RULE_VERSIONS,
    "PodGroup": POD_GROUP_VERSIONS,
    "Workload": (WORKLOADS.version,),
}
#: The webhook reads ResourceClaims and ResourceClaimTemplates to route pods by the classes their
#: own claims use (the worker also keeps the rewrite's templates), and PodGroups to check a member
#: against its group.
WEBHOOK_KINDS = (
    "DeviceClass",
    "Node",
    "ResourceSlice",
    "ResourceClaim",
    "DeviceTaintRule",
    "ResourceQuota",
    "ResourceClaimTemplate",
    "PodGroup",
    "Workload",
)
#: What the volume plugins read (VolumeBinding, VolumeZone, NodeVolumeLimits, VolumeRestrictions).
STORAGE_KINDS = tuple(sorted(KEPT_STORAGE_KINDS))
#: The worker also keeps the pods, the storage kinds, the PodDisruptionBudgets preemption respects,
#: the Namespaces (their labels: pod affinity's namespace selectors) and the Services and workload
#: controllers (their selectors: PodTopologySpread's system defaults).
ALL_KINDS = (
    *WEBHOOK_KINDS,
    "Pod",
    *STORAGE_KINDS,
    "PodDisruptionBudget",
    "Namespace",
    *sorted(WORKLOAD_KINDS),
)


class ClusterCache:
    def __init__(self, state: ClusterState | None = None) -> None:
        self.state = state if state is not None else ClusterState()
        self.lock = threading.RLock()
        self.informers: dict[str, Informer] = {}
        self.pods: dict[str, Obj] = {}  # every pod by uid (the worker needs pending ones too)
        self._quotas: dict[tuple[str, str], Obj] = {}  # ResourceQuotas by (namespace, name)
        self._templates: dict[tuple[str, str], Obj] = {}  # ResourceClaimTemplates by (namespace, name)
        self._pdbs: dict[tuple[str, str], Obj] = {}  # PodDisruptionBudgets by (namespace, name)
        self._pod_groups: dict[GroupKey, Obj] = {}  # PodGroups by (namespace, name)
        self._workloads: dict[GroupKey, Obj] = {}  # 1.35's Workloads by (namespace, name)
        self._members: dict[GroupKey, set[str]] = {}  # the uids of each group's pods
        self._listeners: list[Listener] = []
        self._static_synced: set[str] = set()

    # -- sources --------------------------------------------------------------------------------

    @classmethod
    def from_objects(cls, objects: Iterable[Obj], state: ClusterState | None = None) -> ClusterCache:
        """A fixed snapshot (``--snapshot``, tests, ``plan``): synced from the start."""
        cache = cls(state)
        for obj in objects:
            kind = obj.get("kind")
            if isinstance(kind, str) and kind in KIND_OF:
                cache.handle(kind, "ADDED", obj)
        cache._static_synced = set(KIND_OF)
        return cache

    def start(
        self,
        client: KubeClient,
        kinds: Sequence[str] = ALL_KINDS,
        *,
        transforms: dict[str, trim.Transform | None] | None = None,
        **informer_args: Any,
    ) -> None:
        """One informer per kind. Each keeps only what draxr reads of its objects (``kube.trim``);
        ``transforms`` replaces that per kind (None: keep whole objects, for comparisons). Watching
        the storage kinds tells the volume plugins so: a claim not there is then missing."""
        if any(kind in STORAGE_KINDS for kind in kinds):
            with self.lock:
                self.state.volumes.watched = True
        for kind in kinds:
            res: Resource = KIND_OF[kind]
            chosen = transforms if transforms is not None else {}
            transform = chosen[kind] if kind in chosen else trim.for_kind(kind)
            inf = Informer(
                client,
                res,
                self._handler(kind),
                versions=OPTIONAL_KINDS.get(kind),
                transform=transform,
                **informer_args,
            )
            self.informers[kind] = inf
            inf.start()

    def stop(self) -> None:
        for inf in self.informers.values():
            inf.stop()

    def synced(self, kinds: Iterable[str] = WEBHOOK_KINDS) -> bool:
        for kind in kinds:
            if kind in self._static_synced:
                continue
            inf = self.informers.get(kind)
            if inf is None or not inf.synced.is_set():
                return False
        return True

    def holds(self, kind: str) -> bool:
        """Whether this cache keeps objects of ``kind`` at all (an informer, or a snapshot)."""
        return kind in self.informers or kind in self._static_synced

    def unsynced(self, kinds: Iterable[str]) -> list[tuple[str, str | None]]:
        """The kinds that have not synced yet, each with why its last list failed (None: no
        failure, the list is under way or its informer has not started)."""
        out: list[tuple[str, str | None]] = []
        for kind in kinds:
            if kind in self._static_synced:
                continue
            inf = self.informers.get(kind)
            if inf is None or not inf.synced.is_set():
                out.append((kind, inf.list_error if inf is not None else None))
        return out

    def wait_synced(self, kinds: Iterable[str], timeout: float) -> bool:
        """True once every kind has synced; False after ``timeout`` seconds in all."""
        deadline = time.monotonic() + timeout
        for kind in kinds:
            if kind in self._static_synced:
                continue
            inf = self.informers.get(kind)
            if inf is None or not inf.synced.wait(max(deadline - time.monotonic(), 0.0)):
                return False
        return True

    # -- events ---------------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def _handler(self, kind: str) -> Callable[[str, Obj], None]:
        def handle(etype: str, obj: Obj) -> None:
            self.handle(kind, etype, obj)

        return handle

    def handle(self, kind: str, etype: str, obj: Obj, *, notify: bool = True) -> None:
        deleted = etype == "DELETED"
        with self.lock:
            if kind == "Pod":
                if deleted:
                    self.pods.pop(uid(obj), None)
                else:
                    self.pods[uid(obj)] = obj
                group = group_of(obj)
                if group is not None:  # the group is immutable: a pod joins once, leaves when deleted
                    members = self._members.setdefault(group, set())
                    if deleted:
                        members.discard(uid(obj))
                        if not members:
                            del self._members[group]
                    else:
                        members.add(uid(obj))
            elif kind == "PodGroup":
                if deleted:
                    self._pod_groups.pop(key_of(obj), None)
                else:
                    self._pod_groups[key_of(obj)] = obj
            elif kind == "Workload":
                if deleted:
                    self._workloads.pop(key_of(obj), None)
                else:
                    self._workloads[key_of(obj)] = obj
            elif kind in ("ResourceQuota", "ResourceClaimTemplate", "PodDisruptionBudget"):
                index = {"ResourceQuota": self._quotas, "ResourceClaimTemplate": self._templates}.get(
                    kind, self._pdbs
                )
                if deleted:
                    index.pop((namespace(obj), name(obj)), None)
                else:
                    index[(namespace(obj), name(obj))] = obj
            self.state.apply(kind, obj, deleted)
        if notify:
            for listener in list(self._listeners):
                listener(kind, etype, obj)

    # -- what the webhook and the worker ask (each answer under the lock) -------------------------

    def pod(self, pod_uid: str) -> Obj | None:
        with self.lock:
            return self.pods.get(pod_uid)

    def device_class(self, class_name: str) -> Obj | None:
        with self.lock:
            return self.state.classes.get(class_name)

    def quotas(self) -> list[Obj]:
        with self.lock:
            return list(self._quotas.values())

    def has_template(self, namespace: str, name: str) -> bool:
        with self.lock:
            return (namespace, name) in self._templates

    def template(self, namespace: str, name: str) -> Obj | None:
        with self.lock:
            return self._templates.get((namespace, name))

    def templates(self) -> dict[tuple[str, str], Obj]:
        """ResourceClaimTemplates by (namespace, name)."""
        with self.lock:
            return dict(self._templates)

    def pod_disruption_budgets(self) -> list[Obj]:
        with self.lock:
            return list(self._pdbs.values())

    def pod_group(self, group: GroupKey) -> Obj | None:
        """The group's PodGroup, or for a 1.35 group its Workload's pod group read as one."""
        with self.lock:
            names = workload_of(group)
            if names is None:
                return self._pod_groups.get(group)
            workload = self._workloads.get(GroupKey(group.namespace, names[0]))
            return from_workload(workload, group) if workload is not None else None

    def node_of(self, pod_uid: str) -> str | None:
        """The node a pod counts on in the engine: bound there, or reserved (assumed) by a decision
        whose binding is under way."""
        with self.lock:
            return self.state.allocated.node_of(pod_uid)

    def pod_groups(self) -> dict[GroupKey, Obj]:
        with self.lock:
            return dict(self._pod_groups)

    def group_members(self, group: GroupKey) -> list[Obj]:
        """Every pod that names ``group``, in no particular order."""
        with self.lock:
            return [self.pods[u] for u in self._members.get(group, ()) if u in self.pods]

    def all_pods(self) -> dict[str, Obj]:
        """Every pod by uid (a copy of the index; the objects are shared, never mutate them)."""
        with self.lock:
            return dict(self.pods)

    def special_claim_for(self, pod: Obj) -> Obj | None:
        with self.lock:
            return self.state.allocated.special_claim_for(pod)

    def special_claims_of(self, pod: Obj) -> list[Obj]:
        with self.lock:
            return self.state.allocated.special_claims_of(pod)

    def special_claims(self) -> list[Obj]:
        with self.lock:
            return [c for c in self.state.allocated.claims.values() if is_special_claim(c)]

    def allocated(self, keys: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
        """Which of these claims the cache already shows allocated."""
        with self.lock:
            claims = self.state.allocated.claims
            return {k for k in keys if k in claims and allocated_devices(claims[k])}

    def caught_up(self, written: Mapping[tuple[str, str], str]) -> set[tuple[str, str]]:
        """Which claims (key: the resourceVersion a write left it at, "" unknown) the cache shows
        allocated, or at that resourceVersion or later: deallocated since, it holds nothing."""
        with self.lock:
            claims = self.state.allocated.claims
            out = set()
            for k, rv in written.items():
                claim = claims.get(k)
                if claim is not None and (allocated_devices(claim) or not_older(claim, rv)):
                    out.add(k)
            return out

    def forget_claim(self, claim: Obj) -> None:
        """A claim this process deleted: gone from the engine's view before the watch says so."""
        self.handle("ResourceClaim", "DELETED", claim, notify=False)

    def scheduler(
        self,
        policy: str = DEFAULT_POLICY,
        writer: str | None = None,
        percentage_of_nodes_to_score: int = ADAPTIVE,
    ) -> SharedScheduler:
        engine = Scheduler(
            self.state, policy, writer=writer, percentage_of_nodes_to_score=percentage_of_nodes_to_score
        )
        return SharedScheduler(self, engine)

    def forget_reservation(self, token: str) -> None:
        """Drop an in-flight reservation whose claims the cache now shows as written."""
        with self.lock:
            self.state.unreserve(token)


class SharedScheduler:
    """The engine over a cache's state: each phase that reads or changes the state holds the
    cache's lock, so informer events never interleave with a decision and its Reserve."""

    def __init__(self, cache: ClusterCache, engine: Scheduler) -> None:
        self._cache = cache
        self.engine = engine

    def schedule_and_reserve(self, pod: Obj) -> tuple[Decision, str | None]:
        """PreFilter, Score, Filter and, for a scheduled pod, Reserve, in one hold of the lock:
        the next decision already sees the devices."""
        with self._cache.lock:
            decision = self.engine.schedule(pod)
            token = self.engine.reserve(decision) if decision.status == SCHEDULED else None
        return decision, token

    def schedule_group_and_reserve(
        self, group: PodGroupInfo, *, topology_aware: bool = True, search_steps: int = DEFAULT_STEPS
    ) -> GroupDecision:
        """The pod group cycle in one hold of the lock; the members it places stay reserved."""
        cycle = PodGroupCycle(self.engine, topology_aware=topology_aware, search_steps=search_steps)
        with self._cache.lock:
            return cycle.schedule(group)

    def preempt_group(
        self,
        group: PodGroupInfo,
        pod_groups: Mapping[GroupKey, Obj],
        *,
        topology_aware: bool = True,
        search_steps: int = DEFAULT_STEPS,
    ) -> GroupPreemption:
        """Preemption for a whole pod group, in one hold of the lock (its dry run takes victims out
        of the state and puts them back)."""
        cycle = PodGroupCycle(self.engine, topology_aware=topology_aware, search_steps=search_steps)
        with self._cache.lock:
            return preempt_for_group(cycle, group, pod_groups)

    def preempt(self, pod: Obj, decision: Decision, pdbs: list[Obj]) -> PostFilterResult:
        """DefaultPreemption's choice for an unschedulable decision, in one hold of the lock (its
        dry run takes victims out of the state and puts them back)."""
        with self._cache.lock:
            return DefaultPreemption(self.engine).post_filter(pod, decision, pdbs)

    def unreserve(self, decision: Decision, token: str) -> None:
        """The in-memory half of Unreserve."""
        with self._cache.lock:
            self.engine.unreserve(decision, token)
