"""Label selectors in their string form (``kubectl -l``, ``?labelSelector=``): apimachinery's
``labels.Parse``, its lexer, grammar and ``Requirement.Matches``.

draxr reads one from its own flags (``draxr serve --managed-classes``): the DeviceClasses whose
devices draxr's worker allocates. The grammar, as upstream writes it::

    <selector-syntax>         ::= <requirement> | <requirement> "," <selector-syntax>
    <requirement>             ::= [!] KEY [ <set-based-restriction> | <exact-match-restriction> ]
    <set-based-restriction>   ::= "" | <inclusion-exclusion> <value-set>
    <inclusion-exclusion>     ::= "in" | "notin"
    <value-set>               ::= "(" <values> ")"
    <exact-match-restriction> ::= ["="|"=="|"!="|">"|"<"] VALUE

An empty selector selects everything. Errors are ``LabelSelectorError`` with upstream's words.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from .names import is_qualified_name

_SPECIAL: Final = frozenset("=!(),<>")
_WHITESPACE: Final = frozenset(" \t\r\n")
_OPERATORS: Final = {"=": "=", "==": "==", "!=": "!=", "in": "in", "notin": "notin", ">": "gt", "<": "lt"}
_KEYWORDS: Final = frozenset({"in", "notin"})
_SYMBOLS: Final = ("!=", "==", "=", "!", "(", ")", ",", ">", "<")
_BINARY: Final = "in, notin, =, ==, !=, gt, lt"
_LABEL_VALUE_RE: Final = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_INTEGER_RE: Final = re.compile(r"[-+]?[0-9]+")

#: Token kinds: an identifier (keys and values), an operator or symbol, the end.
_ID, _SYM, _END = "id", "sym", "end"


class LabelSelectorError(ValueError):
    """The selector does not parse; the message is upstream's."""


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  # "=", "==", "!=", "in", "notin", "exists", "!", "gt", "lt"
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        """``Requirement.Matches``."""
        op = self.operator
        if op == "exists":
            return self.key in labels
        if op == "!":
            return self.key not in labels
        value = labels.get(self.key)
        if op in ("=", "==", "in"):
            return value is not None and value in self.values
        if op in ("!=", "notin"):
            return value is None or value not in self.values
        if value is None or not _INTEGER_RE.fullmatch(value):
            return False
        (bound,) = self.values
        return int(value) > int(bound) if op == "gt" else int(value) < int(bound)


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed selector: every requirement must match. ``text`` is what was parsed."""

    requirements: tuple[Requirement, ...]
    text: str = ""

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        found = labels or {}
        return all(r.matches(found) for r in self.requirements)


EVERYTHING: Final = LabelSelector(())


def _lex(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i >= n:
            tokens.append((_END, ""))
            return tokens
        if text[i] in _SPECIAL:
            j = i
            while j < n and text[j] in _SPECIAL:
                j += 1
            run = text[i:j]
            symbol = next((s for s in _SYMBOLS if run.startswith(s)), None)
            if symbol is None:
                raise LabelSelectorError(
                    f"unable to parse requirement: error expected: keyword found '{run}'"
                )
            tokens.append((_SYM, symbol))
            i += len(symbol)
            continue
        j = i
        while j < n and text[j] not in _SPECIAL and text[j] not in _WHITESPACE:
            j += 1
        word = text[i:j]
        tokens.append((_SYM if word in _KEYWORDS else _ID, word))
        i = j


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _lex(text)
        self.pos = 0

    def peek(self, values: bool = True) -> tuple[str, str]:
        kind, lit = self.tokens[self.pos]
        return (_ID, lit) if values and lit in _KEYWORDS else (kind, lit)

    def take(self, values: bool = True) -> tuple[str, str]:
        token = self.peek(values)
        self.pos += 1
        return token

    def parse(self) -> list[Requirement]:
        out: list[Requirement] = []
        while True:
            kind, lit = self.peek()
            if kind == _END:
                return out
            if kind != _ID and lit != "!":
                raise LabelSelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")
            out.append(self.requirement())
            kind, lit = self.take()
            if kind == _END:
                return out
            if lit != ",":
                raise LabelSelectorError(f"found '{lit}', expected: ',' or 'end of string'")
            kind, lit = self.peek()
            if kind != _ID and lit != "!":
                raise LabelSelectorError(f"found '{lit}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        try:
            return self._requirement()
        except LabelSelectorError as e:
            raise LabelSelectorError(f"unable to parse requirement: {e}") from None

    def _requirement(self) -> Requirement:
        negated = False
        kind, key = self.take()
        if key == "!" and kind == _SYM:
            negated = True
            kind, key = self.take()
        if kind != _ID:
            raise LabelSelectorError(f"found '{key}', expected: identifier")
        _check_key(key)
        after = self.peek()
        if negated:  # whatever follows is the selector's to judge
            return Requirement(key, "!", frozenset())
        if after[0] == _END or after[1] == ",":
            return Requirement(key, "exists", frozenset())
        kind, lit = self.take(values=False)
        op = _OPERATORS.get(lit) if kind == _SYM else None
        if op is None:
            raise LabelSelectorError(f"found '{lit}', expected: {_BINARY}")
        values = self._set() if op in ("in", "notin") else self._exact()
        return _requirement(key, op, values)

    def _exact(self) -> list[str]:
        kind, lit = self.peek()
        if kind == _END or lit == ",":
            return [""]
        kind, lit = self.take()
        if kind != _ID:
            raise LabelSelectorError(f"found '{lit}', expected: identifier")
        return [lit]

    def _set(self) -> list[str]:
        kind, lit = self.take()
        if lit != "(":
            raise LabelSelectorError(f"found '{lit}' expected: '('")
        kind, lit = self.peek()
        if lit == ")":
            self.take()
            return [""]
        if kind != _ID and lit != ",":
            raise LabelSelectorError(f"found '{lit}', expected: ',', ')' or identifier")
        values: list[str] = []
        while True:
            kind, lit = self.take()
            if kind == _ID:
                values.append(lit)
                nlit = self.peek()[1]
                if nlit == ")":
                    break
                if nlit != ",":
                    raise LabelSelectorError(f"found '{nlit}', expected: ',' or ')'")
            elif lit == ",":
                nlit = self.peek()[1]
                if not values or nlit in (")", ","):
                    values.append("")
                if nlit == ")":
                    break
            else:
                raise LabelSelectorError(f"found '{lit}', expected: ',', or identifier")
        self.take()
        return values


def _check_key(key: str) -> None:
    problems = is_qualified_name(key)
    if problems:
        raise LabelSelectorError(f'key: Invalid value: "{key}": {"; ".join(problems)}')


def _requirement(key: str, op: str, values: list[str]) -> Requirement:
    for value in values:
        if len(value) > 63:
            raise LabelSelectorError(
                f'values[0][{key}]: Invalid value: "{value}": must be no more than 63 bytes'
            )
        if not _LABEL_VALUE_RE.fullmatch(value):
            raise LabelSelectorError(
                f'values[0][{key}]: Invalid value: "{value}": a valid label must be an empty string or '
                "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                "alphanumeric character"
            )
    if op in ("gt", "lt") and not _INTEGER_RE.fullmatch(values[0]):
        raise LabelSelectorError(
            f'values[0]: Invalid value: "{values[0]}": '
            "for 'Gt', 'Lt' operators, the value must be an integer"
        )
    return Requirement(key, op, frozenset(values))


def parse_label_selector(text: str) -> LabelSelector:
    """``labels.Parse``: ``LabelSelectorError`` when ``text`` does not parse."""
    return LabelSelector(tuple(_Parser(text).parse()), text.strip())


__all__ = ["EVERYTHING", "LabelSelector", "LabelSelectorError", "Requirement", "parse_label_selector"]
