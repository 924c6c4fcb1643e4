"""celpy's CEL grammar, extended with cel-go's optional syntax (``cel.OptionalTypes``).

Upstream's base environment enables optional types since 1.28: ``x.?field`` and ``x[?key]``
select or index only when the field or key is present and give an optional value (none
otherwise); on an optional value they chain. celpy's grammar has neither, so this module builds a
parser of its own from celpy's grammar text with two more ``member`` alternatives. It is a
separate ``Lark`` instance: celpy's process-wide ``CELParser.CEL_PARSER`` is left untouched.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import celpy
import lark
from celpy.celparser import CELParseError, CELParser

_MEMBER = "member         : member_dot | member_dot_arg | member_index | member_object | primary"
_EXTENDED = (
    "member         : member_dot | member_dot_arg | member_index | member_object"
    " | member_dot_opt | member_index_opt | primary\n"
    'member_dot_opt : member "." "?" IDENT\n'
    'member_index_opt : member "[" "?" expr "]"'
)
_FLOAT = (
    'FLOAT_LIT      : /-?/ DIGIT+ "." DIGIT* EXPONENT? | /-?/ DIGIT* "." DIGIT+ EXPONENT?'
    " | /-?/ DIGIT+ EXPONENT"
)
#: cel-go's ``NUM_FLOAT`` needs digits after the dot: ``42.charAt(2)`` is a call on the int 42.
_FLOAT_CEL_GO = 'FLOAT_LIT      : /-?/ DIGIT* "." DIGIT+ EXPONENT? | /-?/ DIGIT+ EXPONENT'


_LIST = 'list_lit       : "[" [exprlist] "]"'
_MAPINITS = 'mapinits       : expr ":" expr ("," expr ":" expr)*'
#: ``[?x]`` and ``{?k: v}``: an element or entry present only when the optional ``x``/``v`` has a
#: value. A list's elements keep the ``exprlist`` node (``opt_expr`` marks an optional one); in a
#: map the mark wraps the key, though it is the value that must be optional. Calls take no ``?``.
_OPTIONAL_ENTRIES = (
    'list_lit       : "[" [listinits] "]"\n'
    'listinits      : listelem ("," listelem)* -> exprlist\n'
    "?listelem      : expr | opt_expr\n"
    'opt_expr       : "?" expr'
)
_OPTIONAL_MAPINITS = (
    'mapinits       : mapkey ":" expr ("," mapkey ":" expr)*\n?mapkey        : expr | opt_expr'
)


def grammar_text() -> str:
    """celpy's grammar with the optional selection and index rules; ValueError if celpy's grammar
    no longer has the ``member`` rule this extends (a celpy upgrade must be looked at)."""
    text = (Path(celpy.__file__).parent / "cel.lark").read_text()
    if any(rule not in text for rule in (_MEMBER, _FLOAT, _LIST, _MAPINITS)):
        raise ValueError("celpy's grammar changed: a rule draxr extends is not the one it expects")
    return (
        text.replace(_MEMBER, _EXTENDED, 1)
        .replace(_FLOAT, _FLOAT_CEL_GO, 1)
        .replace(_LIST, _OPTIONAL_ENTRIES, 1)
        .replace(_MAPINITS, _OPTIONAL_MAPINITS, 1)
    )


def _identifier(token: lark.Token) -> lark.Token:
    """celpy's identifier callback, and cel-go's lexer: ``in`` is a keyword, never an identifier
    (``device.in`` and ``x.in()`` are syntax errors; Lark's contextual lexer took it for one)."""
    if token.value == "in":
        raise CELParseError(
            f"no viable alternative at input '{token.value}'", line=token.line, column=token.column
        )
    return CELParser.ambiguous_literals(token)


class Parser:
    """A CEL parser with the optional syntax; raises celpy's ``CELParseError`` like ``CELParser``.
    Not thread-safe (Lark's LALR parser keeps no state between calls, but callers lock anyway)."""

    def __init__(self) -> None:
        self._lark = lark.Lark(
            grammar_text(),
            parser="lalr",
            start="expr",
            g_regex_flags=re.M,
            lexer_callbacks={"IDENT": _identifier},
            propagate_positions=True,
            maybe_placeholders=False,
            priority="invert",
        )

    def parse(self, text: str) -> lark.Tree[Any]:
        try:
            return self._lark.parse(text)
        except (lark.exceptions.UnexpectedToken, lark.exceptions.UnexpectedCharacters) as ex:
            raise CELParseError(ex.get_context(text), *ex.args, line=ex.line, column=ex.column) from ex
        except (lark.exceptions.LexError, lark.exceptions.ParseError) as ex:
            raise CELParseError(str(ex.args[0]).splitlines()[0], *ex.args) from ex
