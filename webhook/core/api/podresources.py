"""A pod's containers and resource requests, as the API server and kube-scheduler see them.

* Container index: ``initContainers ++ containers`` (init containers first).
* Sidecars (init containers with ``restartPolicy: Always``) are long-lived, like regular containers.
* Requests are defaulted from limits the way API defaulting does, so manifests read offline behave
  like objects read from a cluster.
* ``pod_requests`` is ``resourcehelper.PodRequests``: long-lived containers add up, each init
  container runs next to the sidecars started before it, the larger of both wins, plus overhead.
* ``pod_requests_nonzero`` also gives the cpu and memory kube-scheduler's resource scores count
  (``NonZeroRequested``): a container without a cpu or memory request counts 100m and 200Mi.
"""

from __future__ import annotations

import functools
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

#: ``DefaultMilliCPURequest`` and ``DefaultMemoryRequest`` (``NonMissingContainerRequests``).
NONZERO_DEFAULTS: dict[str, int] = {CPU: 100, MEMORY: 200 * 1024 * 1024}


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


def _units_of(key: str, value: Any) -> int | None:
    q = try_parse(value)
    return None if q is None else to_units(key, q)


#: Pods repeat a handful of values ("1", "500m", "4Gi"), and every decision reads its pod's requests
#: at PreFilter and again when the pod is assumed on its node: each written string is converted once
#: (``Quantity.parse`` caches the parse, this the units). Only strings: ``True == 1`` as a key.
_text_units = functools.lru_cache(maxsize=4096)(_units_of)


def _unit(key: str, value: Any) -> int | None:
    return _text_units(key, value) if type(value) is str else _units_of(key, value)


def container_units(container: Obj) -> Units:
    """``container_requests`` in scheduler units (``to_units``), unparseable values ignored."""
    out: Units = {}
    for key, value in raw_requests(container).items():
        if isinstance(key, str):
            units = _unit(key, value)
            if units is not None:
                out[key] = units
    return out


def _add(into: Units, other: Units) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def _max(into: Units, other: Units) -> None:
    for k, v in other.items():
        if v > into.get(k, 0):
            into[k] = v


class _Sum:
    """``PodRequests``' arithmetic over the containers, in one pass."""

    __slots__ = ("init_max", "reqs", "restartable")

    def __init__(self) -> None:
        self.reqs: Units = {}
        self.restartable: Units = {}
        self.init_max: Units = {}

    def add(self, ref: ContainerRef, creq: Units) -> None:
        if not ref.init:
            _add(self.reqs, creq)
        elif ref.sidecar:
            _add(self.reqs, creq)
            _add(self.restartable, creq)
            _max(self.init_max, self.restartable)
        else:
            running = dict(creq)
            _add(running, self.restartable)
            _max(self.init_max, running)

    def finish(self, pod_level: Obj, overhead: Units) -> Units:
        reqs = self.reqs
        _max(reqs, self.init_max)
        for key in (CPU, MEMORY):
            q = try_parse(pod_level.get(key)) if key in pod_level else None
            if q is not None:
                reqs[key] = to_units(key, q)
        _add(reqs, overhead)
        return reqs


def _pod_requests(pod: Obj, nonzero: bool) -> tuple[Units, Units]:
    total, nz = _Sum(), _Sum()
    for ref in containers(pod):
        creq = container_units(ref.container)
        total.add(ref, creq)
        if nonzero:
            nz.add(ref, {k: creq.get(k, default) for k, default in NONZERO_DEFAULTS.items()})
    pod_level = as_dict(as_dict(spec(pod).get("resources")).get("requests"))
    overhead = _units(
        {k: q for k, v in as_dict(spec(pod).get("overhead")).items() if (q := try_parse(v)) is not None}
    )
    reqs = total.finish(pod_level, overhead)
    if not nonzero:
        return reqs, {}
    nz_reqs = nz.finish(pod_level, {k: v for k, v in overhead.items() if k in NONZERO_DEFAULTS})
    return reqs, nz_reqs


def pod_requests(pod: Obj) -> Units:
    """Effective pod requests in scheduler units (``PodRequests`` without options)."""
    return _pod_requests(pod, False)[0]


def pod_requests_nonzero(pod: Obj) -> tuple[Units, Units]:
    """``pod_requests`` and the pod's non-zero cpu and memory (``NonMissingContainerRequests``)."""
    return _pod_requests(pod, True)


def iter_requests(pod: Obj) -> Iterator[tuple[ContainerRef, str, Any]]:
    """Every (container, resource name, raw value) of requests and limits, for validation."""
    for ref in containers(pod):
        res = as_dict(ref.container.get("resources"))
        for section in ("requests", "limits"):
            for key, value in as_dict(res.get(section)).items():
                yield ref, key, value
