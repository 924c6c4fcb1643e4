"""DeviceTaintRules (KEP-5055): an admin's taint on devices the driver did not taint itself.

Each rule adds its one ``spec.taint`` to every device its ``spec.deviceSelector`` matches, with
the same effect as a taint the driver put in the ResourceSlice (upstream's ResourceSlice tracker
patches the slices the scheduler sees). Selector semantics as upstream documents and, since
kubernetes/kubernetes#141648, implements them:

* no ``deviceSelector`` matches no device; an empty one (``{}``) matches every device;
* ``driver``, ``pool`` and ``device`` narrow the match; every field that is set must match.

The effect ``None`` (1.35+) only reports: it neither blocks allocation nor evicts. Rules from
1.33/1.34 with ``deviceClassName`` or CEL ``selectors`` (fields removed in 1.35) are not
evaluated; such a rule taints nothing here, and ``unsupported`` says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ..api.objects import Obj, as_dict, name, spec

#: Fields of the 1.33/1.34 ``DeviceTaintSelector`` that 1.35 removed.
REMOVED_SELECTOR_FIELDS: Final = ("deviceClassName", "selectors")


@dataclass(frozen=True, slots=True)
class TaintRule:
    name: str
    taint: Obj | None  # None: the rule has no usable taint and taints nothing
    selects: bool  # False without a deviceSelector: the rule matches no device
    driver: str | None = None
    pool: str | None = None
    device: str | None = None
    unsupported: str | None = None

    def matches(self, driver: str, pool: str, device: str) -> bool:
        return self.may_touch(driver, pool) and (self.device is None or self.device == device)

    def may_touch(self, driver: str, pool: str) -> bool:
        """Whether any device of the pool (driver, pool) could match (which slices to re-read)."""
        if self.taint is None or not self.selects or self.unsupported:
            return False
        return (self.driver is None or self.driver == driver) and (self.pool is None or self.pool == pool)


def _optional(selector: Obj, key: str) -> str | None:
    value = selector.get(key)
    return value if isinstance(value, str) and value else None


def parse_taint_rule(obj: Obj) -> TaintRule:
    s = spec(obj)
    raw_taint = as_dict(s.get("taint"))
    taint: Obj | None = None
    if isinstance(raw_taint.get("key"), str) and isinstance(raw_taint.get("effect"), str):
        taint = {k: v for k, v in raw_taint.items() if k in ("key", "value", "effect", "timeAdded")}
    selector = s.get("deviceSelector")
    if not isinstance(selector, dict):
        return TaintRule(name(obj), taint, selects=False)
    removed = [f for f in REMOVED_SELECTOR_FIELDS if selector.get(f)]
    return TaintRule(
        name(obj),
        taint,
        selects=True,
        driver=_optional(selector, "driver"),
        pool=_optional(selector, "pool"),
        device=_optional(selector, "device"),
        unsupported=f"deviceSelector.{removed[0]} is not supported (removed in Kubernetes 1.35)"
        if removed
        else None,
    )
