"""Devices held by two claims' allocations at once: the mark of two allocators sharing one pool.

Every scheduler allocating from a pool reads the others' allocations only once they are written and
watched back (kubernetes/kubernetes#128980); in between, kube-scheduler and draxr's worker can each
give the same device to a claim. draxr routes every pod of the classes it manages to its worker
(core/paths/consumed.py), but pods reach kube-scheduler anyway (opted-out namespaces, fail-open
admission, pods older than draxr, ``--route=never``): so every allocated claim is counted, whoever
allocated it, and a device two claims hold is reported, never silently counted twice.

Only exclusive results count: admin access never makes a device unavailable, and a result with a
``shareID`` is a share of a device that allows multiple allocations (consumable capacity, KEP-5075),
which is how such a device is meant to be held by several claims. In-flight reservations are not
allocations: a device a token reserves and a claim holds is the token's claim in progress.
"""

from __future__ import annotations

from ..api.objects import Obj, as_dict, as_list, status
from .slices import DeviceKey

ClaimKey = tuple[str, str]  # (namespace, name)


def exclusive_devices(claim: Obj) -> list[DeviceKey]:
    """The devices a claim's allocation holds for itself alone (not admin access, not a share)."""
    alloc = as_dict(status(claim).get("allocation"))
    out: list[DeviceKey] = []
    for r in as_list(as_dict(alloc.get("devices")).get("results")):
        rd = as_dict(r)
        if rd.get("adminAccess") is True or rd.get("shareID"):
            continue
        d, p, n = rd.get("driver"), rd.get("pool"), rd.get("device")
        if isinstance(d, str) and isinstance(p, str) and isinstance(n, str):
            out.append((d, p, n))
    return out


class DeviceHolders:
    """Which claims hold each device exclusively, kept per claim change; ``doubles`` is read in
    O(number of doubled devices)."""

    __slots__ = ("_held", "_holders", "doubles")

    def __init__(self) -> None:
        self._held: dict[ClaimKey, list[DeviceKey]] = {}
        self._holders: dict[DeviceKey, set[ClaimKey]] = {}
        #: Each device two or more claims hold, with those claims.
        self.doubles: dict[DeviceKey, set[ClaimKey]] = {}

    def set_claim(self, key: ClaimKey, claim: Obj) -> None:
        """The claim's allocation is now ``claim``'s (replacing what it held before)."""
        devices = exclusive_devices(claim)
        if devices == self._held.get(key):
            return
        self.drop_claim(key)
        if not devices:
            return
        self._held[key] = devices
        for d in devices:
            holders = self._holders.setdefault(d, set())
            holders.add(key)
            if len(holders) > 1:
                self.doubles[d] = holders

    def drop_claim(self, key: ClaimKey) -> None:
        for d in self._held.pop(key, ()):
            holders = self._holders.get(d)
            if holders is None:
                continue
            holders.discard(key)
            if len(holders) < 2:
                self.doubles.pop(d, None)
            if not holders:
                del self._holders[d]

    def double_allocated(self) -> dict[DeviceKey, list[ClaimKey]]:
        """Every device held by two or more claims, with the claims in order."""
        return {d: sorted(claims) for d, claims in sorted(self.doubles.items())}
