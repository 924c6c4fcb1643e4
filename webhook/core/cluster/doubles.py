"""Devices held by two claims' allocations at once: the mark of two allocators sharing one pool.

Every scheduler allocating from a pool reads the others' allocations only once they are written and
watched back (kubernetes/kubernetes#128980); in between, kube-scheduler and draxr's worker can each
give the same device to a claim. draxr routes every pod of the classes it manages to its worker
(core/paths/consumed.py), but pods reach kube-scheduler anyway (opted-out namespaces, fail-open
admission, pods older than draxr, ``--route=never``): so every allocated claim is counted, whoever
allocated it, and a device two claims hold is reported, never silently counted twice.

Admin access never makes a device unavailable and is not counted. A result with a ``shareID`` is a
share of a device that allows multiple allocations (consumable capacity, KEP-5075), which is how
such a device is meant to be held by several claims: shares beside shares are fine, but a share
beside a claim holding the device whole is a double allocation. In-flight reservations are not
allocations: a device a token reserves and a claim holds is the token's claim in progress.
"""

from __future__ import annotations

from ..api.objects import Obj, as_dict, as_list, status
from .slices import DeviceKey

ClaimKey = tuple[str, str]  # (namespace, name)


def held_devices(claim: Obj) -> list[tuple[DeviceKey, bool]]:
    """The devices a claim's allocation holds, each with whether it holds it whole (True) or a share
    of it (False); admin access is left out."""
    alloc = as_dict(status(claim).get("allocation"))
    out: list[tuple[DeviceKey, bool]] = []
    for r in as_list(as_dict(alloc.get("devices")).get("results")):
        rd = as_dict(r)
        if rd.get("adminAccess") is True:
            continue
        d, p, n = rd.get("driver"), rd.get("pool"), rd.get("device")
        if isinstance(d, str) and isinstance(p, str) and isinstance(n, str):
            out.append(((d, p, n), not rd.get("shareID")))
    return out


class DeviceHolders:
    """Which claims hold each device (whole or a share), kept per claim change; ``doubles`` is read
    in O(number of doubled devices)."""

    __slots__ = ("_held", "_holders", "doubles")

    def __init__(self) -> None:
        self._held: dict[ClaimKey, list[tuple[DeviceKey, bool]]] = {}
        #: Each held device: its claims, each with whether it holds the device whole.
        self._holders: dict[DeviceKey, dict[ClaimKey, bool]] = {}
        #: Each device two or more claims hold, one of them whole, with those claims.
        self.doubles: dict[DeviceKey, set[ClaimKey]] = {}

    def set_claim(self, key: ClaimKey, claim: Obj) -> None:
        """The claim's allocation is now ``claim``'s (replacing what it held before)."""
        devices = held_devices(claim)
        if devices == self._held.get(key):
            return
        self.drop_claim(key)
        if not devices:
            return
        self._held[key] = devices
        for d, whole in devices:
            holders = self._holders.setdefault(d, {})
            holders[key] = holders.get(key, False) or whole
            self._judge(d, holders)

    def _judge(self, d: DeviceKey, holders: dict[ClaimKey, bool]) -> None:
        if len(holders) > 1 and any(holders.values()):
            self.doubles[d] = set(holders)
        else:
            self.doubles.pop(d, None)

    def drop_claim(self, key: ClaimKey) -> None:
        for d, _ in self._held.pop(key, ()):
            holders = self._holders.get(d)
            if holders is None:
                continue
            holders.pop(key, None)
            self._judge(d, holders)
            if not holders:
                del self._holders[d]

    def double_allocated(self) -> dict[DeviceKey, list[ClaimKey]]:
        """Every device held by two or more claims, with the claims in order."""
        return {d: sorted(claims) for d, claims in sorted(self.doubles.items())}
