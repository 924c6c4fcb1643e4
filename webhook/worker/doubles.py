"""The double-allocation report (issue 20): a device two claims' allocations hold.

draxr routes every pod of the classes it manages to its worker, but pods reach another scheduler
anyway (opted-out namespaces, fail-open admission, pods older than draxr, ``--route=never``), and
two allocators that cannot see each other's in-flight decisions can give one device twice. The
cache counts every allocated claim, whoever allocated it (core/cluster/doubles.py); this report
says so loudly: ``draxr_double_allocated_devices`` on every replica, a log line naming the device
and both claims the first time it is seen, and, from the leader, a Warning Event on each claim and
on each pod that uses one. Nothing is freed: which claim should keep the device is the admin's call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import Gauge

from ..core.api.objects import Obj, as_dict, as_list, controller_ref, name, namespace, status, uid
from ..core.cluster.slices import DeviceKey
from ..kube.cache import ClusterCache
from .events import EventRecorder

log = logging.getLogger("draxr.worker")

REASON = "DeviceAllocatedTwice"
ClaimKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Double:
    """One device, the claims holding it, and the pods using those claims (namespace, name, uid)."""

    device: DeviceKey
    claims: tuple[Obj, ...]
    pods: tuple[tuple[str, str, str], ...]

    def message(self) -> str:
        driver, pool, device = self.device
        held = " and ".join(f"{namespace(c)}/{name(c)}" for c in self.claims)
        pods = ", ".join(f"{ns}/{n}" for ns, n, _ in self.pods) or "none yet"
        return (
            f"device {driver}/{pool}/{device} is allocated to ResourceClaims {held} at once (pods: {pods}): "
            "two schedulers allocated from one pool; route every pod of the class to one scheduler "
            "(draxr serve --managed-classes) and delete one of the pods"
        )


def claim_pods(claim: Obj) -> list[tuple[str, str, str]]:
    """The pods a claim is reserved for, else its owner pod (a special claim before reservation)."""
    ns = namespace(claim)
    out = [
        (ns, str(r.get("name")), str(r.get("uid")))
        for r in map(as_dict, as_list(status(claim).get("reservedFor")))
        if r.get("resource") == "pods" and r.get("name")
    ]
    owner = controller_ref(claim)
    if not out and owner is not None and owner.get("kind") == "Pod":
        out.append((ns, str(owner.get("name")), str(owner.get("uid"))))
    return out


def find_doubles(cache: ClusterCache) -> list[Double]:
    """Every double allocation the cache sees now."""
    with cache.lock:
        allocated = cache.state.allocated
        found = allocated.holders.double_allocated()
        claims = {
            d: tuple(allocated.claims[k] for k in keys if k in allocated.claims) for d, keys in found.items()
        }
    out: list[Double] = []
    for device, held in claims.items():
        pods = tuple(dict.fromkeys(p for c in held for p in claim_pods(c)))
        out.append(Double(device, held, pods))
    return out


class DoubleAllocations:
    """Checks the cache (``check``, from the maintenance loop every ``every`` seconds) and reports
    what is new."""

    every = 1.0

    def __init__(
        self, cache: ClusterCache, events: EventRecorder, gauge: Gauge, is_leader: Callable[[], bool]
    ) -> None:
        self.cache = cache
        self.events = events
        self.gauge = gauge
        self.is_leader = is_leader
        self._logged: set[tuple[DeviceKey, tuple[str, ...]]] = set()
        self._told: set[tuple[DeviceKey, tuple[str, ...]]] = set()

    def check(self) -> list[Double]:
        doubles = find_doubles(self.cache)
        self.gauge.set(len(doubles))
        now = set()
        for double in doubles:
            seen = (double.device, tuple(uid(c) for c in double.claims))
            now.add(seen)
            if seen not in self._logged:
                log.error("double allocation: %s", double.message())
            if seen not in self._told and self.is_leader() and self._tell(double):
                self._told.add(seen)
        self._logged = now
        self._told &= now
        return doubles

    def _tell(self, double: Double) -> bool:
        message = double.message()
        ok = True
        for claim in double.claims:
            ok &= self.events.event(
                claim, "Warning", REASON, message, kind="ResourceClaim", api_version="resource.k8s.io/v1"
            )
        for ns, pod_name, pod_uid in double.pods:
            pod = {"metadata": {"namespace": ns, "name": pod_name, "uid": pod_uid}}
            ok &= self.events.event(pod, "Warning", REASON, message)
        return ok
