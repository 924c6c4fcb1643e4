"""What an allocation returns: each claim's device results, its configuration (the classes' and
the claim's, for the requests that were allocated) and the node selector its devices impose, in
the shape of ``status.allocation``; and where a share's ``shareID`` comes from."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..api.objects import Obj, as_dict, as_list, spec
from ..api.objects import name as name_of
from ..api.quantity import Quantity
from ..cluster.allocated import Share
from ..cluster.slices import Device, DeviceKey, Pool
from .errors import AllocationError
from .requests import Request

#: Where a share's ``shareID`` comes from (a fresh RFC 4122 UID on each call, lowercase).
ShareIds = Callable[[], str]


def share_id_sequence(start: int = 1) -> ShareIds:
    """Share IDs counted from ``start`` (``00000000-0000-0000-0000-000000000001``, ...): unique within
    one sequence only, so for tests and for callers that persist nothing. A scheduler whose results
    are written takes IDs that are unique everywhere (``uuid4``)."""
    counter = itertools.count(start)
    return lambda: str(uuid.UUID(int=next(counter)))


@dataclass(slots=True)
class DeviceResult:
    request: str
    device: Device
    admin_access: bool = False
    tolerations: list[Obj] = field(default_factory=list)
    #: KEP-5007: the device's binding conditions, copied (empty with the gate off).
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    #: A share of a multi-allocatable device: its ID, and what it consumes (None when nothing).
    share_id: str | None = None
    consumed: dict[str, Quantity] | None = None

    def to_api(self) -> Obj:
        out: Obj = {
            "request": self.request,
            "driver": self.device.driver,
            "pool": self.device.pool,
            "device": self.device.name,
        }
        if self.admin_access:
            out["adminAccess"] = True
        if self.tolerations:
            out["tolerations"] = self.tolerations
        if self.binding_conditions:
            out["bindingConditions"] = list(self.binding_conditions)
        if self.binding_failure_conditions:
            out["bindingFailureConditions"] = list(self.binding_failure_conditions)
        if self.share_id is not None:
            out["shareID"] = self.share_id
        if self.consumed:
            out["consumedCapacity"] = {k: q.canonical() for k, q in self.consumed.items()}
        return out


@dataclass(slots=True)
class ClaimAllocation:
    results: list[DeviceResult]
    config: list[Obj]
    node_selector: Obj | None

    def to_api(self) -> Obj:
        """``status.allocation`` of a ResourceClaim."""
        devices: Obj = {"results": [r.to_api() for r in self.results]}
        if self.config:
            devices["config"] = self.config
        out: Obj = {"devices": devices}
        if self.node_selector is not None:
            out["nodeSelector"] = self.node_selector
        return out

    @property
    def device_keys(self) -> list[DeviceKey]:
        """Every device the allocation holds, taken or shared (admin access holds none)."""
        return [r.device.key for r in self.results if not r.admin_access]

    @property
    def dedicated_keys(self) -> list[DeviceKey]:
        """The devices the allocation takes: its results without a ``shareID``."""
        return [r.device.key for r in self.results if not r.admin_access and r.share_id is None]

    @property
    def shares(self) -> list[Share]:
        """Its shares of multi-allocatable devices (what an in-flight reservation holds)."""
        return [
            Share(r.device.key, r.share_id, r.consumed or {})
            for r in self.results
            if not r.admin_access and r.share_id is not None
        ]


def claim_config(claim: Obj, chosen: Callable[[int], Request | None]) -> list[Obj]:
    """The allocation's ``config``: the classes' (``FromClass``) of the requests allocated, one entry
    per class, then the claim's (``FromClaim``) that name an allocated request or none; ``chosen(i)``
    is the alternative allocated for the claim's i-th request."""
    devices = as_dict(spec(claim).get("devices"))
    requests = [as_dict(r) for r in as_list(devices.get("requests"))]
    config: list[Obj] = []
    class_ranges: dict[str, tuple[int, int]] = {}
    for ri in range(len(requests)):
        picked = chosen(ri)
        if picked is None:
            continue
        rng = class_ranges.get(picked.class_name)
        if rng is not None:
            for i in range(*rng):
                config[i]["requests"].append(picked.name)
            continue
        start = len(config)
        for cfg in as_list(spec(picked.device_class).get("config")):
            entry = {k: v for k, v in as_dict(cfg).items() if k != "requests"}
            config.append({"source": "FromClass", "requests": [picked.name], **entry})
        class_ranges[picked.class_name] = (start, len(config))
    for cfg in as_list(devices.get("config")):
        c = as_dict(cfg)
        wanted = [str(x) for x in as_list(c.get("requests"))]
        body = {k: v for k, v in c.items() if k != "requests"}
        if not wanted:
            config.append({"source": "FromClaim", **body})
            continue
        for ri, r in enumerate(requests):
            picked = chosen(ri)
            if r.get("name") in wanted or (picked is not None and picked.sub and picked.name in wanted):
                config.append({"source": "FromClaim", "requests": wanted, **body})
                break
    for entry in config:
        if len(entry.get("requests", [])) == len(requests):
            entry.pop("requests")
    return config


def node_selector(
    node: Obj, pools: list[Pool], results: list[DeviceResult], binding_conditions: bool
) -> Obj | None:
    """The node selector the results' devices impose (their slices', or their own), None when
    they are reachable from every node; ``binding_conditions``: a ``bindsToNode`` device pins it to
    ``node``, the node allocated for."""
    fields: list[Obj] = []
    exprs: list[Obj] = []
    slices = {s.name: s for p in pools for s in p.slices}
    for r in results:
        if r.device.binds_to_node and binding_conditions:
            return pinned_to(name_of(node))
        sl = slices.get(r.device.slice_name)
        if sl is None:
            continue
        if sl.per_device:
            pinned, selector = r.device.node_name, r.device.node_selector
        else:
            pinned, selector = sl.node_name, sl.node_selector
        if pinned:
            return pinned_to(pinned)
        if selector is not None:
            terms = as_list(selector.get("nodeSelectorTerms"))
            if len(terms) > 1:
                raise AllocationError(f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms")
            if terms:
                _merge_requirements(as_list(as_dict(terms[0]).get("matchFields")), fields)
                _merge_requirements(as_list(as_dict(terms[0]).get("matchExpressions")), exprs)
    if not fields and not exprs:
        return None
    term: Obj = {}
    if exprs:
        term["matchExpressions"] = exprs
    if fields:
        term["matchFields"] = fields
    return {"nodeSelectorTerms": [term]}


def pinned_to(node_name: str) -> Obj:
    """A node selector that selects one node by name (``matchFields`` on ``metadata.name``)."""
    return {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
        ]
    }


def _merge_requirements(source: list[Any], into: list[Obj]) -> None:
    for raw in source:
        req = as_dict(raw)
        values = set(as_list(req.get("values")))
        if not any(
            e.get("key") == req.get("key")
            and e.get("operator") == req.get("operator")
            and set(as_list(e.get("values"))) == values
            for e in into
        ):
            into.append(req)
