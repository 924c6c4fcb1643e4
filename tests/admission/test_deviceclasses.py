"""``POST /validate/deviceclasses`` over TLS: syntax, uniqueness, implicit-name warning."""

from __future__ import annotations

import copy

import pytest

from tests.core.cel.cases import TOO_COMPLEX

from .builders import DEVICE_CLASS, GPU, causes, device_class, review
from .conftest import Webhook

PATH = "/validate/deviceclasses"
MSG = "must be a valid extended resource name"


def _deny_message(class_name: str, value: str) -> str:
    return (
        f'DeviceClass.resource.k8s.io "{class_name}" is invalid: spec.extendedResourceName: '
        f'Invalid value: "{value}": {MSG}'
    )


@pytest.mark.parametrize(
    "name", [GPU, "example.com/my-resource", "example.com/My_Resource", "example-kub.io/foo"]
)
def test_valid_names_are_allowed(webhook: Webhook, name: str) -> None:
    response = webhook.respond(PATH, review(device_class("c", name), resource=DEVICE_CLASS))
    assert response["allowed"] is True
    assert "status" not in response
    assert "warnings" not in response


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("example.com", "a name must be a domain-prefixed path, such as 'example.com/my-prop'"),
        ("kubernetes.io/foo", 'must not have "kubernetes.io/" domain'),
        ("deviceclass.resource.kubernetes.io/foo", 'must not have "kubernetes.io/" domain'),
        ("requests.example.com/foo", 'must not have "requests." prefix'),
        ("example.com/" + "a" * 64, "name part must be no more than 63 bytes"),
    ],
)
def test_invalid_names_are_denied_with_the_upstream_message(
    webhook: Webhook, value: str, reason: str
) -> None:
    response = webhook.respond(PATH, review(device_class("c", value), resource=DEVICE_CLASS))
    assert response["allowed"] is False
    status = response["status"]
    assert status["code"] == 422
    assert status["reason"] == "Invalid"
    assert status["message"] == _deny_message("c", value)
    assert response["warnings"][0].startswith(f"spec.extendedResourceName: {reason}"[:117])
    assert status["details"] == {
        "name": "c",
        "group": "resource.k8s.io",
        "kind": "DeviceClass",
        "causes": [
            {
                "reason": "FieldValueInvalid",
                "message": f'Invalid value: "{value}": {MSG}',
                "field": "spec.extendedResourceName",
            }
        ],
    }


def test_a_second_class_declaring_a_taken_name_is_denied_naming_the_holder(webhook: Webhook) -> None:
    webhook.install([device_class("gpu-a", GPU), device_class("other", "example.com/fpga")])
    response = webhook.respond(PATH, review(device_class("gpu-b", GPU), resource=DEVICE_CLASS))
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        'DeviceClass.resource.k8s.io "gpu-b" is invalid: spec.extendedResourceName: '
        'Duplicate value: "example.com/gpu": already declared by DeviceClass "gpu-a"'
    )
    assert causes(response) == [
        (
            "spec.extendedResourceName",
            "FieldValueDuplicate",
            'Duplicate value: "example.com/gpu": already declared by DeviceClass "gpu-a"',
        )
    ]


def test_an_update_that_keeps_its_name_is_allowed(webhook: Webhook) -> None:
    old = device_class("gpu-a", GPU)
    webhook.install([old])
    new = copy.deepcopy(old)
    new["spec"]["selectors"] = [{"cel": {"expression": "true"}}]
    response = webhook.respond(PATH, review(new, operation="UPDATE", old=old, resource=DEVICE_CLASS))
    assert response["allowed"] is True


def test_an_update_keeping_a_name_that_was_already_duplicated_is_allowed(webhook: Webhook) -> None:
    # A clash made before draxr was installed must not block unrelated edits of either class.
    a, b = device_class("gpu-a", GPU), device_class("gpu-b", GPU)
    webhook.install([a, b])
    new = copy.deepcopy(b)
    new["metadata"]["labels"] = {"team": "ml"}
    response = webhook.respond(PATH, review(new, operation="UPDATE", old=b, resource=DEVICE_CLASS))
    assert response["allowed"] is True


def test_an_update_renaming_onto_a_taken_name_is_denied(webhook: Webhook) -> None:
    a, b = device_class("gpu-a", GPU), device_class("gpu-b", "example.com/other")
    webhook.install([a, b])
    new = copy.deepcopy(b)
    new["spec"]["extendedResourceName"] = GPU
    response = webhook.respond(PATH, review(new, operation="UPDATE", old=b, resource=DEVICE_CLASS))
    assert response["allowed"] is False
    assert 'already declared by DeviceClass "gpu-a"' in response["status"]["message"]


def test_classes_being_deleted_do_not_count(webhook: Webhook) -> None:
    leaving = device_class("gpu-a", GPU)
    leaving["metadata"]["deletionTimestamp"] = "2025-06-01T00:00:00Z"
    webhook.install([leaving])
    response = webhook.respond(PATH, review(device_class("gpu-b", GPU), resource=DEVICE_CLASS))
    assert response["allowed"] is True


def test_a_class_name_unusable_as_implicit_name_is_a_warning_not_a_denial(webhook: Webhook) -> None:
    long_name = "x" * 64
    response = webhook.respond(PATH, review(device_class(long_name), resource=DEVICE_CLASS))
    assert response["allowed"] is True
    assert response["warnings"] == [
        "implicit name deviceclass.resource.kubernetes.io/<name> unusable in pods: "
        "name part must be no more than 63 bytes"
    ]
    assert all(len(w) <= 120 for w in response["warnings"])


def test_a_denial_keeps_its_warnings(webhook: Webhook) -> None:
    response = webhook.respond(PATH, review(device_class("y" * 64, "nope"), resource=DEVICE_CLASS))
    assert response["allowed"] is False
    assert response["warnings"] == [
        "spec.extendedResourceName: a name must be a domain-prefixed path, such as 'example.com/my-prop'",
        "implicit name deviceclass.resource.kubernetes.io/<name> unusable in pods: "
        "name part must be no more than 63 bytes",
    ]


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_beta_versions_are_served(webhook: Webhook, version: str) -> None:
    obj = device_class("c", "bad")
    obj["apiVersion"] = f"resource.k8s.io/{version}"
    response = webhook.respond(PATH, review(obj, resource=("resource.k8s.io", version, "deviceclasses")))
    assert response["allowed"] is False


def test_delete_is_allowed(webhook: Webhook) -> None:
    old = device_class("c", "bad")
    response = webhook.respond(PATH, review(None, operation="DELETE", old=old, resource=DEVICE_CLASS))
    assert response == {"uid": response["uid"], "allowed": True}


def test_a_malformed_align_by_annotation_is_denied_with_its_field(webhook: Webhook) -> None:
    obj = device_class("c", GPU)
    obj["metadata"]["annotations"] = {"draxr.io/align-by": "pcieRoot"}
    response = webhook.respond(PATH, review(obj, resource=DEVICE_CLASS))
    assert response["allowed"] is False
    status = response["status"]
    assert status["code"] == 422
    assert status["reason"] == "Invalid"
    reason = (
        "pcieRoot: must be a domain and a name separated by one '/' (e.g. 'resource.kubernetes.io/pcieRoot')"
    )
    assert status["message"] == (
        f'DeviceClass.resource.k8s.io "c" is invalid: metadata.annotations[draxr.io/align-by]: '
        f'Invalid value: "pcieRoot": {reason}'
    )
    assert causes(response) == [
        (
            "metadata.annotations[draxr.io/align-by]",
            "FieldValueInvalid",
            f'Invalid value: "pcieRoot": {reason}',
        )
    ]
    obj["metadata"]["annotations"]["draxr.io/align-by"] = "resource.kubernetes.io/pcieRoot"
    assert webhook.respond(PATH, review(obj, resource=DEVICE_CLASS))["allowed"] is True


def test_a_malformed_capacity_requests_annotation_is_denied_with_its_path(webhook: Webhook) -> None:
    """Issue 23: ``draxr.io/capacity-requests`` is KEP-6406's CapacityRequirements as JSON."""
    obj = device_class("c")
    obj["metadata"]["annotations"] = {"draxr.io/capacity-requests": '{"requests": {"memory": "-10Gi"}}'}
    response = webhook.respond(PATH, review(obj, resource=DEVICE_CLASS))
    assert response["allowed"] is False
    assert response["status"]["code"] == 422
    assert causes(response) == [
        (
            "metadata.annotations[draxr.io/capacity-requests]",
            "FieldValueInvalid",
            'Invalid value: "{\\"requests\\": {\\"memory\\": \\"-10Gi\\"}}": '
            "requests[memory]: must be greater than or equal to 0",
        )
    ]
    obj["metadata"]["annotations"]["draxr.io/capacity-requests"] = '{"requests": {"memory": "10Gi"}}'
    assert webhook.respond(PATH, review(obj, resource=DEVICE_CLASS))["allowed"] is True


def test_tolerations_for_the_extended_resource_are_validated_as_upstreams_device_tolerations(
    webhook: Webhook,
) -> None:
    """``draxr.io/extended-resource-tolerations`` (issue 23), ``validateDeviceToleration``'s rules."""
    at = "metadata.annotations[draxr.io/extended-resource-tolerations]"
    obj = device_class("c", GPU)
    obj["metadata"]["annotations"] = {
        "draxr.io/extended-resource-tolerations": '[{"key": "example.com/maintenance", "operator": "Exists",'
        ' "effect": "NoSchedule", "tolerationSeconds": 60}, {"operator": "Sometimes"}]'
    }
    response = webhook.respond(PATH, review(obj, resource=DEVICE_CLASS))
    assert response["status"]["code"] == 422
    assert causes(response) == [
        (
            f"{at}[0].effect",
            "FieldValueInvalid",
            "Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set",
        ),
        (
            f"{at}[1].operator",
            "FieldValueNotSupported",
            'Unsupported value: "Sometimes": supported values: "Equal", "Exists"',
        ),
    ]
    good = '[{"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}]'
    obj["metadata"]["annotations"]["draxr.io/extended-resource-tolerations"] = good
    assert webhook.respond(PATH, review(obj, resource=DEVICE_CLASS))["allowed"] is True
    # one stored before draxr checked it does not block an unrelated edit; it is ignored, and said so
    stored = copy.deepcopy(obj)
    stored["metadata"]["annotations"]["draxr.io/extended-resource-tolerations"] = "[oops"
    edited = copy.deepcopy(stored)
    edited["metadata"]["labels"] = {"team": "gpu"}
    response = webhook.respond(PATH, review(edited, operation="UPDATE", old=stored, resource=DEVICE_CLASS))
    assert response["allowed"] is True
    assert response["warnings"][0].startswith(f"draxr ignores {at}: Invalid value: ")


def test_a_selector_over_the_estimated_cost_limit_is_denied_with_the_api_servers_words(
    webhook: Webhook,
) -> None:
    dc = device_class("gpu-a", GPU, ['device.driver == "gpu.example.com"', TOO_COMPLEX])
    response = webhook.respond(PATH, review(dc, resource=DEVICE_CLASS))
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        'DeviceClass.resource.k8s.io "gpu-a" is invalid: '
        "spec.selectors[1].cel.expression: Forbidden: too complex, exceeds cost limit"
    )
    assert causes(response) == [
        (
            "spec.selectors[1].cel.expression",
            "FieldValueForbidden",
            "Forbidden: too complex, exceeds cost limit",
        )
    ]


def test_an_update_keeping_its_selectors_is_not_estimated_again(webhook: Webhook) -> None:
    # Upstream treats unchanged selectors as stored: a class stored before the limit stays editable.
    old = device_class("gpu-a", GPU, [TOO_COMPLEX])
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"team": "a"}
    response = webhook.respond(PATH, review(new, operation="UPDATE", old=old, resource=DEVICE_CLASS))
    assert response["allowed"] is True
    changed = copy.deepcopy(old)
    changed["spec"]["selectors"].append({"cel": {"expression": "true"}})
    response = webhook.respond(PATH, review(changed, operation="UPDATE", old=old, resource=DEVICE_CLASS))
    assert response["allowed"] is False


def test_a_selector_draxr_cannot_compile_is_left_to_the_api_server(webhook: Webhook) -> None:
    dc = device_class("gpu-a", GPU, ["device.driver =="])
    assert webhook.respond(PATH, review(dc, resource=DEVICE_CLASS))["allowed"] is True
