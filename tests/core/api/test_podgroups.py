from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.core.api import podgroups
from webhook.core.api.objects import Obj


def pg(**spec: Any) -> Obj:
    return {"metadata": {"name": "g", "namespace": "ns"}, "spec": spec}


def test_a_pod_names_its_group_in_its_scheduling_group() -> None:
    pod = {"metadata": {"namespace": "ns"}, "spec": {"schedulingGroup": {"podGroupName": "g"}}}
    assert podgroups.group_of(pod) == podgroups.GroupKey("ns", "g")
    assert str(podgroups.group_of(pod)) == "ns/g"
    assert podgroups.group_of({"spec": {}}) is None
    assert podgroups.group_of({"spec": {"schedulingGroup": {}}}) is None


@pytest.mark.parametrize(
    ("policy", "gang", "count"),
    [
        ({"gang": {"minCount": 4}}, True, 4),
        ({"basic": {}}, False, 1),
        ({}, False, 1),
        ({"gang": {"minCount": True}}, True, 1),
    ],
)
def test_min_count_is_the_gangs_or_one(policy: Obj, gang: bool, count: int) -> None:
    group = pg(schedulingPolicy=policy)
    assert podgroups.is_gang(group) is gang
    assert podgroups.min_count(group) == count


def test_the_first_topology_constraint_is_the_groups_key() -> None:
    assert (
        podgroups.topology_key(pg(schedulingConstraints={"topology": [{"key": "rack"}, {"key": "zone"}]}))
        == "rack"
    )
    assert podgroups.topology_key(pg()) is None
    assert podgroups.topology_key(pg(schedulingConstraints={"topology": []})) is None


def test_priority_and_preemption_policy_default_as_upstreams() -> None:
    assert podgroups.priority(pg()) == 0
    assert podgroups.priority(pg(priority=100)) == 100
    assert podgroups.preemption_policy(pg()) == "PreemptLowerPriority"
    assert podgroups.preemption_policy(pg(preemptionPolicy="Never")) == "Never"


def test_the_condition_is_found_by_type() -> None:
    group = pg()
    group["status"] = {
        "conditions": [{"type": "Other"}, {"type": podgroups.INITIALLY_SCHEDULED, "status": "True"}]
    }
    assert podgroups.condition(group) == {"type": podgroups.INITIALLY_SCHEDULED, "status": "True"}
    assert podgroups.condition(pg()) is None


@given(
    st.recursive(st.none() | st.integers() | st.text(), lambda c: st.lists(c) | st.dictionaries(st.text(), c))
)
def test_any_shape_reads_without_an_exception(value: Any) -> None:
    for obj in ({"spec": value}, {"spec": {"schedulingPolicy": value}}, {"spec": {"schedulingGroup": value}}):
        podgroups.group_of(obj)
        podgroups.min_count(obj)
        podgroups.topology_key(obj)
        podgroups.priority(obj)
        podgroups.preemption_policy(obj)


def test_the_condition_is_named_as_the_release_serving_the_version_names_it() -> None:
    assert podgroups.condition_type("v1alpha2") == "PodGroupScheduled"  # 1.36
    assert podgroups.condition_type("v1beta1") == "PodGroupInitiallyScheduled"
    assert podgroups.condition_type("v1alpha3") == "PodGroupInitiallyScheduled"


def test_a_preferred_topology_names_a_key_or_a_preset() -> None:
    def with_annotation(value: str) -> Obj:
        return {"metadata": {"annotations": {podgroups.PREFERRED_TOPOLOGY: value}}}

    assert podgroups.preferred_topology_key(with_annotation("clique")) == "nvidia.com/gpu.clique"
    assert (
        podgroups.preferred_topology_key(with_annotation("topograph")) == "accelerator.topograph.run/domain"
    )
    assert podgroups.preferred_topology_key(with_annotation("example.com/pod")) == "example.com/pod"
    assert podgroups.preferred_topology_key(with_annotation(" ")) is None
    assert podgroups.preferred_topology_key({}) is None


def test_a_1_35_pod_names_its_group_through_its_workload() -> None:
    pod = {"metadata": {"namespace": "ns"}, "spec": {"workloadRef": {"name": "job", "podGroup": "workers"}}}
    key = podgroups.group_of(pod)
    assert key == podgroups.GroupKey("ns", "job/workers")
    assert podgroups.workload_of(key) == ("job", "workers")
    replica = {
        "metadata": {},
        "spec": {"workloadRef": {"name": "job", "podGroup": "w", "podGroupReplicaKey": "3"}},
    }
    assert podgroups.group_of(replica) == podgroups.GroupKey("default", "job/w/3")
    assert podgroups.group_of({"spec": {"workloadRef": {"name": "job"}}}) is None
    assert podgroups.workload_of(podgroups.GroupKey("ns", "plain")) is None


def test_a_workloads_pod_group_reads_as_a_pod_group_of_its_policy() -> None:
    workload = {
        "metadata": {"name": "job", "namespace": "ns"},
        "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 4}}}]},
    }
    group = podgroups.from_workload(workload, podgroups.GroupKey("ns", "job/workers"))
    assert group is not None
    assert podgroups.min_count(group) == 4
    assert podgroups.is_gang(group)
    assert group["kind"] == "Workload"
    assert podgroups.from_workload(workload, podgroups.GroupKey("ns", "job/other")) is None
