"""Kubernetes ``resource.Quantity``, exact (``fractions.Fraction``) and hashable by value.

Parsing follows ``ParseQuantity`` (``staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go``)
except where upstream would lose the value: draxr keeps it exactly and lets validation reject it.
Upstream accepts any ``int32`` exponent and wraps the scaled values of what does not fit in ``int64``
(``1e400``, ``9223372036854775808``: ``MilliValue()`` of both is a multiple of 1000, so the
apiserver's integer check passes and the scheduler's ``AsInt64`` then ignores them); draxr refuses
exponents beyond ``MAX_EXPONENT`` and ``as_int64`` is None outside ``int64``. ``canonical()`` is
upstream's ``String()``, the form field errors print a quantity in.
"""

from __future__ import annotations

import functools
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
#: Larger exponents are refused (upstream takes any int32 one; ``10**(2**31)`` does not fit in memory).
MAX_EXPONENT = 1000
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

#: ``resource.Format`` values: how a quantity was written, and so how it is printed again.
DECIMAL_SI = "DecimalSI"
BINARY_SI = "BinarySI"
DECIMAL_EXPONENT = "DecimalExponent"

_DECIMAL_EXPONENTS = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIXES = {e: s for s, e in _DECIMAL_EXPONENTS.items()}
_BINARY_SUFFIXES = {1: "Ki", 2: "Mi", 3: "Gi", 4: "Ti", 5: "Pi", 6: "Ei"}
_NANO = 10**9
#: ``maxInt64Factors``: decimal digits an int64 always holds.
_MAX_INT64_FACTORS = 18


#: ``ErrNumeric``.
MSG_NUMERIC = "unable to parse numeric part of quantity"
#: ``resource.ErrFormatWrong``.
MSG_FORMAT = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity."""


@dataclass(frozen=True, slots=True, order=False)
class Quantity:
    """A parsed quantity. Compares and hashes by value, so ``1Gi == 1024Mi``."""

    value: Fraction
    text: str = field(compare=False, hash=False, default="")
    #: ``resource.Format``: ``DecimalSI``, ``BinarySI`` or ``DecimalExponent``.
    format: str = field(compare=False, hash=False, default=DECIMAL_SI)
    #: The input text when upstream keeps it as the quantity's ``String()`` (already canonical).
    kept: str = field(compare=False, hash=False, default="")
    _canonical: str = field(compare=False, hash=False, default="", repr=False)

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
            # The decimal the JSON number was written as (its shortest repr), not the binary float.
            return _parse_text(repr(text))
        return _parse_text(text)

    @classmethod
    def _from_text(cls, text: str) -> Quantity:
        s = text.strip()
        m = _RE.fullmatch(s)
        if not m:
            raise QuantityError(MSG_FORMAT)
        sign, number, suffix = m.group(1), m.group(2), m.group(3) or ""
        try:
            value = Fraction(number)
        except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
            raise QuantityError(MSG_NUMERIC) from None
        if suffix in _BINARY:
            value *= _BINARY[suffix]
            fmt, exp = BINARY_SI, _BINARY[suffix].bit_length() - 1
        elif suffix in _DECIMAL:
            value *= _DECIMAL[suffix]
            fmt, exp = DECIMAL_SI, _DECIMAL_EXPONENTS[suffix]
        else:
            exp = int(suffix[1:])
            if abs(exp) > MAX_EXPONENT:
                raise QuantityError("quantity exponent out of range")
            value *= Fraction(10) ** exp
            fmt = DECIMAL_EXPONENT
        if sign == "-":
            value = -value
        return cls(value, s, fmt, s if _kept_as_written(s, number, fmt, exp) else "")

    def is_integer(self) -> bool:
        return self.value.denominator == 1

    def as_int64(self) -> int | None:
        """``AsInt64``: the integer value, or None when fractional or out of int64 range."""
        if self.value.denominator != 1 or not INT64_MIN <= self.value.numerator <= INT64_MAX:
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

    def canonical(self) -> str:
        """``String()``: the canonical form upstream prints (``CanonicalizeBytes``), e.g. ``1500m``
        for ``1.5``, ``1536Mi`` for ``1.5Gi``, ``1e400`` for ``1e400``. Values finer than a nano are
        rounded up, away from zero, as ``ParseQuantity`` rounds them."""
        if self.kept:
            return self.kept
        if not self._canonical:  # parsed quantities are shared (and immutable): compute it once
            object.__setattr__(self, "_canonical", self._canonicalize())
        return self._canonical

    def _canonicalize(self) -> str:
        nanos = _ceil_away(self.value * _NANO)
        if nanos == 0:
            return "0"
        fmt = self.format
        if fmt == BINARY_SI and (abs(nanos) < 1024 * _NANO or nanos % _NANO):
            fmt = DECIMAL_SI  # small or fractional binary values print as decimal ones
        if fmt == BINARY_SI:
            amount, power = nanos // _NANO, 0
            while amount % 1024 == 0 and power < 6:
                amount, power = amount // 1024, power + 1
            return f"{amount}{_BINARY_SUFFIXES.get(power, '')}"
        amount, exponent = _strip_tens(nanos, -9)
        shift = exponent % 3  # down to a multiple of three (Python's % floors, as the Go loop does)
        amount, exponent = amount * 10**shift, exponent - shift
        if fmt == DECIMAL_EXPONENT:
            return f"{amount}e{exponent}" if exponent else str(amount)
        return f"{amount}{_DECIMAL_SUFFIXES.get(exponent, '')}"

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


@functools.lru_cache(maxsize=1024)
def _parse_text(text: str) -> Quantity:
    """Parsed quantities are immutable: a pod repeating ``"1"`` or ``"0.5"`` in thousands of
    containers parses it once (a failure is not remembered, and raises again)."""
    return Quantity._from_text(text)


def _ceil_away(value: Fraction) -> int:
    """Round up, away from zero (``inf.RoundUp`` on the magnitude)."""
    return math.ceil(value) if value >= 0 else -math.ceil(-value)


def _strip_tens(amount: int, exponent: int) -> tuple[int, int]:
    """``removeBigIntFactors(amount, 10)``: every factor of ten moved into the exponent."""
    if amount == 0:
        return 0, exponent
    digits = str(abs(amount))
    zeros = len(digits) - len(digits.rstrip("0"))
    return amount // 10**zeros, exponent + zeros


def _kept_as_written(text: str, number: str, fmt: str, exponent: int) -> bool:
    """Whether ``ParseQuantity`` keeps ``text`` as the quantity's string (its fast path, when the
    text already is canonical): "0", or an int64 mantissa whose scale is a multiple of three
    without trailing zeros (decimal), or a suffix of 2^(10k) on a number not divisible by 8."""
    if text == "0":
        return True
    whole, _, frac = number.partition(".")
    num = whole.lstrip("0") or "0"
    if fmt == BINARY_SI:
        if frac:
            return False
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
        if precision < 0:
            return False
        shifted = num
        if int(shifted) << exponent > INT64_MAX:
            return False
        return exponent % 10 == 0 and int(shifted) & 0x07 != 0
    if _MAX_INT64_FACTORS - (len(num) + len(frac)) < 0:
        return False
    scale = exponent - len(frac)
    if scale < -9:
        return False
    shifted = num + frac
    return scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"


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
