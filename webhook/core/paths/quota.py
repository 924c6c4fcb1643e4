"""ResourceQuota and KEP-5004, release by release: what a claim and a pod are charged, and when a
quota on a name stops limiting rewritten pods.

Upstream's claim evaluator (``pkg/quota/v1/evaluator/core/resource_claims.go``) charges every claim
``count/resourceclaims.resource.k8s.io`` and ``<class>.deviceclass.resource.k8s.io/devices``. With
``DRAExtendedResource`` on (1.35 and later; 1.34's evaluator has no such code) every claim of a class
is also charged ``requests.deviceclass.resource.kubernetes.io/<class>`` and, when the class names
one in ``spec.extendedResourceName``, ``requests.<name>``, less its pod's own usage when it is its
pod's *verified* special claim (``specialclaims.verified_special_claim``; the earliest-owned rule
from 1.36, PR #135434). The pod evaluator charges ``requests.<name>`` for every DRA-style name a pod
asks for (``pods.go``; implicit names from 1.35).

So a pod rewritten into claims is still limited by a quota on its name where the claims are charged
the name, and not where they are charged only as devices (the gate off, 1.34, or a class that names
the resource only in draxr's annotation, which the apiserver's ``ExtendedResourceCache`` does not
read): there draxr warns (at admission and offline).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from ..api.constants import ALLOCATION_RESULTS_MAX_SIZE, DEVICE_CLASS_PREFIX
from ..api.names import is_dra_extended_resource_name, is_extended_resource_name
from ..api.objects import Obj, as_dict, as_list, namespace, spec, status
from ..api.orphans import TERMINAL_PHASES
from ..api.podresources import pod_requests
from ..api.specialclaims import verified_special_claim
from ..cluster.gates import parse_version

#: ``ClaimObjectCountName``.
CLAIM_COUNT_KEY: Final = "count/resourceclaims.resource.k8s.io"
#: ``corev1.DefaultResourceRequestsPrefix``.
REQUESTS_PREFIX: Final = "requests."
#: ``corev1.ResourceImplicitExtendedClaimsPerClass``.
IMPLICIT_QUOTA_PREFIX: Final = REQUESTS_PREFIX + DEVICE_CLASS_PREFIX
#: The newest release draxr knows: an apiserver whose version cannot be read is taken for it.
NEWEST: Final = (1, 37)

Release = tuple[int, int]
#: A DeviceClass's ``spec.extendedResourceName`` as the apiserver stores it (``GetExtendedResource``).
FieldName = Callable[[str], str | None]


def class_quota_key(device_class: str) -> str:
    """``V1ResourceByDeviceClass``: ``<class>.deviceclass.resource.k8s.io/devices``."""
    return f"{device_class}.deviceclass.resource.k8s.io/devices"


@dataclass(frozen=True, slots=True)
class QuotaRules:
    """What the served release's quota evaluators do with KEP-5004's objects."""

    release: Release
    #: ``DRAExtendedResource`` in kube-apiserver (and kube-controller-manager, which recounts).
    gate: bool

    @property
    def claims_charge_names(self) -> bool:
        """Claims are charged ``requests.<name>`` and the implicit key (``addExtendedResourceQuota``)."""
        return self.gate and self.release >= (1, 35)

    @property
    def earliest_owned(self) -> bool:
        """With no pod status, only the earliest owned special claim is verified (PR #135434)."""
        return self.release >= (1, 36)

    @property
    def pods_charge_implicit_names(self) -> bool:
        """``podComputeUsageHelper`` charges implicit names (``IsDRAExtendedResourceName``, 1.35)."""
        return self.release >= (1, 35)


def quota_rules(version: object, gate: bool) -> QuotaRules:
    """The rules of the apiserver at ``version`` (``/version``'s ``gitVersion``; unreadable: the
    newest release) with the gate as detected."""
    return QuotaRules(parse_version(version) or NEWEST, gate)


def release_rules(release: str) -> QuotaRules:
    """``1.34``..``1.37`` with the gate as the release ships it (on from 1.36), for offline checks."""
    parsed = parse_version(release) or NEWEST
    return QuotaRules(parsed, parsed >= (1, 36))


# --- usage, as the evaluators compute it -------------------------------------------------------------


def pod_usage(pod: Obj, rules: QuotaRules) -> dict[str, int]:
    """``PodUsageFunc``'s extended resource part: ``requests.<name>`` per DRA-style name (``pods.go``
    ``podComputeUsageHelper``); a pod in a terminal phase is charged nothing."""
    if status(pod).get("phase") in TERMINAL_PHASES:
        return {}
    charged = is_dra_extended_resource_name if rules.pods_charge_implicit_names else is_extended_resource_name
    return {REQUESTS_PREFIX + r: q for r, q in pod_requests(pod).items() if charged(r) and q}


def _exact_count(request: Obj) -> int:
    mode = request.get("allocationMode", "ExactCount")
    if mode == "ExactCount":
        count = request.get("count", 1)
        return count if isinstance(count, int) and not isinstance(count, bool) else 0
    return ALLOCATION_RESULTS_MAX_SIZE if mode == "All" else 0


def claim_devices(claim: Obj) -> dict[str, int]:
    """``Usage``'s devices per class: ``exactly``'s count (``All``: 32), ``firstAvailable``'s largest
    per class; unknown modes count nothing."""
    out: dict[str, int] = {}
    for request in as_list(as_dict(spec(claim).get("devices")).get("requests")):
        request = as_dict(request)
        if as_list(request.get("firstAvailable")):
            worst: dict[str, int] = {}
            for sub in as_list(request.get("firstAvailable")):
                sub = as_dict(sub)
                cls = str(sub.get("deviceClassName", ""))
                worst[cls] = max(worst.get(cls, 0), _exact_count(sub))
            for cls, n in worst.items():
                out[cls] = out.get(cls, 0) + n
        elif isinstance(request.get("exactly"), dict):
            exact = request["exactly"]
            cls = str(exact.get("deviceClassName", ""))
            out[cls] = out.get(cls, 0) + _exact_count(exact)
    return out


def claim_usage(
    claim: Obj,
    rules: QuotaRules,
    field_name: FieldName,
    pod: Obj | None = None,
    owned: Iterable[Obj] = (),
) -> dict[str, int]:
    """The claim evaluator's ``Usage``: ``pod`` the pod its controller reference names (None: not
    found) and ``owned`` that pod's special claims, for ``getVerifiedPodUsage``."""
    result = {CLAIM_COUNT_KEY: 1}
    devices = claim_devices(claim)
    for cls, n in devices.items():
        result[class_quota_key(cls)] = result.get(class_quota_key(cls), 0) + n
    if not rules.claims_charge_names:
        return result
    verified = verified_special_claim(claim, pod, owned, earliest_owned=rules.earliest_owned)
    discount = pod_usage(pod, rules) if verified and pod is not None else {}
    for cls, n in devices.items():
        keys = [IMPLICIT_QUOTA_PREFIX + cls]
        named = field_name(cls)
        if named:
            keys.append(REQUESTS_PREFIX + named)
        for key in keys:
            left = n - discount.get(key, 0)
            if left > 0:
                result[key] = left
    return result


# --- the rewrite's warning -----------------------------------------------------------------------


def limits_by_name(quota: Obj, resource: str) -> bool:
    """The quota limits ``resource`` by its name (``requests.<name>`` or the bare name)."""
    return _by_name(as_dict(spec(quota).get("hard")), resource)


def _by_name(hard: Container[str], resource: str) -> bool:
    return f"{REQUESTS_PREFIX}{resource}" in hard or resource in hard


def claims_charged_by_name(
    resource: str, device_class: str, rules: QuotaRules, field_name: FieldName
) -> bool:
    """A claim of ``device_class`` is charged ``requests.<resource>`` and a quota on it matches the
    claim (``MatchingResources``): the gate on from 1.35, and for an explicit name the class names
    it in the field; for the implicit name, the class names some explicit one (an upstream quirk:
    ``GetExtendedResource(class) != ""``)."""
    if not rules.claims_charge_names:
        return False
    named = field_name(device_class)
    if resource.startswith(DEVICE_CLASS_PREFIX):
        return bool(named)
    return named == resource


def unguarded(
    quotas: Iterable[Obj],
    ns: str,
    classes: Mapping[str, str],
    rules: QuotaRules | None = None,
    field_name: FieldName = lambda _cls: None,
) -> list[tuple[str, str]]:
    """(resource name, class) pairs a quota in ``ns`` limits by name while the rewritten pods'
    claims escape it: not charged the name under ``rules`` (None: never), and no quota on the
    class's devices."""
    hard: set[str] = set()
    for q in quotas:
        if namespace(q) == ns:
            hard |= set(as_dict(spec(q).get("hard")))
    return [
        (name, cls)
        for name, cls in sorted(classes.items())
        if _by_name(hard, name)
        and class_quota_key(cls) not in hard
        and not (rules is not None and claims_charged_by_name(name, cls, rules, field_name))
    ]
