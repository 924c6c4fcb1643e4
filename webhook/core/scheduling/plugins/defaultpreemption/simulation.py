"""Victims taken out of the cluster state for a dry run, and put back (upstream's ``RemovePod`` and
``AddPod`` on the candidate node's NodeInfo).

Upstream mutates a clone of the node's NodeInfo; draxr's scheduler reads the ``ClusterState`` it
was built on, so the dry run mutates that state and ``restore`` puts every victim back (always:
``with Removal(state) as r``). What a removed victim frees, device-aware (issue 21):

* its requests and host ports on the node (``AllocatedState.remove_pod``);
* the devices of its special claims (KEP-5004's claim for its extended resources), and of its own
  ResourceClaims, when nothing else holds them: every pod in a claim's ``reservedFor`` (and a
  special claim's owner) is among the removed victims. The claim then leaves the state, so its
  devices are free to the scheduler's own Filter and allocator; so does an in-flight reservation
  still holding them (the victim's own Reserve, its binding cycle just finished: the allocator
  never gives one device to two pods).
"""

from __future__ import annotations

from types import TracebackType

from ....api.objects import Obj, as_dict, as_list, controller_ref, namespace, status, uid
from ....api.specialclaims import is_special_claim
from ....cluster.allocated import allocated_devices
from ....cluster.slices import DeviceKey
from ....cluster.state import ClaimKey, ClusterState, claim_key
from ..dynamicresources.prefilter import own_claim_names
from ..dynamicresources.resume import allocation_node


def own_claim_keys(state: ClusterState, pod: Obj) -> list[ClaimKey]:
    """The claims a pod uses: its special claims, and the ResourceClaims of ``spec.resourceClaims``
    (named directly, or generated from a template as ``status.resourceClaimStatuses`` names)."""
    keys = [claim_key(c) for c in state.allocated.special_claims_of(pod)]
    ns = namespace(pod)
    return keys + [(ns, n) for n in own_claim_names(pod)]


def holders(claim: Obj) -> set[str]:
    """The pods (by uid) that keep a claim's devices: its ``reservedFor`` pods, and for a special
    claim its owner pod."""
    out = {
        str(as_dict(r).get("uid"))
        for r in as_list(status(claim).get("reservedFor"))
        if as_dict(r).get("resource", "pods") == "pods"
    }
    if is_special_claim(claim):
        owner = controller_ref(claim)
        if owner is not None:
            out.add(str(owner.get("uid")))
    return out


def releasing_devices(state: ClusterState, node: str) -> bool:
    """Some claim allocated on ``node`` is held by no pod that counts any more: a deleted pod's
    devices not yet released. That is a claim whose holders are all gone, or one no pod holds any
    more that is being deleted or whose owner pod is gone (the resourceclaim controller has taken
    the pod out of ``reservedFor`` and has not yet deallocated and deleted the claim it made from a
    template)."""
    allocated = state.allocated
    for claim in allocated.claims.values():
        if allocation_node(claim) != node:
            continue
        held = holders(claim)
        if held:
            if not any(allocated.counts_pod(u) for u in held):
                return True
            continue
        owner = controller_ref(claim)
        gone_owner = (
            owner is not None
            and owner.get("kind") == "Pod"
            and not allocated.counts_pod(str(owner.get("uid")))
        )
        if as_dict(claim.get("metadata")).get("deletionTimestamp") or gone_owner:
            return True
    return False


class Removal:
    """A set of victims removed from ``state``; ``remove`` and ``add`` move one at a time.
    ``frees_devices=False``: their claims stay allocated (kube-scheduler's dry run)."""

    def __init__(self, state: ClusterState, *, frees_devices: bool = True) -> None:
        self.state = state
        self.frees_devices = frees_devices
        self.removed: dict[str, Obj] = {}  # uid -> pod
        self._freed: dict[ClaimKey, Obj] = {}  # claims taken out of the state, to put back
        self._reservations: dict[ClaimKey, dict[str, list[DeviceKey]]] = {}  # released with them
        self._claims_of: dict[str, list[ClaimKey]] = {}  # pod uid -> its claims, learnt on removal
        self._holders: dict[ClaimKey, set[str]] = {}

    def __enter__(self) -> Removal:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.restore()

    def remove(self, pod: Obj) -> None:
        self.removed[uid(pod)] = pod
        self.state.apply("Pod", pod, deleted=True)
        self._settle(pod)

    def add(self, pod: Obj) -> None:
        self.removed.pop(uid(pod), None)
        self.state.apply("Pod", pod)
        self._settle(pod)

    def restore(self) -> None:
        for pod in list(self.removed.values()):
            self.add(pod)

    def freed_claims(self) -> list[Obj]:
        """The claims whose devices the removed victims free, in the order freed."""
        return list(self._freed.values())

    def _settle(self, pod: Obj) -> None:
        """Each claim of ``pod`` is out of the state exactly when all its holders are removed."""
        if not self.frees_devices:
            return
        allocated = self.state.allocated
        for key in self._keys(pod):
            claim = self._freed.get(key) or allocated.claims.get(key)
            if claim is None or not as_dict(status(claim).get("allocation")):
                continue
            held = self._holders.get(key)
            if held is None:
                held = self._holders[key] = holders(claim)
            free = bool(held) and held <= self.removed.keys()
            if free and key not in self._freed:
                self._freed[key] = claim
                self.state.apply("ResourceClaim", claim, deleted=True)
                held_too = allocated.reservations_holding(allocated_devices(claim))
                self._reservations[key] = held_too
                for token in held_too:
                    allocated.unreserve_devices(token)
            elif not free and key in self._freed:
                del self._freed[key]
                self.state.apply("ResourceClaim", claim)
                for token, devices in self._reservations.pop(key, {}).items():
                    allocated.reserve_devices(token, devices)

    def _keys(self, pod: Obj) -> list[ClaimKey]:
        """A pod's claims, learnt while they are all in the state (its first removal)."""
        pod_uid = uid(pod)
        keys = self._claims_of.get(pod_uid)
        if keys is None:
            keys = self._claims_of[pod_uid] = own_claim_keys(self.state, pod)
        return keys
