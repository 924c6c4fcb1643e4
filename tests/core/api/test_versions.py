"""core.versions: resource.k8s.io v1beta1 and v1beta2 objects in the v1 shape, as upstream converts them.

The table follows upstream's round-trip fixtures (``staging/src/k8s.io/api/testdata/v1.34.0/
resource.k8s.io.<version>.<Kind>.yaml``: every field set, to a value named after it), whose v1beta1
ResourceSlice and v1 ResourceSlice are the same object in the two shapes; the request cases follow
``TestConversion`` in ``pkg/apis/resource/v1beta1/conversion_test.go`` and the rules of
``pkg/apis/resource/v1beta1/conversion.go``. The property test writes generated v1 objects in the
older shapes (the inverse conversions below, ``Convert_resource_*_To_v1beta1_*``, exist only here)
and checks that the engine decides the same after ``to_v1`` reads them back.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.harness import state_of
from tests.core.podfactory import container, device, device_class, node, pod, resource_slice
from webhook.core.api.objects import Obj
from webhook.core.api.versions import EXACT_REQUEST_FIELDS, V1, V1BETA1, V1BETA2, to_v1
from webhook.core.scheduling.framework import SCHEDULED
from webhook.core.scheduling.scheduler import Scheduler

# --- the v1.34.0 fixtures, field by field -------------------------------------------------------------

META: Obj = {
    "name": "nameValue",
    "namespace": "namespaceValue",
    "uid": "uidValue",
    "generation": 7,
    "labels": {"labelsKey": "labelsValue"},
    "annotations": {"annotationsKey": "annotationsValue"},
    "resourceVersion": "resourceVersionValue",
}
NODE_SELECTOR: Obj = {
    "nodeSelectorTerms": [
        {
            "matchExpressions": [{"key": "keyValue", "operator": "operatorValue", "values": ["valuesValue"]}],
            "matchFields": [{"key": "keyValue", "operator": "operatorValue", "values": ["valuesValue"]}],
        }
    ]
}
#: Every ``BasicDevice`` field (v1beta1), which is every v1 ``Device`` field but ``name``.
DEVICE_FIELDS: Obj = {
    "allNodes": True,
    "allowMultipleAllocations": True,
    "attributes": {
        "attributesKey": {"bool": True, "int": 2, "string": "stringValue", "version": "versionValue"}
    },
    "bindingConditions": ["bindingConditionsValue"],
    "bindingFailureConditions": ["bindingFailureConditionsValue"],
    "bindsToNode": True,
    "capacity": {
        "capacityKey": {
            "requestPolicy": {
                "default": "0",
                "validRange": {"max": "0", "min": "0", "step": "0"},
                "validValues": ["0"],
            },
            "value": "0",
        }
    },
    "consumesCounters": [{"counterSet": "counterSetValue", "counters": {"countersKey": {"value": "0"}}}],
    "nodeName": "nodeNameValue",
    "nodeSelector": NODE_SELECTOR,
    "taints": [
        {
            "effect": "effectValue",
            "key": "keyValue",
            "timeAdded": "2004-01-01T01:01:01Z",
            "value": "valueValue",
        }
    ],
}
SLICE_SPEC: Obj = {
    "allNodes": True,
    "driver": "driverValue",
    "nodeName": "nodeNameValue",
    "nodeSelector": NODE_SELECTOR,
    "perDeviceNodeSelection": True,
    "pool": {"generation": 2, "name": "nameValue", "resourceSliceCount": 3},
    "sharedCounters": [{"counters": {"countersKey": {"value": "0"}}, "name": "nameValue"}],
}
SELECTORS: list[Obj] = [{"cel": {"expression": "expressionValue"}}]
TOLERATIONS: list[Obj] = [
    {
        "effect": "effectValue",
        "key": "keyValue",
        "operator": "operatorValue",
        "tolerationSeconds": 5,
        "value": "valueValue",
    }
]
#: The v1beta1 ``DeviceRequest`` fields that v1 keeps in ``exactly``.
EXACT: Obj = {
    "adminAccess": True,
    "allocationMode": "allocationModeValue",
    "capacity": {"requests": {"requestsKey": "0"}},
    "count": 5,
    "deviceClassName": "deviceClassNameValue",
    "selectors": SELECTORS,
    "tolerations": TOLERATIONS,
}
#: ``DeviceSubRequest``: the same fields but admin access, in every version.
SUBREQUEST: Obj = {"name": "nameValue", **{k: v for k, v in EXACT.items() if k != "adminAccess"}}
OPAQUE: Obj = {
    "driver": "driverValue",
    "parameters": {
        "apiVersion": "example.com/v1",
        "kind": "CustomType",
        "spec": {"replicas": 1},
        "status": {"available": 1},
    },
}
CLAIM_DEVICES: Obj = {
    "config": [{"opaque": OPAQUE, "requests": ["requestsValue"]}],
    "constraints": [
        {
            "distinctAttribute": "distinctAttributeValue",
            "matchAttribute": "matchAttributeValue",
            "requests": ["requestsValue"],
        }
    ],
}
CLAIM_STATUS: Obj = {
    "allocation": {
        "allocationTimestamp": "2005-01-01T01:01:01Z",
        "devices": {
            "config": [{"opaque": OPAQUE, "requests": ["requestsValue"], "source": "sourceValue"}],
            "results": [
                {
                    "adminAccess": True,
                    "bindingConditions": ["bindingConditionsValue"],
                    "bindingFailureConditions": ["bindingFailureConditionsValue"],
                    "consumedCapacity": {"consumedCapacityKey": "0"},
                    "device": "deviceValue",
                    "driver": "driverValue",
                    "pool": "poolValue",
                    "request": "requestValue",
                    "shareID": "shareIDValue",
                    "tolerations": TOLERATIONS,
                }
            ],
        },
        "nodeSelector": NODE_SELECTOR,
    },
    "devices": [
        {
            "conditions": [
                {
                    "lastTransitionTime": "2004-01-01T01:01:01Z",
                    "message": "messageValue",
                    "observedGeneration": 3,
                    "reason": "reasonValue",
                    "status": "statusValue",
                    "type": "typeValue",
                }
            ],
            "data": {"apiVersion": "example.com/v1", "kind": "CustomType", "spec": {"replicas": 1}},
            "device": "deviceValue",
            "driver": "driverValue",
            "networkData": {
                "hardwareAddress": "hardwareAddressValue",
                "interfaceName": "interfaceNameValue",
                "ips": ["ipsValue"],
            },
            "pool": "poolValue",
            "shareID": "shareIDValue",
        }
    ],
    "reservedFor": [
        {"apiGroup": "apiGroupValue", "name": "nameValue", "resource": "resourceValue", "uid": "uidValue"}
    ],
}
CLASS_SPEC: Obj = {
    "config": [{"opaque": OPAQUE}],
    "extendedResourceName": "extendedResourceNameValue",
    "selectors": SELECTORS,
}
TAINT_RULE_SPEC: Obj = {
    "deviceSelector": {"device": "deviceValue", "driver": "driverValue", "pool": "poolValue"},
    "taint": {"effect": "effectValue", "key": "keyValue", "timeAdded": "2004-01-01T01:01:01Z"},
}


def fixture(api_version: str, kind: str, **body: Any) -> Obj:
    return {"apiVersion": api_version, "kind": kind, "metadata": META, **body}


def v1beta1_claim_spec() -> Obj:
    request = {"name": "nameValue", "firstAvailable": [SUBREQUEST], **EXACT}
    return {"devices": {**CLAIM_DEVICES, "requests": [request]}}


def v1_claim_spec() -> Obj:
    request = {"name": "nameValue", "firstAvailable": [SUBREQUEST], "exactly": EXACT}
    return {"devices": {**CLAIM_DEVICES, "requests": [request]}}


V1_SLICE = fixture(
    V1, "ResourceSlice", spec={**SLICE_SPEC, "devices": [{"name": "nameValue", **DEVICE_FIELDS}]}
)
V1_CLAIM = fixture(V1, "ResourceClaim", spec=v1_claim_spec(), status=CLAIM_STATUS)
V1_TEMPLATE = fixture(
    V1, "ResourceClaimTemplate", spec={"metadata": {"labels": {"a": "b"}}, "spec": v1_claim_spec()}
)
V1_CLASS = fixture(V1, "DeviceClass", spec=CLASS_SPEC)

FIXTURES: list[tuple[Obj, Obj]] = [
    (
        fixture(
            V1BETA1,
            "ResourceSlice",
            spec={**SLICE_SPEC, "devices": [{"name": "nameValue", "basic": DEVICE_FIELDS}]},
        ),
        V1_SLICE,
    ),
    ({**V1_SLICE, "apiVersion": V1BETA2}, V1_SLICE),
    (fixture(V1BETA1, "ResourceClaim", spec=v1beta1_claim_spec(), status=CLAIM_STATUS), V1_CLAIM),
    ({**V1_CLAIM, "apiVersion": V1BETA2}, V1_CLAIM),
    (
        fixture(
            V1BETA1,
            "ResourceClaimTemplate",
            spec={"metadata": {"labels": {"a": "b"}}, "spec": v1beta1_claim_spec()},
        ),
        V1_TEMPLATE,
    ),
    ({**V1_TEMPLATE, "apiVersion": V1BETA2}, V1_TEMPLATE),
    ({**V1_CLASS, "apiVersion": V1BETA1}, V1_CLASS),
    ({**V1_CLASS, "apiVersion": V1BETA2}, V1_CLASS),
]


def _fixture_id(case: tuple[Obj, Obj]) -> str:
    given_, _ = case
    return f"resource.k8s.io.{given_['apiVersion'].split('/')[1]}.{given_['kind']}"


@pytest.mark.parametrize("case", FIXTURES, ids=[_fixture_id(c) for c in FIXTURES])
def test_testdata_v1_34_0_fixtures_convert_to_their_v1_counterpart(case: tuple[Obj, Obj]) -> None:
    given_, expected = case
    before = copy.deepcopy(given_)
    assert to_v1(given_) == expected
    assert given_ == before  # the input is never mutated
    assert to_v1(to_v1(given_)) == expected


@pytest.mark.parametrize(
    "given_",
    [
        pytest.param(V1_SLICE, id="v1"),
        pytest.param(
            fixture("resource.k8s.io/v1alpha3", "DeviceTaintRule", spec=TAINT_RULE_SPEC), id="v1alpha3-rule"
        ),
        pytest.param(fixture(V1BETA2, "DeviceTaintRule", spec=TAINT_RULE_SPEC), id="v1beta2-rule"),
        pytest.param({**V1_SLICE, "apiVersion": "resource.k8s.io/v1alpha3"}, id="v1alpha3-slice"),
        pytest.param(fixture("v1", "Pod", spec={"containers": []}), id="core-group"),
        pytest.param(fixture("example.com/v1beta1", "ResourceClaim", spec={}), id="other-group"),
        pytest.param(fixture(V1BETA1, "ResourceClaimParameters", spec={}), id="other-kind"),
        pytest.param({"apiVersion": V1BETA1}, id="no-kind"),
        pytest.param({"apiVersion": V1BETA1, "kind": ["ResourceSlice"]}, id="kind-not-a-string"),
    ],
)
def test_what_has_no_conversion_comes_back_as_the_same_object(given_: Obj) -> None:
    """v1 (the informers' hot path), DeviceTaintRule (one shape in v1alpha3, v1beta2 and v1: their
    ``conversion.go`` files add nothing) and what upstream converts elsewhere or not at all."""
    assert to_v1(given_) is given_


# --- pkg/apis/resource/v1beta1/conversion_test.go, TestConversion -------------------------------------

CEL = [{"cel": {"expression": 'device.attributes["driver-a"].exists'}}]


def v1beta1_claim(*requests: Obj) -> Obj:
    return {"apiVersion": V1BETA1, "kind": "ResourceClaim", "spec": {"devices": {"requests": list(requests)}}}


def requests_of(claim: Obj) -> list[Obj]:
    result: list[Obj] = to_v1(claim)["spec"]["devices"]["requests"]
    return result


def test_conversion_test_v1beta1_to_internal_without_alternatives() -> None:
    flat = {
        "name": "foo",
        "deviceClassName": "class-a",
        "selectors": CEL,
        "allocationMode": "ExactCount",
        "count": 2,
    }
    assert requests_of(v1beta1_claim(flat)) == [
        {
            "name": "foo",
            "exactly": {
                "deviceClassName": "class-a",
                "selectors": CEL,
                "allocationMode": "ExactCount",
                "count": 2,
            },
        }
    ]


def test_conversion_test_v1beta1_to_internal_with_alternatives() -> None:
    subs = [
        {
            "name": "sub-1",
            "deviceClassName": "class-a",
            "selectors": CEL,
            "allocationMode": "ExactCount",
            "count": 2,
        },
        {
            "name": "sub-2",
            "deviceClassName": "class-a",
            "selectors": CEL,
            "allocationMode": "ExactCount",
            "count": 1,
        },
    ]
    assert requests_of(v1beta1_claim({"name": "foo", "firstAvailable": subs})) == [
        {"name": "foo", "firstAvailable": subs}
    ]


# --- pkg/apis/resource/v1beta1/conversion.go, rule by rule ---------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "exactly"),
    [
        ("deviceClassName", "gpu", {"deviceClassName": "gpu"}),
        ("selectors", [], {"selectors": []}),  # not nil: set, even without entries
        ("allocationMode", "All", {"allocationMode": "All"}),
        ("count", 3, {"count": 3}),
        ("adminAccess", False, {"adminAccess": False}),  # a pointer: false is set
        ("tolerations", [], {}),  # set, but built by a loop: no entries, no field
        ("capacity", {}, {"capacity": {}}),
    ],
)
def test_has_any_main_request_fields_set(field: str, value: Any, exactly: Obj) -> None:
    assert requests_of(v1beta1_claim({"name": "r", field: value})) == [{"name": "r", "exactly": exactly}]


@pytest.mark.parametrize(
    "unset",
    [
        {},
        {"deviceClassName": ""},
        {"count": 0},
        {"allocationMode": ""},
        {"selectors": None, "adminAccess": None},
    ],
)
def test_no_main_request_field_set_means_no_exactly(unset: Obj) -> None:
    assert requests_of(v1beta1_claim({"name": "r", **unset})) == [{"name": "r"}]


def test_convert_v1beta1_device_request_keeps_exactly_beside_first_available() -> None:
    """Both end up set; upstream leaves the error to validation, as draxr's engine does."""
    sub = {"name": "s", "deviceClassName": "gpu"}
    got = requests_of(v1beta1_claim({"name": "r", "deviceClassName": "gpu", "firstAvailable": [sub]}))
    assert got == [{"name": "r", "firstAvailable": [sub], "exactly": {"deviceClassName": "gpu"}}]


def test_convert_v1beta1_device_request_drops_what_v1beta1_does_not_have() -> None:
    """The decoder drops unknown fields: an ``exactly`` written into a v1beta1 request is not read."""
    request = {"name": "r", "deviceClassName": "gpu", "exactly": {"deviceClassName": "other"}, "x": 1}
    assert requests_of(v1beta1_claim(request)) == [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]


def test_convert_v1beta1_resource_slice_spec_nodename_and_allnodes_become_pointers() -> None:
    def spec_of(**spec: Any) -> Obj:
        obj = {"apiVersion": V1BETA1, "kind": "ResourceSlice", "spec": {"driver": "d", **spec}}
        result: Obj = to_v1(obj)["spec"]
        return result

    assert spec_of(nodeName="", allNodes=False) == {"driver": "d"}
    assert spec_of(nodeName="n") == {"driver": "d", "nodeName": "n"}
    assert spec_of(allNodes=True) == {"driver": "d", "allNodes": True}


@pytest.mark.parametrize(
    ("v1beta1_device", "v1_device"),
    [
        pytest.param(
            {"name": "d", "basic": {"attributes": {}, "capacity": {}, "consumesCounters": [], "taints": []}},
            {"name": "d"},
            id="empty-collections-unset",
        ),
        pytest.param(
            {"name": "d", "basic": {"bindingConditions": [], "nodeName": "", "allNodes": False}},
            {"name": "d", "bindingConditions": [], "nodeName": "", "allNodes": False},
            id="other-fields-copied-as-they-are",
        ),
        pytest.param(
            {"name": "d", "basic": {"nodeName": None, "taints": None}}, {"name": "d"}, id="nulls-unset"
        ),
        pytest.param(
            {"name": "d", "basic": {"name": "other", "composite": {}}, "attributes": {"a": {"int": 1}}},
            {"name": "d"},
            id="unknown-fields-dropped",
        ),
        pytest.param({"name": "d"}, {"name": "d"}, id="no-basic"),
    ],
)
def test_convert_v1beta1_device_to_resource_device(v1beta1_device: Obj, v1_device: Obj) -> None:
    obj = {"apiVersion": V1BETA1, "kind": "ResourceSlice", "spec": {"devices": [v1beta1_device]}}
    assert to_v1(obj)["spec"]["devices"] == [v1_device]


@pytest.mark.parametrize(
    "broken",
    [
        {"spec": "x"},
        {"spec": {"devices": {"a": 1}}},
        {"spec": {"devices": ["x", None, {"name": "d", "basic": ["x"]}]}},
        {"spec": {"devices": {"requests": "x"}}},
        {"spec": {"devices": {"requests": [3, {"name": "r", "count": "2", "tolerations": "x"}]}}},
        {"spec": {"spec": "x"}},
    ],
)
@pytest.mark.parametrize("kind", ["ResourceSlice", "ResourceClaim", "ResourceClaimTemplate"])
def test_wrong_types_stay_for_the_type_checks(kind: str, broken: Obj) -> None:
    """The webhook converts before its type checks: nothing raises, and a wrong type is left as it is."""
    obj = {"apiVersion": V1BETA1, "kind": kind, **copy.deepcopy(broken)}
    out = to_v1(obj)
    assert out["apiVersion"] == V1
    assert obj == {"apiVersion": V1BETA1, "kind": kind, **broken}
    if isinstance(broken["spec"], str):
        assert out["spec"] == "x"


def test_a_wrong_typed_count_moves_into_exactly_where_validation_names_it() -> None:
    assert requests_of(v1beta1_claim({"name": "r", "count": "2"})) == [
        {"name": "r", "exactly": {"count": "2"}}
    ]


# --- property: writing v1 objects in an older shape and reading them back changes no decision ---------

DRIVER = "gpu.example.com"
GPU = "example.com/gpu"
CLASSES = [
    device_class("any", GPU, ["true"]),
    device_class("model-a", selectors=[f"device.attributes['{DRIVER}'].model == 'a'"]),
]
NUMA_0 = [{"cel": {"expression": f"device.attributes['{DRIVER}'].numa == 0"}}]
TOLERATE = [{"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}]


def convert_resource_device_to_v1beta1_device(dev: Obj) -> Obj:
    basic = {k: v for k, v in dev.items() if k != "name"}
    for key in ("attributes", "capacity", "consumesCounters", "taints"):
        if not basic.get(key):
            basic.pop(key, None)
    return {"name": dev["name"], "basic": basic}


def convert_resource_device_request_to_v1beta1_device_request(req: Obj) -> Obj:
    out = {k: v for k, v in req.items() if k != "exactly"}
    exactly = req.get("exactly") or {}
    for key in EXACT_REQUEST_FIELDS:
        if key in exactly and not (key == "tolerations" and not exactly[key]):
            out[key] = exactly[key]
    return out


def convert_resource_resource_slice_spec_to_v1beta1(spec: Obj) -> Obj:
    out = {**spec, "devices": [convert_resource_device_to_v1beta1_device(d) for d in spec["devices"]]}
    # Plain string and bool in v1beta1 (Convert_Pointer_string_To_string): unset is "" and false.
    # The JSON would omit them; written out, they exercise the rule that unsets them again.
    out.setdefault("nodeName", "")
    out.setdefault("allNodes", False)
    return out


def written_as(version: str, obj: Obj) -> Obj:
    """``obj`` (v1) as the API server would serve it in ``version``."""
    out = copy.deepcopy(obj)
    if out["apiVersion"] != V1:
        return out
    out["apiVersion"] = version
    if version != V1BETA1:
        return out
    if out["kind"] == "ResourceSlice":
        out["spec"] = convert_resource_resource_slice_spec_to_v1beta1(out["spec"])
    elif out["kind"] == "ResourceClaim":
        devices = out["spec"]["devices"]
        devices["requests"] = [
            convert_resource_device_request_to_v1beta1_device_request(r) for r in devices["requests"]
        ]
    return out


@st.composite
def gpu(draw: st.DrawFn, /, name: str, **extra: Any) -> Obj:
    attrs = {"model": {"string": draw(st.sampled_from(["a", "b"]))}, "numa": {"int": draw(st.integers(0, 1))}}
    fields: Obj = {"capacity": {"memory": {"value": draw(st.sampled_from(["40Gi", "80Gi"]))}}, **extra}
    if draw(st.integers(0, 4)) == 0:
        fields["taints"] = [{"key": "maintenance", "effect": "NoSchedule"}]
    return device(name, attrs, **fields)


@st.composite
def exact_request(draw: st.DrawFn, name: str) -> Obj:
    body: Obj = {"deviceClassName": draw(st.sampled_from(["any", "model-a"]))}
    if draw(st.booleans()):
        body["allocationMode"] = "All"
    else:
        body |= {"allocationMode": "ExactCount", "count": draw(st.integers(1, 2))}
    if draw(st.booleans()):
        body["selectors"] = NUMA_0
    if draw(st.booleans()):
        body["tolerations"] = TOLERATE
    if draw(st.integers(0, 3)) == 0:
        body["capacity"] = {"requests": {"memory": "40Gi"}}
    return {"name": name, "exactly": body}


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Obj], list[Obj]]:
    """Nodes with local GPUs, maybe a pool every node reaches and one with per-device node
    selection; user claims with exact, all-devices and first-available requests; pods for them."""
    nodes = [f"n{i}" for i in range(draw(st.integers(1, 2)))]
    objects: list[Obj] = [*CLASSES, *(node(n) for n in nodes)]
    for n in nodes:
        devs = [draw(gpu(f"{n}-gpu-{i}")) for i in range(draw(st.integers(0, 3)))]
        objects.append(resource_slice(f"{n}-gpus", devs, node_name=n))
    if draw(st.booleans()):
        devs = [draw(gpu(f"shared-{i}")) for i in range(draw(st.integers(1, 2)))]
        objects.append(resource_slice("shared", devs, pool="shared", allNodes=True))
    if draw(st.booleans()):
        devs = [draw(gpu(f"pinned-{i}", nodeName=draw(st.sampled_from(nodes)))) for i in range(2)]
        objects.append(resource_slice("pinned", devs, pool="pinned", perDeviceNodeSelection=True))
    pods: list[Obj] = []
    for c in range(draw(st.integers(1, 3))):
        shape = draw(st.sampled_from(["exact", "two", "first-available"]))
        if shape == "first-available":
            subs = [
                {"name": "big", "deviceClassName": "model-a", "count": 2},
                {"name": "small", "deviceClassName": "any"},
            ]
            requests = [{"name": "r0", "firstAvailable": subs}]
        else:
            requests = [draw(exact_request(f"r{i}")) for i in range(2 if shape == "two" else 1)]
        spec: Obj = {"devices": {"requests": requests}}
        if shape == "two" and draw(st.booleans()):
            spec["devices"]["constraints"] = [{"matchAttribute": f"{DRIVER}/numa"}]
        objects.append(
            {
                "apiVersion": V1,
                "kind": "ResourceClaim",
                "metadata": {"name": f"claim-{c}", "namespace": "default", "uid": f"uid-claim-{c}"},
                "spec": spec,
            }
        )
        pods.append(pod(f"pod-{c}", resourceClaims=[{"name": "x", "resourceClaimName": f"claim-{c}"}]))
    if draw(st.booleans()):
        pods.append(pod("extended", [container("c", {GPU: draw(st.integers(1, 2))})]))
    return objects, pods


def decisions(objects: list[Obj], pods: list[Obj]) -> list[Any]:
    """Each pod's decision in turn, each scheduled one reserved before the next."""
    scheduler = Scheduler(state_of(*objects))
    out: list[Any] = []
    for p in pods:
        d = scheduler.schedule(p)
        out.append(
            (
                d.status,
                d.node,
                d.message,
                [uc.allocation.to_api() if uc.allocation else None for uc in d.user_claims],
                d.special.to_api() if d.special else None,
            )
        )
        if d.status == SCHEDULED:
            scheduler.reserve(d)
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.sampled_from([V1BETA1, V1BETA2]))
def test_converting_then_rereading_never_changes_the_allocation(
    cluster: tuple[list[Obj], list[Obj]], version: str
) -> None:
    objects, pods = cluster
    older = [written_as(version, o) for o in objects]
    if version == V1BETA1:  # the older shape really is different
        slices = [o for o in older if o["kind"] == "ResourceSlice"]
        assert all("basic" in d for s in slices for d in s["spec"]["devices"])
        claims = [o for o in older if o["kind"] == "ResourceClaim"]
        assert not any("exactly" in r for c in claims for r in c["spec"]["devices"]["requests"])
    assert decisions([to_v1(o) for o in older], pods) == decisions(objects, pods)
