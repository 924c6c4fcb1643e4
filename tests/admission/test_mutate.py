"""``POST /mutate/pods`` over TLS: annotation, routing, idempotency, warnings, dry-run."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import pytest

from webhook.admission import AdmissionConfig
from webhook.admission.context import Context
from webhook.core.api.constants import DEVICE_CLASS_PREFIX, DRAXR_RESOURCES_ANNOTATION
from webhook.core.api.objects import Obj
from webhook.kube.cache import ClusterCache

from .builders import (
    GPU,
    GPU_CLASS,
    container,
    decode_patch,
    device_class,
    gpu_cluster,
    gpu_pod,
    node,
    pod,
    review,
)
from .conftest import Webhook

PATH = "/mutate/pods"
ANNOTATION_PATH = "/metadata/annotations/draxr.io~1extended-resources"


def _apply(p: Obj, response: Obj) -> Obj:
    if "patch" not in response:
        return p
    out: Obj = jsonpatch.apply_patch(p, decode_patch(response))
    return out


def test_a_dra_backed_pod_is_annotated_and_routed(webhook: Webhook) -> None:
    webhook.install(gpu_cluster())
    response = webhook.respond(PATH, review(gpu_pod()))
    assert response["allowed"] is True
    assert "warnings" not in response
    assert decode_patch(response) == [
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {DRAXR_RESOURCES_ANNOTATION: '{"example.com/gpu":"gpu.example.com"}'},
        },
        {"op": "add", "path": "/spec/schedulerName", "value": "draxr"},
    ]


def test_the_mutation_is_a_fixed_point(webhook: Webhook) -> None:
    webhook.install(gpu_cluster())
    p = gpu_pod()
    p["metadata"]["annotations"] = {"team/owner": "ml"}
    first = webhook.respond(PATH, review(p))
    assert [op["path"] for op in decode_patch(first)] == [ANNOTATION_PATH, "/spec/schedulerName"]
    mutated = _apply(p, first)
    assert mutated["metadata"]["annotations"] == {
        "team/owner": "ml",
        DRAXR_RESOURCES_ANNOTATION: '{"example.com/gpu":"gpu.example.com"}',
    }
    second = webhook.respond(PATH, review(mutated))
    assert second == {"uid": second["uid"], "allowed": True}


def test_a_stale_annotation_is_replaced(webhook: Webhook) -> None:
    webhook.install(gpu_cluster())
    p = gpu_pod(schedulerName="draxr")
    p["metadata"]["annotations"] = {DRAXR_RESOURCES_ANNOTATION: '{"example.com/gpu":"old-class"}'}
    patch = decode_patch(webhook.respond(PATH, review(p)))
    assert patch == [
        {"op": "replace", "path": ANNOTATION_PATH, "value": '{"example.com/gpu":"gpu.example.com"}'}
    ]


@pytest.mark.parametrize(
    ("route", "current", "routed"),
    [
        ("default-only", None, True),
        ("default-only", "", True),
        ("default-only", "default-scheduler", True),
        ("default-only", "volcano", False),
        ("always", "volcano", True),
        ("always", "default-scheduler", True),
        ("always", "draxr", False),
        ("never", None, False),
        ("never", "default-scheduler", False),
    ],
)
def test_routing(webhook: Webhook, route: Any, current: str | None, routed: bool) -> None:
    webhook.install(gpu_cluster(), config=AdmissionConfig(route=route))
    p = gpu_pod() if current is None else gpu_pod(schedulerName=current)
    mutated = _apply(p, webhook.respond(PATH, review(p)))
    expected = "draxr" if routed else current
    assert mutated["spec"].get("schedulerName") == expected
    assert DRAXR_RESOURCES_ANNOTATION in mutated["metadata"]["annotations"]
    assert webhook.respond(PATH, review(mutated)) == {"uid": review(p)["request"]["uid"], "allowed": True}


def test_the_scheduler_name_is_configurable(webhook: Webhook) -> None:
    webhook.install(gpu_cluster(), config=AdmissionConfig(scheduler_name="gpu-scheduler"))
    mutated = _apply(gpu_pod(), webhook.respond(PATH, review(gpu_pod())))
    assert mutated["spec"]["schedulerName"] == "gpu-scheduler"


def test_implicit_names_init_containers_and_limits_are_resolved(webhook: Webhook) -> None:
    webhook.install([*gpu_cluster(devices=8), device_class("fpga", None)])
    implicit = DEVICE_CLASS_PREFIX + "fpga"
    c = container("c", {"cpu": "1"})
    c["resources"]["limits"] = {implicit: "1"}
    init = container("init", {GPU: "1"})
    mutated = _apply(pod("p", [c], init=[init]), webhook.respond(PATH, review(pod("p", [c], init=[init]))))
    assert json.loads(mutated["metadata"]["annotations"][DRAXR_RESOURCES_ANNOTATION]) == {
        GPU: GPU_CLASS,
        implicit: "fpga",
    }


@pytest.mark.parametrize(
    "requests",
    [{"cpu": "1"}, {GPU: "0"}, {"nvidia.com/gpu": "1"}],
    ids=["native-only", "zero", "no-class"],
)
def test_pods_without_dra_backed_requests_are_left_alone(webhook: Webhook, requests: Obj) -> None:
    webhook.install([*gpu_cluster(), node("dp-node", {"nvidia.com/gpu": "4"})])
    p = pod("p", [container("c", requests)])
    assert webhook.respond(PATH, review(p)) == {"uid": review(p)["request"]["uid"], "allowed": True}


def test_updates_are_not_mutated(webhook: Webhook) -> None:
    webhook.install(gpu_cluster())
    response = webhook.respond(PATH, review(gpu_pod(), operation="UPDATE", old=gpu_pod()))
    assert response == {"uid": response["uid"], "allowed": True}


def test_a_pod_with_a_generated_name(webhook: Webhook) -> None:
    webhook.install(gpu_cluster())
    p = gpu_pod("x", 3)
    del p["metadata"]["name"]
    p["metadata"]["generateName"] = "train-"
    response = webhook.respond(PATH, review(p))
    assert DRAXR_RESOURCES_ANNOTATION in _apply(p, response)["metadata"]["annotations"]
    assert response["warnings"] == [
        "no node can run this pod now: 0/1 nodes are available: 1 cannot allocate all claims."
    ]


# --- warnings ----------------------------------------------------------------------------------


def test_a_name_several_classes_declare_says_who_wins_and_why(webhook: Webhook) -> None:
    older = device_class("gpu-old", GPU, created="2025-01-01T00:00:00Z")
    newer = device_class("gpu-new", GPU, created="2025-03-01T00:00:00Z")
    webhook.install([*gpu_cluster()[1:], older, newer])
    response = webhook.respond(PATH, review(gpu_pod()))
    assert response["warnings"][0] == (
        'example.com/gpu is declared by 2 DeviceClasses; "gpu-new" wins (newest creationTimestamp)'
    )
    annotation = _apply(gpu_pod(), response)["metadata"]["annotations"][DRAXR_RESOURCES_ANNOTATION]
    assert json.loads(annotation) == {GPU: "gpu-new"}


def test_equal_timestamps_are_broken_by_the_smaller_name(webhook: Webhook) -> None:
    webhook.install([*gpu_cluster()[1:], device_class("gpu-b", GPU), device_class("gpu-a", GPU)])
    warnings = webhook.respond(PATH, review(gpu_pod()))["warnings"]
    assert (
        warnings[0] == 'example.com/gpu is declared by 2 DeviceClasses; "gpu-a" wins '
        "(same creationTimestamp, smallest name)"
    )


def test_a_name_nobody_serves(webhook: Webhook) -> None:
    webhook.install(gpu_cluster())
    response = webhook.respond(PATH, review(gpu_pod(resource="example.com/tpu")))
    assert response["warnings"] == [
        "example.com/tpu: no DeviceClass maps this name and no node advertises it"
    ]
    assert "patch" not in response


def test_a_name_a_device_plugin_serves_is_fine(webhook: Webhook) -> None:
    webhook.install([*gpu_cluster(), node("dp-node", {"example.com/tpu": "2"})])
    response = webhook.respond(PATH, review(gpu_pod(resource="example.com/tpu")))
    assert "warnings" not in response


def test_no_node_fits(webhook: Webhook) -> None:
    webhook.install(gpu_cluster(devices=2))
    response = webhook.respond(PATH, review(gpu_pod("p", 3)))
    assert response["allowed"] is True
    assert response["warnings"] == [
        "no node can run this pod now: 0/1 nodes are available: 1 cannot allocate all claims."
    ]


def test_warnings_are_at_most_120_characters(webhook: Webhook) -> None:
    long_names = [f"{c * 60}.example.com" for c in "abcd"]
    classes = [device_class(n, GPU) for n in long_names]
    nodes = [node(f"node-{c * 40}-{i}") for i, c in enumerate("efghijklmn")]
    webhook.install([*classes, *nodes])
    contended, fit = webhook.respond(PATH, review(gpu_pod()))["warnings"]
    assert contended.startswith('example.com/gpu is declared by 4 DeviceClasses; "aaaa')
    assert fit == "no node can run this pod now: 0/10 nodes are available: 10 cannot allocate all claims."
    [unserved] = webhook.respond(PATH, review(gpu_pod(resource="long.example.com/" + "t" * 60)))["warnings"]
    for warning in (contended, unserved):
        assert len(warning) == 120
        assert warning.endswith("...")


def test_fit_and_unserved_advice_wait_for_a_complete_cache(webhook: Webhook) -> None:
    cache = ClusterCache()  # informer-fed and not synced yet: no false alarms
    older = device_class("gpu-old", GPU, created="2025-01-01T00:00:00Z")
    for obj in [older, device_class("gpu-new", GPU, created="2025-03-01T00:00:00Z")]:
        cache.handle("DeviceClass", "ADDED", obj)
    webhook.install(cache=cache)
    response = webhook.respond(PATH, review(gpu_pod(resource="example.com/tpu")))
    assert "warnings" not in response
    response = webhook.respond(PATH, review(gpu_pod("p", 3)))
    assert [w.split(";")[0] for w in response["warnings"]] == [
        "example.com/gpu is declared by 2 DeviceClasses"
    ]


def test_bound_pods_and_claim_templates_get_no_fit_advice(webhook: Webhook) -> None:
    webhook.install(gpu_cluster(devices=1))
    bound = gpu_pod("p", 3, nodeName="dra-node")
    warnings = webhook.respond(PATH, review(bound))["warnings"]  # left alone: the node cannot serve it
    assert not any(w.startswith("no node can run this pod now") for w in warnings)
    templated = gpu_pod("p", 3, resourceClaims=[{"name": "x", "resourceClaimTemplateName": "tmpl"}])
    assert "warnings" not in webhook.respond(PATH, review(templated))


def test_fit_answers_are_cached_per_state_version(webhook: Webhook) -> None:
    cache = webhook.install(gpu_cluster(devices=2))
    ctx: Context = webhook.server.switch.app.state.admission  # type: ignore[union-attr]
    for i in range(5):
        response = webhook.respond(PATH, review(gpu_pod("p", 3), uid=f"uid-{i}"))
        assert len(response["warnings"]) == 1
    assert (ctx.fit.misses, ctx.fit.hits) == (1, 4)
    # The driver publishes more devices: the cached answer is not reused.
    cache.handle("ResourceSlice", "MODIFIED", gpu_cluster(devices=4)[2])
    response = webhook.respond(PATH, review(gpu_pod("p", 3)))
    assert "warnings" not in response
    assert ctx.fit.misses == 2


# --- dry-run -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "obj"),
    [
        ("/mutate/pods", gpu_pod("p", 3)),
        ("/mutate/pods", gpu_pod(resource="example.com/tpu")),
        ("/validate/pods", gpu_pod("p", "0.5")),
    ],
)
def test_dry_run_gets_exactly_the_same_answer(webhook: Webhook, path: str, obj: Obj) -> None:
    older = device_class("gpu-old", GPU, created="2024-01-01T00:00:00Z")
    webhook.install([*gpu_cluster(devices=2), older])
    real = webhook.respond(path, review(obj))
    dry = webhook.respond(path, review(obj, dry_run=True))
    again = webhook.respond(path, review(obj))
    assert dry == real == again
    assert real.get("warnings") or not real["allowed"]


def test_the_hook_never_changes_its_input(webhook: Webhook) -> None:
    cache = webhook.install(gpu_cluster(devices=2))
    ctx = Context.build(cache, AdmissionConfig())
    from webhook.admission.app import ENDPOINTS
    from webhook.admission.mutate import mutate_pod
    from webhook.admission.review import parse_request

    p = gpu_pod("p", 3)
    body = review(p)
    before = copy.deepcopy(body)
    req = parse_request(body, ENDPOINTS[3].expected)
    verdict = mutate_pod(req, ctx)
    assert verdict.patch
    assert verdict.warnings
    assert body == before
    version = cache.state.version
    mutate_pod(req, ctx)
    assert cache.state.version == version
