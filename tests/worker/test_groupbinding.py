"""The two-phase commit of a pod group's members under injected write failures."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .harness import GPU, Cluster, cluster, device_class, gpu_slice, node, pod_group


def members(kube: Cluster, n: int, gpus: int = 2) -> None:
    for i in range(n):
        kube.pod(f"m{i}", {GPU: gpus}, schedulingGroup={"podGroupName": "train"})


def test_a_prebind_failure_undoes_every_members_writes_then_the_group_binds(kube: Cluster) -> None:
    kube.apply(device_class(), node("n1"), node("n2"), gpu_slice("n1", 4), gpu_slice("n2", 4))
    kube.apply(pod_group("train", 4))
    # The third special claim's create fails, after two members' claims were written.
    rule = kube.em.inject(verbs="create", resource="resourceclaims", error=403, times=1, skip=2)
    kube.worker()
    members(kube, 4)
    kube.em.wait_for(lambda: rule.hits == 1, 10, "the fault")
    bound = kube.wait_bound(4)
    assert len(bound) == 4
    kube.check_consistent()
    assert len(kube.claims()) == 4  # the two claims of the failed commit are gone
    # No member was bound while a write of its group was undone.
    writes = [r for r in kube.em.faults.requests() if r.verb in ("create", "delete")]
    first_bind = next(i for i, r in enumerate(writes) if r.resource == "pods/binding")
    deleted = [i for i, r in enumerate(writes) if r.resource == "resourceclaims" and r.verb == "delete"]
    assert len(deleted) == 2
    assert max(deleted) < first_bind


def test_a_bind_that_fails_below_min_count_releases_the_group(kube: Cluster) -> None:
    kube.apply(device_class(), node("n1"), gpu_slice("n1", 8))
    kube.apply(pod_group("train", 4))
    kube.em.inject(verbs="create", resource="pods/binding", error=403, message="nope", times=1, skip=3)
    kube.worker()
    members(kube, 4)

    def released() -> bool:
        return len([p for p in kube.pods() if not p["metadata"].get("deletionTimestamp")]) == 1

    kube.em.wait_for(released, 10, "the three bound members released")
    left = kube.pods()
    for p in left:
        if p["spec"].get("nodeName"):
            conditions = {c["type"]: c for c in p["status"].get("conditions", [])}
            assert conditions["DisruptionTarget"]["reason"] == "PodGroupReleased"
    assert not [p for p in left if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")]
    assert len(kube.em.faults.requests()) > 0
    deletes = [r for r in kube.em.faults.requests() if r.verb == "delete" and r.resource == "pods"]
    assert len(deletes) == 3


def test_without_two_phase_commit_a_failed_bind_leaves_the_others_bound_as_upstream(kube: Cluster) -> None:
    kube.apply(device_class(), node("n1"), gpu_slice("n1", 8))
    kube.apply(pod_group("train", 4))
    rule = kube.em.inject(verbs="create", resource="pods/binding", error=403, message="nope", times=1, skip=3)
    kube.worker(gang_two_phase_commit=False)
    members(kube, 4)
    kube.em.wait_for(lambda: rule.hits == 1, 10, "the fault")
    bound = kube.wait_bound(3)
    assert len(bound) >= 3
    assert not [p for p in kube.pods() if p["metadata"].get("deletionTimestamp")]


def _bound_live(kube: Cluster) -> list[str]:
    return [
        p["metadata"]["name"]
        for p in kube.pods()
        if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
    ]


#: Every write of a group's commit: the special claims, their allocation, the mappings, the binds.
WRITES = [
    ("create", "resourceclaims"),
    ("update", "resourceclaims/status"),
    ("patch", "pods/status"),
    ("create", "pods/binding"),
]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(write=st.sampled_from(WRITES), skip=st.integers(0, 5), times=st.integers(1, 3))
def test_no_gang_is_ever_left_bound_below_its_min_count(
    tmp_path_factory: pytest.TempPathFactory, write: tuple[str, str], skip: int, times: int
) -> None:
    """Property: whatever write of the commit fails (once or a few times, early or late), the group
    ends with every member bound, or released with none bound; a device is never in two claims."""
    verb, resource = write
    with cluster(tmp_path_factory.mktemp("gang")) as kube:
        kube.apply(device_class(), node("n1"), node("n2"), gpu_slice("n1", 4), gpu_slice("n2", 4))
        kube.apply(pod_group("train", 4))
        rule = kube.em.inject(
            verbs=verb, resource=resource, error=403, message="injected", times=times, skip=skip
        )
        kube.worker()
        members(kube, 4)

        def settled() -> bool:
            bound = _bound_live(kube)
            released = len([p for p in kube.pods() if not p["metadata"].get("deletionTimestamp")]) < 4
            return len(bound) == 4 or (released and not bound)

        kube.em.wait_for(settled, 30, "the gang bound whole, or released")
        bound = _bound_live(kube)
        assert len(bound) in (0, 4), bound
        allocated = kube.allocated()
        assert len(allocated) == len(set(allocated))
        if len(bound) == 4:
            kube.check_consistent()
        assert rule.hits >= 1 or skip >= 4
