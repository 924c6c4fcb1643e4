"""Field errors and statuses, byte-exact with apimachinery's ``field`` and ``apierrors`` packages."""

import ast
import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.core.api import fielderrors as fe
from webhook.core.api.fielderrors import OMITTED, ErrorType, FieldError, Path

# --- ErrorBody / Error() ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("err", "text"),
    [
        (fe.invalid("spec.x", "abc", "must be x"), 'spec.x: Invalid value: "abc": must be x'),
        (fe.invalid("spec.x", 'a"b\\c', ""), 'spec.x: Invalid value: "a\\"b\\\\c"'),
        (fe.invalid("spec.x", 3, "too big"), "spec.x: Invalid value: 3: too big"),
        (fe.invalid("spec.x", -7, "d"), "spec.x: Invalid value: -7: d"),
        (fe.invalid("spec.x", True, "d"), "spec.x: Invalid value: true: d"),
        (fe.invalid("spec.x", None, "d"), "spec.x: Invalid value: null: d"),
        (fe.invalid("spec.x", 1.5, "d"), "spec.x: Invalid value: 1.5: d"),
        (fe.invalid("spec.x", 1e6, "d"), "spec.x: Invalid value: 1e+06: d"),
        (fe.invalid("spec.x", ["a", 1], "d"), 'spec.x: Invalid value: ["a",1]: d'),
        (
            fe.invalid("spec.x", {"b": 1, "a": "<&>"}, "d"),
            'spec.x: Invalid value: {"a":"\\u003c\\u0026\\u003e","b":1}: d',
        ),
        (fe.invalid("spec.x", OMITTED, "d"), "spec.x: Invalid value: d"),
        (
            fe.type_invalid("spec.x", "s", "must be an integer"),
            'spec.x: Invalid value: "s": must be an integer',
        ),
        (fe.required("metadata.name", ""), "metadata.name: Required value"),
        (
            fe.required("metadata.name", "name or generateName is required"),
            "metadata.name: Required value: name or generateName is required",
        ),
        (fe.forbidden("spec.a", "not allowed"), "spec.a: Forbidden: not allowed"),
        (fe.duplicate("spec.a[1].name", "x"), 'spec.a[1].name: Duplicate value: "x"'),
        (
            fe.duplicate("spec.a", "x", 'already declared by DeviceClass "y"'),
            'spec.a: Duplicate value: "x": already declared by DeviceClass "y"',
        ),
        (fe.not_found("spec.a", "x"), 'spec.a: Not found: "x"'),
        (
            fe.not_supported("spec.mode", "All", ["ExactCount", 'x"y']),
            'spec.mode: Unsupported value: "All": supported values: "ExactCount", "x\\"y"',
        ),
        (fe.not_supported("spec.mode", "All", []), 'spec.mode: Unsupported value: "All"'),
        (
            fe.too_long("metadata.name", "x" * 64, 63),
            "metadata.name: Too long: may not be more than 63 bytes",
        ),
        (fe.too_long("metadata.name", "xx", 1), "metadata.name: Too long: may not be more than 1 byte"),
        (fe.too_long("metadata.name", "x", -1), "metadata.name: Too long: value is too long"),
        (fe.too_many("spec.devices", 40, 32), "spec.devices: Too many: 40: must have at most 32 items"),
        (fe.too_many("spec.devices", -1, 1), "spec.devices: Too many: must have at most 1 item"),
        (fe.too_many("spec.devices", 3, -1), "spec.devices: Too many: 3: has too many items"),
        (fe.internal_error("spec", "boom"), "spec: Internal error: boom"),
    ],
)
def test_error_strings_match_go(err: FieldError, text: str) -> None:
    assert str(err) == text
    assert err.error_body() == text.split(": ", 1)[1]


def test_error_types_and_their_messages() -> None:
    assert fe.invalid("f", 1, "").type is ErrorType.INVALID
    assert ErrorType.INVALID.value == "FieldValueInvalid"
    assert ErrorType.TYPE_INVALID.message == "Invalid value"
    assert ErrorType.INTERNAL.value == "InternalError"
    assert {t.message for t in ErrorType} >= {"Not found", "Unsupported value", "Too many", "Too few"}


def test_required_and_forbidden_never_show_a_value() -> None:
    err = FieldError(ErrorType.REQUIRED, "a", "secret", "d")
    assert str(err) == "a: Required value: d"
    assert str(FieldError(ErrorType.FORBIDDEN, "a", 5)) == "a: Forbidden"


def test_cause_is_the_status_cause() -> None:
    err = fe.invalid("spec.x", "v", "bad")
    assert err.cause() == {
        "reason": "FieldValueInvalid",
        "message": 'Invalid value: "v": bad',
        "field": "spec.x",
    }


def test_errors_with_unhashable_values_are_hashable_and_comparable() -> None:
    a = fe.invalid("f", [1, 2], "d")
    assert hash(a) == hash(fe.invalid("f", [1, 2], "d"))
    assert a == fe.invalid("f", [1, 2], "d")
    assert a != fe.invalid("f", [1, 3], "d")


# --- Go formatting ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("", '""'),
        ("plain", '"plain"'),
        ('"Fran & Freddie\'s Diner\t☺"', '"\\"Fran & Freddie\'s Diner\\t☺\\""'),
        ("\a\b\f\n\r\t\v", '"\\a\\b\\f\\n\\r\\t\\v"'),
        ("\x00\x1b\x7f", '"\\x00\\x1b\\x7f"'),
        ("\u00a0\u2028\u00ad", '"\\u00a0\\u2028\\u00ad"'),
        ("é中😀", '"é中😀"'),
        ("\U000e0001", '"\\U000e0001"'),
        ("\ud800", '"\ufffd"'),
    ],
)
def test_go_quote(text: str, quoted: str) -> None:
    assert fe.go_quote(text) == quoted


@given(st.text(alphabet=st.characters(exclude_categories=["Cs"])))
def test_go_quote_round_trips(text: str) -> None:
    # Go's escapes (\a \b \f \n \r \t \v \xNN \uNNNN \UNNNNNNNN) mean the same in Python literals.
    quoted = fe.go_quote(text)
    assert quoted.startswith('"')
    assert quoted.endswith('"')
    assert ast.literal_eval(quoted) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0"),
        (-0.0, "-0"),
        (1.0, "1"),
        (1.5, "1.5"),
        (-2.25, "-2.25"),
        (100.0, "100"),
        (123456.0, "123456"),
        (1e6, "1e+06"),
        (1234567.0, "1.234567e+06"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (1e21, "1e+21"),
        (1e100, "1e+100"),
        (5e-324, "5e-324"),
        (0.1 + 0.2, "0.30000000000000004"),
        (math.inf, "+Inf"),
        (-math.inf, "-Inf"),
        (math.nan, "NaN"),
    ],
)
def test_go_float(value: float, text: str) -> None:
    assert fe.go_float(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1e6, "1000000"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (0.000001, "0.000001"),
        (1e-7, "1e-7"),
        (2.5, "2.5"),
        ("\u2028\b\f\x01", '"\\u2028\\b\\f\\u0001"'),
        ({"z": [True, None], "a": {}}, '{"a":{},"z":[true,null]}'),
    ],
)
def test_go_json(value: Any, text: str) -> None:
    assert fe.go_json(value) == text


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_go_float_round_trips(value: float) -> None:
    assert float(fe.go_float(value)) == value
    assert float(fe.go_json(value)) == value


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(exclude_categories=["Cs"])),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


def _same(loaded: Any, value: Any) -> bool:
    """JSON equality where a float printed without a fraction reads back as an int."""
    if isinstance(value, float):
        return isinstance(loaded, int | float) and float(loaded) == value
    if isinstance(value, list):
        return isinstance(loaded, list) and len(loaded) == len(value) and all(map(_same, loaded, value))
    if isinstance(value, dict):
        return (
            isinstance(loaded, dict)
            and loaded.keys() == value.keys()
            and all(_same(loaded[k], value[k]) for k in value)
        )
    return bool(loaded == value) and type(loaded) is type(value)


@given(_json_values)
def test_go_json_is_json(value: Any) -> None:
    assert _same(json.loads(fe.go_json(value)), value)


# --- paths -----------------------------------------------------------------------------------------


def test_path_builds_upstream_strings() -> None:
    assert str(Path("spec").child("x").index(0).key("example.com/gpu")) == "spec.x[0][example.com/gpu]"
    assert str(Path("spec", "devices", "requests")) == "spec.devices.requests"
    assert str(Path("a").child("b", "c")) == "a.b.c"
    assert str(Path().child("kind")) == "kind"
    assert str(Path().index(2).child("x")) == "[2].x"


def test_path_is_immutable_and_compares_by_value() -> None:
    parent = Path("status")
    a = parent.child("a")
    b = parent.child("b")
    assert (str(parent), str(a), str(b)) == ("status", "status.a", "status.b")
    assert Path("status", "a") == a
    assert hash(Path("status", "a")) == hash(a)
    assert a != b
    assert fe.invalid(a, 1, "d").field == "status.a"


# --- aggregates and statuses -----------------------------------------------------------------------


def test_aggregate_message() -> None:
    a = fe.required("a", "")
    b = fe.invalid("b", "x", "bad")
    assert fe.aggregate_message([]) == ""
    assert fe.aggregate_message([a]) == "a: Required value"
    assert fe.aggregate_message([a, b]) == '[a: Required value, b: Invalid value: "x": bad]'
    assert fe.aggregate_message([a, a]) == "a: Required value"
    assert fe.aggregate_message([a, b, a]) == '[a: Required value, b: Invalid value: "x": bad]'


def test_invalid_status_is_new_invalid() -> None:
    err = fe.invalid("spec.extendedResourceName", "example.com", "must be a valid extended resource name")
    status = fe.invalid_status("DeviceClass", "resource.k8s.io", "gpu", [err, err])
    assert status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'DeviceClass.resource.k8s.io "gpu" is invalid: spec.extendedResourceName: Invalid value: '
        '"example.com": must be a valid extended resource name',
        "reason": "Invalid",
        "details": {
            "name": "gpu",
            "group": "resource.k8s.io",
            "kind": "DeviceClass",
            "causes": [err.cause(), err.cause()],
        },
        "code": 422,
    }


def test_invalid_status_core_group_and_several_errors() -> None:
    errs = [fe.required("a", ""), fe.forbidden("b", "no")]
    status = fe.invalid_status("Pod", "", 'p"1', errs)
    assert status["message"] == 'Pod "p\\"1" is invalid: [a: Required value, b: Forbidden: no]'
    assert "group" not in status["details"]
    assert [c["reason"] for c in status["details"]["causes"]] == ["FieldValueRequired", "FieldValueForbidden"]


def test_invalid_status_without_errors() -> None:
    status = fe.invalid_status("Pod", "", "p", [])
    assert status["message"] == 'Pod "p" is invalid'
    assert status["details"]["causes"] == []


class _CountingStr(str):
    """A message that counts how often it is compared (a hash-based de-duplication rarely does)."""

    comparisons = 0

    def __eq__(self, other: object) -> bool:
        _CountingStr.comparisons += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


class _CountedError(FieldError):
    def __str__(self) -> str:
        return _CountingStr(FieldError.__str__(self))


def test_aggregate_message_deduplicates_in_linear_time() -> None:
    # ErrorList.ToAggregate keeps a sets.String of the messages seen; a list made 28,000 mapping
    # errors cost 392 million comparisons.
    n = 5000
    errors = [_CountedError(ErrorType.INVALID, f"spec.x[{i}]", i % 50, "d") for i in range(n)]
    errors += errors[:10]  # duplicates: compared once each
    _CountingStr.comparisons = 0
    message = fe.aggregate_message(errors)
    assert message.count("Invalid value") == n
    assert _CountingStr.comparisons <= 2 * len(errors)


def test_invalid_status_caps_errors_as_the_apiserver_store_does() -> None:
    # staging/src/k8s.io/apiserver/pkg/storage/etcd3: corruptObjErrAggregatorFactory(100) keeps 100
    # errors, then one metav1.CauseTypeTooMany cause with errTooMany's text; draxr adds the count.
    errors = [fe.invalid(f"status.m[{i}].containerName", f"c{i}", "must match") for i in range(28_000)]
    status = fe.invalid_status("Pod", "", "p", errors)
    causes = status["details"]["causes"]
    assert fe.MAX_STATUS_ERRORS == 100
    assert causes[:100] == [e.cause() for e in errors[:100]]
    assert causes[100:] == [
        {
            "reason": "FieldValueTooMany",
            "message": "too many errors, the list is truncated: 27900 more errors not shown",
        }
    ]
    message = status["message"]
    assert message.startswith(
        'Pod "p" is invalid: [status.m[0].containerName: Invalid value: "c0": must match, '
    )
    assert message.endswith(
        'status.m[99].containerName: Invalid value: "c99": must match, '
        "too many errors, the list is truncated: 27900 more errors not shown]"
    )
    assert "c100" not in message


@pytest.mark.parametrize(("count", "tail"), [(100, None), (101, "1 more error not shown")])
def test_the_cap_counts_what_it_leaves_out(count: int, tail: str | None) -> None:
    errors = [fe.required(f"f{i}", "") for i in range(count)]
    status = fe.invalid_status("Pod", "", "p", errors)
    causes = status["details"]["causes"]
    if tail is None:
        assert len(causes) == count
        assert "too many errors" not in status["message"]
    else:
        assert len(causes) == 101
        assert causes[-1]["message"] == f"too many errors, the list is truncated: {tail}"
        assert status["message"].endswith(f"the list is truncated: {tail}]")


def test_a_stringer_prints_unquoted() -> None:
    # field.Invalid(path, quantity, ...): a fmt.Stringer prints through String(), without quotes.
    assert str(fe.invalid("r", fe.GoStringer("500m"), "must be an integer")) == (
        "r: Invalid value: 500m: must be an integer"
    )
    assert str(fe.invalid("r", "500m", "d")) == 'r: Invalid value: "500m": d'


def test_forbidden_status_messages() -> None:
    s = fe.forbidden_status("resourceclaims", "resource.k8s.io", "c1", "quota exceeded")
    assert s["message"] == 'resourceclaims.resource.k8s.io "c1" is forbidden: quota exceeded'
    assert (s["code"], s["reason"], s["status"]) == (403, "Forbidden", "Failure")
    assert s["details"] == {"name": "c1", "group": "resource.k8s.io", "kind": "resourceclaims"}
    assert fe.forbidden_status("pods", "", "", "nope")["message"] == "pods is forbidden: nope"
    assert fe.forbidden_status("", "", "x", "nope")["message"] == "forbidden: nope"
    assert fe.forbidden_status("pods", "", "", "nope")["details"] == {"kind": "pods"}


def test_status_error_carries_its_status() -> None:
    err = fe.StatusError.invalid("Pod", "", "p", [fe.required("spec", "")])
    assert str(err) == 'Pod "p" is invalid: spec: Required value'
    assert (err.code, err.reason) == (422, "Invalid")
    forbidden = fe.StatusError.forbidden("pods", "", "p", "no")
    assert (forbidden.code, forbidden.reason, str(forbidden)) == (
        403,
        "Forbidden",
        'pods "p" is forbidden: no',
    )
    with pytest.raises(fe.StatusError, match="is invalid"):
        raise err
