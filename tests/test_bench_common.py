"""``bench/common.py``'s option parser for comma-separated integers (``--seeds``,
``--floor-threads``): a benchmark helper, no module of the package, so here, not in a mirror."""

from __future__ import annotations

import argparse

import pytest

from bench.common import int_list


def test_integers_separated_by_commas_spaces_and_a_trailing_comma_allowed() -> None:
    assert int_list("1, 2,3,") == [1, 2, 3]
    assert int_list("") == []


@pytest.mark.parametrize("text", ["1,a", "1.5", "x"])
def test_anything_else_is_refused_naming_the_text(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=f"not '{text}'"):
        int_list(text)
