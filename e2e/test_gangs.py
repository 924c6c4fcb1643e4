"""Issue 33, gangs of GPU pods on a real control plane: a PodGroup's members placed all or nothing
by draxr's worker, on the 1.37 row with ``GenericWorkload`` and ``TopologyAwareWorkloadScheduling``
on (``GANG_GATES``; the apiserver serves ``scheduling.k8s.io/v1beta1``).

The webhook routes every member (each asks for this run's extended resource); the worker waits for
the PodGroup and for ``minCount`` members, places them in one cycle, writes every member's special
claim before binding any, and the kubelets run them. A gang that cannot fit leaves no pod bound and
no claim allocated, and the PodGroup says why (``PodGroupInitiallyScheduled``).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from webhook.core.api.objects import Obj
from webhook.core.scheduling.devicematch import MATCH_ATTRIBUTE

from .local import LocalCluster
from .target import DRIVER, RESOURCES, Target
from .test_rewrite import all_bound, container_devices, live
from .test_upstream_extended_resources import running

pytestmark = pytest.mark.any_gate


@pytest.fixture
def gangs(backend: str | LocalCluster) -> LocalCluster:
    """The row's cluster where PodGroups are served, or a skip saying why (before a Target is made)."""
    if not isinstance(backend, LocalCluster):
        pytest.skip(
            f"{backend}: workload-aware scheduling needs kube-scheduler's GenericWorkload; the local row "
            "1.37 runs this (make e2e-local; on the emulator: tests/worker/test_podgroupscheduling.py)"
        )
    if not backend.row.gangs:
        pytest.skip(
            f"{backend.row.name}: the apiserver serves no PodGroups here (GenericWorkload and "
            "scheduling.k8s.io/v1beta1 are on in the 1.37 row only)"
        )
    return backend


def _pod_group(target: Target, name: str, min_count: int, key: str | None = None) -> Obj:
    spec: Obj = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if key is not None:
        spec["schedulingConstraints"] = {"topology": [{"key": key}]}
    body: Obj = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": spec,
    }
    return target.create("podgroups", body)


def _condition(name: str) -> Callable[[list[Obj]], Obj | None]:
    def check(groups: list[Obj]) -> Obj | None:
        for g in groups:
            if g["metadata"]["name"] != name:
                continue
            for c in (g.get("status") or {}).get("conditions") or []:
                if c["type"] == "PodGroupInitiallyScheduled":
                    return dict(c)
        return None

    return check


def _members(target: Target, group: str, n: int, gpus: int) -> set[str]:
    names = {f"{group}-{i}" for i in range(n)}
    for name in sorted(names):
        target.pod(name, {target.ext: str(gpus)}, schedulingGroup={"podGroupName": group})
    return names


def test_a_gang_of_four_pods_of_two_gpus_runs_together_with_its_devices(
    gangs: LocalCluster, target: Target
) -> None:
    target.device_class()
    for node in target.nodes[:2]:
        target.slice(node, 4)
    _pod_group(target, "train", 4)
    names = _members(target, "train", 4, 2)
    pods = target.wait("pods", all_bound(4, names), timeout=90)
    assert {p["spec"]["schedulerName"] for p in pods} == {"draxr"}  # routed, every member
    if target.cdi_log is not None:
        pods = target.wait("pods", running(names), timeout=180)
    devices: set[str] = set()
    for p in pods:
        got = container_devices(target, p)["c"]
        assert len(got) == 2, (p["metadata"]["name"], got)
        devices |= got
    assert len(devices) == 8
    condition = target.wait("podgroups", _condition("train"), timeout=30)
    assert (condition["status"], condition["reason"]) == ("True", "Scheduled")


def test_a_gang_in_one_topology_domain(gangs: LocalCluster, target: Target) -> None:
    target.device_class()
    for node in target.nodes[:2]:
        target.slice(node, 2)
    _pod_group(target, "pair", 2, key="kubernetes.io/hostname")
    names = _members(target, "pair", 2, 1)
    pods = target.wait("pods", all_bound(2, names), timeout=90)
    assert len({p["spec"]["nodeName"] for p in pods}) == 1


def test_a_gang_that_cannot_fit_leaves_no_pod_bound_and_no_claim_allocated(
    gangs: LocalCluster, target: Target
) -> None:
    target.device_class()
    target.slice(target.nodes[0], 4)
    _pod_group(target, "big", 3)
    names = _members(target, "big", 3, 2)
    condition = target.wait("podgroups", _condition("big"), timeout=60)
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert "pod group is unschedulable" in condition["message"]
    pods = [p for p in live(target.objects("pods")) if p["metadata"]["name"] in names]
    assert len(pods) == 3
    assert not [p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")]
    allocated = [c for c in target.objects("resourceclaims") if (c.get("status") or {}).get("allocation")]
    assert allocated == []


def _clique_slice(target: Target, node: str, cliques: list[str]) -> dict[str, str]:
    """A slice of this run's devices on ``node``, ``dev-<i>`` in clique ``cliques[i]``: each
    device's ``pool/name`` -> its clique."""
    target.slice(node, len(cliques), attributes=[{"clique": {"string": c}} for c in cliques])
    pool = f"{node}-e2e-{target.run_id}"
    return {f"{pool}/dev-{i}": clique for i, clique in enumerate(cliques)}


def test_one_clique_across_the_gangs_pods(gangs: LocalCluster, target: Target) -> None:
    """draxr.io/match-attribute (beyond upstream): both members' devices in clique y, although
    binpacking alone would take clique x's two devices first."""
    target.device_class()
    cliques = _clique_slice(target, target.nodes[0], ["x", "x", "y", "y"])
    cliques |= _clique_slice(target, target.nodes[1], ["y", "y", "y", "y"])
    _pod_group(target, "clique", 2)
    target.admin.patch(
        RESOURCES["podgroups"],
        "clique",
        {"metadata": {"annotations": {MATCH_ATTRIBUTE: f"{DRIVER}/clique"}}},
        namespace=target.namespace,
    )
    names = _members(target, "clique", 2, 2)
    pods = target.wait("pods", all_bound(2, names), timeout=90)
    held = {cliques[d] for p in pods for d in container_devices(target, p)["c"]}
    assert held == {"y"}
