"""Semantic versions (semver 2.0.0) as DRA ``version`` attributes and CEL ``semver()`` use them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import total_ordering

_NUM = r"0|[1-9]\d*"
_PRE_ID = r"0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*"
_STRICT = re.compile(
    rf"({_NUM})\.({_NUM})\.({_NUM})"
    rf"(?:-((?:{_PRE_ID})(?:\.(?:{_PRE_ID}))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
)
_LOOSE = re.compile(r"v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-([0-9A-Za-z.-]+))?(?:\+([0-9A-Za-z.-]+))?")


class SemverError(ValueError):
    """The text is not a semantic version."""


@total_ordering
@dataclass(frozen=True, slots=True)
class Semver:
    """A version; equality and order follow semver precedence (build metadata is ignored)."""

    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...] = ()
    build: str = field(default="", compare=False, hash=False)

    @classmethod
    def parse(cls, text: str, normalize: bool = False) -> Semver:
        if not isinstance(text, str):
            raise SemverError("a version must be a string")
        m = _STRICT.fullmatch(text)
        if m is None and normalize:
            m = _LOOSE.fullmatch(text)
            if m is not None:
                pre = _parse_pre(m.group(4)) if m.group(4) else ()
                return cls(int(m.group(1)), int(m.group(2) or 0), int(m.group(3) or 0), pre, m.group(5) or "")
        if m is None:
            raise SemverError(f"{text!r} is not a valid semantic version")
        pre = _parse_pre(m.group(4)) if m.group(4) else ()
        return cls(int(m.group(1)), int(m.group(2)), int(m.group(3)), pre, m.group(5) or "")

    def _key(self) -> tuple[int, int, int, int, tuple[tuple[int, int, str], ...]]:
        # A version without pre-release ranks above any pre-release of the same core version;
        # numeric identifiers rank below alphanumeric ones.
        pre = tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, 0 if self.pre else 1, pre)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Semver):
            return NotImplemented
        return self._key() < other._key()

    def compare(self, other: Semver) -> int:
        a, b = self._key(), other._key()
        return (a > b) - (a < b)

    def __str__(self) -> str:
        s = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            s += "-" + ".".join(str(p) for p in self.pre)
        if self.build:
            s += "+" + self.build
        return s


def _parse_pre(text: str) -> tuple[int | str, ...]:
    out: list[int | str] = []
    for part in text.split("."):
        if not part:
            raise SemverError("empty pre-release identifier")
        out.append(int(part) if part.isdigit() else part)
    return tuple(out)


def is_semver(text: str, normalize: bool = False) -> bool:
    try:
        Semver.parse(text, normalize)
    except SemverError:
        return False
    return True
