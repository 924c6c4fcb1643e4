"""The special claim's device requests and the pod's request mappings (``createRequestsAndMappings``).

For each resource that needs DRA on the chosen node (sorted by name):

* every long-lived container (regular or sidecar) with a non-zero integer request gets its own
  request ``container-<i>-request-<r>``, where ``i`` indexes ``initContainers ++ containers`` and
  ``r`` is the position of the resource among the container's *sorted request keys* (cpu too);
* a short-lived init container first reuses long-lived requests at its own or a later index (those
  containers have not started yet), then asks for the remainder; only the largest remainder over all
  short-lived containers is kept and their mappings are rewritten to it.

Requests come out sorted by name; mappings long-lived first, then short-lived, per resource. Each
request carries the tolerations the class's ``draxr.io/extended-resource-tolerations`` names, if any
(draxr's, ahead of upstream: tainted devices can then serve these pods). A class with capacity
requests (``draxr.io/capacity-requests``, KEP-6406's field) has them copied onto each of its
requests (``exactly.capacity``), as KEP-6406 does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ....api.constants import REQUEST_NAME_FORMAT
from ....api.objects import Obj
from ....api.podresources import ContainerRef, containers, raw_requests
from ....api.quantity import try_parse

DeviceRequest = dict[str, Any]
Mapping_ = dict[str, str]


def request_name(container_index: int, request_index: int) -> str:
    return REQUEST_NAME_FORMAT.format(container=container_index, request=request_index)


def _count(request: DeviceRequest) -> int:
    count = request["exactly"]["count"]
    assert isinstance(count, int)
    return count


def _container_request(
    ref: ContainerRef,
    resource: str,
    class_name: str,
    reusable: list[DeviceRequest | None],
    tolerations: Sequence[Obj] = (),
    capacity: Mapping[str, str] | None = None,
) -> tuple[DeviceRequest | None, list[Mapping_]]:
    requests = raw_requests(ref.container)
    if resource not in requests:
        return None, []
    q = try_parse(requests[resource])
    need = q.as_int64() if q is not None else None
    if not need:
        return None, []
    mappings: list[Mapping_] = []
    reused = 0
    for r in reusable:
        if r is None:
            continue
        reused += _count(r)
        mappings.append({"containerName": ref.name, "resourceName": resource, "requestName": r["name"]})
        if reused >= need:
            return None, mappings
    ridx = sorted(k for k in requests if isinstance(k, str)).index(resource)
    name = request_name(ref.index, ridx)
    request: DeviceRequest = {
        "name": name,
        "exactly": {"deviceClassName": class_name, "allocationMode": "ExactCount", "count": need - reused},
    }
    if tolerations:
        request["exactly"]["tolerations"] = [dict(t) for t in tolerations]
    if capacity:
        request["exactly"]["capacity"] = {"requests": dict(capacity)}
    mappings.append({"containerName": ref.name, "resourceName": resource, "requestName": name})
    return request, mappings


def create_requests_and_mappings(
    pod: Obj,
    dra_resources: Mapping[str, str],
    tolerations: Callable[[str], Sequence[Obj]] | None = None,
    capacity: Mapping[str, Mapping[str, str]] | None = None,
) -> tuple[list[DeviceRequest], list[Mapping_]]:
    """``dra_resources``: resource name -> DeviceClass name, for the names DRA serves on the node.
    ``tolerations``: class -> the tolerations of its requests (draxr's
    ``draxr.io/extended-resource-tolerations``; upstream's requests have none). ``capacity``: class
    name -> the capacity requests each of its requests carries."""
    refs = containers(pod)
    long_lived = [r for r in refs if r.long_lived]
    short_lived = [r for r in refs if not r.long_lived]
    device_requests: list[DeviceRequest] = []
    all_mappings: list[Mapping_] = []
    for resource in sorted(dra_resources):
        class_name = dra_resources[resource]
        tolerated = tolerations(class_name) if tolerations is not None else ()
        per_class = capacity.get(class_name) if capacity else None
        long_requests: list[DeviceRequest | None] = [None] * len(refs)
        long_mappings: list[Mapping_] = []
        for ref in long_lived:
            req, maps = _container_request(ref, resource, class_name, [], tolerated, per_class)
            long_requests[ref.index] = req
            long_mappings.extend(maps)
        largest: DeviceRequest | None = None
        short_names: set[str] = set()
        short_mappings: list[Mapping_] = []
        for ref in short_lived:
            req, maps = _container_request(
                ref, resource, class_name, long_requests[ref.index :], tolerated, per_class
            )
            if req is not None:
                short_names.add(req["name"])
                if largest is None or _count(largest) < _count(req):
                    largest = req
            short_mappings.extend(maps)
        if largest is not None and len(short_names) > 1:
            short_names.discard(largest["name"])
            for m in short_mappings:
                if m["requestName"] in short_names:
                    m["requestName"] = largest["name"]
        if largest is not None:
            device_requests.append(largest)
        device_requests.extend(r for r in long_requests if r is not None)
        all_mappings.extend(long_mappings)
        all_mappings.extend(short_mappings)
    device_requests.sort(key=lambda r: str(r["name"]))
    return device_requests, all_mappings


def device_demand(
    pod: Obj,
    resources: Mapping[str, str],
    built: tuple[list[DeviceRequest], list[Mapping_]] | None = None,
) -> dict[str, int]:
    """Per resource, how many devices the special claim would request for it if DRA served it.

    The count of one resource does not depend on which other names DRA serves, so it can be
    computed once per pod. Pod overhead is not part of it: upstream builds the requests from the
    containers alone (``createRequestsAndMappings`` reads ``container.resources.requests``).
    """
    requests, mappings = built if built is not None else create_requests_and_mappings(pod, resources)
    counts = {str(r["name"]): _count(r) for r in requests}
    demand: dict[str, int] = {}
    seen: set[tuple[str, str]] = set()
    for m in mappings:
        pair = (m["resourceName"], m["requestName"])
        if pair in seen:
            continue
        seen.add(pair)
        demand[m["resourceName"]] = demand.get(m["resourceName"], 0) + counts.get(m["requestName"], 0)
    return demand


def class_demand(resources: Mapping[str, str], demand: Mapping[str, int]) -> dict[str, int]:
    """Per DeviceClass, the devices its resources (name -> class) ask for (``demand``: name ->
    count, a missing name none): what a node needs free of each class."""
    needs: dict[str, int] = {}
    for r, cls in resources.items():
        needs[cls] = needs.get(cls, 0) + demand.get(r, 0)
    return needs
