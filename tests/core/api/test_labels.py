"""Label selectors in their string form (apimachinery ``labels.Parse``): the cases of upstream's
``selector_test.go`` (``TestSelectorParse``, ``TestSelectorMatches``, ``TestSetSelectorParser``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.core.api.labels import LabelSelectorError, parse_label_selector


@pytest.mark.parametrize(
    "text",
    ["x=a,y=b,z=c", "", "x!=a,y=b", "x=", "x= ", "x=,z= ", "x= ,z= ", "!x", "x>1", "x>1,z<5"],
)
def test_good_strings(text: str) -> None:  # TestSelectorParse's testGoodStrings
    parse_label_selector(text)


@pytest.mark.parametrize("text", ["x=a||y=b", "x==a==b", "!x=a", "x<a"])
def test_bad_strings(text: str) -> None:  # TestSelectorParse's testBadStrings
    with pytest.raises(LabelSelectorError):
        parse_label_selector(text)


@pytest.mark.parametrize(
    ("text", "labels"),
    [  # TestSelectorMatches: expectMatch
        ("", {"x": "y"}),
        ("x=y", {"x": "y"}),
        ("x=y,z=w", {"x": "y", "z": "w"}),
        ("x!=y,z!=w", {"x": "z", "z": "a"}),
        ("notin=in", {"notin": "in"}),
        ("x", {"x": "z"}),
        ("!x", {"y": "z"}),
        ("x>1", {"x": "2"}),
        ("x<1", {"x": "0"}),
        ("x in (a,b)", {"x": "b"}),
        ("x notin (a,b)", {"x": "c"}),
        ("x notin (a,b)", {}),
        ("x in (,a)", {"x": ""}),
        ("x in ()", {"x": ""}),
    ],
)
def test_matches(text: str, labels: dict[str, str]) -> None:
    assert parse_label_selector(text).matches(labels)


@pytest.mark.parametrize(
    ("text", "labels"),
    [  # TestSelectorMatches: expectNoMatch
        ("x=z", {}),
        ("x=y", {"x": "z"}),
        ("x=y,z=w", {"x": "w", "z": "w"}),
        ("x!=y,z!=w", {"x": "z", "z": "w"}),
        ("x", {"y": "z"}),
        ("!x", {"x": "z"}),
        ("x>1", {"x": "0"}),
        ("x<1", {"x": "2"}),
        ("x>1", {"x": "a"}),
        ("x in (a,b)", {"x": "c"}),
        ("x notin (a,b)", {"x": "a"}),
    ],
)
def test_does_not_match(text: str, labels: dict[str, str]) -> None:
    assert not parse_label_selector(text).matches(labels)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x in a", "unable to parse requirement: found 'a' expected: '('"),
        ("x in (a", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("x,", "found '', expected: identifier after ','"),
        ("=a", "found '=', expected: !, identifier, or 'end of string'"),
        ("x a", "unable to parse requirement: found 'a', expected: in, notin, =, ==, !=, gt, lt"),
        ("x=a b", "found 'b', expected: ',' or 'end of string'"),
        ("a/b/c=d", 'unable to parse requirement: key: Invalid value: "a/b/c"'),
        ("x=a_", 'values[0][x]: Invalid value: "a_"'),
        ("x>a", "for 'Gt', 'Lt' operators, the value must be an integer"),
    ],
)
def test_errors_say_why(text: str, message: str) -> None:
    with pytest.raises(LabelSelectorError) as e:
        parse_label_selector(text)
    assert message in str(e.value)


def test_empty_selects_everything() -> None:
    selector = parse_label_selector("  ")
    assert selector.empty
    assert selector.matches(None)
    assert not parse_label_selector("a").empty


_KEY = st.from_regex(r"[a-z]([a-z0-9.-]{0,10}[a-z0-9])?", fullmatch=True).filter(lambda k: ".." not in k)
_VALUE = st.from_regex(r"([a-z0-9]([a-z0-9._-]{0,10}[a-z0-9])?)?", fullmatch=True)


@given(st.dictionaries(_KEY, _VALUE, max_size=4), st.dictionaries(_KEY, _VALUE, max_size=4))
def test_equality_selectors_are_subset_checks(wanted: dict[str, str], labels: dict[str, str]) -> None:
    """``k1=v1,k2=v2`` matches exactly the label sets holding every pair (``SelectorFromSet``)."""
    text = ",".join(f"{k}={v}" for k, v in wanted.items())
    expected = all(labels.get(k) == v for k, v in wanted.items())
    assert parse_label_selector(text).matches(labels) is expected
