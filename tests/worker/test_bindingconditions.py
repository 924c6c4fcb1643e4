"""KEP-5007 on the emulator: a device with binding conditions, the pod held between PreBind and Bind.

The emulator claims 1.37 (``DRADeviceBindingConditions`` on by default). Node n1's only device is
attachable: ``bindingConditions: [Attached]``, ``bindingFailureConditions: [AttachFailed]``,
``bindsToNode``, from an ``allNodes`` slice (a fabric-attached GPU). The test plays the DRA driver:
it writes the conditions into the claim's ``status.devices``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.worker.harness import Cluster, cluster, device_class, gpu_slice, node, poll
from webhook.core.api.objects import Obj
from webhook.runtime.serve import Process

DRIVER = "gpu.example.com"
ATTACHED = f"{DRIVER}/Attached"
FAILED = f"{DRIVER}/AttachFailed"


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[Cluster]:
    with cluster(tmp_path, release="1.37") as c:
        yield c


def fabric_slice() -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "fabric"},
        "spec": {
            "driver": DRIVER,
            "allNodes": True,
            "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": "gpu-0",
                    "bindingConditions": [ATTACHED],
                    "bindingFailureConditions": [FAILED],
                    "bindsToNode": True,
                }
            ],
        },
    }


def setup(kube: Cluster, **worker: Any) -> None:
    kube.apply(node("n1"), device_class(), fabric_slice())
    kube.worker(**worker)


def special_claim(kube: Cluster, other_than: str = "") -> Obj:
    """The pod's special claim once allocated (another one than ``other_than``)."""

    def found() -> Obj | None:
        for c in kube.claims():
            if c["metadata"]["name"] != other_than and (c.get("status") or {}).get("allocation"):
                return c
        return None

    kube.em.wait_for(lambda: found() is not None, 10, "an allocated special claim")
    claim = found()
    assert claim is not None
    return claim


def report(kube: Cluster, claim: Obj, condition: str, value: str = "True") -> None:
    """What the driver writes once the device is attached (or failed to be)."""
    live = kube.em.get("resourceclaims", claim["metadata"]["name"], "default")
    live["status"]["devices"] = [
        {
            "driver": DRIVER,
            "pool": "fabric",
            "device": "gpu-0",
            "conditions": [
                {
                    "type": condition,
                    "status": value,
                    "reason": "Reported",
                    "message": f"{condition} by the test",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        }
    ]
    kube.em.update_status("resourceclaims", live)


def events(kube: Cluster) -> list[tuple[str, str]]:
    return [(e["reason"], e["message"]) for e in kube.em.list("events", "default")]


def wait_event(kube: Cluster, reason: str) -> list[str]:
    kube.em.wait_for(lambda: any(r == reason for r, _ in events(kube)), 10, f"a {reason} Event")
    return [m for r, m in events(kube) if r == reason]


def test_the_pod_binds_only_once_its_binding_conditions_are_true(kube: Cluster) -> None:
    setup(kube)
    kube.pod("p")
    claim = special_claim(kube)
    assert wait_event(kube, "BindingConditionsPending") == [
        "waiting for binding conditions for device on node n1"
    ]
    allocation = claim["status"]["allocation"]
    (result,) = allocation["devices"]["results"]
    assert result["bindingConditions"] == [ATTACHED]
    assert result["bindingFailureConditions"] == [FAILED]
    assert allocation["allocationTimestamp"]
    assert allocation["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n1"]
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["p"]
    proc = kube.processes[0]
    assert proc.worker is not None
    waiter, registry = proc.worker.binding_conditions, proc.worker.metrics.registry
    report(kube, claim, ATTACHED, "False")  # not yet
    seen = kube.em.get("resourceclaims", claim["metadata"]["name"], "default")["metadata"]["resourceVersion"]
    poll(lambda: seen_by_worker(proc, claim, seen), message="the worker saw the condition")
    assert waiter.pending() == 1
    assert registry.get_sample_value("draxr_binding_conditions_pending_pods") == 1
    assert kube.bound() == {}
    report(kube, claim, ATTACHED)
    assert kube.wait_bound(1) == {"p": "n1"}
    assert kube.allocated() == [(DRIVER, "fabric", "gpu-0")]
    kube.check_consistent()
    assert waiter.pending() == 0
    assert registry.get_sample_value("draxr_binding_conditions_total", {"result": "ready"}) == 1
    assert registry.get_sample_value("draxr_binding_conditions_pending_pods") == 0
    assert (
        registry.get_sample_value(
            "draxr_plugin_execution_duration_seconds_count",
            {"plugin": "DynamicResources", "extension_point": "PreBind", "status": "Success"},
        )
        == 1
    )


def seen_by_worker(proc: Process, claim: Obj, resource_version: str) -> bool:
    with proc.cache.lock:
        cached = proc.cache.state.allocated.claims.get(("default", claim["metadata"]["name"]))
    return cached is not None and cached["metadata"].get("resourceVersion") == resource_version


def test_a_failure_condition_releases_the_device_and_the_pod_is_placed_again(kube: Cluster) -> None:
    setup(kube)
    kube.pod("p")
    first = special_claim(kube)
    report(kube, first, FAILED)
    failed = wait_event(kube, "FailedScheduling")
    assert failed[0] == (
        'running PreBind plugin "DynamicResources": claim '
        f'{first["metadata"]["name"]} binding failed: reason=Reported, message="{FAILED} by the test"'
    )
    # The first claim is gone, the device allocated again in a new one, the pod still unbound.
    second = special_claim(kube, other_than=first["metadata"]["name"])
    kube.em.wait_for(
        lambda: first["metadata"]["name"] not in {c["metadata"]["name"] for c in kube.claims()},
        10,
        "the failed claim deleted",
    )
    assert kube.bound() == {}
    report(kube, second, ATTACHED)
    assert kube.wait_bound(1) == {"p": "n1"}
    kube.check_consistent()


def test_binding_timeout_releases_the_device_and_the_pod_is_placed_again(kube: Cluster) -> None:
    setup(kube, binding_timeout=0.5)
    kube.pod("p")
    first = special_claim(kube)
    assert 'running PreBind plugin "DynamicResources": device binding timeout' in wait_event(
        kube, "FailedScheduling"
    )
    kube.em.wait_for(
        lambda: first["metadata"]["name"] not in {c["metadata"]["name"] for c in kube.claims()},
        10,
        "the timed-out claim deleted",
    )
    assert kube.bound() == {}
    proc = kube.processes[0]
    assert proc.worker is not None
    registry = proc.worker.metrics.registry
    poll(lambda: registry.get_sample_value("draxr_binding_conditions_total", {"result": "timeout"}))


def test_before_1_36_such_a_device_is_never_picked(tmp_path: Path) -> None:
    """The emulator's default release, 1.35: the gate is off, so the plain GPU is taken, without an
    ``allocationTimestamp``, and the attachable device by nobody."""
    with cluster(tmp_path) as kube:
        kube.apply(gpu_slice("n1", 1))
        setup(kube)
        kube.pod("p")
        assert kube.wait_bound(1) == {"p": "n1"}
        (claim,) = kube.claims()
        assert "allocationTimestamp" not in claim["status"]["allocation"]
        kube.pod("q")
        kube.em.wait_for(lambda: kube.condition("q") is not None, 10, "PodScheduled written")
        assert (kube.condition("q") or {}).get("status") == "False"
        assert kube.allocated() == [(DRIVER, "n1-gpu", "gpu-0")]


def test_the_waiter_ends_each_wait_once_on_claim_events_and_deadlines() -> None:
    """The waiter alone, on a static cache and a clock the test moves: a claim event decides a
    wait, a deleted claim fails it, and the timeout thread ends what the clock has passed."""
    from webhook.kube.cache import ClusterCache
    from webhook.worker.bindingconditions import BindingConditionWaiter

    now = [0.0]
    cache = ClusterCache.from_objects([])
    waiter = BindingConditionWaiter(cache, timeout=60.0, clock=lambda: now[0])
    ended: dict[str, list[str | None]] = {}

    def pod(name: str) -> Obj:
        return {"metadata": {"name": name, "namespace": "default", "uid": name}}

    def claim(name: str, *conditions: tuple[str, str]) -> Obj:
        result = {"request": "r", "driver": DRIVER, "pool": "fabric", "device": name}
        return {
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"devices": {"requests": []}},
            "status": {
                "allocation": {
                    "devices": {
                        "results": [
                            {**result, "bindingConditions": [ATTACHED], "bindingFailureConditions": [FAILED]}
                        ]
                    }
                },
                "devices": [
                    {
                        **{k: result[k] for k in ("driver", "pool", "device")},
                        "conditions": [{"type": t, "status": s} for t, s in conditions],
                    }
                ],
            },
        }

    def recorder(name: str) -> Callable[[str | None], None]:
        return lambda failure: ended.setdefault(name, []).append(failure)

    for name in ("a", "b", "c"):
        cache.handle("ResourceClaim", "ADDED", claim(name))
        waiter.wait(pod(name), [("default", name)], recorder(name))
    assert waiter.pending() == 3
    cache.handle("ResourceClaim", "MODIFIED", claim("a", (ATTACHED, "True")))
    cache.handle("ResourceClaim", "MODIFIED", claim("a", (ATTACHED, "True")))  # once only
    cache.handle("ResourceClaim", "DELETED", claim("b"))
    assert ended == {"a": [None], "b": ["claim default/b got deleted in the meantime"]}
    waiter.start()
    try:
        now[0] = 61.0
        with waiter._cond:
            waiter._cond.notify_all()
        poll(lambda: "c" in ended, message="the timeout thread ended c")
        assert ended["c"] == ["device binding timeout"]
        assert waiter.pending() == 0
    finally:
        waiter.stop()
