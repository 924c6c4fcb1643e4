"""Shared counters of partitionable devices: what one allocation attempt takes from its pools'
counter sets, beside what allocated claims consume, given back when the search backtracks."""

from __future__ import annotations

from collections.abc import Callable

from ..api.quantity import Quantity
from ..cluster.slices import Device, Pool

_ZERO = Quantity.parse(0)

#: One charge: (pool, counter set, counter, amount).
Taken = tuple[tuple[str, str], str, str, Quantity]

#: What allocated claims consume of a pool's counters: counter set -> counter -> amount.
PoolCounters = Callable[[Pool], dict[str, dict[str, Quantity]]]


class Counters:
    """The counter ledger of one node's pools (what allocated claims consume is read once per pool)."""

    def __init__(self, pools: list[Pool], allocated_counters: PoolCounters | None) -> None:
        self.pools = pools
        self.allocated_counters = allocated_counters or (lambda pool: {})
        self._already: dict[tuple[str, str], dict[str, dict[str, Quantity]]] = {}
        self._consumed: dict[tuple[str, str], dict[str, dict[str, Quantity]]] = {}

    def reset(self) -> None:
        """Forget what an earlier attempt took (what allocated claims consume stays cached)."""
        self._consumed = {}

    def _pool_of(self, device: Device) -> Pool | None:
        for p in self.pools:
            if p.driver == device.driver and p.name == device.pool:
                return p
        return None

    def take(self, device: Device) -> list[Taken] | None:
        """Charge the device's counters; None (nothing charged) when one does not fit."""
        if not device.consumes_counters:
            return []
        pool = self._pool_of(device)
        if pool is None:
            return None
        already = self._already.get(pool.key)
        if already is None:
            already = self._already[pool.key] = self.allocated_counters(pool)
        consumed = self._consumed.setdefault(pool.key, {})
        taken: list[Taken] = []
        for set_name, counters in device.consumes_counters:
            available = pool.counter_sets.get(set_name)
            if available is None:
                self.give_back(taken)
                return None
            bucket = consumed.setdefault(set_name, {})
            for cname, q in counters.items():
                total = available.get(cname)
                if total is None:
                    continue
                used = bucket.get(cname, _ZERO).value
                pre = already.get(set_name, {}).get(cname, _ZERO).value
                if total.value < pre + used + q.value:
                    self.give_back(taken)
                    return None
                bucket[cname] = Quantity(used + q.value)
                taken.append((pool.key, set_name, cname, q))
        return taken

    def give_back(self, taken: list[Taken]) -> None:
        for pool_key, set_name, cname, q in taken:
            bucket = self._consumed[pool_key][set_name]
            bucket[cname] = Quantity(bucket[cname].value - q.value)
