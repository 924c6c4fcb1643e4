"""``core.cel.releases``: what each release's environments declare, transcribed from upstream's
versioned options (``apiserver/pkg/cel/environment/base.go`` and
``dynamic-resource-allocation/cel/compile.go`` of 1.34 to 1.37), on both engines."""

from __future__ import annotations

import pytest

from webhook.core.cel import CelCompileError, SelectorEngine, SimpleDevice
from webhook.core.cel.releases import NEWEST, OLDEST, SCHEDULER, CelEnvironment, served

INCLUDES = "[1, 2].includes(2)"
EXT_LISTS = "[3, 1].sort()[0] == 1"
RANGE = "lists.range(3).size() == 3"
SORT_BY = "[2, 1].sortBy(e, e)[0] == 1"
MULTIPLE = "!device.allowMultipleAllocations"
ALWAYS = "[1, 2].indexOf(2) == 1 && sets.contains([1], [1]) && ip('10.0.0.1').family() == 4"

#: (release, stored) -> the selectors above that compile there.
DECLARED = {
    ((1, 34), True): {EXT_LISTS, RANGE, SORT_BY, MULTIPLE, ALWAYS},
    ((1, 35), True): {EXT_LISTS, RANGE, SORT_BY, MULTIPLE, ALWAYS},
    ((1, 36), True): {INCLUDES, EXT_LISTS, RANGE, SORT_BY, MULTIPLE, ALWAYS},
    ((1, 37), True): {INCLUDES, EXT_LISTS, RANGE, SORT_BY, MULTIPLE, ALWAYS},
    ((1, 34), False): {ALWAYS},
    ((1, 35), False): {EXT_LISTS, RANGE, SORT_BY, ALWAYS},
    ((1, 36), False): {EXT_LISTS, RANGE, SORT_BY, MULTIPLE, ALWAYS},
    ((1, 37), False): {EXT_LISTS, RANGE, SORT_BY, MULTIPLE, ALWAYS},
}
UNDECLARED_WORDS = {
    INCLUDES: "undeclared reference to 'includes'",
    EXT_LISTS: "undeclared reference to 'sort'",
    RANGE: "undeclared reference to 'lists'",
    SORT_BY: "undeclared reference to 'e'",  # no macro: its arguments are plain expressions
    MULTIPLE: "undefined field 'allowMultipleAllocations'",
}


@pytest.mark.parametrize(("release", "stored"), list(DECLARED))
def test_each_release_declares_what_upstream_declares(release: tuple[int, int], stored: bool) -> None:
    engine = SelectorEngine(env=CelEnvironment(release, stored))
    device = SimpleDevice("gpu.example.com")
    for expression in (INCLUDES, EXT_LISTS, RANGE, SORT_BY, MULTIPLE, ALWAYS):
        if expression in DECLARED[(release, stored)]:
            assert engine.matches(expression, device), expression
        else:
            with pytest.raises(CelCompileError, match=UNDECLARED_WORDS[expression]):
                engine.compile(expression)


def test_a_string_reverse_is_no_list_function_anywhere() -> None:
    """``reverse`` is ext.Lists' (strings version 2 has none): on a string it is no overload where
    ext.Lists is declared, and undeclared where it is not."""
    with pytest.raises(CelCompileError, match="found no matching overload for 'reverse'"):
        SelectorEngine().compile("'ab'.reverse() == 'ba'")
    with pytest.raises(CelCompileError, match="undeclared reference to 'reverse'"):
        SelectorEngine(env=CelEnvironment((1, 34), stored=False)).compile("'ab'.reverse() == 'ba'")


def test_the_served_release_is_clamped_to_the_known_ones() -> None:
    assert served(None) == SCHEDULER == CelEnvironment(NEWEST, True)
    assert served((1, 31)).release == OLDEST
    assert served((1, 40), stored=False) == CelEnvironment(NEWEST, False)
    assert served((1, 35)).release == (1, 35)


def test_following_the_served_release_recompiles_and_forgets_outcomes() -> None:
    engine = SelectorEngine()
    device = SimpleDevice("gpu.example.com")
    assert engine.matches(INCLUDES, device)
    assert not engine.set_release(NEWEST)  # unchanged: the caches stay
    assert engine.set_release((1, 35))
    with pytest.raises(CelCompileError, match="undeclared reference to 'includes'"):
        engine.matches(INCLUDES, device)
    assert engine.set_release(None)  # unknown again: the newest
    assert engine.matches(INCLUDES, device)
