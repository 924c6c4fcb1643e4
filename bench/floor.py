"""The floor: what the API server can take of exactly draxr's writes, with no scheduling at all.

For every pod of a stream, a writer performs the five writes draxr's worker makes to place it
(PreBind, Bind and the Event), for a placement computed beforehand:

1. ``POST resourceclaims``: the special claim (``core.allocation.claims.special_claim``);
2. ``PUT resourceclaims/status``: its allocation and ``reservedFor`` (``with_reservation``);
3. ``PATCH pods/status``: the pod's ``extendedResourceClaimStatus`` (a merge patch with the uid);
4. ``POST pods/binding``;
5. ``POST events``: the ``Scheduled`` Event.

The placement is a slot per pod: device ``slot mod devices`` of node ``slot div devices``, the
slots taken in the stream's order (init pods first), so no device is given twice. Nothing is read
and nothing is decided: whatever time a scheduler takes beyond the floor's is its own. ``threads``
writers, each on a connection of its own, with no client-side rate limit: the fastest this
machine's API server takes these writes (``bench/versus_scheduler.py`` tries a few counts).
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field

from webhook.core.allocation.claims import extended_resource_claim_status, special_claim, with_reservation
from webhook.core.allocation.results import pinned_to
from webhook.core.api.objects import Obj
from webhook.core.scheduling.plugins.dynamicresources.mappings import request_name
from webhook.kube.client import MERGE_PATCH, KubeClient
from webhook.kube.resources import EVENTS, PODS, RESOURCE_CLAIMS
from webhook.worker.events import event_body, now_rfc3339

#: The floor's pods name this scheduler: neither kube-scheduler nor draxr places them.
SCHEDULER = "floor"


@dataclass(frozen=True)
class Slot:
    """Where the floor places a pod: ``device`` of ``node`` (its ``pool`` of ``driver``), for the
    pod's ``device_class`` and extended ``resource``."""

    node: str
    pool: str
    device: str
    driver: str
    device_class: str
    resource: str


def allocation(slot: Slot, request: str) -> Obj:
    """``status.allocation`` as draxr writes it for one device of a node-local slice."""
    result = {"request": request, "driver": slot.driver, "pool": slot.pool, "device": slot.device}
    return {"devices": {"results": [result]}, "nodeSelector": pinned_to(slot.node)}


def place(client: KubeClient, pod: Obj, slot: Slot) -> None:
    """The five writes that place ``pod`` on ``slot`` (see the module's docstring)."""
    meta = pod["metadata"]
    ns, pod_name, pod_uid = meta["namespace"], meta["name"], meta["uid"]
    container = pod["spec"]["containers"][0]["name"]
    request = request_name(0, 0)
    requests = [
        {
            "name": request,
            "exactly": {"deviceClassName": slot.device_class, "allocationMode": "ExactCount", "count": 1},
        }
    ]
    created = client.create(RESOURCE_CLAIMS, dict(special_claim(pod, requests)), ns)
    with_reservation(created, pod, allocation(slot, request))
    client.update(RESOURCE_CLAIMS, created, subresource="status")
    mapping = {"containerName": container, "resourceName": slot.resource, "requestName": request}
    erc = extended_resource_claim_status(created["metadata"]["name"], [mapping])
    client.patch(
        PODS,
        pod_name,
        {"metadata": {"uid": pod_uid}, "status": {"extendedResourceClaimStatus": erc}},
        namespace=ns,
        subresource="status",
        patch_type=MERGE_PATCH,
    )
    client.bind(ns, pod_name, pod_uid, slot.node)
    involved = {"apiVersion": "v1", "kind": "Pod", "name": pod_name, "namespace": ns, "uid": pod_uid}
    message = f"Successfully assigned {ns}/{pod_name} to {slot.node}"
    client.create(EVENTS, event_body(involved, "Normal", "Scheduled", message, now=now_rfc3339()), ns)


@dataclass
class FloorWriter:
    """``threads`` writers placing each pod handed to ``submit`` on its slot, as soon as it comes."""

    client: KubeClient
    threads: int
    errors: list[str] = field(default_factory=list)
    _queue: queue.SimpleQueue[tuple[Obj, Slot] | None] = field(default_factory=queue.SimpleQueue)
    _workers: list[threading.Thread] = field(default_factory=list)

    def __post_init__(self) -> None:
        for i in range(self.threads):
            t = threading.Thread(target=self._run, name=f"floor-{i}", daemon=True)
            t.start()
            self._workers.append(t)

    def submit(self, pod: Obj, slot: Slot) -> None:
        self._queue.put((pod, slot))

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            pod, slot = item
            try:
                place(self.client, pod, slot)
            except Exception as e:  # a floor that failed a pod says so; the watch sees it unbound
                self.errors.append(f"{pod['metadata']['name']}: {type(e).__name__}: {e}")

    def stop(self) -> None:
        for _ in self._workers:
            self._queue.put(None)
        for t in self._workers:
            t.join()
