"""The pod features draxr's worker does not implement: each detected, named, and nothing else."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.podfactory import container, pod
from webhook.core.api.objects import Obj
from webhook.core.scheduling.unsupported import UNSUPPORTED, UNSUPPORTED_GROUPS, unsupported_features

TERM: Obj = {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "kubernetes.io/hostname"}
PVC: Obj = {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}
EPHEMERAL: Obj = {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}
REQUIRED_NODES: Obj = {"nodeSelectorTerms": []}
NO_TERMS: list[Obj] = []
WORKLOAD: Obj = {"name": "w", "podGroup": "g"}
#: A pod spec showing each entry of UNSUPPORTED (by name and field): an entry deleted from the list
#: leaves its example here unused, and that is all.
EXAMPLES: dict[tuple[str, str], Obj] = {
    ("a PodGroup of a CompositePodGroup", "PodGroup spec.parentCompositePodGroupName"): {
        "parentCompositePodGroupName": "top"
    },
    ("a PodGroup's shared ResourceClaims", "PodGroup spec.resourceClaims"): {
        "resourceClaims": [{"name": "c"}]
    },
}
#: What every worker honours: none of it is unsupported.
SUPPORTED: list[Obj] = [
    {},
    {"schedulingGroup": {"podGroupName": "trainers"}},
    {"workloadRef": {"name": "w", "podGroup": "g"}},
    {
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}
        }
    },
    {
        "affinity": {
            "podAffinity": {},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []},
        }
    },
    {"topologySpreadConstraints": []},
    {"volumes": [{"name": "c", "configMap": {"name": "x"}}, {"name": "e", "emptyDir": {}}]},
    # The volume plugins (VolumeBinding, VolumeZone, NodeVolumeLimits, VolumeRestrictions).
    {"volumes": [PVC, EPHEMERAL]},
    {"volumes": [{"name": "v", "csi": {"driver": "csi.example.com"}}]},
    {"volumes": [{"name": "v", "gcePersistentDisk": {"pdName": "d"}}]},
    # InterPodAffinity and PodTopologySpread.
    {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [TERM]}}},
    {
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": TERM}]
            }
        }
    },
    {
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {}}
        ]
    },
    {"nodeSelector": {"zone": "a"}, "tolerations": [{"operator": "Exists"}], "priorityClassName": "high"},
]


def gpu_pod(**spec: object) -> Obj:
    return pod(containers=[container("c", {"example.com/gpu": 1})], **spec)  # type: ignore[arg-type]


MEMBER = {"schedulingGroup": {"podGroupName": "trainers"}}


def test_every_unsupported_feature_is_detected_and_named() -> None:
    for feature in UNSUPPORTED_GROUPS:
        group = {"spec": EXAMPLES[(feature.name, feature.field)]}
        assert feature in unsupported_features(gpu_pod(**MEMBER), group), feature
        assert feature.describe() == f"{feature.name} ({feature.field})"


def test_what_the_worker_honours_is_not_unsupported() -> None:
    for spec in SUPPORTED:
        assert unsupported_features(gpu_pod(**spec)) == [], spec


def test_no_pod_feature_is_left_unsupported() -> None:
    assert UNSUPPORTED == ()


def test_what_of_a_pod_group_the_worker_does_not_place_is_read_from_the_group() -> None:
    member = gpu_pod(schedulingGroup={"podGroupName": "trainers"})
    assert unsupported_features(member, {"spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}) == []
    composite = {"spec": {"parentCompositePodGroupName": "top"}}
    assert [f.name for f in unsupported_features(member, composite)] == ["a PodGroup of a CompositePodGroup"]
    shared = {"spec": {"resourceClaims": [{"name": "c"}]}}
    assert [f.field for f in unsupported_features(member, shared)] == ["PodGroup spec.resourceClaims"]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from(sorted(EXAMPLES)), unique=True), st.sampled_from(SUPPORTED))
def test_features_are_found_whatever_else_the_pod_has(keys: list[tuple[str, str]], base: Obj) -> None:
    """Property: a member of a PodGroup with some examples' fields, whatever the pod has besides,
    has exactly those features, reported in the list's order, each once."""
    group: Obj = {"spec": {"schedulingPolicy": {"basic": {}}}}
    for key in keys:
        group["spec"].update(EXAMPLES[key])
    found = unsupported_features(gpu_pod(**{**base, **MEMBER}), group)
    assert found == [u for u in UNSUPPORTED_GROUPS if u in found]
    assert {(u.name, u.field) for u in found} == set(keys)
