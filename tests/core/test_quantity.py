from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.core.quantity import Quantity, QuantityError, try_parse


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", 1),
        ("1Gi", 2**30),
        ("1024Mi", 2**30),
        ("500m", Fraction(1, 2)),
        ("1.5", Fraction(3, 2)),
        ("2k", 2000),
        ("1e3", 1000),
        ("1E-3", Fraction(1, 1000)),
        ("-4", -4),
        ("+7", 7),
        (".5", Fraction(1, 2)),
        ("100n", Fraction(1, 10**7)),
        ("3u", Fraction(3, 10**6)),
        ("1Ei", 2**60),
    ],
)
def test_parse(text: str, value: Fraction) -> None:
    assert Quantity.parse(text).value == value


@pytest.mark.parametrize("text", ["", "abc", "1Ki2", "1 Gi", "1K", "--1", "1e", "1e99999"])
def test_reject(text: str) -> None:
    with pytest.raises(QuantityError):
        Quantity.parse(text)


def test_equality_and_hash_by_value() -> None:
    assert Quantity.parse("1Gi") == Quantity.parse("1024Mi")
    assert len({Quantity.parse("1Gi"), Quantity.parse("1024Mi")}) == 1
    assert Quantity.parse("1") < Quantity.parse("1500m")


def test_int64_and_rounding() -> None:
    assert Quantity.parse("2").as_int64() == 2
    assert Quantity.parse("1500m").as_int64() is None
    assert Quantity.parse("1500m").ceil() == 2
    assert Quantity.parse("100m").milli() == 100
    assert Quantity.parse(str(2**63)).as_int64() is None
    assert try_parse(None) is None
    assert try_parse(True) is None


@given(st.integers(min_value=-(10**12), max_value=10**12))
def test_integers_round_trip(n: int) -> None:
    assert Quantity.parse(str(n)).as_int64() == n
