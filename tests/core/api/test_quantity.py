from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.core.api.quantity import Quantity, QuantityError, try_parse


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


# ``String()`` of a parsed quantity: ``ParseQuantity`` (which keeps canonical input text as it was
# written, and rounds finer than a nano up) then ``CanonicalizeBytes`` (apimachinery
# pkg/api/resource/quantity.go, amount.go, suffix.go).
@pytest.mark.parametrize(
    ("text", "canonical", "fmt"),
    [
        ("0", "0", "DecimalSI"),
        ("1", "1", "DecimalSI"),
        ("+5", "+5", "DecimalSI"),  # kept as written: upstream's fast path reuses the string
        ("05", "05", "DecimalSI"),
        ("1000", "1k", "DecimalSI"),
        ("1.5", "1500m", "DecimalSI"),
        ("0.5", "500m", "DecimalSI"),
        ("100m", "100m", "DecimalSI"),
        ("1.9995", "1999500u", "DecimalSI"),
        ("-0.5", "-500m", "DecimalSI"),
        ("10E", "10E", "DecimalSI"),
        ("1000E", "1", "DecimalSI"),  # 1e21: no DecimalSI suffix for it, constructBytes gives none
        ("1e3", "1e3", "DecimalExponent"),
        ("1e400", "10e399", "DecimalExponent"),  # exponent to a multiple of three
        ("1e19", "10e18", "DecimalExponent"),
        ("1e-10", "1e-9", "DecimalExponent"),  # rounded up to the nano
        ("1.5Gi", "1536Mi", "BinarySI"),
        ("2048Ki", "2Mi", "BinarySI"),
        ("1Ki", "1Ki", "BinarySI"),
        ("0.5Ki", "512", "BinarySI"),  # below 1024: printed as a decimal
        ("9223372036854775808", "9223372036854775808", "DecimalSI"),
    ],
)
def test_canonical_is_upstreams_string(text: str, canonical: str, fmt: str) -> None:
    q = Quantity.parse(text)
    assert q.canonical() == canonical
    assert q.format == fmt


@pytest.mark.parametrize(
    ("value", "int64"),
    [
        ("9223372036854775807", 2**63 - 1),
        ("-9223372036854775808", -(2**63)),
        ("9223372036854775808", None),
        ("1e400", None),
        ("8Ei", None),  # 2^63: upstream caps BinarySI at 2^63-1, draxr refuses it instead
        ("0.5", None),
        (0.5, None),
        (1e3, 1000),
        (7, 7),
    ],
)
def test_as_int64_is_the_scheduler_reading(value: object, int64: int | None) -> None:
    # ``AsInt64``: what createRequestsAndMappings reads a device count with.
    assert Quantity.parse(value).as_int64() == int64


def test_floats_are_read_as_the_decimal_they_were_written_as() -> None:
    assert Quantity.parse(0.1).value == Fraction(1, 10)  # not the binary float 0.1000000000000000055...
    assert Quantity.parse(1e21).canonical() == "1e+21"


def test_more_digits_than_python_reads_is_a_quantity_error() -> None:
    with pytest.raises(QuantityError, match="unable to parse numeric part of quantity"):
        Quantity.parse("9" * 5000)
