"""Device-aware preemption on a real control plane (issue 21): a pod of a higher PriorityClass that
no node can serve evicts a lower one holding the device it needs, as kube-scheduler's
DefaultPreemption does, and runs with that device once the victim is gone.

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
from .target import Target
from .test_rewrite import all_bound, container, create_pod
from .test_shares_and_taints import _results
from .test_upstream_extended_resources import mapped_class, running

pytestmark = pytest.mark.any_gate


def _priority_class(target: Target, name: str, value: int) -> str:
    body: Obj = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": f"{name}-e2e-{target.run_id}"},
        "value": value,
    }
    return str(target.create("priorityclasses", body)["metadata"]["name"])


def test_a_higher_priority_pod_preempts_a_lower_one_for_its_device(target: Target) -> None:
    """One device of this run, held by a pod of priority 10: a pod of priority 1000 asking for the
    same name evicts it (a ``Preempted`` Event names the preemptor and the node), is placed on that
    node and runs with the freed device."""
    if target.sandbox is not None:
        pytest.skip("the emulator has no Priority admission (priorityClassName): make e2e-local runs this")
    if not target.native:
        target.require_controllers("claims from draxr's templates")
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
