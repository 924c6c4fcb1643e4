"""The cycle state's typed keys: each plugin reads back what its PreFilter wrote, under its own key,
and a key never written says which it is instead of handing back a default."""

from __future__ import annotations

import pytest

from webhook.core.scheduling.framework import CycleState, StateKey


def test_each_key_reads_back_its_own_value() -> None:
    counts = StateKey[dict[str, int]]("Demo/counts")
    names = StateKey[list[str]]("Demo/names")
    cs = CycleState()
    cs.write(counts, {"gpu": 2})
    cs.write(names, ["n1"])
    assert cs.read(counts) == {"gpu": 2}
    assert cs.read(names) == ["n1"]
    cs.write(counts, {"gpu": 3})  # a later write replaces the value
    assert cs.read(counts) == {"gpu": 3}


def test_two_keys_of_one_name_are_two_slots() -> None:
    """Keys are compared by identity: another plugin's key of the same name never reads mine."""
    mine, theirs = StateKey[int]("X"), StateKey[int]("X")
    cs = CycleState()
    cs.write(mine, 1)
    with pytest.raises(KeyError, match="cycle state has no X"):
        cs.read(theirs)
