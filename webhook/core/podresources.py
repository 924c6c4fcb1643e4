"""A pod's containers and resource requests, as the API server and kube-scheduler see them.

* Container index: ``initContainers ++ containers`` (init containers first).
* Sidecars (init containers with ``restartPolicy: Always``) are long-lived, like regular containers.
* Requests are defaulted from limits the way API defaulting does, so manifests read offline behave
  like objects read from a cluster.
* ``pod_requests`` is ``resourcehelper.PodRequests``: long-lived containers add up, each init
  container runs next to the sidecars started before it, the larger of both wins, plus overhead.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .objects import Obj, as_dict, as_list, spec
from .quantity import Quantity, try_parse

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"

Units = dict[str, int]


@dataclass(frozen=True, slots=True)
class ContainerRef:
    index: int  # position in initContainers ++ containers
    container: Obj
    init: bool
    sidecar: bool

    @property
    def name(self) -> str:
        n = self.container.get("name")
        return n if isinstance(n, str) else ""

    @property
    def long_lived(self) -> bool:
        return not self.init or self.sidecar


def containers(pod: Obj) -> list[ContainerRef]:
    s = spec(pod)
    out: list[ContainerRef] = []
    for c in as_list(s.get("initContainers")):
        if isinstance(c, dict):
            out.append(ContainerRef(len(out), c, True, c.get("restartPolicy") == "Always"))
        else:
            out.append(ContainerRef(len(out), {}, True, False))
    for c in as_list(s.get("containers")):
        out.append(ContainerRef(len(out), c if isinstance(c, dict) else {}, False, False))
    return out


def raw_requests(container: Obj) -> dict[str, Any]:
    """``resources.requests`` with limits copied in for missing keys (API defaulting)."""
    res = as_dict(container.get("resources"))
    requests = as_dict(res.get("requests"))
    limits = as_dict(res.get("limits"))
    if not limits:
        return requests
    merged = dict(limits)
    merged.update(requests)
    return merged


def container_requests(container: Obj) -> dict[str, Quantity]:
    """Parsed requests; unparseable values are ignored (validation reports them)."""
    out: dict[str, Quantity] = {}
    for key, value in raw_requests(container).items():
        q = try_parse(value)
        if q is not None and isinstance(key, str):
            out[key] = q
    return out


def to_units(resource: str, q: Quantity) -> int:
    """Scheduler accounting units: milli-CPU for cpu, ``Value()`` (rounded up) otherwise."""
    return q.milli() if resource == CPU else q.ceil()


def _units(reqs: dict[str, Quantity]) -> Units:
    return {k: to_units(k, q) for k, q in reqs.items()}


def _add(into: Units, other: Units) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def _max(into: Units, other: Units) -> None:
    for k, v in other.items():
        if v > into.get(k, 0):
            into[k] = v


def pod_requests(pod: Obj) -> Units:
    """Effective pod requests in scheduler units (``PodRequests`` without options)."""
    reqs: Units = {}
    restartable: Units = {}
    init_max: Units = {}
    for ref in containers(pod):
        creq = _units(container_requests(ref.container))
        if not ref.init:
            _add(reqs, creq)
        elif ref.sidecar:
            _add(reqs, creq)
            _add(restartable, creq)
            _max(init_max, restartable)
        else:
            running = dict(creq)
            _add(running, restartable)
            _max(init_max, running)
    _max(reqs, init_max)
    pod_level = as_dict(as_dict(spec(pod).get("resources")).get("requests"))
    for key in (CPU, MEMORY):
        q = try_parse(pod_level.get(key)) if key in pod_level else None
        if q is not None:
            reqs[key] = to_units(key, q)
    overhead = as_dict(spec(pod).get("overhead"))
    _add(reqs, _units({k: q for k, v in overhead.items() if (q := try_parse(v)) is not None}))
    return reqs


def iter_requests(pod: Obj) -> Iterator[tuple[ContainerRef, str, Any]]:
    """Every (container, resource name, raw value) of requests and limits, for validation."""
    for ref in containers(pod):
        res = as_dict(ref.container.get("resources"))
        for section in ("requests", "limits"):
            for key, value in as_dict(res.get(section)).items():
                yield ref, key, value
