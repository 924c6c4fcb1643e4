"""ResourceQuota per release: the claim evaluator (``pkg/quota/v1/evaluator/core/resource_claims.go``
``Usage``, ``addExtendedResourceQuota``, ``MatchingResources``), the pod evaluator (``pods.go``
``podComputeUsageHelper``), upstream's e2e oracle, and when a quota on a name stops limiting
rewritten pods."""

from __future__ import annotations

import pytest

from tests.core.podfactory import container, pod
from webhook.core.allocation.claims import as_obj, special_claim
from webhook.core.api.objects import Obj
from webhook.core.paths.quota import (
    CLAIM_COUNT_KEY,
    QuotaRules,
    claim_devices,
    claim_usage,
    claims_charged_by_name,
    class_quota_key,
    limits_by_name,
    pod_usage,
    quota_rules,
    release_rules,
    unguarded,
)
from webhook.core.scheduling.plugins.dynamicresources.mappings import create_requests_and_mappings

GPU, GPU_CLASS = "example.com/gpu", "gpu.example.com"
IMPLICIT = f"deviceclass.resource.kubernetes.io/{GPU_CLASS}"
ON_137 = QuotaRules((1, 37), True)


def quota(ns: str, **hard: str) -> dict[str, object]:
    return {"kind": "ResourceQuota", "metadata": {"name": "q", "namespace": ns}, "spec": {"hard": hard}}


def field_name(cls: str) -> str | None:
    return GPU if cls == GPU_CLASS else None


def no_field(_cls: str) -> str | None:
    return None


def claim(*requests: Obj, name: str = "c") -> Obj:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": list(requests)}},
    }


def exactly(cls: str = GPU_CLASS, **fields: object) -> Obj:
    return {"name": "r", "exactly": {"deviceClassName": cls, **fields}}


@pytest.mark.parametrize(
    ("release", "gate", "names", "earliest", "implicit_pods"),
    [
        ((1, 34), True, False, False, False),  # 1.34's claim evaluator has no extended resource code
        ((1, 35), False, False, False, True),  # alpha, off by default
        ((1, 35), True, True, False, True),  # getVerifiedPodUsage without the claimGetter
        ((1, 36), True, True, True, True),  # PR #135434
        ((1, 37), True, True, True, True),
        ((1, 36), False, False, True, True),  # turned off by hand
    ],
)
def test_the_rules_of_each_release(
    release: tuple[int, int], gate: bool, names: bool, earliest: bool, implicit_pods: bool
) -> None:
    rules = QuotaRules(release, gate)
    assert (rules.claims_charge_names, rules.earliest_owned, rules.pods_charge_implicit_names) == (
        names,
        earliest,
        implicit_pods,
    )


def test_the_release_comes_from_the_version_and_offline_from_its_default_gate() -> None:
    assert quota_rules("v1.35.4", True) == QuotaRules((1, 35), True)
    assert quota_rules(None, True) == QuotaRules((1, 37), True)  # unreadable: the newest release
    assert release_rules("1.35") == QuotaRules((1, 35), False)
    assert release_rules("1.36") == QuotaRules((1, 36), True)


@pytest.mark.parametrize(
    ("requests", "devices"),
    [
        ([exactly(allocationMode="ExactCount", count=3)], {GPU_CLASS: 3}),
        ([exactly()], {GPU_CLASS: 1}),  # defaults: ExactCount, count 1
        ([exactly(allocationMode="All")], {GPU_CLASS: 32}),  # "Worst case...": AllocationResultsMaxSize
        ([exactly(allocationMode="Future")], {GPU_CLASS: 0}),  # "Could happen after a downgrade"
        (
            [
                {
                    "name": "r",
                    "firstAvailable": [
                        {"name": "a", "deviceClassName": GPU_CLASS, "count": 2},
                        {"name": "b", "deviceClassName": GPU_CLASS, "count": 4},
                        {"name": "c", "deviceClassName": "nic", "count": 1},
                    ],
                }
            ],
            {GPU_CLASS: 4, "nic": 1},  # the max number of devices per class over the subrequests
        ),
        ([{"name": "r"}], {}),  # "Some unknown, future request type"
    ],
)
def test_usage_counts_devices_per_class(requests: list[Obj], devices: dict[str, int]) -> None:
    assert claim_devices(claim(*requests)) == devices


def test_with_the_gate_on_every_claim_of_a_class_is_charged_its_names() -> None:
    """addExtendedResourceQuota: the implicit key always, ``requests.<name>`` when the class names one."""
    c = claim(exactly(count=2))
    assert claim_usage(c, ON_137, field_name) == {
        CLAIM_COUNT_KEY: 1,
        class_quota_key(GPU_CLASS): 2,
        f"requests.{IMPLICIT}": 2,
        f"requests.{GPU}": 2,
    }
    assert claim_usage(c, ON_137, no_field) == {
        CLAIM_COUNT_KEY: 1,
        class_quota_key(GPU_CLASS): 2,
        f"requests.{IMPLICIT}": 2,
    }
    for rules in (QuotaRules((1, 34), True), QuotaRules((1, 36), False)):
        assert claim_usage(c, rules, field_name) == {CLAIM_COUNT_KEY: 1, class_quota_key(GPU_CLASS): 2}


def test_pods_are_charged_their_names_the_implicit_ones_from_135() -> None:
    p = pod(containers=[container("c", {GPU: "2", IMPLICIT: "1", "cpu": "1"})])
    assert pod_usage(p, ON_137) == {f"requests.{GPU}": 2, f"requests.{IMPLICIT}": 1}
    assert pod_usage(p, QuotaRules((1, 34), True)) == {f"requests.{GPU}": 2}
    p["status"] = {"phase": "Succeeded"}
    assert pod_usage(p, ON_137) == {}


def test_upstreams_e2e_quota_case_gives_its_exact_used_figures() -> None:
    """``test/e2e/dra/dra.go`` "must run a pod with extended resource with resource quota": the main
    container, an init container, a sidecar and a second init container each ask for the explicit
    and the implicit name (1 each); an ordinary 1-device claim of the class besides. Used:
    count/resourceclaims 2, and 5 for ``requests.<name>``, ``requests.deviceclass...`` and devices."""
    res = {GPU: "1", IMPLICIT: "1"}
    p = pod(
        "quota",
        containers=[container("c", res)],
        init=[
            container("c-init", res),
            container("c-sidecar", res, sidecar=True),
            container("c-init-1", res),
        ],
    )
    requests, _ = create_requests_and_mappings(p, {GPU: GPU_CLASS, IMPLICIT: GPU_CLASS})
    special = as_obj(special_claim(p, requests, claim_name="quota-extended-resources-x2k4z"))
    special["metadata"]["creationTimestamp"] = "2026-10-01T00:00:00Z"
    p["status"] = {"extendedResourceClaimStatus": {"resourceClaimName": "quota-extended-resources-x2k4z"}}
    external = claim(exactly(count=1), name="external-claim")
    used: dict[str, int] = {}
    for usage in (
        pod_usage(p, ON_137),
        claim_usage(special, ON_137, field_name, p, [special]),
        claim_usage(external, ON_137, field_name),
    ):
        for key, n in usage.items():
            used[key] = used.get(key, 0) + n
    assert used == {
        CLAIM_COUNT_KEY: 2,
        f"requests.{GPU}": 5,
        f"requests.{IMPLICIT}": 5,
        class_quota_key(GPU_CLASS): 5,
    }


def test_an_unverified_special_claim_is_charged_in_full() -> None:
    """A second claim a pod owns (a failed binding cycle's, or a forged one) gets no discount."""
    p = pod("p", containers=[container("c", {GPU: "1"})])
    first = as_obj(special_claim(p, [exactly(count=1)], claim_name="a"))
    second = as_obj(special_claim(p, [exactly(count=1)], claim_name="b"))
    for c, t in ((first, "2026-10-01T00:00:00Z"), (second, "2026-10-01T00:00:09Z")):
        c["metadata"]["creationTimestamp"] = t
    owned = [first, second]
    assert f"requests.{GPU}" not in claim_usage(first, ON_137, field_name, p, owned)
    assert claim_usage(second, ON_137, field_name, p, owned)[f"requests.{GPU}"] == 1
    # 1.35: both discounted while the pod's status is unset (kubernetes/kubernetes#135404)
    on_135 = QuotaRules((1, 35), True)
    assert f"requests.{GPU}" not in claim_usage(second, on_135, field_name, p, owned)


def test_a_quota_on_the_name_without_one_on_the_class_is_reported() -> None:
    classes = {GPU: GPU_CLASS}
    on_name = quota("team", **{f"requests.{GPU}": "4"})
    assert unguarded([on_name], "team", classes) == [(GPU, GPU_CLASS)]
    both = quota("team", **{f"requests.{GPU}": "4", class_quota_key(GPU_CLASS): "4"})
    assert unguarded([both], "team", classes) == []
    assert unguarded([on_name], "other", classes) == []  # another namespace's quota
    assert unguarded([quota("team", cpu="4")], "team", classes) == []
    assert class_quota_key(GPU_CLASS) == "gpu.example.com.deviceclass.resource.k8s.io/devices"


def test_where_claims_are_charged_the_name_a_quota_on_it_limits_rewritten_pods() -> None:
    """MatchingResources: ``requests.<name>`` when the name resolves to a class, the implicit key
    only for a class with an explicit name (``GetExtendedResource(class) != ""``)."""
    classes = {GPU: GPU_CLASS, IMPLICIT: GPU_CLASS}
    hard = quota("team", **{f"requests.{GPU}": "4", f"requests.{IMPLICIT}": "4"})
    assert unguarded([hard], "team", classes, ON_137, field_name) == []
    # the class names it only in draxr's annotation: the apiserver's cache does not know it
    assert unguarded([hard], "team", classes, ON_137, no_field) == [(IMPLICIT, GPU_CLASS), (GPU, GPU_CLASS)]
    for rules in (QuotaRules((1, 34), True), QuotaRules((1, 35), False)):
        assert len(unguarded([hard], "team", classes, rules, field_name)) == 2
    assert claims_charged_by_name(GPU, GPU_CLASS, QuotaRules((1, 35), True), field_name)
    assert not claims_charged_by_name("example.com/other", GPU_CLASS, ON_137, field_name)


def test_a_quota_limits_a_name_by_its_request_key_or_the_bare_name() -> None:
    assert limits_by_name(quota("team", **{f"requests.{GPU}": "4"}), GPU)
    assert limits_by_name(quota("team", **{GPU: "4"}), GPU)
    assert not limits_by_name(quota("team", **{f"limits.{GPU}": "4"}), GPU)
    assert not limits_by_name(quota("team", **{"requests.example.com/nic": "4"}), GPU)
    assert not limits_by_name({"kind": "ResourceQuota", "spec": {"hard": "broken"}}, GPU)
    # the quotas of a namespace add up: the name limited by one, the class by another
    split = [quota("team", **{GPU: "4"}), quota("team", **{class_quota_key(GPU_CLASS): "4"})]
    assert unguarded(split, "team", {GPU: GPU_CLASS}) == []
