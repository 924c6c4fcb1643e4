"""Issue 23 on the whole cluster: a shared device serving several pods through
``draxr.io/capacity-requests`` (KEP-5075's consumable capacity), and a tainted device serving a pod
only through a class whose ``draxr.io/extended-resource-tolerations`` tolerate the taint. Both run
where the apiserver keeps the fields (DRAConsumableCapacity and DRADeviceTaints are on from 1.36),
native or rewritten; on the local rows the fake runtime's CDI log shows what each container got.
"""

from __future__ import annotations

import json

import pytest

from webhook.core.api.capacityrequests import CAPACITY_REQUESTS_ANNOTATION
from webhook.core.api.constants import EXTENDED_RESOURCE_TOLERATIONS_ANNOTATION
from webhook.core.api.objects import Obj

from .controlplane.nodes import TEST_CDI_KIND
from .kubelet_logs import cdi_records, prepared_twice
from .target import RESOURCES, Target
from .test_rewrite import all_bound, container, create_pod
from .test_upstream_extended_resources import mapped_class, running, unschedulable

pytestmark = pytest.mark.any_gate


def _slice(target: Target, fields: Obj, field: str, gate: str) -> None:
    """A slice of this run's test driver with one device ``dev-0`` with ``fields``; skips where the
    apiserver drops ``field`` (``gate`` off)."""
    created = target.slice(target.nodes[0], 1, fields)
    if field not in created["spec"]["devices"][0]:
        pytest.skip(f"the apiserver drops devices[].{field} ({gate} is off)")


def _placed(target: Target, names: set[str]) -> list[Obj]:
    """The pods once bound, and where kubelets run them (the local rows), once Running."""
    pods: list[Obj] = target.wait("pods", all_bound(len(names), names), timeout=60)
    if target.cdi_log is not None:
        pods = target.wait("pods", running(names), timeout=120)
    return pods


def _results(target: Target, pod: Obj) -> list[Obj]:
    """The allocation results of the claims made for the pod (its special claim, or draxr's claim
    from a template where the gate is off)."""
    uid = pod["metadata"]["uid"]
    out: list[Obj] = []
    for claim in target.objects("resourceclaims"):
        if any(o["uid"] == uid for o in claim["metadata"].get("ownerReferences") or []):
            out += claim["status"]["allocation"]["devices"]["results"]
    return out


def test_four_pods_take_four_shares_of_one_device(target: Target) -> None:
    """A class with ``draxr.io/capacity-requests`` of 1Gi and one device of 4Gi that allows multiple
    allocations: four pods asking ``<name>: 1`` all run, each claim holding a share of the device
    (its ``shareID``, 1Gi consumed), each container created with its own share's CDI ID; a fifth
    pod waits, Unschedulable."""
    if not target.native:
        target.require_controllers("claims from draxr's templates")
    _slice(
        target,
        {"allowMultipleAllocations": True, "capacity": {"memory": {"value": "4Gi"}}},
        "allowMultipleAllocations",
        "DRAConsumableCapacity",
    )
    ext = f"e2e-{target.run_id}.draxr.io/shared"
    requests = json.dumps({"requests": {"memory": "1Gi"}})
    mapped_class(target, "shared", ext, {CAPACITY_REQUESTS_ANNOTATION: requests})
    names = {f"p{i}" for i in range(4)}
    for name in sorted(names):
        create_pod(target, name, [container("c", {ext: "1"})])
    pods = _placed(target, names)
    shares: dict[str, str] = {}
    for pod in pods:
        [result] = _results(target, pod)
        assert (result["device"], result["consumedCapacity"]) == ("dev-0", {"memory": "1Gi"}), result
        shares[pod["metadata"]["name"]] = result["shareID"]
        if target.cdi_log is not None:
            [record] = cdi_records(target.cdi_log, target.namespace, pod["metadata"]["name"])
            assert record["cdi_devices"] == [f"{TEST_CDI_KIND}={result['pool']}-dev-0-{result['shareID']}"]
    assert len(set(shares.values())) == 4, shares
    if target.prepare_log is not None:
        assert prepared_twice(target.prepare_log) == []
    create_pod(target, "p4", [container("c", {ext: "1"})])
    target.wait("pods", unschedulable("p4"), timeout=60)


def test_a_tainted_device_serves_only_through_a_class_that_tolerates_it(target: Target) -> None:
    """One device with a NoSchedule taint, two classes selecting it: a pod through the class without
    tolerations stays Unschedulable; a pod through the class whose
    ``draxr.io/extended-resource-tolerations`` tolerate the taint runs with the device, its claim's
    request carrying the toleration."""
    if not target.native:
        target.require_controllers("claims from draxr's templates")
    taint = {"key": "e2e.draxr.io/broken", "value": "true", "effect": "NoSchedule"}
    _slice(target, {"taints": [taint]}, "taints", "DRADeviceTaints")
    plain = f"e2e-{target.run_id}.draxr.io/plain"
    tolerating = f"e2e-{target.run_id}.draxr.io/tolerating"
    toleration = {"key": "e2e.draxr.io/broken", "operator": "Exists", "effect": "NoSchedule"}
    mapped_class(target, "plain", plain)
    mapped_class(
        target, "tolerating", tolerating, {EXTENDED_RESOURCE_TOLERATIONS_ANNOTATION: json.dumps([toleration])}
    )
    create_pod(target, "plain", [container("c", {plain: "1"})])
    target.wait("pods", unschedulable("plain"), timeout=60)
    create_pod(target, "tolerating", [container("c", {tolerating: "1"})])
    [pod] = _placed(target, {"tolerating"})
    [result] = _results(target, pod)
    assert result["device"] == "dev-0"
    claims = [
        c
        for c in target.objects("resourceclaims")
        if any(o["uid"] == pod["metadata"]["uid"] for o in c["metadata"].get("ownerReferences") or [])
    ]
    [request] = claims[0]["spec"]["devices"]["requests"]
    assert request["exactly"]["tolerations"] == [toleration]
    if target.cdi_log is not None:
        [record] = cdi_records(target.cdi_log, target.namespace, "tolerating")
        assert record["cdi_devices"] == [f"{TEST_CDI_KIND}={result['pool']}-dev-0"]
    plain_pod = target.admin.get(RESOURCES["pods"], "plain", target.namespace)
    assert not plain_pod["spec"].get("nodeName")
