"""Device-aware preemption on a real control plane (issue 21): a pod of a higher PriorityClass that
no node can serve evicts a lower one holding the device it needs, as kube-scheduler's
DefaultPreemption does, and runs with that device once the victim is gone: the fewest and lowest
victims, ``preemptionPolicy: Never`` waiting, a PodDisruptionBudget turning the choice.

The real apiserver's Priority admission turns ``priorityClassName`` into ``spec.priority``; the
emulator has none, so the emulator's preemption cases are draxr's own scenarios
(``tests/scenarios`` and ``tests/worker/test_preemption.py``). Where the gate is off draxr rewrites
both pods into claims from its templates, which kube-controller-manager makes and releases.
"""

from __future__ import annotations

import pytest

from webhook.core.api.objects import Obj

from .controlplane.nodes import TEST_CDI_KIND
from .kubelet_logs import cdi_records, prepared_twice
from .target import RESOURCES, Target
from .test_rewrite import all_bound, container, create_pod, live
from .test_shares_and_taints import _results
from .test_upstream_extended_resources import mapped_class, running, unschedulable

pytestmark = pytest.mark.any_gate


def _priority_class(target: Target, name: str, value: int, **more: str) -> str:
    body: Obj = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": f"{name}-e2e-{target.run_id}"},
        "value": value,
        **more,
    }
    return str(target.create("priorityclasses", body)["metadata"]["name"])


def _skip_where_it_cannot_run(target: Target) -> None:
    if target.sandbox is not None:
        pytest.skip("the emulator has no Priority admission (priorityClassName): make e2e-local runs this")
    if not target.native:
        target.require_controllers("claims from draxr's templates")


def _full_node(target: Target, suffix: str, pods: dict[str, tuple[str, dict[str, str]]]) -> tuple[str, str]:
    """A slice of as many devices of this run as ``pods`` (name: priority class, labels), a class
    mapping a name to them, and the pods holding every device: the node and the name."""
    node = target.nodes[0]
    target.slice(node, len(pods))
    ext = f"e2e-{target.run_id}.draxr.io/{suffix}"
    mapped_class(target, suffix, ext)
    for name, (priority_class, labels) in pods.items():
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "containers": [container("c", {ext: "1"})],
                "terminationGracePeriodSeconds": 0,
                "priorityClassName": priority_class,
            },
        }
        target.create("pods", body, as_user=True)
    target.wait("pods", all_bound(len(pods), set(pods)), timeout=60)
    if target.cdi_log is not None:
        target.wait("pods", running(set(pods)), timeout=120)
    return node, ext


def _preempted(target: Target, victims: set[str], survivors: set[str], preemptor: str) -> Obj:
    """``preemptor`` bound where the victims were, with one of their devices; the victims gone, each
    with upstream's ``Preempted`` Event; the survivors still bound."""
    found: list[Obj] = target.wait("pods", all_bound(1, {preemptor}), timeout=120)
    [pod] = found
    names = {p["metadata"]["name"] for p in live(target.objects("pods"))}
    assert not victims & names, f"victims still there: {victims & names}"
    assert survivors <= names, f"survivors gone: {survivors - names}"
    for victim in victims:
        events = [
            e
            for e in target.objects("events")
            if e["reason"] == "Preempted" and e["involvedObject"]["name"] == victim
        ]
        assert [e["message"] for e in events] == [
            f"Preempted by pod {pod['metadata']['uid']} on node {pod['spec']['nodeName']}"
        ], victim
    if target.cdi_log is not None:
        target.wait("pods", running({preemptor}), timeout=120)
    return pod


def test_a_higher_priority_pod_preempts_a_lower_one_for_its_device(target: Target) -> None:
    """One device of this run, held by a pod of priority 10: a pod of priority 1000 asking for the
    same name evicts it (a ``Preempted`` Event names the preemptor and the node), is placed on that
    node and runs with the freed device."""
    _skip_where_it_cannot_run(target)
    node = target.nodes[0]
    target.slice(node, 1)
    ext = f"e2e-{target.run_id}.draxr.io/preempt"
    mapped_class(target, "preempt", ext)
    low, high = _priority_class(target, "low", 10), _priority_class(target, "high", 1000)
    create_pod(target, "low", [container("c", {ext: "1"})], priorityClassName=low)
    [victim] = target.wait("pods", all_bound(1, {"low"}), timeout=60)
    if target.cdi_log is not None:
        target.wait("pods", running({"low"}), timeout=120)
    [held] = _results(target, victim)

    create_pod(target, "high", [container("c", {ext: "1"})], priorityClassName=high)
    [preemptor] = target.wait("pods", all_bound(1, {"high"}), timeout=120)
    assert preemptor["spec"]["nodeName"] == node
    assert preemptor["spec"]["priority"] == 1000
    assert not [p for p in target.objects("pods") if p["metadata"]["name"] == "low"], "the victim stays"
    preempted = [
        e
        for e in target.objects("events")
        if e["reason"] == "Preempted" and e["involvedObject"]["name"] == "low"
    ]
    assert preempted, "no Preempted Event on the victim"
    # upstream's words: "Preempted by pod <uid> on node <node>"
    assert preempted[0]["message"] == f"Preempted by pod {preemptor['metadata']['uid']} on node {node}"
    [result] = _results(target, preemptor)
    assert (result["pool"], result["device"]) == (held["pool"], held["device"])
    if target.cdi_log is not None:
        target.wait("pods", running({"high"}), timeout=120)
        [record] = cdi_records(target.cdi_log, target.namespace, "high")
        assert record["cdi_devices"] == [f"{TEST_CDI_KIND}={result['pool']}-{result['device']}"]
    if target.prepare_log is not None:
        assert prepared_twice(target.prepare_log) == []


def test_the_fewest_lowest_victims_go_and_a_never_preempting_pod_waits(target: Target) -> None:
    """upstream's DefaultPreemption on a full node of two devices held by priorities 10 and 20: a pod
    of priority 1000 with ``preemptionPolicy: Never`` waits, Unschedulable, evicting nobody; one of
    priority 1000 that may preempt evicts only the priority-10 pod (one victim suffices; the
    higher-priority one is reprieved first) and gets its device."""
    _skip_where_it_cannot_run(target)
    low, mid = _priority_class(target, "low", 10), _priority_class(target, "mid", 20)
    high = _priority_class(target, "high", 1000)
    never = _priority_class(target, "never", 1000, preemptionPolicy="Never")
    _, ext = _full_node(target, "fewest", {"low": (low, {}), "mid": (mid, {})})
    [held] = _results(target, target.admin.get(RESOURCES["pods"], "low", target.namespace))
    create_pod(target, "patient", [container("c", {ext: "1"})], priorityClassName=never)
    target.wait("pods", unschedulable("patient"), timeout=60)
    assert {"low", "mid"} <= {p["metadata"]["name"] for p in target.objects("pods")}
    create_pod(target, "high", [container("c", {ext: "1"})], priorityClassName=high)
    pod = _preempted(target, {"low"}, {"mid"}, "high")
    [result] = _results(target, pod)
    assert (result["pool"], result["device"]) == (held["pool"], held["device"])
    patient = target.admin.get(RESOURCES["pods"], "patient", target.namespace)
    assert not patient["spec"].get("nodeName")


def test_a_pod_disruption_budget_turns_preemption_to_another_victim(target: Target) -> None:
    """The same node, the priority-10 pod guarded by a PodDisruptionBudget (minAvailable 1, so no
    disruption is allowed): upstream reprieves PDB-violating victims first, so the priority-20 pod is
    evicted instead and the guarded one keeps running."""
    _skip_where_it_cannot_run(target)
    low, mid = _priority_class(target, "low", 10), _priority_class(target, "mid", 20)
    high = _priority_class(target, "high", 1000)
    target.create(
        "poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guard"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
        },
    )
    _, ext = _full_node(target, "guarded", {"low": (low, {"app": "guarded"}), "mid": (mid, {})})
    create_pod(target, "high", [container("c", {ext: "1"})], priorityClassName=high)
    _preempted(target, {"mid"}, {"low"}, "high")
