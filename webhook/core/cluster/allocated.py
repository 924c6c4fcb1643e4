"""The allocated state: which devices are taken, and what pods take from their nodes.

* Devices: every non-admin result without a ``shareID`` in any claim's ``status.allocation``, plus
  in-flight reservations (Reserve makes a decision's devices taken at once, before the API shows
  the claim), counted by reference so a device held twice stays taken until both let go. A device
  that becomes taken or free is reported to ``on_flip``, so free-device counts follow without a scan.
* Shares (consumable capacity, KEP-5075): a non-admin result with a ``shareID`` does not take its
  device; it is one share of it, consuming its ``consumedCapacity``. Per device, the number of shares
  and what they consume together, from claims and in-flight reservations alike (upstream's
  ``AllocatedSharedDeviceIDs`` and ``AggregatedCapacity``); a change is reported to ``on_shares``.
  A share counts once by its ``shareID``, however many hold it: Reserve's reservation and the
  written claim both hold it until Unreserve, and counting it twice would refuse the next pod.
* Pods: bound, non-terminal pods and assumed pods (reserved, not yet seen bound) count their
  requests, host ports and volumes on their node's ``NodeInfo``; a pod bound to a node the cache has not
  seen yet counts as soon as the node appears.
* Special claims by their owner pod's uid (``findExtendedResourceClaim``).
* Devices two claims' allocations hold (``doubles.py``): reported, not counted as one.
* What pod placement reads of the same pods (``placed``: labels, namespaces, affinity terms,
  indexed), and the pending pods nominated to nodes (``nominator``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from ..api.objects import Obj, as_dict, as_list, controller_ref, name, namespace, spec, status, uid
from ..api.orphans import TERMINAL_PHASES
from ..api.podresources import pod_requests_nonzero
from ..api.quantity import Quantity, try_parse
from ..api.specialclaims import is_special_claim, pod_owner
from .doubles import DeviceHolders
from .nodeinfo import NodeInfo, Nodes, host_ports
from .nominator import Nominator, priority
from .placedpods import PlacedPods
from .podinfo import pod_info
from .podvolumes import mounted_volumes
from .slices import DeviceKey, Pool

ClaimKey = tuple[str, str]  # (namespace, name)
FlipListener = Callable[[DeviceKey, bool], None]  # (device, now taken)
ShareListener = Callable[[DeviceKey], None]  # (device whose shares changed)


def _held(claim: Obj) -> Iterator[tuple[DeviceKey, Obj]]:
    """The allocation's results that hold a device (not admin access, device named), with it."""
    alloc = as_dict(status(claim).get("allocation"))
    for r in as_list(as_dict(alloc.get("devices")).get("results")):
        rd = as_dict(r)
        if rd.get("adminAccess") is True:
            continue
        d, p, n = rd.get("driver"), rd.get("pool"), rd.get("device")
        if isinstance(d, str) and isinstance(p, str) and isinstance(n, str):
            yield (d, p, n), rd


def allocated_devices(claim: Obj) -> list[DeviceKey]:
    """Devices a claim holds, taken or shared; admin-access results do not make a device
    unavailable."""
    return [key for key, _ in _held(claim)]


@dataclass(frozen=True, slots=True)
class Share:
    """One allocation of a multi-allocatable device: its ``shareID`` and ``consumedCapacity``."""

    device: DeviceKey
    share_id: str
    consumed: Mapping[str, Quantity] = field(default_factory=dict)


@dataclass(slots=True)
class SharedUse:
    """A device's shares: how many, and what they consume together, by capacity name."""

    shares: int = 0
    consumed: dict[str, Fraction] = field(default_factory=dict)


def holdings(claim: Obj) -> tuple[list[DeviceKey], list[Share]]:
    """What a claim's allocation holds: the devices it takes (non-admin results without a
    ``shareID``) and its shares (non-admin results with one; upstream's ``foreachAllocatedDevice``).
    A consumed amount that is not a quantity is left out (the API server never stores one)."""
    taken: list[DeviceKey] = []
    shares: list[Share] = []
    for key, rd in _held(claim):
        share_id = rd.get("shareID")
        if isinstance(share_id, str):
            consumed: dict[str, Quantity] = {}
            for k, v in as_dict(rd.get("consumedCapacity")).items():
                q = try_parse(v)
                if q is not None:
                    consumed[str(k)] = q
            shares.append(Share(key, share_id, consumed))
        else:
            taken.append(key)
    return taken, shares


def _count_pod(info: NodeInfo, pod_uid: str, pod: Obj) -> None:
    reqs, nonzero = pod_requests_nonzero(pod)
    info.add_pod(pod_uid, reqs, host_ports(pod), nonzero, mounted_volumes(pod))


def claim_key(claim: Obj) -> ClaimKey:
    return (namespace(claim), name(claim))


class TakenDevices(Collection[DeviceKey]):
    """``in`` on the reference counts of taken devices, without copying them (the allocator's
    ``allocated``)."""

    __slots__ = ("_refs",)

    def __init__(self, refs: dict[DeviceKey, int]) -> None:
        self._refs = refs

    def __contains__(self, key: object) -> bool:
        return key in self._refs

    def __len__(self) -> int:
        return len(self._refs)

    def __iter__(self) -> Iterator[DeviceKey]:
        return iter(self._refs)


class AllocatedState:
    def __init__(
        self, nodes: Nodes, on_flip: FlipListener | None = None, on_shares: ShareListener | None = None
    ) -> None:
        self._nodes = nodes
        self._on_flip = on_flip
        self._on_shares = on_shares
        self.claims: dict[ClaimKey, Obj] = {}
        self.pods: dict[str, Obj] = {}  # bound, non-terminal pods by uid
        self._assumed: dict[str, str] = {}  # pod uid -> node, reserved but not yet seen bound
        self._by_node: dict[str, set[str]] = {}  # node -> uids of bound pods on it
        self._claim_devices: dict[ClaimKey, list[DeviceKey]] = {}
        self._claim_shares: dict[ClaimKey, list[Share]] = {}
        self._inflight: dict[str, list[DeviceKey]] = {}
        self._inflight_shares: dict[str, list[Share]] = {}
        self._refs: dict[DeviceKey, int] = {}
        self._shares: dict[DeviceKey, SharedUse] = {}
        self._share_holders: dict[tuple[DeviceKey, str], int] = {}  # (device, shareID) -> holders
        self._special_by_owner: dict[str, set[ClaimKey]] = {}  # owner pod uid -> its special claims
        self.devices = TakenDevices(self._refs)
        #: Devices with at least one share, and what their shares consume (the allocator's view).
        self.shares: Mapping[DeviceKey, SharedUse] = self._shares
        #: Which claims hold each device: two on one is a double allocation.
        self.holders = DeviceHolders()
        self.placed = PlacedPods()  # the bound and assumed pods, as pod placement reads them
        self.nominator = Nominator()

    # -- devices -----------------------------------------------------------------------------------

    def is_allocated(self, key: DeviceKey) -> bool:
        return self._refs.get(key, 0) > 0

    def reserve_devices(self, token: str, devices: Iterable[DeviceKey], shares: Iterable[Share] = ()) -> None:
        """Reserve: the devices are taken, and the shares held, under ``token`` until
        ``unreserve_devices``."""
        self.unreserve_devices(token)
        keys = list(devices)
        self._inflight[token] = keys
        for d in keys:
            self._ref(d, +1)
        held = list(shares)
        if held:
            self._inflight_shares[token] = held
            for share in held:
                self._share(share, +1)

    def unreserve_devices(self, token: str) -> None:
        for d in self._inflight.pop(token, []):
            self._ref(d, -1)
        for share in self._inflight_shares.pop(token, []):
            self._share(share, -1)

    def reservations_holding(self, devices: Iterable[DeviceKey]) -> dict[str, list[DeviceKey]]:
        """The in-flight reservations (token -> its devices) that hold any of ``devices``."""
        wanted = set(devices)
        return {t: list(keys) for t, keys in self._inflight.items() if wanted.intersection(keys)}

    def _ref(self, key: DeviceKey, delta: int) -> None:
        before = self._refs.get(key, 0)
        after = before + delta
        if after <= 0:
            self._refs.pop(key, None)
            after = 0
        else:
            self._refs[key] = after
        if (before > 0) != (after > 0) and self._on_flip is not None:
            self._on_flip(key, after > 0)

    def _share(self, share: Share, delta: int) -> None:
        held = (share.device, share.share_id)
        before = self._share_holders.get(held, 0)
        after = before + delta
        if after > 0:
            self._share_holders[held] = after
        else:
            self._share_holders.pop(held, None)
        if (before > 0) == (after > 0):
            return  # another holder of the same share: counted once
        key = share.device
        use = self._shares.get(key)
        if use is None:
            use = self._shares[key] = SharedUse()
        use.shares += delta
        if use.shares <= 0:
            del self._shares[key]
        else:
            for cname, q in share.consumed.items():
                use.consumed[cname] = use.consumed.get(cname, 0) + delta * q.value
        if self._on_shares is not None:
            self._on_shares(key)

    def consumed(self, key: DeviceKey) -> Mapping[str, Fraction] | None:
        """What the device's shares consume together, by capacity name (None: no share)."""
        use = self._shares.get(key)
        return use.consumed if use is not None else None

    def allocated_counters(self, pool: Pool) -> dict[str, dict[str, Quantity]]:
        """Counters already consumed in a pool by taken devices, and by devices with a share (a
        shared device's counters count once: upstream's ``IsDeviceAllocated``)."""
        out: dict[str, dict[str, Quantity]] = {}
        for sl in pool.all_slices:
            for d in sl.devices:
                if not d.consumes_counters or not (d.key in self._refs or d.key in self._shares):
                    continue
                for set_name, counters in d.consumes_counters:
                    bucket = out.setdefault(set_name, {})
                    for cname, q in counters.items():
                        prev = bucket.get(cname)
                        bucket[cname] = Quantity(q.value + (prev.value if prev else 0))
        return out

    # -- claims ------------------------------------------------------------------------------------

    def upsert_claim(self, claim: Obj) -> None:
        key = claim_key(claim)
        self._drop_claim(key)
        self.claims[key] = claim
        devices, shares = holdings(claim)
        self._claim_devices[key] = devices
        for d in devices:
            self._ref(d, +1)
        if shares:
            self._claim_shares[key] = shares
            for share in shares:
                self._share(share, +1)
        self.holders.set_claim(key, claim)
        if is_special_claim(claim):
            owner = controller_ref(claim)
            if owner is not None and isinstance(owner.get("uid"), str):
                self._special_by_owner.setdefault(owner["uid"], set()).add(key)

    def remove_claim(self, ns: str, claim_name: str) -> None:
        self._drop_claim((ns, claim_name))

    def _drop_claim(self, key: ClaimKey) -> None:
        old = self.claims.pop(key, None)
        if old is None:
            return
        for d in self._claim_devices.pop(key, []):
            self._ref(d, -1)
        for share in self._claim_shares.pop(key, []):
            self._share(share, -1)
        self.holders.drop_claim(key)
        owner_uid = str(as_dict(controller_ref(old)).get("uid"))
        owned = self._special_by_owner.get(owner_uid)
        if owned is not None:
            owned.discard(key)
            if not owned:
                del self._special_by_owner[owner_uid]

    def special_claims_of(self, pod: Obj) -> list[Obj]:
        """Every special claim this pod (name + uid) is the controller owner of, by name. Normally
        one; a binding cycle that failed half-way can leave more."""
        out: list[Obj] = []
        for key in sorted(self._special_by_owner.get(uid(pod), ())):
            claim = self.claims.get(key)
            owner = controller_ref(claim) if claim is not None else None
            if claim is not None and owner is not None and owner.get("name") == name(pod):
                out.append(claim)
        return out

    def owned_special_claims(self, ns: str, pod_uid: str) -> list[Obj]:
        """The special claims of namespace ``ns`` whose controller is the ``v1`` Pod ``pod_uid``, by
        name: upstream quota's owner index (``extendedResourceClaimPodUIDOwnerIndex``), which does not
        compare the owner's name."""
        out: list[Obj] = []
        for key in sorted(self._special_by_owner.get(pod_uid, ())):
            claim = self.claims.get(key)
            if claim is not None and key[0] == ns and pod_owner(claim) is not None:
                out.append(claim)
        return out

    def special_claim_for(self, pod: Obj) -> Obj | None:
        """``findExtendedResourceClaim``: annotated "true", controller owner = this pod (name +
        uid). Of several, the one the pod's status names, else an allocated one, else the first."""
        claims = self.special_claims_of(pod)
        if len(claims) <= 1:
            return claims[0] if claims else None
        named = as_dict(status(pod).get("extendedResourceClaimStatus")).get("resourceClaimName")
        for claim in claims:
            if name(claim) == named:
                return claim
        for claim in claims:
            if as_dict(status(claim).get("allocation")):
                return claim
        return claims[0]

    # -- pods --------------------------------------------------------------------------------------

    def upsert_pod(self, pod: Obj) -> None:
        """Bound, non-terminal pods consume node resources; others are forgotten here."""
        pod_uid = uid(pod)
        node_name = spec(pod).get("nodeName")
        self.nominator.update(pod)
        if not node_name and pod_uid in self._assumed and status(pod).get("phase") not in TERMINAL_PHASES:
            return  # reserved, not yet seen bound (its PreBind status patch, say): the assumption stands
        self._uncount_pod(pod_uid)
        if node_name and status(pod).get("phase") not in TERMINAL_PHASES:
            node_name = str(node_name)
            self.pods[pod_uid] = pod
            self._by_node.setdefault(node_name, set()).add(pod_uid)
            self.placed.add(pod_info(pod, node_name))
            info = self._nodes.get(node_name)
            if info is not None:
                _count_pod(info, pod_uid, pod)

    def remove_pod(self, pod_uid: str) -> None:
        self.nominator.remove(pod_uid)
        self._uncount_pod(pod_uid)

    def _uncount_pod(self, pod_uid: str) -> None:
        old = self.pods.pop(pod_uid, None)
        node_name = spec(old).get("nodeName") if old is not None else self._assumed.get(pod_uid)
        self._assumed.pop(pod_uid, None)
        self.placed.remove(pod_uid)
        if old is not None:
            self._by_node.get(str(node_name), set()).discard(pod_uid)
        info = self._nodes.get(str(node_name)) if node_name else None
        if info is not None:
            info.remove_pod(pod_uid)

    def assume_pod(self, pod: Obj, node_name: str) -> None:
        """Reserve: the pod's requests count on the node before the API shows it bound."""
        pod_uid = uid(pod)
        if pod_uid in self.pods:
            return
        info = self._nodes.get(node_name)
        if info is not None:
            _count_pod(info, pod_uid, pod)
            self._assumed[pod_uid] = node_name
            self.placed.add(pod_info(pod, node_name))

    def node_of(self, pod_uid: str) -> str | None:
        """Where the pod counts: its node when bound, the node it is assumed on when reserved."""
        pod = self.pods.get(pod_uid)
        if pod is not None:
            return str(spec(pod).get("nodeName"))
        return self._assumed.get(pod_uid)

    def counts_pod(self, pod_uid: str) -> bool:
        """The pod counts on a node: bound and not terminal, or assumed."""
        return pod_uid in self.pods or pod_uid in self._assumed

    def forget_pod(self, pod: Obj) -> None:
        """Unreserve: drop an assumed pod (a pod already seen bound stays)."""
        pod_uid = uid(pod)
        if pod_uid in self._assumed:
            self._uncount_pod(pod_uid)

    def nominated_for(self, pod: Obj) -> dict[str, list[Obj]]:
        """Node -> the pods nominated to it that ``pod`` must leave room for (``addGENominatedPods``):
        priority equal or higher, not ``pod`` itself, not assumed by this process."""
        by_node = self.nominator.by_node()
        if not by_node:
            return {}
        own, floor = uid(pod), priority(pod)
        out: dict[str, list[Obj]] = {}
        for node_name, pods in by_node.items():
            keep = [
                p for u, p in pods.items() if u != own and u not in self._assumed and priority(p) >= floor
            ]
            if keep:
                out[node_name] = keep
        return out

    def node_added(self, node_name: str) -> None:
        """A node appeared: the bound pods already on it count now."""
        info = self._nodes.get(node_name)
        if info is None:
            return
        for pod_uid in self._by_node.get(node_name, ()):
            pod = self.pods[pod_uid]
            _count_pod(info, pod_uid, pod)
