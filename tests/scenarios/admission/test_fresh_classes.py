"""A DeviceClass created a moment ago counts, though the webhook's informer may not have it yet:
it routes the pod that follows, and it holds its extended resource name against a second class.

The sandbox runs the emulator, draxr's webhook over TLS (called by the emulator per the
webhook manifests) and the worker. Stopping the webhook's DeviceClass informer stands in for a
watch that has not delivered the new class yet.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from e2e.emulator.sandbox import Sandbox
from tests.core.podfactory import container, device_class, pod
from webhook.core.api.constants import DRAXR_RESOURCES_ANNOTATION
from webhook.core.api.objects import Obj
from webhook.kube.client import ApiError
from webhook.kube.resources import DEVICE_CLASSES, PODS

GPU = "example.com/gpu"


def _sandbox(class_read_timeout: float) -> Iterator[Sandbox]:
    box = Sandbox(leader_elect=False, class_read_timeout=class_read_timeout).start()
    try:
        assert box.webhook.cache.wait_synced(["DeviceClass"], 10)
        box.webhook.cache.informers["DeviceClass"].stop()  # its watch now lags behind for good
        yield box
    finally:
        box.stop()


@pytest.fixture
def box() -> Iterator[Sandbox]:
    yield from _sandbox(2.0)


@pytest.fixture
def trusting_box() -> Iterator[Sandbox]:
    yield from _sandbox(0)


def _gpu_pod(name: str) -> Obj:
    return pod(name, [container("c", {GPU: "1"})])


def _reads(box: Sandbox, result: str) -> float:
    value = box.webhook.registry.get_sample_value(
        "draxr_admission_deviceclass_reads_total", {"result": result}
    )
    return value or 0.0


def _create_with_warnings(box: Sandbox, obj: Obj) -> tuple[Obj, list[str]]:
    """Create as the developer over plain HTTP, to see the admission warnings too."""
    with httpx.Client(base_url=box.em.url, headers={"Authorization": "Bearer dev"}, timeout=30) as http:
        resp = http.post("/api/v1/namespaces/default/pods", json=obj)
    assert resp.status_code == 201, resp.text
    return resp.json(), resp.headers.get_list("warning")


def test_a_class_the_cache_has_not_seen_still_routes_the_pod(box: Sandbox) -> None:
    box.admin.create(DEVICE_CLASSES, device_class("gpu.example.com", GPU))
    created = box.dev.create(PODS, _gpu_pod("p"), "default")
    assert created["spec"]["schedulerName"] == "draxr"
    assert (
        created["metadata"]["annotations"][DRAXR_RESOURCES_ANNOTATION]
        == '{"example.com/gpu":"gpu.example.com"}'
    )
    assert _reads(box, "found") == 1


def test_without_fresh_reads_the_lagging_cache_decides(trusting_box: Sandbox) -> None:
    # The control for the test above: the lag is real, and only the fresh list bridges it.
    trusting_box.admin.create(DEVICE_CLASSES, device_class("gpu.example.com", GPU))
    created = trusting_box.dev.create(PODS, _gpu_pod("p"), "default")
    assert created["spec"]["schedulerName"] == "default-scheduler"
    assert DRAXR_RESOURCES_ANNOTATION not in (created["metadata"].get("annotations") or {})


def test_names_no_class_backs_cost_one_list_each_and_are_left_alone(box: Sandbox) -> None:
    created, warnings = _create_with_warnings(box, _gpu_pod("p"))
    assert created["spec"]["schedulerName"] == "default-scheduler"
    assert warnings == ['299 - "example.com/gpu: no DeviceClass maps this name and no node advertises it"']
    assert _reads(box, "none") == 1
    assert _reads(box, "found") == 0


def test_a_failed_list_keeps_the_cache_answer_and_says_so(box: Sandbox) -> None:
    box.em.inject(verbs="list", resource="deviceclasses", error=500, message="etcd is down")
    box.admin.create(DEVICE_CLASSES, device_class("gpu.example.com", GPU))
    created, warnings = _create_with_warnings(box, _gpu_pod("p"))
    assert created["spec"]["schedulerName"] == "default-scheduler"
    # The cache's own advice ("no DeviceClass maps this name") is held back: it may be stale.
    assert warnings == [
        "299 - \"routing follows draxr's cache, DeviceClasses could not be listed: 500: "
        'Internal error occurred: etcd is down"'
    ]
    assert _reads(box, "error") == 1


def test_a_name_taken_a_moment_ago_is_not_given_twice(box: Sandbox) -> None:
    box.admin.create(DEVICE_CLASSES, device_class("gpu-a.example.com", GPU))
    with pytest.raises(ApiError) as denied:
        box.admin.create(DEVICE_CLASSES, device_class("gpu-b.example.com", GPU))
    assert denied.value.status == 422
    assert "spec.extendedResourceName: Duplicate value" in denied.value.message
    assert "gpu-a.example.com" in denied.value.message
    box.admin.create(DEVICE_CLASSES, device_class("tpu.example.com", "example.com/tpu"))


def test_without_fresh_reads_the_second_class_slips_through(trusting_box: Sandbox) -> None:
    trusting_box.admin.create(DEVICE_CLASSES, device_class("gpu-a.example.com", GPU))
    trusting_box.admin.create(DEVICE_CLASSES, device_class("gpu-b.example.com", GPU))  # not denied
    both = {c["metadata"]["name"] for c in trusting_box.admin.list(DEVICE_CLASSES)["items"]}
    assert both == {"gpu-a.example.com", "gpu-b.example.com"}
