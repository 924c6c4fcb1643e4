"""Extended resource names (spec §1, scenarios 1-5) and the name formats behind them."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.core.api import names


@pytest.mark.parametrize(
    "value",
    [
        "example.com/gpu",
        "example.com/my-resource",
        "example.com/My_Resource",
        "example-kub.io/foo",
        "a.b/c.d-e_f",
    ],
)
def test_valid_extended_resource_names(value: str) -> None:
    assert names.is_extended_resource_name(value)
    assert names.extended_resource_name_errors(value) == []


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("example.com", "a name must be a domain-prefixed path, such as 'example.com/my-prop'"),
        ("noslash", "a name must be a domain-prefixed path, such as 'example.com/my-prop'"),
        ("invalid_name", "a name must be a domain-prefixed path, such as 'example.com/my-prop'"),
        ("", "a name must be a domain-prefixed path, such as 'example.com/my-prop'"),
        ("kubernetes.io/foo", 'must not have "kubernetes.io/" domain'),
        ("deviceclass.resource.kubernetes.io/foo", 'must not have "kubernetes.io/" domain'),
        ("foo.kubernetes.io/x", 'must not have "kubernetes.io/" domain'),
        ("requests.example.com/foo", 'must not have "requests." prefix'),
        ("example.com/" + "a" * 64, "name part must be no more than 63 bytes"),
    ],
)
def test_invalid_extended_resource_names(value: str, reason: str) -> None:
    assert not names.is_extended_resource_name(value)
    assert reason in names.extended_resource_name_errors(value)


def test_uppercase_domain_is_not_a_dns_subdomain() -> None:
    errs = names.extended_resource_name_errors("Example.com/gpu")
    assert any(e.startswith("prefix part a lowercase RFC 1123 subdomain") for e in errs)


def test_dra_candidates_include_implicit_names() -> None:
    assert names.is_dra_extended_resource_name("deviceclass.resource.kubernetes.io/gpu")
    assert names.is_dra_extended_resource_name("example.com/gpu")
    assert not names.is_dra_extended_resource_name("cpu")
    assert not names.is_dra_extended_resource_name("kubernetes.io/foo")


def test_implicit_name_problems_for_long_class_names() -> None:
    assert names.implicit_name_problems("gpu.example.com") == []
    assert names.implicit_name_problems("a" * 64) == ["name part must be no more than 63 bytes"]


def test_regex_error_keeps_upstream_spacing() -> None:
    assert names.is_dns1123_label("Container_0") == [
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
        "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
        "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
    ]
    assert names.is_dns1123_label("a.b") == ["must not contain dots"]
    assert names.is_dns1123_subdomain("x" * 254)[0] == "must be no more than 253 bytes"


@given(st.text(max_size=80))
def test_validity_agrees_with_reasons(value: str) -> None:
    # The boolean and the reason list are two views of one rule.
    assert names.is_extended_resource_name(value) == (names.extended_resource_name_errors(value) == [])


@given(
    st.one_of(
        st.text(max_size=400),
        st.sampled_from(["example.com/gpu", "cpu", "deviceclass.resource.kubernetes.io/" + "a" * 300]),
    )
)
def test_the_cached_answer_is_the_answer_and_long_names_are_not_kept(name: str) -> None:
    assert names.is_dra_extended_resource_name(name) == names._is_dra_extended(name)
    assert names.is_dra_extended_resource_name(name) == names._is_dra_extended(name)  # from the cache
    kept = names._dra_extended_cached.cache_info().currsize
    names.is_dra_extended_resource_name("deviceclass.resource.kubernetes.io/" + name + "x" * 320)
    assert names._dra_extended_cached.cache_info().currsize == kept
