"""Issue 31, binding conditions (KEP-5007) on a real cluster: devices that bind only once their
driver says so, as composable or fabric-attached GPUs do.

On the rows where ``DRADeviceBindingConditions`` is on (1.36-default, 1.37) the DRA driver
``gpu.example.com`` of ``e2e-node-b`` also publishes ``attachable-0..`` (``Row.attachable``), each
with the binding condition ``gpu.example.com/Attached``, the failure condition
``gpu.example.com/AttachFailed`` and ``bindsToNode``; the workers run with a short
``--binding-timeout`` (``BINDING_TIMEOUT``). Each test maps a name of its own to a class selecting
only those devices (their ``attachable`` attribute; the KEP example's class never gets them, see
``ATTACHABLE_NODE``) and plays the driver: it writes the conditions into the special claim's
``status.devices`` through the ``/status`` subresource, as the cluster admin. The worker decides:
the pod binds once ``Attached`` is True, and a failure condition or the timeout releases the device
(the special claim is deleted) and the pod is placed again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from webhook.core.api.constants import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from webhook.core.api.objects import Obj

from .controlplane.nodes import CDI_KIND, DRIVER
from .kubelet_logs import cdi_records, prepared_twice
from .local import ATTACHABLE_NODE, BINDING_TIMEOUT, LocalCluster
from .target import RESOURCES, Target
from .test_rewrite import live, owned_by
from .test_upstream_extended_resources import running

pytestmark = pytest.mark.any_gate

ATTACHED = f"{DRIVER}/Attached"
ATTACH_FAILED = f"{DRIVER}/AttachFailed"
PENDING_MESSAGE = f"waiting for binding conditions for device on node {ATTACHABLE_NODE}"


@pytest.fixture
def row(backend: str | LocalCluster) -> LocalCluster:
    """The row's cluster, or a skip saying why its devices have no binding conditions (before a
    Target is made: the emulator targets skip without starting a sandbox)."""
    if not isinstance(backend, LocalCluster):
        pytest.skip(
            f"{backend}: no DRA driver publishes devices with binding conditions here; the local "
            "rows 1.36-default and 1.37 run this (make e2e-local; on the emulator: "
            "tests/worker/test_bindingconditions.py)"
        )
    if not backend.row.attachable:
        pytest.skip(
            f"{backend.row.name}: DRADeviceBindingConditions is off in Kubernetes {backend.row.version} "
            "(beta and on by default from 1.36): the apiserver drops a device's bindingConditions and "
            "draxr never picks a device that has them"
        )
    return backend


def _attachable_class(target: Target) -> str:
    """A class mapping this run's name to the attachable devices only (the ordinary GPUs of the
    same driver lack the ``attachable`` attribute)."""
    ext = f"e2e-{target.run_id}.draxr.io/attachable"
    target.create(
        "deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": target.class_name("attachable")},
            "spec": {
                "extendedResourceName": ext,
                "selectors": [
                    {
                        "cel": {
                            "expression": f'device.driver == "{DRIVER}" && '
                            f'"attachable" in device.attributes["{DRIVER}"]'
                        }
                    }
                ],
            },
        },
    )
    return ext


def _special_claim(pod: Obj, *, not_uid: str = "") -> Callable[[list[Obj]], Obj | None]:
    """The pod's live special claim once allocated (another than ``not_uid``)."""

    def check(claims: list[Obj]) -> Obj | None:
        for claim in live(owned_by(claims, pod)):
            annotations = claim["metadata"].get("annotations") or {}
            allocated = (claim.get("status") or {}).get("allocation")
            special = annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true"
            if special and allocated and claim["metadata"]["uid"] != not_uid:
                return claim
        return None

    return check


def _gone(uid: str) -> Callable[[list[Obj]], bool]:
    return lambda claims: all(c["metadata"]["uid"] != uid for c in claims)


def _event(reason: str, pod: str, needle: str) -> Callable[[list[Obj]], Obj | None]:
    def check(events: list[Obj]) -> Obj | None:
        for e in events:
            if (e.get("reason"), e["involvedObject"].get("name")) == (reason, pod) and needle in e.get(
                "message", ""
            ):
                return e
        return None

    return check


def _result(claim: Obj) -> Obj:
    """The claim's one device result: an attachable device of ATTACHABLE_NODE, its conditions copied."""
    allocation = claim["status"]["allocation"]
    [result] = allocation["devices"]["results"]
    assert (result["driver"], result["pool"]) == (DRIVER, ATTACHABLE_NODE), result
    assert result["device"].startswith("attachable-"), result
    assert result["bindingConditions"] == [ATTACHED], result
    assert result["bindingFailureConditions"] == [ATTACH_FAILED], result
    assert allocation["allocationTimestamp"], allocation
    # bindsToNode pins the allocation to the node it was made for.
    [term] = allocation["nodeSelector"]["nodeSelectorTerms"]
    assert ATTACHABLE_NODE in str(term), allocation["nodeSelector"]
    return dict(result)


def _set_conditions(target: Target, claim: Obj, **conditions: str) -> None:
    """As the driver would: the device's conditions in the claim's ``status.devices`` (``/status``)."""
    result = _result(claim)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    entry = {
        "driver": result["driver"],
        "pool": result["pool"],
        "device": result["device"],
        "conditions": [
            {
                "type": kind,
                "status": value,
                "reason": "E2E",
                "message": f"set by the test to {value}",
                "lastTransitionTime": now,
            }
            for kind, value in conditions.items()
        ],
    }
    target.admin.patch(
        RESOURCES["resourceclaims"],
        claim["metadata"]["name"],
        {"status": {"devices": [entry]}},
        namespace=target.namespace,
        subresource="status",
    )


def _pod(target: Target, name: str) -> Obj:
    pod: Obj = target.admin.get(RESOURCES["pods"], name, target.namespace)
    return pod


def _stays_unbound(target: Target, name: str, seconds: float) -> None:
    """No ``spec.nodeName`` within ``seconds``: watched (a bind shows at once), not slept through."""
    with pytest.raises(TimeoutError):
        target.wait(
            "pods",
            lambda pods: any(p["metadata"]["name"] == name and p["spec"].get("nodeName") for p in pods),
            timeout=seconds,
        )


def _runs_with(target: Target, name: str, claim: Obj) -> None:
    """Bound to ATTACHABLE_NODE, Running, its container created with the claim's device's CDI ID."""
    [pod] = target.wait("pods", running({name}), timeout=120)
    assert pod["spec"]["nodeName"] == ATTACHABLE_NODE
    assert pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"] == claim["metadata"]["name"]
    result = _result(claim)
    assert target.cdi_log is not None
    assert target.prepare_log is not None
    [record] = cdi_records(target.cdi_log, target.namespace, name)
    assert record["cdi_devices"] == [f"{CDI_KIND}={result['pool']}-{result['device']}"], record
    assert prepared_twice(target.prepare_log) == []


def test_a_pod_binds_once_its_device_is_attached(row: LocalCluster, target: Target, kubectl: str) -> None:
    """The pod's special claim is allocated an attachable device with the conditions copied and an
    ``allocationTimestamp``, but the pod stays unbound while ``Attached`` is unset and while it is
    False; ``kubectl describe pod`` shows ``BindingConditionsPending``; once the test sets
    ``Attached=True`` the pod binds and runs with the device."""
    ext = _attachable_class(target)
    pod = target.pod("attach", {ext: "1"})
    claim = target.wait("resourceclaims", _special_claim(pod), timeout=60)
    _result(claim)
    assert not _pod(target, "attach")["spec"].get("nodeName")
    target.wait("events", _event("BindingConditionsPending", "attach", PENDING_MESSAGE), timeout=30)
    described = target.kubectl("describe", "pod", "attach")
    assert described.returncode == 0, described.stderr
    assert "BindingConditionsPending" in described.stdout, described.stdout
    assert PENDING_MESSAGE in described.stdout, described.stdout
    _set_conditions(target, claim, **{ATTACHED: "False"})
    _stays_unbound(target, "attach", 3)
    assert not _pod(target, "attach")["spec"].get("nodeName")
    _set_conditions(target, claim, **{ATTACHED: "True"})
    _runs_with(target, "attach", claim)
    # The same claim throughout: nothing was released.
    [special] = owned_by(target.objects("resourceclaims"), pod)
    assert special["metadata"]["uid"] == claim["metadata"]["uid"]


def test_a_failure_condition_releases_the_device_and_the_pod_is_placed_again(
    row: LocalCluster, target: Target, kubectl: str
) -> None:
    """``AttachFailed=True`` on the allocated device: the worker deletes the special claim, reports
    upstream's PreBind failure, and places the pod again through a new claim; ``Attached=True`` on
    that one and the pod runs."""
    ext = _attachable_class(target)
    pod = target.pod("failing", {ext: "1"})
    first = target.wait("resourceclaims", _special_claim(pod), timeout=60)
    _set_conditions(target, first, **{ATTACHED: "False", ATTACH_FAILED: "True"})
    target.wait("resourceclaims", _gone(first["metadata"]["uid"]), timeout=30)
    event = target.wait(
        "events",
        _event("FailedScheduling", "failing", f"claim {first['metadata']['name']} binding failed"),
        30,
    )
    assert event["type"] == "Warning"
    assert event["message"].startswith('running PreBind plugin "DynamicResources": '), event["message"]
    assert "reason=E2E" in event["message"], event["message"]
    second = target.wait("resourceclaims", _special_claim(pod, not_uid=first["metadata"]["uid"]), timeout=60)
    assert not _pod(target, "failing")["spec"].get("nodeName")
    described = target.kubectl("describe", "pod", "failing")
    assert described.returncode == 0, described.stderr
    assert "binding failed" in described.stdout, described.stdout
    _set_conditions(target, second, **{ATTACHED: "True"})
    _runs_with(target, "failing", second)


def test_conditions_never_set_release_the_device_after_the_binding_timeout(
    row: LocalCluster, target: Target
) -> None:
    """Nobody sets the conditions: ``BINDING_TIMEOUT`` seconds after its ``allocationTimestamp``
    (not before) the worker releases the device with upstream's ``device binding timeout``, and the
    pod is placed again through a new claim, still unbound."""
    ext = _attachable_class(target)
    pod = target.pod("forgotten", {ext: "1"})
    first = target.wait("resourceclaims", _special_claim(pod), timeout=60)
    _result(first)
    started = time.monotonic()
    target.wait("resourceclaims", _gone(first["metadata"]["uid"]), timeout=BINDING_TIMEOUT + 30)
    waited = time.monotonic() - started
    stamped = datetime.fromisoformat(first["status"]["allocation"]["allocationTimestamp"])
    held = (datetime.now(UTC) - stamped).total_seconds()
    # Released no earlier than the timeout (1 s: the timestamp's precision), and not much later.
    assert held >= BINDING_TIMEOUT - 1, (held, waited)
    assert waited <= BINDING_TIMEOUT + 20, (held, waited)
    event = target.wait("events", _event("FailedScheduling", "forgotten", "device binding timeout"), 30)
    assert event["message"] == 'running PreBind plugin "DynamicResources": device binding timeout'
    target.wait("resourceclaims", _special_claim(pod, not_uid=first["metadata"]["uid"]), timeout=60)
    assert not _pod(target, "forgotten")["spec"].get("nodeName")
