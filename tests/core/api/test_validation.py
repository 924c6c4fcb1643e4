"""KEP-5004 validation rules: spec §1 and §2, scenarios 1-5 and 9-15, and draxr's own rules."""

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.core.api import names
from webhook.core.api.fielderrors import ErrorType, FieldError
from webhook.core.api.messages import MAX_WARNING_LENGTH, clip
from webhook.core.api.objects import controller_ref
from webhook.core.api.quantity import try_parse
from webhook.core.api.validation import (
    carries_special_annotation,
    extended_resource_name_reasons,
    validate_device_class,
    validate_dra_quantities,
    validate_extended_resource_claim_status,
    validate_extended_resource_name,
    validate_mapped_requests,
    validate_special_claim,
)
from webhook.core.api.versions import to_v1

ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
ERCS = "status.extendedResourceClaimStatus"
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
    "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def texts(errors: list[FieldError]) -> list[str]:
    return [str(e) for e in errors]


# --- spec.extendedResourceName (scenarios 1-5) -----------------------------------------------------


@pytest.mark.parametrize(
    "value", ["example.com/gpu", "example.com/my-resource", "example.com/My_Resource", "example-kub.io/foo"]
)
def test_valid_extended_resource_names(value: str) -> None:
    assert validate_extended_resource_name(value) == []


@pytest.mark.parametrize(
    ("value", "reasons"),
    [
        ("example.com", "a name must be a domain-prefixed path, such as 'example.com/my-prop'"),
        ("noslash", "a name must be a domain-prefixed path, such as 'example.com/my-prop'"),
        ("invalid_name", "a name must be a domain-prefixed path, such as 'example.com/my-prop'"),
        ("kubernetes.io/foo", 'must not have "kubernetes.io/" domain'),
        ("deviceclass.resource.kubernetes.io/foo", 'must not have "kubernetes.io/" domain'),
        ("requests.example.com/foo", 'must not have "requests." prefix'),
        ("example.com/" + "a" * 64, "name part must be no more than 63 bytes"),
    ],
)
def test_invalid_extended_resource_names(value: str, reasons: str) -> None:
    """``validateDeviceClassSpec``'s error, byte for byte; the declarative validator's reasons
    (``strfmt.go``) come as a warning."""
    assert texts(validate_extended_resource_name(value)) == [
        f'spec.extendedResourceName: Invalid value: "{value}": must be a valid extended resource name'
    ]
    assert extended_resource_name_reasons(value)[0] == reasons
    errors, warnings = validate_device_class(device_class("c", value))
    assert texts(errors) == texts(validate_extended_resource_name(value))
    assert warnings[0] == clip(
        f"spec.extendedResourceName: {'; '.join(extended_resource_name_reasons(value))}"
    )
    assert warnings[0].startswith(f"spec.extendedResourceName: {reasons}"[:117])


def test_empty_extended_resource_name_lists_every_reason() -> None:
    [err] = validate_extended_resource_name("")
    assert str(err) == 'spec.extendedResourceName: Invalid value: "": must be a valid extended resource name'
    assert err.type is ErrorType.INVALID
    assert extended_resource_name_reasons("")[:2] == [
        "a name must be a domain-prefixed path, such as 'example.com/my-prop'",
        extended_resource_name_reasons("")[1],
    ]
    assert extended_resource_name_reasons("")[1].startswith("name part ")


def test_extended_resource_name_path_and_type() -> None:
    assert texts(validate_extended_resource_name("x", "spec.other")) == [
        'spec.other: Invalid value: "x": must be a valid extended resource name'
    ]
    assert texts(validate_extended_resource_name(5)) == [
        "spec.extendedResourceName: Invalid value: 5: "
        "must be a valid extended resource name: must be a string"
    ]
    assert extended_resource_name_reasons(5) == []
    assert extended_resource_name_reasons("example.com/gpu") == []


@given(st.text(max_size=80))
def test_extended_resource_name_agrees_with_names(value: str) -> None:
    errors = validate_extended_resource_name(value)
    assert (errors == []) == names.is_extended_resource_name(value)
    if errors:
        assert len(errors) == 1
        assert errors[0].error_body().startswith("Invalid value: ")
        assert "must be a valid extended resource name" in errors[0].detail


# --- DeviceClass uniqueness and warnings -----------------------------------------------------------


def device_class(name: str, ern: Any = None, *, deleting: bool = False) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
    }
    if ern is not None:
        obj["spec"] = {"extendedResourceName": ern}
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    return obj


def test_device_class_without_others_is_valid() -> None:
    assert validate_device_class(device_class("gpu", "example.com/gpu"), None, []) == ([], [])
    assert validate_device_class(device_class("gpu"), None, []) == ([], [])


def test_device_class_syntax_error() -> None:
    errors, _ = validate_device_class(device_class("gpu", "kubernetes.io/gpu"), None, [])
    assert texts(errors) == [
        'spec.extendedResourceName: Invalid value: "kubernetes.io/gpu": '
        "must be a valid extended resource name"
    ]
    errors, _ = validate_device_class({"metadata": {"name": "x"}, "spec": {"extendedResourceName": ""}})
    assert len(errors) == 1


def test_device_class_duplicate_names_the_other_class() -> None:
    others = [device_class("gpu-old", "example.com/gpu"), device_class("cpu", "example.com/cpu")]
    errors, _ = validate_device_class(device_class("gpu-new", "example.com/gpu"), None, others)
    assert texts(errors) == [
        'spec.extendedResourceName: Duplicate value: "example.com/gpu": '
        'already declared by DeviceClass "gpu-old"'
    ]
    assert errors[0].type is ErrorType.DUPLICATE


def test_device_class_duplicates_are_listed_sorted() -> None:
    others = [device_class(n, "example.com/gpu") for n in ("zeta", "alpha", "mid", "alpha")]
    errors, _ = validate_device_class(device_class("new", "example.com/gpu"), None, others)
    assert texts(errors) == [
        'spec.extendedResourceName: Duplicate value: "example.com/gpu": already declared by DeviceClasses '
        '"alpha", "mid", "zeta"'
    ]


def test_device_class_ignores_itself_and_classes_being_deleted() -> None:
    others = [
        device_class("gpu", "example.com/gpu"),
        device_class("gone", "example.com/gpu", deleting=True),
        device_class("other", "example.com/other"),
        device_class("plain"),
        "not an object",
    ]
    assert validate_device_class(device_class("gpu", "example.com/gpu"), None, others) == ([], [])


def test_device_class_update_keeping_its_name_is_allowed() -> None:
    others = [device_class("gpu-old", "example.com/gpu")]
    old = device_class("gpu-new", "example.com/gpu")
    new = device_class("gpu-new", "example.com/gpu")
    new["metadata"]["labels"] = {"edited": "yes"}
    assert validate_device_class(new, old, others) == ([], [])


def test_device_class_update_adopting_a_taken_name_is_denied() -> None:
    others = [device_class("gpu-old", "example.com/gpu")]
    for old in (device_class("gpu-new"), device_class("gpu-new", "example.com/other")):
        errors, _ = validate_device_class(device_class("gpu-new", "example.com/gpu"), old, others)
        assert [e.type for e in errors] == [ErrorType.DUPLICATE]


def test_device_class_warns_when_the_implicit_name_is_unusable() -> None:
    for name in ("a" * 64, "b" * 253, "x." + "c" * 70):
        errors, warnings = validate_device_class(device_class(name, "example.com/gpu"), None, [])
        assert errors == []
        assert len(warnings) == 1
        assert len(warnings[0]) <= MAX_WARNING_LENGTH
        assert warnings[0].startswith(
            "implicit name deviceclass.resource.kubernetes.io/<name> unusable in pods"
        )
        assert "63" in warnings[0]
    assert validate_device_class(device_class("a" * 63), None, [])[1] == []


# --- status.extendedResourceClaimStatus (scenarios 9-15) -------------------------------------------


def pod(mappings: Any = None, claim: Any = "p-extended-resources-abc", **spec: Any) -> dict[str, Any]:
    if mappings is None:
        mappings = [
            {"containerName": "c", "resourceName": "example.com/gpu", "requestName": "container-0-request-0"}
        ]
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"example.com/gpu": "1"}}}], **spec},
        "status": {"extendedResourceClaimStatus": {"requestMappings": mappings, "resourceClaimName": claim}},
    }
    return body


def mapping(
    container: str = "c", resource: str = "example.com/gpu", request: str = "container-0-request-0"
) -> Any:
    return {"containerName": container, "resourceName": resource, "requestName": request}


def test_scenario_9_valid_status() -> None:
    assert validate_extended_resource_claim_status(pod()) == []


def test_no_status_is_valid() -> None:
    p = pod()
    del p["status"]
    assert validate_extended_resource_claim_status(p) == []
    p["status"] = {"phase": "Pending", "extendedResourceClaimStatus": None}
    assert validate_extended_resource_claim_status(p) == []


def test_scenario_10_empty_or_missing_mappings() -> None:
    expected = [f"{ERCS}.requestMappings: Required value: at least one request mapping is required"]
    assert texts(validate_extended_resource_claim_status(pod([]))) == expected
    p = pod()
    del p["status"]["extendedResourceClaimStatus"]["requestMappings"]
    assert texts(validate_extended_resource_claim_status(p)) == expected


def test_scenario_11_unknown_container() -> None:
    assert texts(validate_extended_resource_claim_status(pod([mapping("nope")]))) == [
        f'{ERCS}.requestMappings[0].containerName: Invalid value: "nope": must match the name of an entry in '
        "spec.initContainers.name or spec.containers.name"
    ]


def test_scenario_11_init_container_is_accepted_ephemeral_is_not() -> None:
    init = [{"name": "init", "resources": {"requests": {"example.com/gpu": "1"}}}]
    assert validate_extended_resource_claim_status(pod([mapping("init")], initContainers=init)) == []
    eph = [{"name": "debug", "resources": {"requests": {"example.com/gpu": "1"}}}]
    errors = validate_extended_resource_claim_status(pod([mapping("debug")], ephemeralContainers=eph))
    assert [e.field for e in errors] == [f"{ERCS}.requestMappings[0].containerName"]


def test_scenario_12_resource_not_requested() -> None:
    assert texts(validate_extended_resource_claim_status(pod([mapping(resource="example.com/other")]))) == [
        f'{ERCS}.requestMappings[0].resourceName: Invalid value: "example.com/other": '
        "must match the extended resource name of an entry in spec.initContainers.resources.requests or "
        "spec.containers.resources.requests"
    ]


def test_resource_in_limits_only_counts_as_requested_after_defaulting() -> None:
    p = pod()
    p["spec"]["containers"][0]["resources"] = {"limits": {"example.com/gpu": "1"}}
    assert validate_extended_resource_claim_status(p) == []


def test_scenario_13_request_name_is_a_label_at_the_unindexed_path() -> None:
    assert texts(validate_extended_resource_claim_status(pod([mapping(request="Container_0")]))) == [
        f'{ERCS}.requestName: Invalid value: "Container_0": {LABEL_MSG}'
    ]


def test_scenario_14_duplicate_triple_gives_three_errors() -> None:
    assert texts(validate_extended_resource_claim_status(pod([mapping(), mapping()]))) == [
        f'{ERCS}.requestMappings[1].containerName: Duplicate value: "c"',
        f'{ERCS}.requestMappings[1].resourceName: Duplicate value: "example.com/gpu"',
        f'{ERCS}.requestMappings[1].requestName: Duplicate value: "container-0-request-0"',
    ]


def test_scenario_14_one_resource_mapped_to_two_requests_is_valid() -> None:
    mappings = [mapping(request="container-0-request-0"), mapping(request="container-0-request-1")]
    assert validate_extended_resource_claim_status(pod(mappings)) == []


@pytest.mark.parametrize("claim", ["", None])
def test_scenario_15_claim_name_required(claim: Any) -> None:
    assert texts(validate_extended_resource_claim_status(pod(claim=claim))) == [
        f"{ERCS}.resourceClaimName: Required value"
    ]


def test_scenario_15_claim_name_must_be_a_subdomain() -> None:
    assert texts(validate_extended_resource_claim_status(pod(claim="Bad_Name"))) == [
        f'{ERCS}.resourceClaimName: Invalid value: "Bad_Name": {SUBDOMAIN_MSG}'
    ]


def test_errors_follow_upstream_order() -> None:
    mappings = [
        mapping("nope", request="Bad_0"),
        mapping(resource="example.com/other"),
        mapping("nope", request="Bad_0"),
    ]
    assert [(e.type, e.field) for e in validate_extended_resource_claim_status(pod(mappings, claim=""))] == [
        (ErrorType.INVALID, f"{ERCS}.requestMappings[0].containerName"),
        (ErrorType.INVALID, f"{ERCS}.requestName"),
        (ErrorType.INVALID, f"{ERCS}.requestMappings[1].resourceName"),
        (ErrorType.INVALID, f"{ERCS}.requestMappings[2].containerName"),
        (ErrorType.INVALID, f"{ERCS}.requestName"),
        (ErrorType.DUPLICATE, f"{ERCS}.requestMappings[2].containerName"),
        (ErrorType.DUPLICATE, f"{ERCS}.requestMappings[2].resourceName"),
        (ErrorType.DUPLICATE, f"{ERCS}.requestMappings[2].requestName"),
        (ErrorType.REQUIRED, f"{ERCS}.resourceClaimName"),
    ]


def test_wrong_types_in_the_status_are_reported_not_raised() -> None:
    p = pod()
    p["status"]["extendedResourceClaimStatus"] = ["x"]
    assert texts(validate_extended_resource_claim_status(p)) == [
        f'{ERCS}: Invalid value: ["x"]: must be an object'
    ]
    assert texts(validate_extended_resource_claim_status(pod("x"))) == [
        f'{ERCS}.requestMappings: Invalid value: "x": must be a list',
        f"{ERCS}.requestMappings: Required value: at least one request mapping is required",
    ]
    errors = validate_extended_resource_claim_status(pod([5, {"containerName": 7, "resourceName": "x"}]))
    assert texts(errors)[:2] == [
        f"{ERCS}.requestMappings[0]: Invalid value: 5: must be an object",
        f"{ERCS}.requestMappings[1].containerName: Invalid value: 7: must be a string",
    ]


# --- mapped requests (the kubelet contract) --------------------------------------------------------


def test_mapped_request_must_be_a_positive_integer() -> None:
    assert validate_mapped_requests(pod()) == []
    for bad in ("0", "500m", "-1", 0, "x"):
        p = pod()
        p["spec"]["containers"][0]["resources"]["requests"]["example.com/gpu"] = bad
        [err] = validate_mapped_requests(p)
        assert err.field == "spec.containers[0].resources.requests[example.com/gpu]"
        assert err.bad_value == bad
        assert err.detail.startswith("must be a positive integer")


def test_mapped_request_paths_for_init_containers_and_limits() -> None:
    init = [{"name": "init", "resources": {"limits": {"example.com/gpu": "0"}}}]
    p = pod([mapping("init"), mapping("init", request="container-0-request-1")], initContainers=init)
    assert texts(validate_mapped_requests(p)) == [
        'spec.initContainers[0].resources.limits[example.com/gpu]: Invalid value: "0": must be a positive '
        "integer: the kubelet only hands devices to a container whose request for a mapped extended resource "
        "is a non-zero integer"
    ]


def test_mapped_requests_skip_what_status_validation_reports() -> None:
    assert validate_mapped_requests(pod([mapping("nope"), mapping(resource="example.com/other")])) == []
    assert validate_mapped_requests({"status": {"extendedResourceClaimStatus": "x"}}) == []


# --- DRA-backed quantities -------------------------------------------------------------------------


def is_dra(name: str) -> bool:
    return name == "example.com/gpu" or name.startswith("deviceclass.resource.kubernetes.io/")


def quantity_pod(requests: dict[str, Any], limits: dict[str, Any] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": requests}
    if limits is not None:
        resources["limits"] = limits
    return {"spec": {"containers": [{"name": "a"}, {"name": "c", "resources": resources}]}}


def test_fractional_quantity_is_denied_with_the_exact_path() -> None:
    assert texts(validate_dra_quantities(quantity_pod({"example.com/gpu": "1500m"}), is_dra)) == [
        "spec.containers[1].resources.requests[example.com/gpu]: Invalid value: 1500m: must be an integer"
    ]


INT64_NOTE = "must be an integer: the largest device count is 9223372036854775807 (int64)"


# ``ValidateResourceQuantityValue`` (pkg/apis/core/validation/validation.go) for an integer resource:
# ``ValidateNonnegativeQuantity`` first (``IsNegativeErrorMsg``, the value's String() quoted), then
# ``isNotIntegerErrorMsg`` (the Quantity itself, a fmt.Stringer: unquoted). draxr's integer test is
# ``AsInt64``, so values upstream's wrapped ``MilliValue() % 1000`` lets through are denied too.
@pytest.mark.parametrize(
    ("value", "messages"),
    [
        ("0.5", ["Invalid value: 500m: must be an integer"]),
        (0.5, ["Invalid value: 500m: must be an integer"]),
        (1.5, ["Invalid value: 1500m: must be an integer"]),
        ("1.5Gi", []),  # 1536Mi: a whole number of bytes is an integer
        ("0.1", ["Invalid value: 100m: must be an integer"]),
        ("1.9995", ["Invalid value: 1999500u: must be an integer"]),  # MilliValue() rounds it to 2000
        ("1e-10", ["Invalid value: 1e-9: must be an integer"]),  # rounded up to a nano, as ParseQuantity does
        ("1e400", [f"Invalid value: 10e399: {INT64_NOTE}"]),  # MilliValue() wraps to 0
        ("9223372036854775808", [f"Invalid value: 9223372036854775808: {INT64_NOTE}"]),
        ("9223372036854775807", []),
        ("1e19", [f"Invalid value: 10e18: {INT64_NOTE}"]),
        ("10E", [f"Invalid value: 10E: {INT64_NOTE}"]),
        ("9Ei", [f"Invalid value: 9Ei: {INT64_NOTE}"]),
        ("-1", ['Invalid value: "-1": must be greater than or equal to 0']),
        (-2, ['Invalid value: "-2": must be greater than or equal to 0']),
        (
            "-0.5",
            [
                'Invalid value: "-500m": must be greater than or equal to 0',
                "Invalid value: -500m: must be an integer",
            ],
        ),
        ("0", []),
        ("1k", []),
        ("2000m", []),
        ("1e3", []),
        (3, []),
    ],
)
def test_dra_quantities_follow_validate_resource_quantity_value(value: Any, messages: list[str]) -> None:
    path = "spec.containers[1].resources.limits[example.com/gpu]"
    errors = validate_dra_quantities(quantity_pod({}, {"example.com/gpu": value}), is_dra)
    assert texts(errors) == [f"{path}: {m}" for m in messages]
    assert all(e.type is ErrorType.INVALID for e in errors)


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        (
            "lots",
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        ),
        ("9" * 5000, "unable to parse numeric part of quantity"),  # upstream's ErrNumeric
        ("1e1001", "quantity exponent out of range"),
        (float("inf"), "quantities must be finite"),
        ([1], "quantities must be strings or numbers, not list"),
    ],
)
def test_unparseable_quantity_says_why(value: Any, detail: str) -> None:
    [err] = validate_dra_quantities(quantity_pod({"deviceclass.resource.kubernetes.io/gpu": value}), is_dra)
    assert err.field == "spec.containers[1].resources.requests[deviceclass.resource.kubernetes.io/gpu]"
    assert err.detail == detail
    assert err.bad_value == value


def test_other_resources_and_init_containers() -> None:
    p = quantity_pod({"cpu": "100m", "example.com/other": "0.5"})
    p["spec"]["initContainers"] = [{"name": "i", "resources": {"requests": {"example.com/gpu": "0.1"}}}]
    assert [e.field for e in validate_dra_quantities(p, is_dra)] == [
        "spec.initContainers[0].resources.requests[example.com/gpu]"
    ]


# --- the special claim -----------------------------------------------------------------------------


def special_claim(**changes: Any) -> dict[str, Any]:
    claim: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": "p-extended-resources-abcde",
            "namespace": "default",
            "annotations": {ANNOTATION: "true"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u1", "controller": True}
            ],
        },
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "container-0-request-0",
                        "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1},
                    },
                    {"name": "container-0-request-1", "exactly": {"deviceClassName": "gpu"}},
                ]
            }
        },
    }
    claim.update(changes)
    return claim


def first_request(claim: dict[str, Any]) -> dict[str, Any]:
    request: dict[str, Any] = claim["spec"]["devices"]["requests"][0]
    return request


def test_a_claim_like_the_schedulers_is_valid() -> None:
    assert validate_special_claim(special_claim()) == []


def test_claims_without_the_annotation_are_not_checked() -> None:
    claim = special_claim()
    del claim["metadata"]["annotations"][ANNOTATION]
    claim["metadata"]["ownerReferences"] = []
    assert not carries_special_annotation(claim)
    assert validate_special_claim(claim) == []
    assert validate_special_claim("junk") == []


def test_annotation_value_must_be_true() -> None:
    claim = special_claim()
    claim["metadata"]["annotations"][ANNOTATION] = "yes"
    assert carries_special_annotation(claim)
    assert texts(validate_special_claim(claim)) == [
        f'metadata.annotations[{ANNOTATION}]: Invalid value: "yes": the only valid value is "true"'
    ]


def test_controller_owner_is_required() -> None:
    claim = special_claim()
    claim["metadata"]["ownerReferences"][0]["controller"] = False
    assert texts(validate_special_claim(claim)) == [
        "metadata.ownerReferences: Required value: "
        "an extended resource claim must have its Pod as controller owner"
    ]


def test_only_one_controller_ref() -> None:
    claim = special_claim()
    refs = claim["metadata"]["ownerReferences"]
    refs.append(dict(refs[0], name="q", uid="u2"))
    assert texts(validate_special_claim(claim)) == [
        "metadata.ownerReferences: Invalid value: must have exactly one controller owner (its Pod), found 2"
    ]


def test_controller_owner_must_be_a_v1_pod() -> None:
    claim = special_claim()
    refs = claim["metadata"]["ownerReferences"]
    refs.insert(0, {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u0"})
    refs[1].update(kind="ReplicaSet", apiVersion="apps/v1")
    assert texts(validate_special_claim(claim)) == [
        'metadata.ownerReferences[1].kind: Invalid value: "ReplicaSet": must be "Pod"',
        'metadata.ownerReferences[1].apiVersion: Invalid value: "apps/v1": must be "v1"',
    ]


def test_first_available_is_forbidden() -> None:
    claim = special_claim()
    claim["spec"]["devices"]["requests"][0] = {"name": "r", "firstAvailable": [{"name": "a"}]}
    assert texts(validate_special_claim(claim)) == [
        "spec.devices.requests[0].firstAvailable: Forbidden: is not allowed in an extended resource claim; "
        "use exactly"
    ]


def test_exactly_is_required() -> None:
    claim = special_claim()
    claim["spec"]["devices"]["requests"][1] = {"name": "r"}
    assert texts(validate_special_claim(claim)) == [
        "spec.devices.requests[1].exactly: Required value: "
        "an extended resource claim request must use exactly"
    ]


def test_allocation_mode_count_and_admin_access() -> None:
    claim = special_claim()
    first_request(claim)["exactly"].update(allocationMode="All", count=0, adminAccess=True)
    assert texts(validate_special_claim(claim)) == [
        'spec.devices.requests[0].exactly.allocationMode: Unsupported value: "All": supported values: '
        '"ExactCount"',
        "spec.devices.requests[0].exactly.count: Invalid value: 0: must be greater than zero",
        "spec.devices.requests[0].exactly.adminAccess: Forbidden: admin access is not allowed in an extended "
        "resource claim",
    ]
    for count in (-1, True, "2", 1.0):
        claim = special_claim()
        first_request(claim)["exactly"]["count"] = count
        assert [e.field for e in validate_special_claim(claim)] == ["spec.devices.requests[0].exactly.count"]
    claim = special_claim()
    first_request(claim)["exactly"]["adminAccess"] = False
    assert validate_special_claim(claim) == []


def test_v1beta1_claims_are_checked_in_the_v1_shape_they_convert_to() -> None:
    """The boundary (``core.versions.to_v1``) turns a v1beta1 flat request into ``exactly``; the
    rules then see one shape, and name fields by their v1 path as upstream's internal type does."""
    claim = special_claim(apiVersion="resource.k8s.io/v1beta1")
    claim["spec"]["devices"]["requests"] = [{"name": "r", "deviceClassName": "gpu", "count": 2}]
    assert validate_special_claim(to_v1(claim)) == []
    claim["spec"]["devices"]["requests"][0]["allocationMode"] = "All"
    assert [e.field for e in validate_special_claim(to_v1(claim))] == [
        "spec.devices.requests[0].exactly.allocationMode"
    ]


def test_controller_owner_helper() -> None:
    claim = special_claim()
    assert controller_ref(claim) == claim["metadata"]["ownerReferences"][0]
    assert controller_ref({"metadata": {"ownerReferences": [{"controller": "true"}]}}) is None
    assert controller_ref({"metadata": {"ownerReferences": "x"}}) is None
    assert controller_ref(None) is None


# --- fuzz: arbitrary JSON-like input in every position ---------------------------------------------

json_leaf = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12)
json_like = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)


def junk_or(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``strategy`` three times in four, any JSON-like value otherwise."""
    return st.integers(min_value=0, max_value=3).flatmap(lambda i: strategy if i else json_like)


def shaped(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """A dict with ``fields`` (each possibly junk, some possibly missing), or junk itself."""
    values = {k: junk_or(v) for k, v in fields.items()}
    return junk_or(st.fixed_dictionaries(values) | st.fixed_dictionaries({}, optional=values))


names_st = st.sampled_from(["c", "init", "nope", "", "example.com/gpu", "Bad_Name", "container-0-request-0"])
quantity_st = st.sampled_from(["1", "0", "1500m", "-1", "x", 2, 1.5, True, None]) | json_like
resource_map = (
    st.dictionaries(
        st.sampled_from(["example.com/gpu", "cpu", "deviceclass.resource.kubernetes.io/g"]),
        quantity_st,
        max_size=3,
    )
    | json_like
)
container_names = st.sampled_from(["c", "init"]) | names_st
resource_names = st.sampled_from(["example.com/gpu", "deviceclass.resource.kubernetes.io/g"]) | names_st
container_st = shaped(
    {"name": container_names, "resources": shaped({"requests": resource_map, "limits": resource_map})}
)
mapping_st = shaped(
    {"containerName": container_names, "resourceName": resource_names, "requestName": names_st}
)
pod_st = shaped(
    {
        "spec": shaped(
            {
                "containers": st.lists(container_st, max_size=3),
                "initContainers": st.lists(container_st, max_size=2),
            }
        ),
        "status": shaped(
            {
                "extendedResourceClaimStatus": shaped(
                    {"requestMappings": st.lists(mapping_st, max_size=4), "resourceClaimName": names_st}
                )
            }
        ),
    }
)
meta_st = shaped(
    {
        "name": names_st,
        "deletionTimestamp": json_like,
        "annotations": st.fixed_dictionaries({ANNOTATION: st.just("true") | json_like}),
        "ownerReferences": st.lists(
            shaped({"controller": st.booleans(), "kind": st.just("Pod"), "apiVersion": st.just("v1")}),
            max_size=3,
        ),
    }
)
exact_st = shaped(
    {"allocationMode": st.just("ExactCount"), "count": st.integers(), "adminAccess": st.booleans()}
)
claim_st = shaped(
    {
        "apiVersion": st.sampled_from(["resource.k8s.io/v1", "resource.k8s.io/v1beta1"]),
        "metadata": meta_st,
        "spec": shaped(
            {
                "devices": shaped(
                    {"requests": st.lists(shaped({"exactly": exact_st, "firstAvailable": json_like}))}
                )
            }
        ),
    }
)
class_st = shaped({"metadata": meta_st, "spec": shaped({"extendedResourceName": names_st | json_like})})


def only_field_errors(errors: Any) -> None:
    assert isinstance(errors, list)
    for e in errors:
        assert isinstance(e, FieldError)
        assert str(e).startswith(e.field)


@settings(max_examples=300)
@given(pod_st)
def test_fuzz_pod_validators(pod_obj: Any) -> None:
    before = copy.deepcopy(pod_obj)
    only_field_errors(validate_extended_resource_claim_status(pod_obj))
    only_field_errors(validate_mapped_requests(pod_obj))
    only_field_errors(validate_dra_quantities(pod_obj, is_dra))
    assert pod_obj == before  # never mutated


@settings(max_examples=300)
@given(claim_st)
def test_fuzz_special_claim(claim: Any) -> None:
    only_field_errors(validate_special_claim(claim))
    assert isinstance(carries_special_annotation(claim), bool)
    owner = controller_ref(claim)
    assert owner is None or owner.get("controller") is True


@settings(max_examples=300)
@given(class_st, class_st | st.none(), st.lists(class_st, max_size=3))
def test_fuzz_device_class(new: Any, old: Any, others: list[Any]) -> None:
    errors, warnings = validate_device_class(new, old, others)
    only_field_errors(errors)
    assert all(isinstance(w, str) and len(w) <= MAX_WARNING_LENGTH for w in warnings)


@given(json_like, st.text(max_size=10))
def test_fuzz_extended_resource_name(value: Any, path: str) -> None:
    only_field_errors(validate_extended_resource_name(value, path))


@st.composite
def coherent_pod(draw: st.DrawFn) -> tuple[dict[str, Any], Any]:
    """A well-formed pod mapping ``example.com/gpu`` of container ``c``, with any quantity value."""
    value = draw(quantity_st)
    section = draw(st.sampled_from(["containers", "initContainers"]))
    where = draw(st.sampled_from(["requests", "limits"]))
    repeats = draw(st.integers(min_value=1, max_value=3))
    body = {
        "spec": {section: [{"name": "c", "resources": {where: {"example.com/gpu": value}}}]},
        "status": {
            "extendedResourceClaimStatus": {
                "requestMappings": [mapping(request=f"container-0-request-{i}") for i in range(repeats)],
                "resourceClaimName": "p-extended-resources-abc",
            }
        },
    }
    return body, value


@settings(max_examples=300)
@given(coherent_pod())
def test_fuzz_quantity_rules_follow_the_quantity(case: tuple[dict[str, Any], Any]) -> None:
    pod_obj, value = case
    q = try_parse(value)
    assert validate_extended_resource_claim_status(pod_obj) == []
    count = q.as_int64() if q is not None else None  # what the scheduler reads (AsInt64)
    mapped = validate_mapped_requests(pod_obj)
    assert len(mapped) == (0 if count is not None and count > 0 else 1)
    dra = validate_dra_quantities(pod_obj, is_dra)
    if q is None:
        assert [e.bad_value for e in dra] == [value]
    else:
        assert len(dra) == (q.value < 0) + (count is None)
        assert {e.bad_value for e in dra} <= {q.canonical()}
    for err in mapped + dra:
        assert err.field.endswith("[example.com/gpu]")
    assert all(err.bad_value == value for err in mapped)


def _annotated(name: str, value: str, field: str | None = None) -> dict[str, Any]:
    dc = device_class(name, field)
    dc["metadata"]["annotations"] = {"draxr.io/extended-resource-name": value}
    return dc


def test_the_annotation_follows_the_fields_syntax_rules() -> None:
    assert validate_device_class(_annotated("gpu", "example.com/gpu"))[0] == []
    errors, warnings = validate_device_class(_annotated("gpu", "example.com"))
    assert texts(errors) == [
        'metadata.annotations[draxr.io/extended-resource-name]: Invalid value: "example.com": '
        "must be a valid extended resource name"
    ]
    assert warnings[0].startswith("metadata.annotations[draxr.io/extended-resource-name]: a name must be")


def test_field_and_annotation_must_agree_when_both_are_set() -> None:
    assert validate_device_class(_annotated("gpu", "example.com/gpu", "example.com/gpu"))[0] == []
    errors, _ = validate_device_class(_annotated("gpu", "example.com/other", "example.com/gpu"))
    assert texts(errors) == [
        'metadata.annotations[draxr.io/extended-resource-name]: Invalid value: "example.com/other": '
        "must equal spec.extendedResourceName when both are set"
    ]


def test_an_annotated_name_is_unique_across_annotations_and_fields() -> None:
    holder = device_class("gpu-a", "example.com/gpu")
    errors, _ = validate_device_class(_annotated("gpu-b", "example.com/gpu"), None, [holder])
    assert texts(errors) == [
        'metadata.annotations[draxr.io/extended-resource-name]: Duplicate value: "example.com/gpu": '
        'already declared by DeviceClass "gpu-a"'
    ]
    errors, _ = validate_device_class(
        device_class("gpu-c", "example.com/gpu"), None, [_annotated("gpu-b", "example.com/gpu")]
    )
    assert [e.field for e in errors] == ["spec.extendedResourceName"]


# --- draxr.io/align-by -----------------------------------------------------------------------------


def _aligned(value: Any) -> dict[str, Any]:
    obj = device_class("gpu", "example.com/gpu")
    obj["metadata"]["annotations"] = {"draxr.io/align-by": value}
    return obj


def test_align_by_with_fully_qualified_attributes_is_valid() -> None:
    value = "resource.kubernetes.io/pcieRoot, gpu.example.com/numaNode"
    assert validate_device_class(_aligned(value)) == ([], [])


def test_a_malformed_align_by_is_invalid_at_its_annotation() -> None:
    errors, _ = validate_device_class(_aligned("pcieRoot,resource.kubernetes.io/pcie-root"))
    prefix = (
        'metadata.annotations[draxr.io/align-by]: Invalid value: "pcieRoot,resource.kubernetes.io/pcie-root"'
    )
    assert texts(errors) == [
        f"{prefix}: pcieRoot: must be a domain and a name separated by one '/' (e.g. "
        "'resource.kubernetes.io/pcieRoot')",
        f"{prefix}: resource.kubernetes.io/pcie-root: name part: a valid C identifier must start with "
        "alphabetic character or '_', followed by a string of alphanumeric characters or '_' (e.g. "
        "'my_name',  or 'MY_NAME',  or 'MyName', regex used for validation is '[A-Za-z_][A-Za-z0-9_]*')",
    ]
    assert {e.type for e in errors} == {ErrorType.INVALID}


def test_an_update_keeping_a_stored_malformed_align_by_only_warns() -> None:
    old = _aligned("pcieRoot")
    new = copy.deepcopy(old)
    new["spec"]["selectors"] = [{"cel": {"expression": "true"}}]
    errors, warnings = validate_device_class(new, old)
    assert errors == []
    (warning,) = warnings
    assert warning.startswith(
        "draxr ignores metadata.annotations[draxr.io/align-by]: pcieRoot: must be a domain and a name"
    )
    errors, _ = validate_device_class(_aligned("numa"), old)  # a new malformed value is still denied
    assert len(errors) == 1


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="abcXYZ_09./-, ", max_size=40))
def test_align_by_is_valid_exactly_when_the_engine_would_use_it(value: str) -> None:
    from webhook.core.api.alignment import align_by

    errors, _ = validate_device_class(_aligned(value))
    assert (errors == []) == (align_by(_aligned(value)) != ())
