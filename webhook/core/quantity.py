"""Kubernetes ``resource.Quantity``, exact (``fractions.Fraction``) and hashable by value."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_RE = re.compile(r"([+-]?)(\d+(?:\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?")
_MAX_EXPONENT = 1000
_INT64_MAX = 2**63 - 1
_INT64_MIN = -(2**63)


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity."""


@dataclass(frozen=True, slots=True, order=False)
class Quantity:
    """A parsed quantity. Compares and hashes by value, so ``1Gi == 1024Mi``."""

    value: Fraction
    text: str = field(compare=False, hash=False, default="")

    @classmethod
    def parse(cls, text: Any) -> Quantity:
        if isinstance(text, Quantity):
            return text
        if isinstance(text, bool) or not isinstance(text, (str, int, float)):
            raise QuantityError(f"quantities must be strings or numbers, not {type(text).__name__}")
        if isinstance(text, int):
            return cls(Fraction(text), str(text))
        if isinstance(text, float):
            if not math.isfinite(text):
                raise QuantityError("quantities must be finite")
            return cls(Fraction(text), repr(text))
        s = text.strip()
        m = _RE.fullmatch(s)
        if not m:
            raise QuantityError(
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
            )
        sign, number, suffix = m.group(1), m.group(2), m.group(3) or ""
        value = Fraction(number)
        if suffix in _BINARY:
            value *= _BINARY[suffix]
        elif suffix in _DECIMAL:
            value *= _DECIMAL[suffix]
        else:
            exp = int(suffix[1:])
            if abs(exp) > _MAX_EXPONENT:
                raise QuantityError("quantity exponent out of range")
            value *= Fraction(10) ** exp
        if sign == "-":
            value = -value
        return cls(value, s)

    def is_integer(self) -> bool:
        return self.value.denominator == 1

    def as_int64(self) -> int | None:
        """``AsInt64``: the integer value, or None when fractional or out of int64 range."""
        if self.value.denominator != 1 or not _INT64_MIN <= self.value.numerator <= _INT64_MAX:
            return None
        return self.value.numerator

    def ceil(self) -> int:
        """``Value()``: rounded up to an integer, as kube-scheduler counts scalar resources."""
        return math.ceil(self.value)

    def milli(self) -> int:
        """``MilliValue()``: thousandths, rounded up (cpu accounting)."""
        return math.ceil(self.value * 1000)

    def sign(self) -> int:
        return (self.value > 0) - (self.value < 0)

    def __lt__(self, other: Quantity) -> bool:
        return self.value < other.value

    def __le__(self, other: Quantity) -> bool:
        return self.value <= other.value

    def __gt__(self, other: Quantity) -> bool:
        return self.value > other.value

    def __ge__(self, other: Quantity) -> bool:
        return self.value >= other.value

    def __str__(self) -> str:
        return self.text or format_fraction(self.value)


def format_fraction(value: Fraction) -> str:
    """A readable canonical form (integers plain, fractions in milli-units when exact)."""
    if value.denominator == 1:
        return str(value.numerator)
    milli = value * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    return str(float(value))


def parse_quantity(text: Any) -> Quantity:
    return Quantity.parse(text)


def try_parse(text: Any) -> Quantity | None:
    try:
        return Quantity.parse(text)
    except QuantityError:
        return None
